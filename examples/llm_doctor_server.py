"""An LLM doctor against an OpenAI-compatible server on EGIP-MedQA-v0, Direct strategy.

Serve a model with vLLM (or any OpenAI-compatible server: llama.cpp, a provider)::

    vllm serve Qwen/Qwen3-8B --port 8000

then run from the repository root::

    CLINENV_DATA_DIR=/path/to/agentclinic python examples/llm_doctor_server.py \\
        --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen3-8B --episodes 20

Each episode runs :class:`~clinenv.agents.llm_doctor.LLMDoctor` (the EGIP doctor prompt,
the Direct terminal strategy) through ``--concurrency`` episodes at once
(:class:`clinenv.runs.Concurrent`), so the server batches their requests. Every
episode is one line of the run log ``--out`` (with the model calls, tokens and latency
under ``llm``); the script prints each verdict as it arrives, then accuracy and the
model-call totals. Without MedQA data (``CLINENV_DATA_DIR`` pointing at a folder with
``agentclinic_medqa.jsonl``) it uses the bundled demo cases, with a note. The API key,
if the server needs one, is read from ``OPENAI_API_KEY``.

The default log is ``runs/llm_doctor_server_<env id>_<model>.jsonl`` (the model name with
characters other than letters, digits, ``-``, ``_``, ``.`` replaced by ``-``), so a run
on other data or with another model starts its own log. The log is continued when it
exists: missing episodes run, and so do episodes that a server outage stopped (error
lines; their new lines supersede them). A run that stops early (fail fast,
:mod:`clinenv.runs.fail_fast`: the server refused a request, e.g. a wrong ``--base-url`` or
``--model``, or five episodes in a row met a backend error) prints the reason on stderr
and exits with code 2; the log keeps every line written before, so fix the cause and run
the same command again. An ``--out`` log of another run (other data, model or settings),
a corrupt log or dataset, or an ``--out`` that cannot be written is one line on stderr
(naming the file, line and field that differ), exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import gymnasium as gym

import clinenv  # noqa: F401  (registers the EGIP environment ids)
from clinenv import ClinenvError, DatasetNotFoundError
from clinenv.agents import LLMDoctor
from clinenv.datasets import resolve_dataset
from clinenv.evaluation import llm_totals, summarize
from clinenv.llm import OpenAIChatModel
from clinenv.runs import Concurrent, RunAborted, RunResult, RunSpec, run


def pick_env() -> str:
    """EGIP-MedQA-v0 when its file resolves, else EGIP-Demo-v0 (with a note)."""
    try:
        resolve_dataset("medqa")
        return "EGIP-MedQA-v0"
    except DatasetNotFoundError:
        print("note: MedQA data is not configured (set CLINENV_DATA_DIR to a folder with "
              "agentclinic_medqa.jsonl); running the bundled demo cases instead")
        return "EGIP-Demo-v0"


def positive(text: str) -> int:
    """An integer >= 1 (argparse type)."""
    value = int(text) if text.lstrip("-").isdigit() else 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def default_out(env_id: str, model: str) -> Path:
    """``runs/llm_doctor_server_<env id>_<model>.jsonl`` (model made file-name safe)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in model)
    return Path("runs", f"llm_doctor_server_{env_id}_{safe}.jsonl")


def print_verdict(line: dict) -> None:
    """Progress: one episode's answer and verdict, as its log line is written."""
    print(f"{line['case_id']}: {line['answer']!r} -> {line['verdict']}", flush=True)


def report(env_id: str, result: RunResult, out: Path) -> None:
    """The run's accuracy, coverage, backend errors and model-call totals."""
    summary = summarize(result.lines, plan=result.plan)
    calls = llm_totals(result.lines) or {"n_calls": 0, "prompt_tokens": None,
                                          "completion_tokens": None}
    print(f"{env_id}: accuracy {summary['accuracy']:.1f} % over {summary['n_scheduled']} "
          f"episodes, coverage {summary['coverage']:.1f} %, {summary['n_errors']} backend "
          f"errors; {calls['n_calls']} model calls, {calls['prompt_tokens']} prompt and "
          f"{calls['completion_tokens']} completion tokens; log {out}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="LLM doctor (Direct) against a server.")
    parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--model", required=True, help="the model name the server knows")
    parser.add_argument("--episodes", type=positive, default=None,
                        help="first N cases (default: all)")
    parser.add_argument("--concurrency", type=positive, default=32)
    parser.add_argument("--out", type=Path, default=None,
                        help="run log; an existing one is continued (default: "
                             "runs/llm_doctor_server_<env id>_<model>.jsonl)")
    args = parser.parse_args(argv)

    out = args.out
    try:
        env_id = pick_env()
        out = out or default_out(env_id, args.model)
        with OpenAIChatModel(args.model, base_url=args.base_url) as model:
            result = run(lambda: gym.make(env_id), lambda: LLMDoctor(model, strategy="direct"),
                         RunSpec(out=out, episodes=args.episodes, resume=True, env_id=env_id),
                         Concurrent(args.concurrency), progress=print_verdict)
    except RunAborted as err:  # fail fast: a refused request or an outage
        print(str(err), file=sys.stderr)
        return 2
    except ClinenvError as err:  # a log of another run, a corrupt log or dataset
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # --out cannot be written (a folder, no permission)
        print(f"error: {err.filename or out}: {err.strerror or err}", file=sys.stderr)
        return 2
    report(env_id, result, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
