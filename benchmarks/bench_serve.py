"""Overhead per step of the OpenEnv server (``clinenv serve``) over in-process stepping.

Plays the same fixed episodes (reset, then questions until the step budget, resetting
when an episode ends) in process (``ClinOpenEnv`` called directly: the environment's
own cost) and through a server on 127.0.0.1 with ``ClinenvClient`` over WebSocket, at
1 and at N concurrent sessions (asyncio clients in this process). Prints µs per step
for each and the overhead (server minus in process); target: <= 1000 µs per step at 64
sessions. Needs ``clinenv[openenv]``.

    python benchmarks/bench_serve.py [--env EGIP-Demo-v0] [--steps 200] [--sessions 64]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from clinenv.integrations.openenv import ClinAction, ClinenvClient, ClinOpenEnv

QUESTION = ClinAction(text="Can you describe your symptoms?")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def in_process(env_id: str, steps: int, kwargs: dict) -> float:
    """µs per step of ClinOpenEnv called directly."""
    env = ClinOpenEnv(env_id, **kwargs)
    env.reset(seed=0, case_id=0)
    t0 = time.perf_counter()
    for i in range(steps):
        if env.step(QUESTION).done or env.state.phase != "acquire":
            env.reset(seed=i, case_id=0)
    took = time.perf_counter() - t0
    env.close()
    return took / steps * 1e6


async def one_session(url: str, steps: int, index: int) -> None:
    client = ClinenvClient(base_url=url)
    await client.reset(seed=index, case_id=0)
    for i in range(steps):
        result = await client.step(QUESTION)
        if result.done or result.observation.metadata.get("phase") != "acquire":
            await client.reset(seed=i, case_id=0)
    await client.close()


async def served(url: str, steps: int, sessions: int) -> float:
    """µs per step (wall time / all sessions' steps) through the server."""
    await one_session(url, 5, 0)  # warm up
    t0 = time.perf_counter()
    await asyncio.gather(*(one_session(url, steps, i) for i in range(sessions)))
    return (time.perf_counter() - t0) / (steps * sessions) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="EGIP-Demo-v0")
    parser.add_argument("--steps", type=int, default=200, help="steps per session")
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()
    kwargs = {"data_dir": args.data_dir} if args.data_dir else {}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "clinenv", "serve", "--env", args.env, "--port", str(port),
           "--max-sessions", str(args.sessions + 2)]
    if args.data_dir:
        cmd += ["--data-dir", args.data_dir]
    proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            cwd=Path(__file__).resolve().parents[1], env=dict(os.environ))
    try:
        deadline = time.monotonic() + 240
        while True:
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                print("the server did not start", file=sys.stderr)
                return 1
            time.sleep(0.3)
        local = in_process(args.env, args.steps * 4, kwargs)
        print(f"{args.env}, {args.steps} steps per session, {os.cpu_count()} CPUs")
        print(f"in process:                {local:9.0f} µs/step")
        for n in (1, args.sessions):
            remote = asyncio.run(served(url, args.steps, n))
            print(f"server, {n:3d} session(s):    {remote:9.0f} µs/step  "
                  f"(overhead {remote - local:+.0f} µs/step)")
    finally:
        proc.terminate()
        proc.wait(15)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
