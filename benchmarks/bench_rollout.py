"""Episodes per minute of an LLM doctor against a server: sequential versus concurrent.

Starts the project's OpenAI-compatible fake server in a subprocess (``python -m
clinenv.testing.fake_server --delay-ms 200 --responder clinician``: every request takes a
fixed 200 ms, the reply is a deterministic EGIP doctor's) and runs, in one process and
one run, an :class:`~clinenv.agents.llm_doctor.LLMDoctor` with the Direct strategy over
:class:`~clinenv.llm.openai_backend.OpenAIChatModel` on ``EGIP-MedQA-v0``:

1. **sequential**: one episode at a time, with the synchronous client
   (:func:`clinenv.runs.run`, the default :class:`~clinenv.runs.logged.Serial`), as
   AgentClinic runs;
2. **concurrent**: ``--concurrency`` episodes at once in one asyncio loop
   (:class:`clinenv.runs.concurrent.Concurrent`);
3. **end to end** (``--cli-runs N`` times, default 3; 0 skips it): the concurrent
   phase's episodes through the command line, ``python -m clinenv run --doctor llm
   --concurrency N ...`` in a fresh interpreter, timed from its start to its exit
   (imports, argument and dataset checks, model and environment building, the run, the
   summary), so that its speed-up over the sequential phase counts everything a user
   waits for. Each run prints its wall time, its time before the first request and
   after the last one, and its CPU seconds; the median run is the phase's figure.

For phases 1 and 2 it prints episodes per minute, the requests sent, and three views of
where the time goes (``delay`` is the server's fixed time per request):

- **server idle** ``1 - |union of the server's request intervals| / wall``: the share
  of wall time in which the server had *no* request in flight (intervals from the
  server's ``GET /stats``, arrival to reply, ``time.monotonic``, clipped to the phase).
  With 64 overlapping requests this figure says nothing about how *many* are in
  flight: one request at a time keeps it near 0 %, so it hides client-side queueing;
- **ideal vs actual wall**: ``ideal = ramp-up + requests x delay / workers``, where
  ``workers = min(concurrency, episodes)`` and ``ramp-up`` is the time to the first
  request plus ``(workers - 1) x RAMP_UP_S`` (:data:`clinenv.runs.concurrent.RAMP_UP_S`,
  the workers' staggered start); ``efficiency = ideal / actual``. What is missing from
  the ideal is time the server could have been serving more requests;
- **per-episode share outside its own server calls**:
  ``sum(episode wall - its requests' server time) / sum(episode wall)``, episode wall
  being the run log's ``timing.total_s`` and the server time ``n_requests x`` the mean
  server interval of the phase (every request sleeps the same fixed delay; the spread
  of the intervals is printed). Also shown: the share outside its calls as the client
  measures them (``llm.calls[*].latency_s``: environment and agent work between
  calls), the mean client time per request inside a call but outside the server
  (HTTP client CPU and waiting for the event loop), and the client process's CPU
  seconds per request (``time.process_time``: everything the client does).

The targets: the concurrent rate at least 60 times the sequential one in process (the
ceiling is the concurrency, 64) and at least 50 times end to end through the command
line, and under 5 % of the concurrent phase's time outside the server. Wall-clock
figures need a machine with a core to spare for the server process. MedQA needs
``CLINENV_DATA_DIR`` (a folder with ``agentclinic_medqa.jsonl``); without it the
bundled demo cases are used, with a printed note. More episodes than cases are
scheduled as repetitions (the first N cases, R times each).

Run from the repository root::

    python benchmarks/bench_rollout.py [--episodes-seq 3] [--episodes-concurrent 128]
                                       [--concurrency 64] [--delay-ms 200] [--cli-runs 3]
                                       [--http-transport auto|aiohttp|httpx] [--json]

``--http-transport`` sets the in-process model's asynchronous transport; the command
line uses its default (aiohttp when installed).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
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
from clinenv.datasets import resolve_dataset
from clinenv.errors import DatasetNotFoundError
from clinenv.llm.openai_backend import OpenAIChatModel
from clinenv.runs import Concurrent, RunSpec, run
from clinenv.runs.concurrent import RAMP_UP_S
from clinenv.testing.fake_server import spawn_server

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


def server_intervals(base_url: str) -> list[list[float]]:
    """The request intervals of ``GET /stats``."""
    root = base_url.rsplit("/v1", 1)[0]
    with urllib.request.urlopen(f"{root}/stats", timeout=10) as reply:
        return json.loads(reply.read())["intervals"]


def schedule(n_episodes: int, n_cases: int) -> tuple[int, int]:
    """``(cases, repetitions)`` covering ``n_episodes`` with the first cases."""
    reps = math.ceil(n_episodes / n_cases)
    return math.ceil(n_episodes / reps), reps


def episode_shares(lines: Sequence[dict], server_s: float) -> dict:
    """Per-episode time accounting of run-log lines (see the module docstring).

    Args:
        lines: run-log lines with ``timing.total_s`` and ``llm.calls`` (others skipped).
        server_s: server seconds per request (the phase's mean interval).

    Returns:
        ``{"episode_s": sum of episode walls, "call_s": sum of client-measured call
        seconds, "requests": int, "outside_server": share, "outside_calls": share,
        "client_in_call_ms": mean ms per request inside a call but outside the server}``.
    """
    episode_s = call_s = 0.0
    requests = 0
    for line in lines:
        calls = (line.get("llm") or {}).get("calls")
        total = (line.get("timing") or {}).get("total_s")
        if not calls or total is None:
            continue
        episode_s += total
        call_s += sum(c["latency_s"] for c in calls)
        requests += sum(c["n_requests"] for c in calls)
    server = requests * server_s
    return {"episode_s": episode_s, "call_s": call_s, "requests": requests,
            "outside_server": 1 - server / episode_s, "outside_calls": 1 - call_s / episode_s,
            "client_in_call_ms": 1000 * (call_s - server) / requests}


def phase(name: str, run, n: int, base_url: str, *, workers: int, delay_s: float) -> dict:
    """Run one phase with ``workers`` episodes at once; print and return its figures."""
    cpu0 = time.process_time()
    start = time.monotonic()
    result = run()
    end = time.monotonic()
    cpu = time.process_time() - cpu0
    wall = end - start
    intervals = [iv for iv in server_intervals(base_url) if iv[1] > start and iv[0] < end]
    busy = union_seconds(intervals, start, end)
    head = min(a for a, _ in intervals) - start
    tail = end - max(b for _, b in intervals)
    durations = sorted(b - a for a, b in intervals)
    server_s = statistics.fmean(durations)
    shares = episode_shares(result.lines, server_s)
    requests = len(intervals)
    ramp = head + (workers - 1) * RAMP_UP_S
    ideal = ramp + requests * delay_s / workers
    row = {"phase": name, "episodes": n, "wall_s": wall, "eps_per_min": 60 * n / wall,
           "requests": requests, "server_idle_share": 1 - busy / wall, "head_s": head,
           "tail_s": tail, "ideal_s": ideal, "efficiency": ideal / wall,
           "server_s": server_s, "cpu_ms_per_request": 1000 * cpu / requests,
           "errors": result.n_errors, **shares}
    print(f"{name}: {n} episodes, {workers} at once, {requests} requests, {wall:.2f} s, "
          f"{row['eps_per_min']:.1f} episodes/min, errors {row['errors']}\n"
          f"  server idle (no request in flight) {100 * row['server_idle_share']:6.2f} % of "
          f"wall (before the first request {head:.2f} s, after the last {tail:.2f} s)\n"
          f"  ideal wall {ideal:.2f} s (ramp-up {ramp:.2f} s + {requests} x "
          f"{delay_s * 1000:g} ms / {workers}) vs actual {wall:.2f} s: efficiency "
          f"{100 * row['efficiency']:.1f} %\n"
          f"  per episode, outside its own server calls {100 * shares['outside_server']:6.2f} %"
          f" (server time per request {1000 * server_s:.1f} ms, range "
          f"{1000 * durations[0]:.1f}-{1000 * durations[-1]:.1f} ms); outside its calls as "
          f"the client times them {100 * shares['outside_calls']:.2f} %\n"
          f"  client time in a call outside the server {shares['client_in_call_ms']:.2f} ms "
          f"per request; client process CPU {row['cpu_ms_per_request']:.2f} ms per request "
          f"({cpu:.2f} s CPU in {wall:.2f} s wall)", flush=True)
    return row


def cli_phase(env_id: str, cases: int, reps: int, concurrency: int, base_url: str,
              out: Path, seq_eps_per_min: float) -> dict:
    """Time one ``python -m clinenv run`` of ``cases x reps`` episodes at ``concurrency``,
    from its start to its exit; print and return its figures (``speed_up`` over the
    sequential phase's ``seq_eps_per_min``)."""
    command = [sys.executable, "-m", "clinenv", "run", "--env", env_id, "--doctor", "llm",
               "--base-url", base_url, "--model", "fake-model", "--episodes", str(cases),
               "--repetitions", str(reps), "--concurrency", str(concurrency),
               "--out", str(out), "--quiet"]
    if out.exists():
        out.unlink()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    end = time.monotonic()
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"clinenv run exited {done.returncode}: {done.stderr.strip()}")
    intervals = [iv for iv in server_intervals(base_url) if iv[1] > start and iv[0] < end]
    n = cases * reps
    wall = end - start
    row = {"episodes": n, "wall_s": wall, "eps_per_min": 60 * n / wall,
           "speed_up": 60 * n / wall / seq_eps_per_min, "requests": len(intervals),
           "first_request_s": min(a for a, _ in intervals) - start,
           "after_last_s": end - max(b for _, b in intervals),
           "cpu_s": (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)}
    print(f"  clinenv run: {n} episodes, {len(intervals)} requests, {wall:.2f} s start to "
          f"exit, {row['eps_per_min']:.1f} episodes/min, {row['speed_up']:.1f}x the "
          f"sequential rate (first request after {row['first_request_s']:.2f} s, exit "
          f"{row['after_last_s']:.2f} s after the last; {row['cpu_s']:.2f} s CPU)",
          flush=True)
    return row


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes-seq", type=int, default=3)
    parser.add_argument("--episodes-concurrent", type=int, default=128)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--delay-ms", type=float, default=200.0)
    parser.add_argument("--cli-runs", type=int, default=3,
                        help="end-to-end runs through `clinenv run` (0: none)")
    parser.add_argument("--http-transport", choices=("auto", "aiohttp", "httpx"),
                        default="auto", help="OpenAIChatModel's async HTTP transport")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args(argv)
    delay_s = args.delay_ms / 1000.0
    try:
        resolve_dataset("medqa")
        env_id = PREFERRED
    except DatasetNotFoundError:
        env_id = FALLBACK
        print(f"note: MedQA not found (set CLINENV_DATA_DIR to a folder with "
              f"agentclinic_medqa.jsonl); using {FALLBACK}", flush=True)
    n_cases = len(gym.make(env_id).unwrapped.pool.cases)
    proc, base_url = spawn_server(args.delay_ms)
    model = OpenAIChatModel("fake-model", base_url=base_url, timeout_s=60.0,
                            http_transport=args.http_transport)
    print(f"{env_id}: LLMDoctor (Direct) over {base_url}, {args.delay_ms:g} ms per request, "
          f"concurrency {args.concurrency}, async HTTP transport {model.async_transport}",
          flush=True)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            seq_cases, seq_reps = schedule(args.episodes_seq, n_cases)
            seq = phase("sequential", lambda: run(
                lambda: gym.make(env_id), lambda: LLMDoctor(model),
                RunSpec(out=Path(tmp, "seq.jsonl"), episodes=seq_cases,
                        repetitions=seq_reps)), seq_cases * seq_reps, base_url,
                workers=1, delay_s=delay_s)
            con_cases, con_reps = schedule(args.episodes_concurrent, n_cases)
            n_con = con_cases * con_reps
            con = phase("concurrent", lambda: run(
                lambda: gym.make(env_id), lambda: LLMDoctor(model),
                RunSpec(out=Path(tmp, "con.jsonl"), episodes=con_cases, repetitions=con_reps),
                Concurrent(args.concurrency)), n_con, base_url,
                workers=min(args.concurrency, n_con), delay_s=delay_s)
            cli: list[dict] = []
            if args.cli_runs > 0:
                print(f"end to end: {args.cli_runs} x `python -m clinenv run --env {env_id} "
                      f"--doctor llm --concurrency {args.concurrency}` ({n_con} episodes)",
                      flush=True)
            for _ in range(args.cli_runs):
                cli.append(cli_phase(env_id, con_cases, con_reps, args.concurrency, base_url,
                                     Path(tmp, "cli.jsonl"), seq["eps_per_min"]))
    finally:
        model.close()
        proc.terminate()
        proc.wait(timeout=10)
    ratio = con["eps_per_min"] / seq["eps_per_min"]
    print(f"speed-up {ratio:.1f}x in process (target >= 60x); concurrent phase: server idle "
          f"{100 * con['server_idle_share']:.2f} % of wall, efficiency "
          f"{100 * con['efficiency']:.1f} % of the ideal wall, per episode "
          f"{100 * con['outside_server']:.2f} % outside its server calls (target < 5 %)")
    end_to_end = None
    if cli:
        end_to_end = statistics.median(row["speed_up"] for row in cli)
        walls = statistics.median(row["wall_s"] for row in cli)
        first = statistics.median(row["first_request_s"] for row in cli)
        print(f"end to end through clinenv run: {end_to_end:.1f}x the sequential rate "
              f"(median of {len(cli)}; target >= 50x), {walls:.2f} s start to exit, first "
              f"request after {first:.2f} s")
    if args.json:
        print(json.dumps({"sequential": seq, "concurrent": con, "speed_up": ratio,
                          "cli": cli, "speed_up_end_to_end": end_to_end}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
