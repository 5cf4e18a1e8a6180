"""Rollouts: run a doctor policy through episodes and keep a crash-safe run log.

Pieces, smallest first:

- :func:`episode_seed` (from :mod:`clinenv.seeding`) — the seed of one scheduled episode;
- :func:`run_episode` — one episode of a Gymnasium environment with a doctor policy;
- :func:`plan_episodes` — the deterministic schedule of (case, repetition, seed);
- the run log (:mod:`clinenv.runlog`) — one JSON object per line and per episode;
- :func:`prepare_run` — the plan of a logged run and the resume checks, shared by
  :func:`run_logged` (one episode at a time) and :func:`clinenv.concurrent.run_concurrent`
  (many episodes at once under asyncio);
- :func:`run_logged` — the whole run with resume, as used by ``clinenv run``;
- :func:`summarize` — accuracy, coverage, turns and exams (EGIP section 4.1);
  :func:`llm_totals` — model calls, tokens and latency of a run.

Run-log line (schema :data:`SCHEMA`), UTF-8, ``ensure_ascii=False``::

    schema, case_id, case_index, repetition, seed, run_seed, env_id, env_spec, dataset,
    dataset_sha256, clinenv_version, doctor {name, config}, n_cases_scheduled,
    n_repetitions, turns, n_exams_requested,
    invalid_actions, stopped_early, phase, answer, verdict, correct, match_score, reward,
    steps, terminated, truncated, events, evidence, case_flags, case_strata, target,
    scorer, timing; and when present: judge_verdict, llm, error

``scorer`` is ``"deterministic"`` or ``"llm-judge"``; ``judge_verdict`` (with an LLM
judge) is ``"correct"``, ``"wrong"``, ``"unparsed"`` or ``None`` (no answer to judge).

``llm`` is present when the doctor has ``drain_calls`` (an LLM doctor) or the
environment has an LLM patient or judge: ``{"n_calls", "prompt_tokens",
"completion_tokens", "latency_s", "calls"}``, where ``calls`` holds one
:meth:`clinenv.llm.base.ChatResult.to_log` record per model call, each with ``agent``
(``"doctor"``, ``"patient"`` or ``"judge"``), in the order doctor, patient, judge; token
sums are ``None`` when no call reported them, ``latency_s`` sums the calls' wall seconds.

``error`` marks an episode stopped by a model backend that still failed after its
retries (:class:`clinenv.llm.base.BackendError`): ``{"type", "message", "backend",
"detail"}``. Such a line is an unfinished episode (``terminated`` false, ``verdict``
``"unscored"``, ``correct`` false, events up to the failure); the run goes on with the
next episode, the summary counts the errors (``n_errors``), and the episode stays in the
accuracy denominator. Resuming does not run it again (a log holds one line per
episode); run the schedule into a new log to retry.

``timing`` (wall seconds) and ``llm`` are the only non-deterministic fields: two runs
with the same seed, environment and doctor (and deterministic model replies) write
identical lines apart from ``timing`` and ``llm``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from clinenv.llm.base import BackendError
from clinenv.runlog import (
    KEY,
    RunContext,
    RunLog,
    RunLogError,
    RunLogWriter,
    read_run_log,
)
from clinenv.seeding import episode_seed

__all__ = [
    "PreparedRun", "RunLogError", "RunResult", "episode_seed", "llm_totals",
    "plan_episodes", "prepare_run", "run_episode", "run_logged", "summarize",
]


def run_episode(
    env: Any,
    doctor: Any,
    *,
    case_id: str | int,
    seed: int | None,
    max_steps: int = 100_000,
) -> dict[str, Any]:
    """Run one episode: ``doctor.act`` → ``env.step`` until the episode ends.

    The environment is reset with ``seed`` and ``options={"case_id": case_id}``; the
    doctor is reset with the same seed. Timings are measured here and go only into the
    returned record, never into the environment's ``info``.

    Args:
        env: a Gymnasium environment whose ``unwrapped`` is
            :class:`clinenv.env.EGIPEnv` (wrappers allowed).
        doctor: a :class:`clinenv.agents.base.DoctorPolicy`.
        case_id: a ``case_id`` string or a 0-based case index.
        seed: the episode seed (see :func:`episode_seed`).
        max_steps: safety cap on ``env.step`` calls; an episode that reaches it stops
            with ``"truncated": True`` (EGIP episodes end by themselves far earlier).

    Returns:
        ``env.unwrapped.episode_record()`` (``case_id``, ``dataset``, ``phase``,
        ``turns``, ``n_exams_requested``, ``invalid_actions``, ``events``, ``evidence``,
        ``answer`` and, when finished, ``verdict``, ``correct``, ``match_score``) plus
        ``reward`` (sum of step rewards, float), ``steps`` (``env.step`` calls),
        ``terminated``, ``truncated`` and ``timing`` = ``{"reset_s", "doctor_s",
        "env_s", "total_s"}`` (wall seconds; ``env_s`` covers ``env.step`` only); plus
        ``llm`` and ``error`` as described in the module docstring. A
        :class:`~clinenv.llm.base.BackendError` of the doctor, patient or judge ends the
        episode as an error record instead of propagating.

    Raises:
        KeyError, IndexError: unknown case id or index (from ``env.reset``).
    """
    tally = EpisodeTally()
    observation, info = env.reset(seed=seed, options={"case_id": case_id})
    doctor.reset(seed=seed)
    tally.reset_done()
    try:
        while not tally.should_stop(max_steps):
            t0 = tally.clock()
            action = doctor.act(observation, info)
            t1 = tally.clock()
            observation, reward, terminated, truncated, info = env.step(action)
            tally.add_step(reward, terminated, truncated, doctor_s=t1 - t0,
                           env_s=tally.clock() - t1)
    except BackendError as err:
        tally.error = err
    return tally.record(env, doctor)


@dataclass
class EpisodeTally:
    """Bookkeeping of one running episode, shared by :func:`run_episode` and
    :func:`clinenv.concurrent.arun_episode` (so both return the same record).

    Attributes:
        start: ``time.perf_counter()`` at the start; times below are wall seconds.
        reset_s, doctor_s, env_s: time in ``reset``, in the doctor, in the environment.
        reward: sum of step rewards.
        steps: ``env.step`` calls so far.
        terminated, truncated: the episode's end flags.
        error: the backend error that stopped the episode, if any.
    """

    start: float = field(default_factory=time.perf_counter)
    reset_s: float = 0.0
    doctor_s: float = 0.0
    env_s: float = 0.0
    reward: float = 0.0
    steps: int = 0
    terminated: bool = False
    truncated: bool = False
    error: BackendError | None = None

    @staticmethod
    def clock() -> float:
        """The clock of every timing (``time.perf_counter``)."""
        return time.perf_counter()

    def reset_done(self) -> None:
        """Mark the end of ``env.reset`` and ``doctor.reset``."""
        self.reset_s = self.clock() - self.start

    def should_stop(self, max_steps: int) -> bool:
        """The episode is over, or reached ``max_steps`` (then it is truncated)."""
        if self.terminated or self.truncated:
            return True
        if self.steps >= max_steps:
            self.truncated = True
            return True
        return False

    def add_step(self, reward: float, terminated: bool, truncated: bool, *,
                 doctor_s: float, env_s: float) -> None:
        """Count one ``env.step``."""
        self.reward += float(reward)
        self.steps += 1
        self.terminated, self.truncated = bool(terminated), bool(truncated)
        self.doctor_s += doctor_s
        self.env_s += env_s

    def record(self, env: Any, doctor: Any) -> dict[str, Any]:
        """The episode record (see :func:`run_episode`); drains the model call records."""
        record = env.unwrapped.episode_record()
        record.update(reward=self.reward, steps=self.steps, terminated=self.terminated,
                      truncated=self.truncated)
        if self.error is not None:
            record.update(terminated=False, verdict="unscored", correct=False,
                          error=error_dict(self.error))
        llm = episode_llm(env, doctor)
        if llm is not None:
            record["llm"] = llm
        record["timing"] = {"reset_s": self.reset_s, "doctor_s": self.doctor_s,
                            "env_s": self.env_s, "total_s": self.clock() - self.start}
        return record


def error_dict(err: BaseException) -> dict[str, Any]:
    """``{"type", "message", "backend", "detail"}`` of an exception, for a log line."""
    return {"type": type(err).__name__, "message": str(err),
            "backend": getattr(err, "backend", "") or "",
            "detail": getattr(err, "detail", "") or ""}


def episode_llm(env: Any, doctor: Any) -> dict[str, Any] | None:
    """The ``llm`` field of an episode record, or ``None`` without any LLM agent.

    Drains ``doctor.drain_calls()`` (records get ``agent="doctor"`` unless they name
    one) and ``env.unwrapped.drain_llm_calls()`` (patient, judge).
    """
    drain = getattr(doctor, "drain_calls", None)
    unwrapped = env.unwrapped
    env_llm = bool(getattr(unwrapped, "has_llm_agents", False))
    if not callable(drain) and not env_llm:
        return None
    calls = [{"agent": "doctor", **call} for call in drain()] if callable(drain) else []
    if env_llm:
        calls += unwrapped.drain_llm_calls()
    return call_totals(calls) | {"calls": calls}


def call_totals(calls: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"n_calls", "prompt_tokens", "completion_tokens", "latency_s"}`` of call records.

    Token sums skip calls that did not report them and are ``None`` when none did.
    """
    def total(key: str) -> int | None:
        known = [int(c[key]) for c in calls if c.get(key) is not None]
        return sum(known) if known else None

    return {"n_calls": len(calls), "prompt_tokens": total("prompt_tokens"),
            "completion_tokens": total("completion_tokens"),
            "latency_s": float(sum(float(c.get("latency_s") or 0.0) for c in calls))}


def llm_totals(lines: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Model calls of a run from its lines' ``llm`` fields; ``None`` when no line has one.

    Returns:
        ``{"n_calls", "prompt_tokens", "completion_tokens", "mean_latency_s"}``: totals
        over the lines (tokens ``None`` when never reported) and the mean wall seconds
        per call (``nan`` without calls).
    """
    fields = [line["llm"] for line in lines if isinstance(line.get("llm"), Mapping)]
    if not fields:
        return None
    n_calls = sum(int(f.get("n_calls") or 0) for f in fields)

    def total(key: str) -> int | None:
        known = [int(f[key]) for f in fields if f.get(key) is not None]
        return sum(known) if known else None

    latency = sum(float(f.get("latency_s") or 0.0) for f in fields)
    return {"n_calls": n_calls, "prompt_tokens": total("prompt_tokens"),
            "completion_tokens": total("completion_tokens"),
            "mean_latency_s": latency / n_calls if n_calls else math.nan}


# ------------------------------------------------------------------------ schedule
def plan_episodes(
    n_cases: int, episodes: int | None, repetitions: int, seed: int
) -> list[tuple[int, int, int]]:
    """The deterministic schedule of a run.

    Order is repetition-major: every case of repetition 0 (in dataset order), then every
    case of repetition 1, and so on, so an interrupted run holds complete repetitions
    first.

    Args:
        n_cases: number of cases in the dataset (>= 1).
        episodes: use the first ``episodes`` cases (1..n_cases); ``None`` means all.
        repetitions: repetitions per case (>= 1).
        seed: the run seed (>= 0); see :func:`episode_seed`.

    Returns:
        ``[(case_index, repetition, episode_seed), ...]`` of length
        ``episodes * repetitions``.

    Raises:
        ValueError: an argument out of range (the message says which).
    """
    if n_cases < 1:
        raise ValueError("the dataset has no cases")
    if episodes is None:
        episodes = n_cases
    if not 1 <= episodes <= n_cases:
        raise ValueError(f"episodes must be in 1..{n_cases} (the dataset has {n_cases} "
                         f"cases), got {episodes}")
    if repetitions < 1:
        raise ValueError(f"repetitions must be >= 1, got {repetitions}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    return [(index, rep, episode_seed(seed, rep, index))
            for rep in range(repetitions) for index in range(episodes)]


@dataclass
class RunResult:
    """Outcome of :func:`run_logged` and :func:`clinenv.concurrent.run_concurrent`.

    Attributes:
        plan: the schedule (``[(case_index, repetition, seed), ...]``).
        lines: one log line per scheduled episode, in plan order.
        n_new: episodes run now.
        n_resumed: scheduled episodes already in the log.
        n_extra: log lines outside this plan (e.g. from a run with more ``episodes``).
        partial_bytes: size of a crash-cut last line that was removed (0 if none).
        n_errors: lines of this plan stopped by a backend error (``error`` field).
    """

    plan: list[tuple[int, int, int]]
    lines: list[dict[str, Any]]
    n_new: int
    n_resumed: int
    n_extra: int
    partial_bytes: int
    n_errors: int = 0


@dataclass
class PreparedRun:
    """A checked, planned logged run: what is done, what is left.

    Built by :func:`prepare_run`; the runner runs :attr:`todo`, passes each line to
    :meth:`add`, and ends with :meth:`result`.

    Attributes:
        out: the log file.
        context: the run's :class:`~clinenv.runlog.RunContext` (with its schedule).
        plan: the whole schedule.
        todo: the scheduled ``(case_index, repetition, seed)`` missing from the log, in
            plan order.
        done: log lines by ``(case_id, repetition)`` (old ones, then new ones).
        partial_bytes: size of a crash-cut last line that was removed.
    """

    out: Path
    context: RunContext
    plan: list[tuple[int, int, int]]
    todo: list[tuple[int, int, int]]
    done: dict[KEY, dict[str, Any]]
    partial_bytes: int

    def line(self, record: Mapping[str, Any], item: tuple[int, int, int]) -> dict[str, Any]:
        """The log line of the episode ``item`` = ``(case_index, repetition, seed)``."""
        index, rep, ep_seed = item
        return self.context.line(record, case_index=index, repetition=rep, seed=ep_seed)

    def add(self, line: dict[str, Any]) -> None:
        """Record a new line (already written to the log)."""
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
                         n_errors=sum("error" in line for line in lines))


def prepare_run(
    env: Any,
    doctor: Any,
    *,
    out: str | Path,
    seed: int = 0,
    episodes: int | None = None,
    repetitions: int = 1,
    resume: bool = False,
    env_id: str | None = None,
) -> PreparedRun:
    """Plan a logged run and check an existing log against it (nothing is run).

    With ``resume=True`` an existing log is read (a partial last line is cut off), every
    line is checked against this run (:meth:`RunContext.check`), and exactly the
    scheduled ``(case_id, repetition)`` keys missing from it are left to do.

    Args: as :func:`run_logged` (``env`` and ``doctor`` give the run's context).

    Returns:
        A :class:`PreparedRun`.

    Raises:
        FileExistsError: ``out`` exists, is not empty, and ``resume`` is false.
        RunLogError: the existing log is corrupt or from a different run; or it holds a
            key twice.
        ValueError: ``episodes``, ``repetitions`` or ``seed`` out of range.
    """
    out = Path(out)
    context = RunContext.from_env(env, doctor, seed=seed, env_id=env_id)
    plan = plan_episodes(len(context.case_ids), episodes, repetitions, seed)
    context = context.scheduled(len({i for i, _, _ in plan}), repetitions)
    if not resume and out.exists() and out.stat().st_size > 0:
        raise FileExistsError(f"{out} exists and is not empty; pass --resume to continue "
                              "it, or choose another --out file")
    log = read_run_log(out, repair=True) if resume else RunLog(out)
    done: dict[KEY, dict[str, Any]] = {}
    for line, number in zip(log.lines, log.line_numbers, strict=True):
        context.check(line, path=out, line_no=number)
        key = (line["case_id"], line["repetition"])
        if key in done:
            raise RunLogError(f"episode {key} appears twice (also on an earlier line)",
                              path=out, line=number)
        done[key] = line
    todo = [(i, r, s) for i, r, s in plan if (context.case_ids[i], r) not in done]
    return PreparedRun(out=out, context=context, plan=plan, todo=todo, done=done,
                       partial_bytes=log.partial_bytes)


def run_logged(
    env: Any,
    doctor: Any,
    *,
    out: str | Path,
    seed: int = 0,
    episodes: int | None = None,
    repetitions: int = 1,
    resume: bool = False,
    env_id: str | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> RunResult:
    """Run a whole schedule, one episode at a time, appending one line per episode to
    ``out`` (see :func:`prepare_run` for the plan and the resume checks).

    Args:
        env: the environment.
        doctor: the doctor policy.
        out: the log file.
        seed: the run seed (>= 0).
        episodes: the first N cases in dataset order (``None``: all).
        repetitions: repetitions per case (>= 1).
        resume: continue an existing log instead of refusing it.
        env_id: overrides ``env.spec.id`` in the log.
        progress: called with each new line after it is written.
        on_start: called once with the number of episodes about to run.

    Returns:
        A :class:`RunResult`. Episodes stopped by a backend error are error lines
        (module docstring) and counted in ``n_errors``; the run goes on.

    Raises:
        FileExistsError: ``out`` exists, is not empty, and ``resume`` is false.
        RunLogError: the existing log is corrupt or from a different run; or it holds a
            key twice.
        ValueError: ``episodes``, ``repetitions`` or ``seed`` out of range.
    """
    run = prepare_run(env, doctor, out=out, seed=seed, episodes=episodes,
                      repetitions=repetitions, resume=resume, env_id=env_id)
    if on_start is not None:
        on_start(len(run.todo))
    with RunLogWriter(run.out) as writer:
        for item in run.todo:
            index, _, ep_seed = item
            line = run.line(run_episode(env, doctor, case_id=index, seed=ep_seed), item)
            writer.write(line)
            run.add(line)
            if progress is not None:
                progress(line)
    return run.result()


# ------------------------------------------------------------------------- summary
def summarize(
    records: Iterable[Mapping[str, Any]],
    *,
    plan: Sequence[tuple[int, int, int]] | None = None,
) -> dict[str, Any]:
    """Run metrics (EGIP section 4.1).

    Accuracy is the share of *scheduled* outputs scored correct: unscored answers,
    non-answers and scheduled episodes without a record all stay in the denominator.
    Coverage is the share of scheduled outputs with an identifiable answer
    (``verdict != "unscored"``).

    Args:
        records: run-log lines or :func:`run_episode` records (``verdict``, ``turns``,
            ``n_exams_requested`` and, for run-log lines, ``repetition``; a record
            without ``repetition`` counts as repetition 0, one without ``verdict`` as
            unscored).
        plan: the schedule; when given, ``n_scheduled`` and the per-repetition
            denominators come from it, else from the records.

    Returns:
        ``{"n_scheduled", "n_records", "n_correct", "n_wrong", "n_unscored",
        "n_errors", "accuracy", "coverage", "mean_turns", "mean_exams", "repetitions",
        "accuracy_mean", "accuracy_sd"}`` (``n_errors``: records stopped by a backend
        error, also counted as unscored), computed with the definitions of
        :mod:`clinenv.evaluation.metrics` (``accuracy``, ``per_repetition_accuracy``,
        ``mean_sd``, ``coverage``), so they agree with ``clinenv eval`` on the same log.
        Percentages are in 0..100 (``nan`` when nothing is scheduled); means are over the
        records (``nan`` without records).
        ``repetitions`` maps each repetition index to ``{"n_scheduled", "n_correct",
        "accuracy", "coverage"}``; ``accuracy_mean`` is the mean of the per-repetition
        accuracies and ``accuracy_sd`` their sample standard deviation (``None``, never
        NaN, with fewer than 2 repetitions).
    """
    from clinenv.evaluation.metrics import (
        accuracy,
        coverage,
        mean_sd,
        mean_turns_exams,
        per_repetition_accuracy,
    )

    records = list(records)
    verdicts = [r.get("verdict", "unscored") for r in records]
    reps = [int(r.get("repetition", 0)) for r in records]
    scheduled: dict[int, int] = {}
    for rep in (r for _, r, _ in plan) if plan is not None else reps:
        scheduled[rep] = scheduled.get(rep, 0) + 1
    n_scheduled = sum(scheduled.values())
    columns = sorted(scheduled)
    # One column per repetition, one cell per scheduled output: 1 correct, 0 wrong,
    # unscored or missing (a scheduled episode without a record), NaN for no slot (a
    # repetition with fewer scheduled outputs than the longest) -- the correctness
    # matrix of clinenv.evaluation.metrics, so this summary and ``clinenv eval`` share
    # their definitions.
    per_rep_correct = {r: [v == "correct" for v, rr in zip(verdicts, reps, strict=True)
                           if rr == r] for r in columns}
    n_rows = max([scheduled[r] for r in columns], default=0)
    matrix = np.full((n_rows, len(columns)), np.nan)
    for j, r in enumerate(columns):
        matrix[:scheduled[r], j] = 0.0
        hits = per_rep_correct[r][:scheduled[r]]
        matrix[:len(hits), j] = np.asarray(hits, dtype=float)
    # coverage items: every record, plus an answerless slot per missing scheduled output
    items = [{"verdict": v} for v in verdicts]
    items += [None] * max(0, n_scheduled - len(records))
    repetitions: dict[int, dict[str, Any]] = {}
    per_rep = per_repetition_accuracy(matrix) if matrix.size else np.array([])
    for j, r in enumerate(columns):
        mine = [{"verdict": v} for v, rr in zip(verdicts, reps, strict=True) if rr == r]
        mine += [None] * max(0, scheduled[r] - len(mine))
        repetitions[r] = {
            "n_scheduled": scheduled[r],
            "n_correct": int(np.nansum(matrix[:, j])),
            "accuracy": float(per_rep[j]),
            "coverage": coverage(mine),
        }
    n_correct = verdicts.count("correct")
    n_wrong = verdicts.count("wrong")
    mean, sd = mean_sd(per_rep) if per_rep.size else (math.nan, math.nan)
    interaction = mean_turns_exams(records)
    return {
        "n_scheduled": n_scheduled,
        "n_records": len(records),
        "n_correct": n_correct,
        "n_wrong": n_wrong,
        "n_unscored": n_scheduled - n_correct - n_wrong,
        "n_errors": sum("error" in r for r in records),
        "accuracy": accuracy(matrix) if matrix.size else math.nan,
        "coverage": coverage(items),
        "mean_turns": float(interaction["mean_turns"]),
        "mean_exams": float(interaction["mean_exams"]),
        "repetitions": repetitions,
        "accuracy_mean": mean,
        "accuracy_sd": None if math.isnan(sd) else sd,
    }
