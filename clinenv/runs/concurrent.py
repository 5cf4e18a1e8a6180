"""Concurrent rollouts: many episodes at once under asyncio, so a server batches them.

An EGIP episode spends almost all of its time waiting for model replies. Run one at a
time (as AgentClinic does) and a 200 ms server gives a few episodes a minute; run
``concurrency`` of them in one event loop and the server receives that many requests at
once, which ``vllm serve`` batches. The environment itself stays synchronous and cheap:
only the model calls are awaited (:meth:`clinenv.env.EGIPEnv.astep`, the doctor's
``aact``).

- :func:`arun_episode` — one episode, awaiting the doctor and the environment; the same
  record as :func:`clinenv.runs.episode.run_episode` (one loop,
  :func:`clinenv.runs.episode.play_episode`);
- :func:`arun_concurrent` / :func:`run_concurrent` — a whole logged run with
  ``concurrency`` workers, each with its own environment and doctor (built by the
  factories as the worker starts; workers start :data:`RAMP_UP_S` apart). Plan, resume
  checks and line format are those of :func:`clinenv.runs.logged.run_logged` (shared
  through :func:`clinenv.runs.logged.prepare_run` and one
  :class:`~clinenv.runs.spec.RunSpec`): lines are written, durably, in the order
  episodes finish, and returned in plan order. With deterministic model replies a
  concurrent run writes the same lines as a sequential one, apart from ``timing`` and
  ``llm`` (each episode's seeds come from the schedule, never from the order of
  completion).

An episode whose model backend fails after its retries
(:class:`~clinenv.llm.base.BackendError`) becomes an error line and the other episodes go
on (see the run-log schema in :mod:`clinenv.runs.logged`); ``resume=True`` later runs such
episodes again. A refused request or too many error episodes in a row stop the run
(:class:`~clinenv.runs.fail_fast.RunAborted`, :mod:`clinenv.runs.fail_fast`), and so does any other
exception: no new episode starts, the episodes in flight are cancelled without a line,
and the log keeps every line written before, whole (continue with ``resume=True``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from clinenv.case_list import CaseList
from clinenv.runlog import RunLogWriter, doctor_config
from clinenv.runs.episode import awaitable, play_episode
from clinenv.runs.fail_fast import DEFAULT_MAX_CONSECUTIVE_ERRORS, FailFast
from clinenv.runs.logged import PreparedRun, RunResult, prepare_run
from clinenv.runs.spec import RunSpec, resolve_spec

__all__ = ["arun_concurrent", "arun_episode", "run_concurrent"]

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
    """Run one episode in the running event loop.

    Like :func:`clinenv.runs.episode.run_episode` (the same loop,
    :func:`clinenv.runs.episode.play_episode`), but the doctor's move is ``await
    doctor.aact(observation, info)`` when the doctor has ``aact`` (else ``doctor.act``)
    and the environment's is ``await env.unwrapped.astep(action)`` (else ``env.step``).
    ``astep`` is called on the unwrapped environment, so Gymnasium wrappers' ``step`` is
    bypassed (reset still goes through them).

    Args:
        env: a Gymnasium environment whose ``unwrapped`` is :class:`clinenv.env.EGIPEnv`.
        doctor: a doctor policy (``reset``, ``act`` and optionally ``aact``).
        case_id: a ``case_id`` string or a 0-based case index.
        seed: the episode seed.
        max_steps: safety cap on steps (then ``truncated``).

    Returns:
        The record of :func:`clinenv.runs.episode.run_episode` (with ``timing`` and, when
        an LLM takes part, ``llm``; ``error`` after a backend failure).

    Raises:
        KeyError, IndexError: unknown case id or index (from ``env.reset``).
    """
    aact = getattr(doctor, "aact", None)
    astep = getattr(env.unwrapped, "astep", None)
    return await play_episode(
        env, doctor, aact if callable(aact) else awaitable(doctor.act),
        astep if callable(astep) else awaitable(env.step),
        case_id=case_id, seed=seed, max_steps=max_steps)


async def arun_concurrent(
    make_env: Callable[[], Any],
    make_doctor: Callable[[], Any],
    spec: RunSpec | None = None,
    *,
    out: str | Path | None = None,
    seed: int = 0,
    episodes: int | None = None,
    repetitions: int = 1,
    resume: bool = False,
    retry_errors: bool = True,
    env_id: str | None = None,
    concurrency: int = 8,
    max_consecutive_errors: int | None = DEFAULT_MAX_CONSECUTIVE_ERRORS,
    progress: Callable[[dict[str, Any]], None] | None = None,
    on_start: Callable[[int], None] | None = None,
    paper_settings: Mapping[str, Any] | None = None,
    cases: CaseList | None = None,
) -> RunResult:
    """:func:`run_concurrent` inside a running event loop (``await`` it).

    Same arguments, result and errors as :func:`run_concurrent`, except that it never
    refuses a running loop.
    """
    spec = resolve_spec(spec, dict(
        out=out, seed=seed, episodes=episodes, repetitions=repetitions, resume=resume,
        retry_errors=retry_errors, env_id=env_id,
        max_consecutive_errors=max_consecutive_errors, paper_settings=paper_settings,
        cases=cases), caller="arun_concurrent")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be an integer >= 1, got {concurrency!r}")
    guard = FailFast(spec.out, spec.max_consecutive_errors)
    env0, doctor0 = make_env(), make_doctor()
    envs = [env0]  # every environment made here, closed at the end
    run: PreparedRun | None = None  # holds the log's lock until the end
    try:
        run = prepare_run(env0, doctor0, spec)
        if on_start is not None:
            on_start(len(run.todo))
        items: Iterator[tuple[int, int, int]] = iter(run.todo)
        loop = asyncio.get_running_loop()

        def pair(index: int) -> tuple[Any, Any]:
            """Worker ``index``'s environment and doctor (the first pair is made above)."""
            if index == 0:
                return env0, doctor0
            env = make_env()
            envs.append(env)
            doctor = make_doctor()
            if doctor_config(doctor) != run.context.doctor:
                raise ValueError("make_doctor() must build identically configured doctors "
                                 f"(got {doctor_config(doctor)} after {run.context.doctor})")
            return env, doctor

        # One writer thread: whole lines, one at a time, fsync'd off the event loop. The
        # pool shuts down (waiting for a line being written) before the file closes.
        # the guard exits last: a stop is counted from the file once every write is done
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
            await guard.run_workers(worker, min(concurrency, len(run.todo)))
        return run.result()
    finally:
        if run is not None:
            run.close()
        for env in envs:
            env.close()


def run_concurrent(
    make_env: Callable[[], Any],
    make_doctor: Callable[[], Any],
    spec: RunSpec | None = None,
    *,
    out: str | Path | None = None,
    seed: int = 0,
    episodes: int | None = None,
    repetitions: int = 1,
    resume: bool = False,
    retry_errors: bool = True,
    env_id: str | None = None,
    concurrency: int = 8,
    max_consecutive_errors: int | None = DEFAULT_MAX_CONSECUTIVE_ERRORS,
    progress: Callable[[dict[str, Any]], None] | None = None,
    on_start: Callable[[int], None] | None = None,
    paper_settings: Mapping[str, Any] | None = None,
    cases: CaseList | None = None,
) -> RunResult:
    """Run a whole schedule with ``concurrency`` episodes at once, logging each line.

    The schedule, the resume checks (with the retry of error lines), the fail-fast stops
    and the lines are those of :func:`clinenv.runs.logged.run_logged`; only the execution
    differs. Up to ``concurrency`` workers run in one asyncio event loop, each owning one
    environment from ``make_env()`` and one doctor from ``make_doctor()`` (stateful
    policies and environments are never shared; model clients may be). The first pair
    also gives the run's context (environment id, dataset, doctor config). Every
    environment made here is closed at the end; models are the caller's to close.

    Args:
        make_env: factory of a fresh environment (e.g. ``lambda: gym.make(ID, ...)``).
        make_doctor: factory of a fresh doctor; every doctor must have the same config.
        spec: the run's :class:`~clinenv.runs.spec.RunSpec` (out, seed, episodes,
            repetitions, resume, retry_errors, env_id, max_consecutive_errors,
            paper_settings, cases); or ``None`` and those keyword arguments, which fill
            one (with a spec, a field keyword other than its default is a
            :class:`TypeError` naming it). The spec given to
            :func:`clinenv.runs.logged.run_logged` writes the same lines.
        out: the log file (JSON Lines); must be new or empty unless ``resume``; required
            unless ``spec``.
        seed: the run seed (>= 0); episode seeds derive from it.
        episodes: run the first N cases in dataset order (``None``: all).
        repetitions: repetitions per case (>= 1).
        resume: continue an existing log instead of refusing it
            (:func:`clinenv.runs.logged.prepare_run`).
        retry_errors: when resuming, run the episodes whose latest line is an error line
            again (default); false keeps them.
        env_id: the environment id written to the log (default ``env.spec.id``).
        concurrency: episodes in flight at once (integer >= 1).
        max_consecutive_errors: stop the run after this many error episodes in a row, in
            the order they finish (>= 1; ``None``: never); see :mod:`clinenv.runs.fail_fast`.
        progress: called with each new line after it is written (completion order).
        on_start: called once with the number of episodes about to run.
        paper_settings: written into every line (:func:`clinenv.runs.logged.prepare_run`).
        cases: run only the cases of this case list (:func:`clinenv.runs.logged.prepare_run`).

    Returns:
        A :class:`~clinenv.runs.logged.RunResult`, lines in plan order; ``n_errors``
        counts episodes stopped by a backend error, ``n_retried`` the error lines run
        again on resume.

    Raises:
        RuntimeError: called inside a running event loop (use ``await
            arun_concurrent(...)`` there: no nested loop, no deadlock).
        RunAborted: a non-retryable backend error or ``max_consecutive_errors`` error
            episodes in a row; no new episode starts, the episodes in flight are
            cancelled without a line, the log keeps whole lines only.
        FileExistsError: ``out`` exists, is not empty, and ``resume`` is false.
        RunLogError: the existing log is corrupt or from a different run.
        ValueError: ``episodes``, ``repetitions``, ``seed``, ``concurrency`` or
            ``max_consecutive_errors`` out of range, or doctors with different configs.
        TypeError: ``spec`` together with a field keyword other than its default.
    """
    spec = resolve_spec(spec, dict(
        out=out, seed=seed, episodes=episodes, repetitions=repetitions, resume=resume,
        retry_errors=retry_errors, env_id=env_id,
        max_consecutive_errors=max_consecutive_errors, paper_settings=paper_settings,
        cases=cases), caller="run_concurrent")
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("run_concurrent() cannot run inside a running event loop; "
                           "use `await arun_concurrent(...)` there")
    results: list[RunResult] = []

    async def main() -> None:
        # the main task's result stays None: leaving asyncio.run, Python 3.11 repr()s that
        # task (signal.getsignal on its SIGINT handler), and a RunResult's repr holds
        # every line (0.1 s at 128 episodes)
        results.append(await arun_concurrent(make_env, make_doctor, spec,
                                             concurrency=concurrency, progress=progress,
                                             on_start=on_start))

    asyncio.run(main())
    return results[0]
