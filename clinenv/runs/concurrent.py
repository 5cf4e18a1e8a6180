"""Concurrent rollouts: many episodes at once under asyncio, so a server batches them.

:func:`arun_episode` and the :class:`Concurrent` executor (``n`` workers started
:data:`RAMP_UP_S` apart; the same lines as ``Serial`` apart from ``timing`` and ``llm``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from clinenv.runlog import RunLogWriter, doctor_config
from clinenv.runs.episode import awaitable, play_episode
from clinenv.runs.fail_fast import FailFast
from clinenv.runs.logged import PreparedRun, RunResult, prepare_run
from clinenv.runs.spec import RunSpec

__all__ = ["Concurrent", "arun_episode"]

#: Seconds between the starts of two workers (64 workers ramp up over 0.25 s). Started
#: at once, every worker prepares its first request (reset, prompt, the client's request
#: encoding) before any request leaves, and the server idles meanwhile; staggered, the
#: first requests are in flight while later workers prepare theirs, and the workers' CPU
#: work stays spread over time (measured with benchmarks/bench_rollout.py).
RAMP_UP_S = 0.004


async def arun_episode(
    env: Any,
    doctor: Any,
    *,
    case_id: str | int,
    seed: int | None,
    max_steps: int = 100_000,
) -> dict[str, Any]:
    """Run one episode in the running event loop (the loop of :func:`run_episode`).

    The doctor's move is ``await doctor.aact`` when it has one, the environment's ``await
    env.unwrapped.astep`` (bypassing wrappers' ``step``; reset still goes through them).

    Args:
        env: a Gymnasium environment whose ``unwrapped`` is :class:`clinenv.env.EGIPEnv`.
        doctor: a doctor policy (``reset``, ``act`` and optionally ``aact``).
        case_id: a ``case_id`` string or a 0-based case index.
        seed: the episode seed.
        max_steps: safety cap on steps (then ``truncated``).

    Returns:
        The record of :func:`clinenv.runs.episode.run_episode`.

    Raises:
        KeyError, IndexError: unknown case id or index (from ``env.reset``).
    """
    aact = getattr(doctor, "aact", None)
    astep = getattr(env.unwrapped, "astep", None)
    return await play_episode(
        env, doctor, aact if callable(aact) else awaitable(doctor.act),
        astep if callable(astep) else awaitable(env.step),
        case_id=case_id, seed=seed, max_steps=max_steps)


@dataclass(frozen=True)
class Concurrent:
    """The executor of ``n`` episodes at once in one asyncio event loop (docs/api/runs.md).

    Up to ``n`` workers, each owning one environment from ``make_env()`` and one doctor
    from ``make_doctor()`` (stateful policies and environments are never shared; model
    clients may be). The first pair also gives the run's context (environment id,
    dataset, doctor config); every doctor must have the same config. Every environment
    made here is closed at the end; models are the caller's to close. Lines are written
    in the order episodes finish (``progress`` and the fail-fast count too) and returned
    in plan order.

    Attributes:
        n: episodes in flight at once, an integer >= 1.

    Raises:
        ValueError: ``n`` is not an integer >= 1.
    """

    n: int = 8

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"concurrency must be an integer >= 1, got {self.n!r}")

    def run(self, make_env: Callable[[], Any], make_doctor: Callable[[], Any],
            spec: RunSpec, **hooks: Any) -> RunResult:
        """The run in a new event loop (:func:`clinenv.runs.run`).

        Raises:
            RuntimeError: called inside a running event loop (``await`` :meth:`arun`
                there: no nested loop, no deadlock).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError("run() with Concurrent cannot run inside a running event "
                               "loop; use `await arun(...)` there")
        results: list[RunResult] = []

        async def main() -> None:
            # the main task's result stays None: leaving asyncio.run, Python 3.11 repr()s
            # that task (signal.getsignal on its SIGINT handler), and a RunResult's repr
            # holds every line (0.1 s at 128 episodes)
            results.append(await self.arun(make_env, make_doctor, spec, **hooks))

        asyncio.run(main())
        return results[0]

    async def arun(self, make_env: Callable[[], Any], make_doctor: Callable[[], Any],
                   spec: RunSpec, *, progress: Callable[[dict[str, Any]], None] | None = None,
                   on_start: Callable[[int], None] | None = None) -> RunResult:
        """The run in the running event loop (:func:`clinenv.runs.arun`)."""
        guard = FailFast(spec.out, spec.max_consecutive_errors)
        env0, doctor0 = make_env(), make_doctor()
        envs = [env0]  # every environment made here, closed at the end
        run: PreparedRun | None = None  # holds the log's lock until the end
        try:
            run = prepare_run(env0, doctor0, spec)
            if on_start is not None:
                on_start(len(run.todo))
            await _workers(run, env0, doctor0, make_env, make_doctor, envs, guard,
                           self.n, progress)
            return run.result()
        finally:
            if run is not None:
                run.close()
            for env in envs:
                env.close()


async def _workers(run: PreparedRun, env0: Any, doctor0: Any,
                   make_env: Callable[[], Any], make_doctor: Callable[[], Any],
                   envs: list[Any], guard: FailFast, n: int,
                   progress: Callable[[dict[str, Any]], None] | None) -> None:
    """Run ``run.todo`` with up to ``n`` workers, writing each line (:class:`Concurrent`)."""
    items: Iterator[tuple[int, int, int]] = iter(run.todo)
    loop = asyncio.get_running_loop()

    def pair(index: int) -> tuple[Any, Any]:
        """Worker ``index``'s environment and doctor (the first pair is made already)."""
        if index == 0:
            return env0, doctor0
        env = make_env()
        envs.append(env)
        doctor = make_doctor()
        if doctor_config(doctor) != run.context.doctor:
            raise ValueError("make_doctor() must build identically configured doctors "
                             f"(got {doctor_config(doctor)} after {run.context.doctor})")
        return env, doctor

    # One writer thread: whole lines, one at a time, fsync'd off the event loop. The pool
    # shuts down (waiting for a line being written) before the file closes. The guard
    # exits last: a stop is counted from the file once every write is done.
    with guard, RunLogWriter(run.out) as writer, ThreadPoolExecutor(1) as write_thread:

        async def worker(index: int) -> None:
            # Ramp-up: workers start RAMP_UP_S apart and build their pair then, so the
            # first workers' requests are in flight while later ones still prepare.
            await asyncio.sleep(index * RAMP_UP_S)
            env, doctor = pair(index)
            # one shared iterator: each worker takes the next scheduled episode, until
            # the run is stopped (fail fast)
            for item in items:
                record = await arun_episode(env, doctor, case_id=item[0], seed=item[2])
                if guard.stopped:
                    return  # another worker stopped the run: no line for this one
                guard.before_write(record)
                line = run.line(record, item)
                await loop.run_in_executor(write_thread, writer.write, line)
                run.add(line)
                if progress is not None:
                    progress(line)
                guard.after_write(line)

        # a failure or a fail-fast stop cancels the episodes in flight (no line)
        await guard.run_workers(worker, min(n, len(run.todo)))
