"""The one way to run: :func:`run` and its awaitable twin :func:`arun`.

A logged run is *what* (a :class:`~clinenv.runs.spec.RunSpec`: log file, schedule,
resume and fail-fast rules) executed *how* (an executor)::

    spec = RunSpec(out="runs/demo.jsonl", seed=3, repetitions=2)
    run(lambda: gym.make("EGIP-Demo-v0"), ScriptedDoctor, spec)             # Serial()
    run(make_env, make_doctor, spec.replace(resume=True), Concurrent(64))
    run(None, None, spec, Ray(RayConfig(address="auto"), parts=parts))      # clinenv[ray]

Executors: :class:`~clinenv.runs.logged.Serial` (one episode at a time, the default),
:class:`~clinenv.runs.concurrent.Concurrent` (``n`` episodes at once under asyncio) and
:class:`clinenv.distributed.Ray` (runner actors on many nodes). Each has ``run`` and
``arun`` methods taking ``(make_env, make_doctor, spec, progress=, on_start=)``; the
plan, resume checks, fail-fast stops and lines are the same under each
(:func:`~clinenv.runs.logged.prepare_run`), so one spec writes the same lines (apart
from ``timing`` and ``llm``) whichever executes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from clinenv.runs.logged import RunResult, Serial
from clinenv.runs.spec import RunSpec, check_spec

__all__ = ["Executor", "arun", "run"]


class Executor(Protocol):
    """How a run executes (module docstring)."""

    def run(self, make_env: Any, make_doctor: Any, spec: RunSpec,
            **hooks: Any) -> RunResult: ...

    async def arun(self, make_env: Any, make_doctor: Any, spec: RunSpec,
                   **hooks: Any) -> RunResult: ...


def run(make_env: Callable[[], Any] | None, make_doctor: Callable[[], Any] | None,
        spec: RunSpec, executor: Executor | None = None, *,
        progress: Callable[[dict[str, Any]], None] | None = None,
        on_start: Callable[[int], None] | None = None) -> RunResult:
    """Run a whole schedule, appending one line per episode to ``spec.out``.

    Args:
        make_env: factory of a fresh environment (a Gymnasium environment over
            :class:`clinenv.env.EGIPEnv`); every environment made is closed at the end.
        make_doctor: factory of a fresh doctor; every doctor must have the same config.
            The first pair gives the run's context (environment id, dataset, doctor).
            ``None`` for both only with an executor that builds its own
            (:class:`clinenv.distributed.Ray` with ``parts``).
        spec: the run's :class:`~clinenv.runs.spec.RunSpec`.
        executor: :class:`~clinenv.runs.logged.Serial` (default),
            :class:`~clinenv.runs.concurrent.Concurrent` or
            :class:`clinenv.distributed.Ray`.
        progress: called with each new line after it is written.
        on_start: called once with the number of episodes about to run.

    Returns:
        A :class:`~clinenv.runs.logged.RunResult`, lines in plan order. Episodes stopped
        by a backend error are error lines, counted in ``n_errors``; the run goes on.

    Raises:
        RunAborted: a non-retryable backend error or ``max_consecutive_errors`` error
            episodes in a row (:mod:`clinenv.runs.fail_fast`); the log keeps whole lines.
        FileExistsError: ``out`` exists, is not empty, and ``resume`` is false.
        RunLogError: the existing log is corrupt or from a different run.
        ValueError: ``episodes`` beyond the dataset, or doctors with different configs.
        TypeError: ``spec`` is not a :class:`~clinenv.runs.spec.RunSpec`.
        RuntimeError: :class:`~clinenv.runs.concurrent.Concurrent` inside a running
            event loop (``await arun(...)`` there).
    """
    spec = check_spec(spec, caller="run")
    return (executor or Serial()).run(make_env, make_doctor, spec, progress=progress,
                                      on_start=on_start)


async def arun(make_env: Callable[[], Any] | None, make_doctor: Callable[[], Any] | None,
               spec: RunSpec, executor: Executor | None = None, *,
               progress: Callable[[dict[str, Any]], None] | None = None,
               on_start: Callable[[int], None] | None = None) -> RunResult:
    """:func:`run` inside a running event loop (``await`` it): same arguments, result and
    errors, never refusing a running loop."""
    spec = check_spec(spec, caller="arun")
    return await (executor or Serial()).arun(make_env, make_doctor, spec,
                                             progress=progress, on_start=on_start)
