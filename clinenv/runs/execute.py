"""The one way to run: :func:`run` and its awaitable twin :func:`arun`.

A :class:`~clinenv.runs.spec.RunSpec` executed by ``Serial()`` (default), ``Concurrent(n)``
or :class:`clinenv.distributed.Ray`; examples in docs/api/runs.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from clinenv.runs.logged import RunResult, Serial
from clinenv.runs.spec import RunSpec, check_spec

__all__ = ["Executor", "arun", "run"]


class Executor(Protocol):
    """How a run executes: ``run`` and its awaitable ``arun``, each taking
    ``(make_env, make_doctor, spec, progress=, on_start=)``; ``Serial``, ``Concurrent``
    and :class:`clinenv.distributed.Ray` are executors (docs/api/runs.md)."""

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
        make_env: factory of a fresh environment over :class:`clinenv.env.EGIPEnv`.
        make_doctor: factory of a fresh doctor (all with one config); ``None`` for both
            only with an executor that builds its own (Ray with ``parts``).
        spec: the run's :class:`~clinenv.runs.spec.RunSpec`.
        executor: ``Serial()`` (default), ``Concurrent(n)`` or :class:`clinenv.distributed.Ray`.
        progress: called with each new line after it is written.
        on_start: called once with the number of episodes about to run.

    Returns:
        A :class:`~clinenv.runs.logged.RunResult`, lines in plan order; error lines are
        counted in ``n_errors``.

    Raises:
        RunAborted: fail fast (:mod:`clinenv.runs.fail_fast`); the log keeps whole lines.
        FileExistsError: ``out`` exists, is not empty, and ``resume`` is false.
        RunLogError: the existing log is corrupt or from a different run.
        ValueError: ``episodes`` beyond the dataset, or doctors with different configs.
        TypeError: ``spec`` is not a :class:`~clinenv.runs.spec.RunSpec`.
        RuntimeError: ``Concurrent`` inside a running event loop (``await arun(...)``).
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
