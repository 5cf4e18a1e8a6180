"""Episodes per minute of an LLM doctor against a server: sequential versus concurrent.

Starts the project's OpenAI-compatible fake server in a subprocess (``python -m
clinenv.llm.fake_server --delay-ms 200 --responder clinician``: every request takes a
fixed 200 ms, the reply is a deterministic EGIP doctor's) and runs, in one process and
one run, an :class:`~clinenv.agents.llm_doctor.LLMDoctor` with the Direct strategy over
:class:`~clinenv.llm.openai_backend.OpenAIChatModel` on ``EGIP-MedQA-v0``:

1. **sequential**: one episode at a time, with the synchronous client
   (:func:`clinenv.rollouts.run_logged`), as AgentClinic runs;
2. **concurrent**: ``--concurrency`` episodes at once in one asyncio loop
   (:func:`clinenv.concurrent.run_concurrent`).

For each phase it prints episodes per minute and the share of wall time spent outside
the server: ``1 - |union of the server's request intervals| / wall time``, where the
intervals (arrival to reply, ``time.monotonic``) come from the server's ``GET /stats``
and are clipped to the phase. The targets (issue 3): the concurrent rate at least 30
times the sequential one, and under 5 % of the concurrent phase's wall time outside the
server. MedQA needs ``CLINENV_DATA_DIR`` (a folder with ``agentclinic_medqa.jsonl``);
without it the bundled demo cases are used, with a printed note. More episodes than
cases are scheduled as repetitions (the first N cases, R times each).

Run from the repository root::

    python benchmarks/bench_rollout.py [--episodes-seq 3] [--episodes-concurrent 128]
                                       [--concurrency 64] [--delay-ms 200]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import gymnasium as gym

import clinenv  # noqa: F401  (registers the EGIP environment ids)
from clinenv.agents.llm_doctor import LLMDoctor
from clinenv.concurrent import run_concurrent
from clinenv.datasets import resolve_dataset
from clinenv.errors import DatasetNotFoundError
from clinenv.llm.openai_backend import OpenAIChatModel
from clinenv.rollouts import run_logged

PREFERRED, FALLBACK = "EGIP-MedQA-v0", "EGIP-Demo-v0"


def union_seconds(intervals: Sequence[Sequence[float]], start: float, end: float) -> float:
    """Length of the union of ``[a, b]`` intervals clipped to ``[start, end]`` (seconds)."""
    clipped = sorted((max(a, start), min(b, end)) for a, b in intervals
                     if b > start and a < end)
    total, cur_a, cur_b = 0.0, None, None
    for a, b in clipped:
        if cur_b is None or a > cur_b:
            if cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_b is not None:
        total += cur_b - cur_a
    return total


def start_server(delay_ms: float) -> tuple[subprocess.Popen, str]:
    """The fake server subprocess and its base URL (from its ``READY <url>`` line)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "clinenv.llm.fake_server", "--delay-ms", str(delay_ms),
         "--responder", "clinician"], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("READY "):
        proc.kill()
        raise RuntimeError(f"fake server did not start (got {line!r})")
    return proc, line.split(None, 1)[1].strip()


def server_intervals(base_url: str) -> list[list[float]]:
    """The request intervals of ``GET /stats``."""
    root = base_url.rsplit("/v1", 1)[0]
    with urllib.request.urlopen(f"{root}/stats", timeout=10) as reply:
        return json.loads(reply.read())["intervals"]


def schedule(n_episodes: int, n_cases: int) -> tuple[int, int]:
    """``(cases, repetitions)`` covering ``n_episodes`` with the first cases."""
    reps = math.ceil(n_episodes / n_cases)
    return math.ceil(n_episodes / reps), reps


def phase(name: str, run, n: int, base_url: str) -> dict:
    """Run one phase; its episodes per minute and share of wall time outside the server."""
    start = time.monotonic()
    result = run()
    end = time.monotonic()
    wall = end - start
    intervals = [iv for iv in server_intervals(base_url) if iv[1] > start and iv[0] < end]
    busy = union_seconds(intervals, start, end)
    head = min(a for a, _ in intervals) - start
    tail = end - max(b for _, b in intervals)
    row = {"phase": name, "episodes": n, "wall_s": wall, "eps_per_min": 60 * n / wall,
           "outside_share": 1 - busy / wall, "head_s": head, "tail_s": tail,
           "errors": result.n_errors,
           "calls": sum(line["llm"]["n_calls"] for line in result.lines)}
    print(f"{name:<11} {n:4d} episodes  {wall:8.2f} s  {row['eps_per_min']:9.1f} episodes/min"
          f"  {row['calls']:6d} calls  outside the server {100 * row['outside_share']:5.2f} %"
          f" (before the first request {head:.2f} s, after the last {tail:.2f} s)"
          f"  errors {row['errors']}", flush=True)
    return row


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes-seq", type=int, default=3)
    parser.add_argument("--episodes-concurrent", type=int, default=128)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--delay-ms", type=float, default=200.0)
    args = parser.parse_args(argv)
    try:
        resolve_dataset("medqa")
        env_id = PREFERRED
    except DatasetNotFoundError:
        env_id = FALLBACK
        print(f"note: MedQA not found (set CLINENV_DATA_DIR to a folder with "
              f"agentclinic_medqa.jsonl); using {FALLBACK}", flush=True)
    n_cases = len(gym.make(env_id).unwrapped.pool.cases)
    proc, base_url = start_server(args.delay_ms)
    model = OpenAIChatModel("fake-model", base_url=base_url, timeout_s=60.0)
    print(f"{env_id}: LLMDoctor (Direct) over {base_url}, {args.delay_ms:g} ms per request, "
          f"concurrency {args.concurrency}", flush=True)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            seq_cases, seq_reps = schedule(args.episodes_seq, n_cases)
            seq = phase("sequential", lambda: run_logged(
                gym.make(env_id), LLMDoctor(model), out=Path(tmp, "seq.jsonl"),
                episodes=seq_cases, repetitions=seq_reps), seq_cases * seq_reps, base_url)
            con_cases, con_reps = schedule(args.episodes_concurrent, n_cases)
            con = phase("concurrent", lambda: run_concurrent(
                lambda: gym.make(env_id), lambda: LLMDoctor(model),
                out=Path(tmp, "con.jsonl"), episodes=con_cases, repetitions=con_reps,
                concurrency=args.concurrency), con_cases * con_reps, base_url)
    finally:
        model.close()
        proc.terminate()
        proc.wait(timeout=10)
    ratio = con["eps_per_min"] / seq["eps_per_min"]
    print(f"speed-up {ratio:.1f}x (target >= 30x); concurrent phase outside the server "
          f"{100 * con['outside_share']:.2f} % (target < 5 %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
