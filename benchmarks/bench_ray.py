"""Episodes per minute on Ray: one local node versus two, and the driver's overhead.

Starts the project's fake OpenAI-compatible server in a subprocess (``python -m
clinenv.testing.fake_server --delay-ms 200 --responder clinician``: every request takes
a fixed 200 ms) and a local :class:`ray.cluster_utils.Cluster`, then runs an
:class:`~clinenv.agents.llm_doctor.LLMDoctor` (Direct strategy, 20 requests an episode)
on ``EGIP-Demo-v0`` over the same schedule in four phases:

1. **one machine**: :func:`clinenv.runs.run` with
   :class:`~clinenv.runs.concurrent.Concurrent` (``--concurrency`` episodes at once), no
   Ray (the reference);
2. **Ray, 1 node**: :class:`clinenv.distributed.Ray` on a one-node cluster, one
   runner with ``--concurrency`` episodes at once;
3. **Ray, 2 nodes**: a second node added, one runner per node, each with
   ``--concurrency`` episodes at once (twice the episodes in flight);
4. **driver overhead**: the scripted doctor (no model call, an episode takes a few
   milliseconds on its runner) over ``--overhead-episodes`` episodes on the two nodes:
   the driver's CPU time per episode (hand out the unit, wait, fetch the record, write
   and fsync the line); its wall time per episode is then bound by the runners' own
   episodes, on the same cores.

For every phase it prints the run's wall time and episodes per minute (for a Ray phase
from handing out the first unit to writing the last line,
:attr:`~clinenv.distributed.RayRunResult.run_s`; the runners' start-up is printed
apart), the driver process's CPU milliseconds per episode, and the check of its lines
against phase 1 (the same lines apart from ``timing`` and ``llm``). The ideal rate is
``60 x in-flight episodes / (20 requests x delay)`` (480 episodes a minute per 32
in flight at 200 ms). Both nodes of the cluster run on this machine and share its
cores: phase 3 shows what a second node's runner adds when episodes wait on their
server, not the CPU of a second machine.

Ray binds its services to the machine's network address; like the tests, the benchmark
runs inside a network namespace that holds only loopback. Started outside one, it
re-runs itself inside a new one (``unshare -n``, then ``ip link set lo up``; needs root)
and says so when it cannot. Run from the repository root::

    python benchmarks/bench_ray.py [--episodes 128] [--concurrency 32] [--delay-ms 200]
                                   [--overhead-episodes 340] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym

import clinenv  # noqa: F401  (registers the EGIP environment ids)
from clinenv.agents.llm_doctor import LLMDoctor
from clinenv.agents.scripted_doctor import ScriptedDoctor
from clinenv.distributed import Ray, RayConfig, RunnerParts
from clinenv.llm.openai_backend import OpenAIChatModel
from clinenv.runs import Concurrent, RunSpec, run
from clinenv.testing.fake_server import spawn_server

ENV_ID = "EGIP-Demo-v0"
N_CASES = 17  # the demo cases
VOLATILE = ("timing", "llm")


class LLMParts:
    """Runner parts: the demo environment and an LLM doctor of the node's server
    (this module runs as ``__main__``, so Ray ships the class by value)."""

    def __call__(self, base_url):
        model = OpenAIChatModel("fake-model", base_url=base_url, timeout_s=120)
        return RunnerParts(make_env=lambda: gym.make(ENV_ID),
                           make_doctor=lambda: LLMDoctor(model), close=model.close)


class ScriptedParts:
    """Runner parts without a server: the scripted doctor."""

    def __call__(self, base_url):
        return RunnerParts(make_env=lambda: gym.make(ENV_ID), make_doctor=ScriptedDoctor)


def loopback_only() -> bool:
    return [name for _, name in socket.if_nameindex()] == ["lo"]


def in_namespace(argv: list[str]) -> int:
    """Re-run this script inside a loopback-only network namespace; its exit code."""
    command = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$0" "$@"',
               sys.executable, str(Path(__file__).resolve()), *argv]
    try:
        return subprocess.call(command)
    except FileNotFoundError:
        print("bench_ray: unshare is missing; run inside a loopback-only network namespace",
              file=sys.stderr)
        return 2


def schedule(n_episodes: int) -> tuple[int, int]:
    """``(cases, repetitions)`` covering ``n_episodes`` with the first demo cases."""
    reps = math.ceil(n_episodes / N_CASES)
    return math.ceil(n_episodes / reps), reps


def stable(lines):
    return sorted(({k: v for k, v in line.items() if k not in VOLATILE} for line in lines),
                  key=lambda line: (line["case_id"], line["repetition"]))


def phase(name: str, run, reference=None) -> dict:
    """Run one phase; print and return its figures. A Ray phase's rate counts the run
    itself (first unit handed out to last line written, ``RayRunResult.run_s``); the
    start of its runners (``startup_s``) is printed apart."""
    cpu0, start = time.process_time(), time.monotonic()
    result = run()
    wall, cpu = time.monotonic() - start, time.process_time() - cpu0
    n = len(result.lines)
    ray_run = hasattr(result, "run_s")
    run_s = result.run_s if ray_run else wall
    cpu = result.driver_cpu_s if ray_run else cpu
    same = None if reference is None else stable(result.lines) == stable(reference)
    row = {"phase": name, "episodes": n, "run_s": run_s, "eps_per_min": 60 * n / run_s,
           "startup_s": result.startup_s if ray_run else None, "call_wall_s": wall,
           "driver_cpu_ms_per_episode": 1000 * cpu / n,
           "driver_wall_ms_per_episode": 1000 * run_s / n, "errors": result.n_errors,
           "runners": len(result.runners) if ray_run else None,
           "resubmitted": result.n_resubmitted if ray_run else None,
           "same_lines_as_one_machine": same}
    check = "" if same is None else f"; lines {'equal' if same else 'DIFFER'} to one machine"
    start_note = (f" (runners ready after {result.startup_s:.2f} s, whole call {wall:.2f} s)"
                  if ray_run else "")
    print(f"{name}: {n} episodes in {run_s:.2f} s = {row['eps_per_min']:.1f} episodes/min"
          f"{start_note}; driver CPU {row['driver_cpu_ms_per_episode']:.2f} ms/episode, "
          f"wall {row['driver_wall_ms_per_episode']:.2f} ms/episode; errors "
          f"{result.n_errors}{check}", flush=True)
    return {**row, "lines": result.lines}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=128)
    parser.add_argument("--concurrency", type=int, default=32,
                        help="episodes at once per runner (and in the one-machine phase)")
    parser.add_argument("--delay-ms", type=float, default=200.0)
    parser.add_argument("--overhead-episodes", type=int, default=340)
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args(argv)
    if not loopback_only():
        print("bench_ray: re-running inside a loopback-only network namespace", flush=True)
        return in_namespace(argv)

    import ray
    from ray.cluster_utils import Cluster

    cases, reps = schedule(args.episodes)
    cases_o, reps_o = schedule(args.overhead_episodes)
    print(f"{ENV_ID}, LLM doctor (direct), {cases} cases x {reps} repetitions, "
          f"{args.delay_ms:g} ms per request, {args.concurrency} episodes at once per "
          f"runner; both Ray nodes share this machine's cores", flush=True)
    server, base_url = spawn_server(args.delay_ms)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        try:
            model = OpenAIChatModel("fake-model", base_url=base_url, timeout_s=120)
            one = phase("one machine (no Ray)", lambda: run(
                lambda: gym.make(ENV_ID), lambda: LLMDoctor(model),
                RunSpec(out=out / "one.jsonl", episodes=cases, repetitions=reps),
                Concurrent(args.concurrency)))
            model.close()
            rows.append(one)
            start = time.monotonic()
            cluster = Cluster(initialize_head=True, head_node_args={
                "num_cpus": 2, "include_dashboard": False})
            ray.init(address=cluster.address, logging_level="warning")
            print(f"(a one-node cluster up in {time.monotonic() - start:.1f} s)", flush=True)
            try:
                plan = dict(episodes=cases, repetitions=reps)
                llm = Ray(RayConfig(base_url=base_url, concurrency=args.concurrency),
                          parts=LLMParts())
                rows.append(phase("Ray, 1 node, 1 runner", lambda: run(
                    None, None, RunSpec(out=out / "ray1.jsonl", **plan), llm),
                    one["lines"]))
                start = time.monotonic()
                cluster.add_node(num_cpus=2)
                cluster.wait_for_nodes()
                print(f"(a second node up in {time.monotonic() - start:.1f} s)", flush=True)
                rows.append(phase("Ray, 2 nodes, 2 runners", lambda: run(
                    None, None, RunSpec(out=out / "ray2.jsonl", **plan), llm),
                    one["lines"]))
                rows.append(phase("driver overhead: scripted doctor, 2 nodes", lambda: run(
                    None, None, RunSpec(out=out / "scripted.jsonl", episodes=cases_o,
                                        repetitions=reps_o),
                    Ray(RayConfig(concurrency=args.concurrency), parts=ScriptedParts()))))
            finally:
                ray.shutdown()
                cluster.shutdown()
        finally:
            server.terminate()
            server.wait()
    one_rate, two_rate = rows[1]["eps_per_min"], rows[2]["eps_per_min"]
    print(f"two nodes / one node: {two_rate / one_rate:.2f}x the episodes per minute "
          f"(ideal 2x: twice the episodes in flight; both nodes share this machine's "
          f"cores)", flush=True)
    if args.json:
        print(json.dumps([{k: v for k, v in row.items() if k != "lines"} for row in rows],
                         indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
