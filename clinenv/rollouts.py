"""Rollouts: run a doctor policy through episodes and keep a crash-safe run log.

Pieces, smallest first:

- :func:`episode_seed` — the seed of one scheduled episode, derived from the run seed;
- :func:`run_episode` — one episode of a Gymnasium environment with a doctor policy;
- :func:`plan_episodes` — the deterministic schedule of (case, repetition, seed);
- the run log — one JSON object per line and per episode (:class:`RunContext` builds the
  lines, :class:`RunLogWriter` appends them durably, :func:`read_run_log` reads them back
  and repairs a line cut by a crash);
- :func:`run_logged` — the whole run with resume, as used by ``clinenv run``;
- :func:`summarize` — accuracy, coverage, turns and exams (EGIP section 4.1).

Run-log line (schema :data:`SCHEMA`), UTF-8, ``ensure_ascii=False``::

    schema, case_id, case_index, repetition, seed, run_seed, env_id, env_spec, dataset,
    dataset_sha256, clinenv_version, doctor {name, config}, turns, n_exams_requested,
    invalid_actions, stopped_early, phase, answer, verdict, correct, similarity, reward,
    steps, terminated, truncated, events, evidence, timing

``timing`` (wall seconds) is the only non-deterministic field: two runs with the same
seed, environment and doctor write identical lines apart from ``timing``.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from clinenv.errors import ClinenvError

#: Version tag written in every run-log line; readers refuse other versions.
SCHEMA = "clinenv.runlog/1"

#: An episode's key in a run log: ``(case_id, repetition)``.
_KEY = tuple[str, int]


class RunLogError(ClinenvError, ValueError):
    """A run log cannot be used: corrupt in the middle, or written by a different run.

    The message names the file and the 1-based line.

    Attributes:
        path: the log file.
        line: the 1-based line number (``None`` when the whole file is at fault).
    """

    def __init__(self, message: str, *, path: str | Path, line: int | None = None) -> None:
        self.path = str(path)
        self.line = line
        where = self.path if line is None else f"{self.path}, line {line}"
        super().__init__(f"{where}: {message}")


# --------------------------------------------------------------------------- seeds
def episode_seed(seed: int, repetition: int, case_index: int) -> int:
    """The seed of one scheduled episode.

    Derived with :class:`numpy.random.SeedSequence` from the entropy
    ``[seed, repetition, case_index]`` (first 32-bit word of ``generate_state``, masked
    to 31 bits), so seeds of different episodes are statistically independent, the same
    triple always gives the same seed on every platform, and the value fits any API that
    wants a signed 32-bit int.

    Args:
        seed: the run seed (>= 0).
        repetition: 0-based repetition index (>= 0).
        case_index: 0-based index of the case in its dataset (>= 0).

    Returns:
        An int in ``0 .. 2**31 - 1``.

    Raises:
        ValueError: a negative argument.
    """
    if min(seed, repetition, case_index) < 0:
        raise ValueError("seed, repetition and case_index must be >= 0")
    state = np.random.SeedSequence([int(seed), int(repetition), int(case_index)])
    return int(state.generate_state(1, dtype=np.uint32)[0]) & 0x7FFF_FFFF


# ------------------------------------------------------------------------- episode
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
        ``answer`` and, when finished, ``verdict``, ``correct``, ``similarity``) plus
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


# ------------------------------------------------------------------------- run log
def doctor_config(doctor: Any) -> dict[str, Any]:
    """``{"name", "config"}`` describing a doctor policy for the run log.

    ``config`` is ``doctor.config()`` when the policy defines it (a JSON-ready dict),
    else its public scalar attributes (``int``, ``float``, ``str``, ``bool``, ``None``)
    other than ``name``, sorted by key.
    """
    name = str(getattr(doctor, "name", type(doctor).__name__))
    custom = getattr(doctor, "config", None)
    if callable(custom):
        config = dict(custom())
    else:
        config = {k: v for k, v in sorted(vars(doctor).items())
                  if not k.startswith("_") and k != "name"
                  and (v is None or isinstance(v, bool | int | float | str))}
    return {"name": name, "config": config}


def env_spec_dict(env: Any) -> dict[str, Any] | None:
    """The environment's spec as a dict (``env.spec.to_json()`` parsed back).

    When the spec has kwargs that JSON cannot hold, a reduced dict ``{"id", "kwargs"}``
    with ``repr`` of the unserializable values is returned; ``None`` without a spec.
    """
    spec = getattr(env, "spec", None)
    if spec is None:
        return None
    try:
        return json.loads(spec.to_json())
    except (ValueError, TypeError):
        kwargs = {}
        for key, value in (spec.kwargs or {}).items():
            try:
                json.dumps(value)
                kwargs[key] = value
            except (TypeError, ValueError):
                kwargs[key] = repr(value)
        return {"id": spec.id, "kwargs": kwargs}


@dataclass(frozen=True)
class RunContext:
    """What is constant over one run; builds its log lines and checks old ones.

    Attributes:
        env_id: the environment id (``"EGIP-MedQA-v0"``...).
        env_spec: :func:`env_spec_dict` of the environment.
        dataset: the case pool's name.
        dataset_sha256: sha256 of the dataset file (``None`` for in-memory cases).
        case_ids: ``case_id`` of every case, in dataset order.
        doctor: :func:`doctor_config` of the policy.
        run_seed: the run seed.
        clinenv_version: ``clinenv.__version__``.
    """

    env_id: str
    env_spec: dict[str, Any] | None
    dataset: str
    dataset_sha256: str | None
    case_ids: tuple[str, ...]
    doctor: dict[str, Any]
    run_seed: int
    clinenv_version: str = field(default="")

    @classmethod
    def from_env(cls, env: Any, doctor: Any, *, seed: int,
                 env_id: str | None = None) -> RunContext:
        """The context of a run of ``doctor`` on ``env`` with run seed ``seed``.

        Args:
            env: the environment (``env.unwrapped.pool`` must exist).
            doctor: the doctor policy.
            seed: the run seed.
            env_id: overrides ``env.spec.id`` (needed when the env has no spec).
        """
        from clinenv import __version__

        pool = env.unwrapped.pool
        spec = getattr(env, "spec", None)
        return cls(
            env_id=env_id or (spec.id if spec is not None else type(env.unwrapped).__name__),
            env_spec=env_spec_dict(env),
            dataset=pool.name,
            dataset_sha256=pool.sha256,
            case_ids=tuple(c.case_id for c in pool.cases),
            doctor=doctor_config(doctor),
            run_seed=int(seed),
            clinenv_version=__version__,
        )

    def line(self, record: Mapping[str, Any], *, case_index: int, repetition: int,
             seed: int) -> dict[str, Any]:
        """The run-log line of one episode record (from :func:`run_episode`)."""
        head = {
            "schema": SCHEMA,
            "case_id": record.get("case_id", self.case_ids[case_index]),
            "case_index": case_index,
            "repetition": repetition,
            "seed": seed,
            "run_seed": self.run_seed,
            "env_id": self.env_id,
            "env_spec": self.env_spec,
            "dataset": self.dataset,
            "dataset_sha256": self.dataset_sha256,
            "clinenv_version": self.clinenv_version,
            "doctor": self.doctor,
        }
        body = {k: v for k, v in record.items() if k not in head}
        body.setdefault("verdict", "unscored")
        body.setdefault("correct", False)
        return {**head, **body}

    def check(self, line: Mapping[str, Any], *, path: str | Path, line_no: int) -> None:
        """Refuse a log line written by a different run.

        Raises:
            RunLogError: schema, env id, doctor, run seed, episode seed, dataset file
                or case order differ (the message names file, line and field).
        """
        def refuse(what: str) -> RunLogError:
            return RunLogError(f"{what}; refusing to resume a different run into the same "
                               "log (use another --out file)", path=path, line=line_no)

        for name, ours in (("env_id", self.env_id), ("doctor", self.doctor),
                           ("run_seed", self.run_seed),
                           ("dataset_sha256", self.dataset_sha256)):
            theirs = line.get(name)
            if theirs != ours:
                raise refuse(f"{name} is {_short(theirs)} but this run has {_short(ours)}")
        index, rep = line.get("case_index"), line.get("repetition")
        if not (isinstance(index, int) and 0 <= index < len(self.case_ids)
                and isinstance(rep, int) and rep >= 0):
            raise refuse(f"case_index {index!r} / repetition {rep!r} do not fit this run")
        if line.get("case_id") != self.case_ids[index]:
            raise refuse(f"case {index} is {line.get('case_id')!r} there but "
                         f"{self.case_ids[index]!r} in this dataset")
        expected = episode_seed(self.run_seed, rep, index)
        if line.get("seed") != expected:
            raise refuse(f"seed is {line.get('seed')!r} but this run schedules {expected}")


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


@dataclass
class RunLog:
    """The complete lines of a run-log file.

    Attributes:
        path: the file.
        lines: parsed JSON objects, in file order.
        line_numbers: 1-based line number of each entry of ``lines``.
        partial_bytes: size of a partial last line left by a crash (0 if none).
        repaired: the partial line was cut off (or a missing final newline added).
    """

    path: Path
    lines: list[dict[str, Any]] = field(default_factory=list)
    line_numbers: list[int] = field(default_factory=list)
    partial_bytes: int = 0
    repaired: bool = False

    def keys(self) -> set[_KEY]:
        """``{(case_id, repetition), ...}`` present in the log."""
        return {(ln["case_id"], ln["repetition"]) for ln in self.lines}


def read_run_log(path: str | Path, *, repair: bool = False) -> RunLog:
    """Read a run log, tolerating a partial last line.

    A crash while writing can leave only a prefix of the last line (the writer puts the
    newline at the end of one write, so such a prefix has no final newline). That
    partial line is reported in ``partial_bytes`` and, with ``repair=True``, cut off: the
    file is truncated to the end of its last complete line. A last line without a
    newline that is nevertheless a complete JSON object is kept (with ``repair`` the
    newline is added). Complete lines are never lost. A missing file reads as empty.

    Args:
        path: the log file.
        repair: truncate a partial last line in place (and fsync).

    Returns:
        A :class:`RunLog`.

    Raises:
        RunLogError: a complete (newline-terminated) line is not a JSON object of
            schema :data:`SCHEMA` — corruption a crash cannot cause; the message names
            the line.
    """
    path = Path(path)
    log = RunLog(path)
    if not path.exists():
        return log
    data = path.read_bytes()
    chunks = data.split(b"\n")
    tail = chunks.pop()  # bytes after the last newline (b"" when the file ends with one)
    for number, raw in enumerate(chunks, start=1):
        if not raw.strip():
            continue
        log.lines.append(_parse_line(raw, path, number))
        log.line_numbers.append(number)
    if tail.strip():
        number = len(chunks) + 1
        try:
            obj = _parse_line(tail, path, number)
        except RunLogError:
            log.partial_bytes = len(tail)
            if repair:
                _truncate(path, len(data) - len(tail))
                log.repaired = True
        else:
            log.lines.append(obj)
            log.line_numbers.append(number)
            if repair:
                with path.open("ab") as fh:
                    fh.write(b"\n")
                    fh.flush()
                    os.fsync(fh.fileno())
                log.repaired = True
    return log


def _parse_line(raw: bytes, path: Path, number: int) -> dict[str, Any]:
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RunLogError(f"not a complete JSON line ({err})", path=path, line=number) from None
    if not isinstance(obj, dict):
        raise RunLogError("not a JSON object", path=path, line=number)
    if obj.get("schema") != SCHEMA:
        raise RunLogError(f"schema is {obj.get('schema')!r}, expected {SCHEMA!r} "
                          "(not a clinenv run log of this version)", path=path, line=number)
    for key in ("case_id", "repetition"):
        if key not in obj:
            raise RunLogError(f"missing field {key!r}", path=path, line=number)
    return obj


def _truncate(path: Path, size: int) -> None:
    with path.open("r+b") as fh:
        fh.truncate(size)
        fh.flush()
        os.fsync(fh.fileno())


class RunLogWriter:
    """Appends run-log lines durably: one ``write`` per line, then flush and fsync.

    Use as a context manager. Lines are JSON (UTF-8, ``ensure_ascii=False``, no NaN).

    Args:
        path: the log file (created with its parent folders; appended to).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("ab")

    def write(self, line: Mapping[str, Any]) -> None:
        """Append one line and make it durable before returning.

        Raises:
            ValueError: the line holds values JSON cannot represent (NaN included).
        """
        data = json.dumps(line, ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n"
        self._fh.write(data)
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        """Close the file."""
        self._fh.close()

    def __enter__(self) -> RunLogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ------------------------------------------------------------------------ whole run
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
    if not resume and out.exists() and out.stat().st_size > 0:
        raise FileExistsError(f"{out} exists and is not empty; pass --resume to continue "
                              "it, or choose another --out file")
    log = read_run_log(out, repair=True) if resume else RunLog(out)
    done: dict[_KEY, dict[str, Any]] = {}
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
        "accuracy_mean", "accuracy_sd"}``. Percentages are in 0..100 (``nan`` when
        nothing is scheduled); means are over the records (``nan`` without records).
        ``repetitions`` maps each repetition index to ``{"n_scheduled", "n_correct",
        "accuracy", "coverage"}``; ``accuracy_mean`` is the mean of the per-repetition
        accuracies and ``accuracy_sd`` their sample standard deviation (``None`` with
        fewer than 2 repetitions).
    """
    records = list(records)
    verdicts = [r.get("verdict", "unscored") for r in records]
    reps = [int(r.get("repetition", 0)) for r in records]
    if plan is not None:
        n_scheduled = len(plan)
        per_rep_scheduled: dict[int, int] = {}
        for _, rep, _ in plan:
            per_rep_scheduled[rep] = per_rep_scheduled.get(rep, 0) + 1
    else:
        n_scheduled = len(records)
        per_rep_scheduled = {}
        for rep in reps:
            per_rep_scheduled[rep] = per_rep_scheduled.get(rep, 0) + 1

    def pct(count: int, total: int) -> float:
        return 100.0 * count / total if total else math.nan

    def mean(values: list[float]) -> float:
        return float(statistics.fmean(values)) if values else math.nan

    n_correct = verdicts.count("correct")
    n_wrong = verdicts.count("wrong")
    repetitions: dict[int, dict[str, Any]] = {}
    for rep in sorted(per_rep_scheduled):
        mine = [v for v, r in zip(verdicts, reps, strict=True) if r == rep]
        total = per_rep_scheduled[rep]
        repetitions[rep] = {
            "n_scheduled": total,
            "n_correct": mine.count("correct"),
            "accuracy": pct(mine.count("correct"), total),
            "coverage": pct(sum(v != "unscored" for v in mine), total),
        }
    accs = [v["accuracy"] for v in repetitions.values()]
    return {
        "n_scheduled": n_scheduled,
        "n_records": len(records),
        "n_correct": n_correct,
        "n_wrong": n_wrong,
        "n_unscored": n_scheduled - n_correct - n_wrong,
        "accuracy": pct(n_correct, n_scheduled),
        "coverage": pct(n_correct + n_wrong, n_scheduled),
        "mean_turns": mean([float(r["turns"]) for r in records if "turns" in r]),
        "mean_exams": mean([float(r["n_exams_requested"]) for r in records
                            if "n_exams_requested" in r]),
        "repetitions": repetitions,
        "accuracy_mean": mean(accs),
        "accuracy_sd": float(statistics.stdev(accs)) if len(accs) >= 2 else None,
    }
