"""Rollouts: run a doctor policy through episodes and keep a crash-safe run log.

Pieces, smallest first:

- :func:`episode_seed` (from :mod:`clinenv.seeding`) — the seed of one scheduled episode;
- :func:`run_episode` — one episode of a Gymnasium environment with a doctor policy;
- :func:`plan_episodes` — the deterministic schedule of (case, repetition, seed);
- the run log (:mod:`clinenv.runlog`) — one JSON object per line and per episode;
- :func:`run_logged` — the whole run with resume, as used by ``clinenv run``;
- :func:`summarize` — accuracy, coverage, turns and exams (EGIP section 4.1).

Run-log line (schema :data:`SCHEMA`), UTF-8, ``ensure_ascii=False``::

    schema, case_id, case_index, repetition, seed, run_seed, env_id, env_spec, dataset,
    dataset_sha256, clinenv_version, doctor {name, config}, n_cases_scheduled,
    n_repetitions, turns, n_exams_requested,
    invalid_actions, stopped_early, phase, answer, verdict, correct, match_score, reward,
    steps, terminated, truncated, events, evidence, case_flags, case_strata, target,
    timing

``timing`` (wall seconds) is the only non-deterministic field: two runs with the same
seed, environment and doctor write identical lines apart from ``timing``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

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
    "RunLogError", "RunResult", "episode_seed", "plan_episodes", "run_episode",
    "run_logged", "summarize",
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
        "env_s", "total_s"}`` (wall seconds; ``env_s`` covers ``env.step`` only).

    Raises:
        KeyError, IndexError: unknown case id or index (from ``env.reset``).
    """
    clock = time.perf_counter
    start = clock()
    observation, info = env.reset(seed=seed, options={"case_id": case_id})
    doctor.reset(seed=seed)
    reset_s = clock() - start
    doctor_s = env_s = 0.0
    reward = 0.0
    steps = 0
    terminated = truncated = False
    while not (terminated or truncated):
        if steps >= max_steps:
            truncated = True
            break
        t0 = clock()
        action = doctor.act(observation, info)
        t1 = clock()
        observation, r, terminated, truncated, info = env.step(action)
        t2 = clock()
        doctor_s += t1 - t0
        env_s += t2 - t1
        reward += float(r)
        steps += 1
    record = env.unwrapped.episode_record()
    record.update(reward=reward, steps=steps, terminated=bool(terminated),
                  truncated=bool(truncated))
    record["timing"] = {"reset_s": reset_s, "doctor_s": doctor_s, "env_s": env_s,
                        "total_s": clock() - start}
    return record


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
    """Outcome of :func:`run_logged`.

    Attributes:
        plan: the schedule (``[(case_index, repetition, seed), ...]``).
        lines: one log line per scheduled episode, in plan order.
        n_new: episodes run now.
        n_resumed: scheduled episodes already in the log.
        n_extra: log lines outside this plan (e.g. from a run with more ``episodes``).
        partial_bytes: size of a crash-cut last line that was removed (0 if none).
    """

    plan: list[tuple[int, int, int]]
    lines: list[dict[str, Any]]
    n_new: int
    n_resumed: int
    n_extra: int
    partial_bytes: int


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
    """Run a whole schedule, appending one line per episode to ``out``.

    With ``resume=True`` an existing log is read (a partial last line is cut off), every
    line is checked against this run (:meth:`RunContext.check`), and exactly the
    scheduled ``(case_id, repetition)`` keys missing from it are run.

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
        A :class:`RunResult`.

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
    wanted = {(context.case_ids[i], r) for i, r, _ in plan}
    todo = [(i, r, s) for i, r, s in plan if (context.case_ids[i], r) not in done]
    if on_start is not None:
        on_start(len(todo))
    with RunLogWriter(out) as writer:
        for index, rep, ep_seed in todo:
            record = run_episode(env, doctor, case_id=index, seed=ep_seed)
            line = context.line(record, case_index=index, repetition=rep, seed=ep_seed)
            writer.write(line)
            done[(line["case_id"], rep)] = line
            if progress is not None:
                progress(line)
    lines = [done[(context.case_ids[i], r)] for i, r, _ in plan]
    return RunResult(plan=plan, lines=lines, n_new=len(todo),
                     n_resumed=len(plan) - len(todo),
                     n_extra=len(set(done) - wanted), partial_bytes=log.partial_bytes)


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
        "accuracy", "coverage", "mean_turns", "mean_exams", "repetitions",
        "accuracy_mean", "accuracy_sd"}``, computed with the definitions of
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
        "accuracy": accuracy(matrix) if matrix.size else math.nan,
        "coverage": coverage(items),
        "mean_turns": float(interaction["mean_turns"]),
        "mean_exams": float(interaction["mean_exams"]),
        "repetitions": repetitions,
        "accuracy_mean": mean,
        "accuracy_sd": None if math.isnan(sd) else sd,
    }
