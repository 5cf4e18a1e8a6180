"""Logged runs: a doctor policy over a schedule of episodes, with a crash-safe run log.

:func:`plan_episodes`, :func:`prepare_run` (shared by every executor) and the
:class:`Serial` executor; the line format is in docs/evaluation.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from clinenv.runlog import (
    KEY,
    RunContext,
    RunLog,
    RunLogError,
    RunLogWriter,
    is_error_line,
    read_run_log,
)
from clinenv.runlog_lock import RunLogLock
from clinenv.runs.episode import (
    EpisodeTally,
    awaitable,
    call_totals,
    episode_llm,
    error_dict,
    play_episode,
    run_episode,
    run_without_loop,
)
from clinenv.runs.fail_fast import FailFast, RunAborted
from clinenv.runs.spec import RunSpec, check_spec
from clinenv.seeding import episode_seed

__all__ = [
    # this module
    "PreparedRun", "RunResult", "Serial", "plan_episodes", "prepare_run",
    # re-exported
    "EpisodeTally", "RunAborted", "RunLogError", "RunSpec", "awaitable", "call_totals",
    "episode_llm", "episode_seed", "error_dict", "play_episode", "run_episode",
    "run_without_loop",
]


def plan_episodes(
    n_cases: int, episodes: int | None, repetitions: int, seed: int,
    cases: Sequence[int] | None = None,
) -> list[tuple[int, int, int]]:
    """The deterministic schedule of a run, repetition-major (complete repetitions first).

    Args:
        n_cases: number of cases in the dataset (>= 1).
        episodes: use the first ``episodes`` cases (1..n_cases); ``None`` means all.
        repetitions: repetitions per case (>= 1).
        seed: the run seed (>= 0); see :func:`episode_seed`.
        cases: exactly these case indices instead (a case list), in dataset order, each
            with the seed it has in a run over all cases.

    Returns:
        ``[(case_index, repetition, episode_seed), ...]``, ``episodes * repetitions`` long.

    Raises:
        ValueError: an argument out of range, or ``cases`` with ``episodes``, empty,
            repeated or out of range.
    """
    if n_cases < 1:
        raise ValueError("the dataset has no cases")
    if cases is not None:
        if episodes is not None:
            raise ValueError("give either episodes (the first N cases) or a case list, "
                             "not both")
        indices = sorted(set(cases))
        if not indices or len(indices) != len(cases) or indices[0] < 0 \
                or indices[-1] >= n_cases:
            raise ValueError(f"cases must be distinct indices in 0..{n_cases - 1}, got "
                             f"{list(cases)[:8]}")
    else:
        if episodes is None:
            episodes = n_cases
        indices = list(range(episodes))
    if cases is None and not 1 <= len(indices) <= n_cases:
        raise ValueError(f"episodes must be in 1..{n_cases} (the dataset has {n_cases} "
                         f"cases), got {episodes}")
    if repetitions < 1:
        raise ValueError(f"repetitions must be >= 1, got {repetitions}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    return [(index, rep, episode_seed(seed, rep, index))
            for rep in range(repetitions) for index in indices]


@dataclass
class RunResult:
    """Outcome of a logged run (:func:`clinenv.runs.run`, any executor).

    Attributes:
        plan: the schedule (``[(case_index, repetition, seed), ...]``).
        lines: the line that stands for each scheduled episode (the latest, by the
            supersession rule of :mod:`clinenv.runlog`), in plan order.
        n_new: episodes run now (retried ones included).
        n_resumed: scheduled episodes kept from the log as they were.
        n_extra: episodes in the log outside this plan (e.g. from a run with more
            ``episodes``).
        partial_bytes: size of a crash-cut last line that was removed (0 if none).
        n_errors: episodes of this plan whose line is an error line (stopped by a
            backend error), after any retry.
        n_retried: episodes of this plan run again because their latest line in the log
            was an error line (counted in ``n_new``).
    """

    plan: list[tuple[int, int, int]]
    lines: list[dict[str, Any]]
    n_new: int
    n_resumed: int
    n_extra: int
    partial_bytes: int
    n_errors: int = 0
    n_retried: int = 0

    def __repr__(self) -> str:
        """Counts only (a run's lines can be megabytes; Python's asyncio.run repr()s the
        main task's result on the way out)."""
        return (f"RunResult(episodes={len(self.lines)}, n_new={self.n_new}, "
                f"n_resumed={self.n_resumed}, n_extra={self.n_extra}, "
                f"n_errors={self.n_errors}, n_retried={self.n_retried}, "
                f"partial_bytes={self.partial_bytes})")


@dataclass
class PreparedRun:
    """A checked, planned logged run: what is done, what is left.

    Built by :func:`prepare_run`, holding the log's lock (:mod:`clinenv.runlog_lock`);
    the runner runs :attr:`todo`, passes each line to :meth:`add`, ends with
    :meth:`result`, and releases the lock with :meth:`close` (or ``with run:``).

    Attributes:
        out: the log file.
        context: the run's :class:`~clinenv.runlog.RunContext` (with its schedule).
        plan: the whole schedule.
        todo: the scheduled ``(case_index, repetition, seed)`` to run now, in plan
            order: those missing from the log and (when retrying) those whose latest
            line is an error line.
        done: the line that stands for each episode, by ``(case_id, repetition)``
            (old ones, replaced or joined by new ones).
        partial_bytes: size of a crash-cut last line that was removed.
        n_retried: episodes of :attr:`todo` that have an error line in the log.
        lock: the held :class:`~clinenv.runlog_lock.RunLogLock` of :attr:`out`.
    """

    out: Path
    context: RunContext
    plan: list[tuple[int, int, int]]
    todo: list[tuple[int, int, int]]
    done: dict[KEY, dict[str, Any]]
    partial_bytes: int
    n_retried: int = 0
    lock: RunLogLock | None = field(default=None, repr=False, compare=False)

    def close(self) -> None:
        """Release the log's lock (:mod:`clinenv.runlog_lock`); idempotent."""
        if self.lock is not None:
            self.lock.release()

    def __enter__(self) -> PreparedRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def line(self, record: Mapping[str, Any], item: tuple[int, int, int]) -> dict[str, Any]:
        """The log line of the episode ``item`` = ``(case_index, repetition, seed)``."""
        index, rep, ep_seed = item
        return self.context.line(record, case_index=index, repetition=rep, seed=ep_seed)

    def add(self, line: dict[str, Any]) -> None:
        """Record a new line (already written to the log); it supersedes an error line
        of the same episode."""
        self.done[(line["case_id"], line["repetition"])] = line

    def result(self) -> RunResult:
        """The :class:`RunResult`, lines in plan order.

        Raises:
            KeyError: a scheduled episode has no line (the run did not finish).
        """
        ids = self.context.case_ids
        wanted = {(ids[i], r) for i, r, _ in self.plan}
        lines = [self.done[(ids[i], r)] for i, r, _ in self.plan]
        return RunResult(plan=self.plan, lines=lines, n_new=len(self.todo),
                         n_resumed=len(self.plan) - len(self.todo),
                         n_extra=len(set(self.done) - wanted),
                         partial_bytes=self.partial_bytes,
                         n_errors=sum(map(is_error_line, lines)), n_retried=self.n_retried)


def prepare_run(env: Any, doctor: Any, spec: RunSpec) -> PreparedRun:
    """Plan a logged run and check an existing log against it (nothing is run).

    With ``resume=True`` the log is read (a partial last line cut off) and checked line by
    line (:meth:`RunContext.check`); left to do are the scheduled episodes without a line
    and, with ``retry_errors``, those whose latest line is an error line. The log's lock is
    taken first and held by the returned run until it is closed.

    Args:
        env: the environment; with ``doctor`` it gives the run's context.
        doctor: the doctor policy.
        spec: the run's :class:`~clinenv.runs.spec.RunSpec`.

    Returns:
        A :class:`PreparedRun` holding the lock: close it (``with run:``).

    Raises:
        RunLogLocked: another run holds ``out`` (the message names its pid).
        FileExistsError: ``out`` exists, is not empty, and ``resume`` is false.
        RunLogError: the existing log is corrupt, from a different run, or repeats an
            episode other than after an error line.
        ValueError: ``episodes``, ``repetitions`` or ``seed`` out of range, or ``episodes``
            with ``cases``.
        TypeError: ``spec`` is not a :class:`~clinenv.runs.spec.RunSpec`.
        clinenv.case_list.CaseListError: a listed case id is not in the dataset.
    """
    spec = check_spec(spec, caller="prepare_run")
    out = spec.out
    context = RunContext.from_env(env, doctor, seed=spec.seed, env_id=spec.env_id)
    indices = None
    if spec.cases is not None:
        indices = spec.cases.indices(context.case_ids, dataset=context.dataset)
        context = replace(context, case_list=spec.cases.to_log(context.case_ids))
    plan = plan_episodes(len(context.case_ids), spec.episodes, spec.repetitions, spec.seed,
                         indices)
    context = context.scheduled(len({i for i, _, _ in plan}), spec.repetitions)
    if spec.paper_settings is not None:  # a JSON copy already (RunSpec)
        context = replace(context, paper_settings=spec.paper_settings)
    lock = RunLogLock(out).acquire()  # before reading: held until the run is closed
    try:
        if not spec.resume and out.exists() and out.stat().st_size > 0:
            raise FileExistsError(f"{out} exists and is not empty; pass --resume to "
                                  "continue it, or choose another --out file")
        log = read_run_log(out, repair=True) if spec.resume else RunLog(out)
        context = context.continuing(log.lines)  # a log naming the dataset by its bytes
        for line, number in zip(log.lines, log.line_numbers, strict=True):
            context.check(line, path=out, line_no=number)
        done = log.episodes()
    except BaseException:
        lock.release()
        raise
    todo, n_retried = [], 0
    for index, rep, ep_seed in plan:
        line = done.get((context.case_ids[index], rep))
        retry = line is not None and spec.retry_errors and is_error_line(line)
        if line is None or retry:
            todo.append((index, rep, ep_seed))
            n_retried += retry
    return PreparedRun(out=out, context=context, plan=plan, todo=todo, done=done,
                       partial_bytes=log.partial_bytes, n_retried=n_retried, lock=lock)


@dataclass(frozen=True)
class Serial:
    """The executor of one episode at a time, with no event loop (the default of
    :func:`clinenv.runs.run`): one environment from ``make_env()`` and one doctor from
    ``make_doctor()``, each line appended to the log as its episode ends.

    It works inside a running event loop too (:meth:`arun` runs it there, blocking).
    """

    def run(self, make_env: Callable[[], Any], make_doctor: Callable[[], Any],
            spec: RunSpec, *, progress: Callable[[dict[str, Any]], None] | None = None,
            on_start: Callable[[int], None] | None = None) -> RunResult:
        """The run (:func:`clinenv.runs.run`); the environment is closed at the end."""
        guard = FailFast(spec.out, spec.max_consecutive_errors)
        env = make_env()
        try:
            doctor = make_doctor()
            with prepare_run(env, doctor, spec) as run:  # holds the log's lock to the end
                _run_todo(run, env, doctor, guard, progress, on_start)
            return run.result()
        finally:
            env.close()

    async def arun(self, make_env: Callable[[], Any], make_doctor: Callable[[], Any],
                   spec: RunSpec, **hooks: Any) -> RunResult:
        """:meth:`run`, awaited (it never suspends: the loop waits for the whole run)."""
        return self.run(make_env, make_doctor, spec, **hooks)


def _run_todo(run: PreparedRun, env: Any, doctor: Any, guard: FailFast,
              progress: Callable[[dict[str, Any]], None] | None,
              on_start: Callable[[int], None] | None) -> None:
    if on_start is not None:
        on_start(len(run.todo))
    with guard, RunLogWriter(run.out) as writer:  # guard: counts a stop from the file
        for item in run.todo:
            index, _, ep_seed = item
            record = run_episode(env, doctor, case_id=index, seed=ep_seed)
            guard.before_write(record)
            line = run.line(record, item)
            writer.write(line)
            run.add(line)
            if progress is not None:
                progress(line)
            guard.after_write(line)
