"""An LLM doctor on EGIP-MedQA-v0 with an in-process vLLM engine (GPU only), Direct.

The same run as ``examples/llm_doctor_server.py`` without a server: the model is loaded
into this process with :class:`~clinenv.llm.vllm_backend.VLLMChatModel` (``pip install -e
'.[vllm]'`` in a clinenv clone; vLLM runs on a CUDA GPU only). Episodes run one after another here;
for many episodes at once prefer ``vllm serve`` and the server example, which lets the
server batch the requests of concurrent episodes. Without vLLM installed the script
stops at once with the message of :class:`~clinenv.llm.base.BackendUnavailableError`
naming the extra to install. A run that stops early (fail fast,
:mod:`clinenv.runs.fail_fast`: five episodes in a row met a backend error, such as a failing
engine call) prints the reason on stderr and exits with code 2; the log keeps every line
written before. Without MedQA data
(``CLINENV_DATA_DIR``) the bundled demo cases are used, with a note. The choice of
environment, the progress lines and the report come from the server example
(``examples/llm_doctor_server.py``, imported).

Run from the repository root, on a GPU machine::

    CLINENV_DATA_DIR=/path/to/agentclinic python examples/llm_doctor_engine.py \\
        --model Qwen/Qwen3-8B --episodes 20
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import gymnasium as gym
from llm_doctor_server import pick_env, print_verdict, report  # the server example

import clinenv  # noqa: F401  (registers the EGIP environment ids)
from clinenv.agents import LLMDoctor
from clinenv.llm import BackendUnavailableError, VLLMChatModel
from clinenv.runs import RunAborted, RunSpec, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="LLM doctor (Direct) on an in-process "
                                                 "vLLM engine (GPU only).")
    parser.add_argument("--model", required=True, help="hub id or local path of the model")
    parser.add_argument("--episodes", type=int, default=None,
                        help="first N cases (default: all)")
    parser.add_argument("--out", type=Path, default=Path("runs/llm_doctor_engine.jsonl"),
                        help="run log; an existing one is continued")
    args = parser.parse_args(argv)

    try:
        model = VLLMChatModel(args.model)
    except BackendUnavailableError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    env_id = pick_env()
    try:
        with model:
            result = run(lambda: gym.make(env_id), lambda: LLMDoctor(model, strategy="direct"),
                         RunSpec(out=args.out, episodes=args.episodes, resume=True, env_id=env_id),
                         progress=print_verdict)
    except RunAborted as err:  # fail fast: a refused request or an outage
        print(str(err), file=sys.stderr)
        return 2
    report(env_id, result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
