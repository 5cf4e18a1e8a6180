"""The run log: one JSON object per line and per episode, written durably, read back safely.

:class:`RunContext`, :class:`RunLogWriter` (fsync'd appends), :func:`read_run_log`; a later
line supersedes only an error line. The fields are in docs/evaluation.md.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from clinenv.errors import ClinenvError
from clinenv.scoring import SCORING_VERSION
from clinenv.seeding import episode_seed

#: Version tag written in every run-log line; readers refuse other versions.
SCHEMA = "clinenv.runlog/1"

#: An episode's key in a run log: ``(case_id, repetition)``.
KEY = tuple[str, int]


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


def doctor_config(doctor: Any) -> dict[str, Any]:
    """``{"name", "config"}`` describing a doctor policy for the run log.

    ``config`` is the policy's own description when it has one: ``doctor.config()`` (a
    method) or ``doctor.config`` (a mapping, e.g. the LLM doctor's property), copied as
    a JSON-ready dict; else its public scalar attributes (``int``, ``float``, ``str``,
    ``bool``, ``None``) other than ``name``, sorted by key.
    """
    name = str(getattr(doctor, "name", type(doctor).__name__))
    custom = getattr(doctor, "config", None)
    if callable(custom):
        config = dict(custom())
    elif isinstance(custom, Mapping):
        config = json.loads(json.dumps(custom))
    else:
        config = {k: v for k, v in sorted(vars(doctor).items())
                  if not k.startswith("_") and k != "name"
                  and (v is None or isinstance(v, bool | int | float | str))}
    return {"name": name, "config": config}


def env_spec_dict(env: Any) -> dict[str, Any] | None:
    """The environment's spec as a dict (``env.spec.to_json()`` parsed back).

    When the spec has kwargs that JSON cannot hold, a reduced dict ``{"id", "kwargs"}``
    is returned where each such value is replaced by its ``describe()`` (a chat model:
    backend, model and generation config; never a key or a client) when it has one, else
    by ``"<module.Class>"`` (no ``repr``: it may hold a memory address, and the lines of
    two equal runs must be identical). A ``reward_spec`` keyword is recorded as the
    spec's canonical JSON (:meth:`clinenv.reward_spec.RewardSpec.to_dict`: its content,
    a file by its sha256, never its path), so the line rebuilds the same environment. An
    ``env_config=`` keyword (:class:`~clinenv.env.config.EnvConfig`) is recorded as its
    fields that differ from their defaults, flat in ``kwargs`` where it stood
    (:meth:`~clinenv.env.config.EnvConfig.to_kwargs`), the form the keyword route
    gives. ``None`` without a spec.
    """
    spec = getattr(env, "spec", None)
    if spec is None:
        return None
    kwargs = _canonical_kwargs(spec.kwargs or {}, getattr(env, "unwrapped", env))
    try:
        described = json.loads(replace(spec, kwargs=kwargs).to_json())
    except (ValueError, TypeError):
        reduced = {}
        for key, value in kwargs.items():
            try:
                json.dumps(value)
                reduced[key] = value
            except (TypeError, ValueError):
                reduced[key] = _describe(value)
        described = {"id": spec.id, "kwargs": reduced}
    return described


def _canonical_kwargs(kwargs: Mapping[str, Any], unwrapped: Any) -> dict[str, Any]:
    """``kwargs`` with a ``reward_spec`` as its canonical JSON, a ``patient_persona`` /
    ``exam_noise`` settings object as its string / dict, and an ``env_config=`` object
    as its non-default fields, flat where it stood (see :func:`env_spec_dict`)."""
    out = dict(kwargs)
    if "reward_spec" in out:
        from clinenv.reward_spec import load_reward_spec

        used = getattr(unwrapped, "reward_spec", None)
        if used is None:
            used = load_reward_spec(out["reward_spec"])
        out["reward_spec"] = used.to_dict()
    persona, noise = out.get("patient_persona"), out.get("exam_noise")
    if callable(getattr(persona, "to_value", None)):  # a PersonaConfig: its string
        out["patient_persona"] = persona.to_value()
    if callable(getattr(noise, "to_dict", None)):  # an ExamNoiseConfig: its dict
        out["exam_noise"] = noise.to_dict()
    config = out.get("env_config")
    if callable(getattr(config, "to_kwargs", None)):
        # flat, as the keyword route records them (EnvConfig.to_kwargs): the line
        # rebuilds the environment with gym.make(id, **kwargs), and both routes resume
        # each other
        given, flat = config.to_kwargs(), {}
        for key, value in out.items():
            if key == "env_config":
                flat.update(given)
            elif key not in given:  # a field at its default beside env_config=
                flat[key] = value
        out = flat
    return out


#: ``env_spec`` keyword arguments that do not change what a run is: where the dataset file
#: lies (its records are compared by ``dataset_sha256``), whether it may be fetched and
#: its checksum checked, and rendering.
RUN_NEUTRAL_ENV_KWARGS = frozenset({"data_dir", "allow_download", "verify", "render_mode"})
#: Keys of a seat model's description (a kwarg value with a ``backend``) that say where
#: and how patiently the model is reached, not which model answers or how it decodes.
RUN_NEUTRAL_MODEL_KEYS = frozenset({"base_url", "timeout_s", "max_retries"})


def env_settings(env_spec: Any) -> dict[str, Any] | None:
    """The keyword arguments of a line's ``env_spec`` that make the run what it is (the
    protocol, its preset and settings, the seats and their models), without
    :data:`RUN_NEUTRAL_ENV_KWARGS` and, inside seat model descriptions,
    :data:`RUN_NEUTRAL_MODEL_KEYS`; ``None`` for a line without an ``env_spec``. The
    fields of :class:`~clinenv.env.config.EnvConfig` are compared flat, each left out at
    its default (a ``reward_spec`` equal to the default ``accuracy`` too), so a log
    written without one matches, and a ``settings`` or ``env_config`` dict (a form of
    older logs) compares as its fields."""
    from clinenv.env.config import is_default_field

    if not isinstance(env_spec, Mapping):
        return None
    kwargs = env_spec.get("kwargs")
    if not isinstance(kwargs, Mapping):
        return {}
    items = []
    for key, value in kwargs.items():
        if key in ("settings", "env_config") and isinstance(value, Mapping):
            items += value.items()  # an older log: the fields, flat
        else:
            items.append((key, value))
    settings = {}
    for key, value in items:
        if key in RUN_NEUTRAL_ENV_KWARGS or is_default_field(key, value):
            continue
        if isinstance(value, Mapping) and "backend" in value:
            value = {k: v for k, v in value.items() if k not in RUN_NEUTRAL_MODEL_KEYS}
        settings[key] = value
    return settings


def _describe(value: Any) -> Any:
    """A deterministic JSON stand-in for a value JSON cannot hold (see env_spec_dict)."""
    describe = getattr(value, "describe", None)
    if callable(describe):
        try:
            return json.loads(json.dumps(describe()))
        except (TypeError, ValueError):
            pass
    kind = type(value)
    return f"<{kind.__module__}.{kind.__qualname__}>"


@dataclass(frozen=True)
class RunContext:
    """What is constant over one run; builds its log lines and checks old ones.

    Attributes:
        env_id: the environment id (``"EGIP-MedQA-v0"``...).
        env_spec: :func:`env_spec_dict` of the environment.
        dataset: the case pool's name.
        dataset_sha256: records digest of the dataset file (the same for copies that differ
            in bytes only); ``None`` for in-memory cases. Older logs hold a byte digest.
        dataset_sha256_aliases: raw digests naming this run's records; not written.
        case_ids: ``case_id`` of every case, in dataset order.
        doctor: :func:`doctor_config` of the policy.
        run_seed: the run seed.
        clinenv_version: ``clinenv.__version__``.
        n_cases_scheduled: cases per repetition in the plan; ``None`` until :meth:`scheduled`.
        n_repetitions: repetitions in the plan; ``None`` until :meth:`scheduled`.
        paper_settings: the applied paper settings, written as ``paper_settings``; not
            compared on resume.
        case_list: the run's case list (``{"path", "sha256", "case_ids"}``), written as
            ``case_list``; its sha256 is compared on resume.
        privileged: the doctor sees Y or M; every line then carries ``"privileged": true``.
        reward_spec: for an environment without a Gymnasium spec, the canonical JSON of a
            non-default reward spec, written as ``reward_spec`` and compared on resume.
    """

    env_id: str
    env_spec: dict[str, Any] | None
    dataset: str
    dataset_sha256: str | None
    case_ids: tuple[str, ...]
    doctor: dict[str, Any]
    run_seed: int
    clinenv_version: str = field(default="")
    n_cases_scheduled: int | None = None
    n_repetitions: int | None = None
    paper_settings: dict[str, Any] | None = None
    case_list: dict[str, Any] | None = None
    dataset_sha256_aliases: tuple[str, ...] = ()
    privileged: bool = False
    reward_spec: dict[str, Any] | None = None

    def scheduled(self, n_cases: int, n_repetitions: int) -> RunContext:
        """This context with the plan's schedule (written into every line)."""
        return replace(self, n_cases_scheduled=int(n_cases), n_repetitions=int(n_repetitions))

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
        from clinenv.reward_spec import DEFAULT_SPEC

        pool = env.unwrapped.pool
        spec = getattr(env, "spec", None)
        env_spec = env_spec_dict(env)
        used = getattr(env.unwrapped, "reward_spec", None)
        return cls(
            env_id=env_id or (spec.id if spec is not None else type(env.unwrapped).__name__),
            env_spec=env_spec,
            reward_spec=(used.to_dict() if env_spec is None and callable(
                getattr(used, "to_dict", None)) and used != DEFAULT_SPEC else None),
            dataset=pool.name,
            dataset_sha256=pool.sha256,
            dataset_sha256_aliases=tuple(getattr(pool, "sha256_aliases", ())),
            case_ids=tuple(c.case_id for c in pool.cases),
            doctor=doctor_config(doctor),
            run_seed=int(seed),
            clinenv_version=__version__,
            privileged=policy_is_privileged(doctor),
        )

    def continuing(self, lines: Sequence[Mapping[str, Any]]) -> RunContext:
        """This context for continuing a log: when its first line names the dataset by
        one of :attr:`dataset_sha256_aliases` (the byte digest an earlier clinenv wrote,
        of these same records), the run keeps writing that value, so every line of the
        log agrees; otherwise this context unchanged."""
        theirs = lines[0].get("dataset_sha256") if lines else None
        if theirs and theirs != self.dataset_sha256 and theirs in self.dataset_sha256_aliases:
            return replace(self, dataset_sha256=theirs)
        return self

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
            "scoring_version": SCORING_VERSION,  # clinenv.scoring; absent: version 1
            "doctor": self.doctor,
        }
        if self.n_cases_scheduled is not None:
            head["n_cases_scheduled"] = self.n_cases_scheduled
        if self.n_repetitions is not None:
            head["n_repetitions"] = self.n_repetitions
        if self.paper_settings is not None:
            head["paper_settings"] = self.paper_settings
        if self.case_list is not None:
            head["case_list"] = self.case_list
        if self.privileged:
            head["privileged"] = True
        if self.reward_spec is not None:
            head["reward_spec"] = self.reward_spec
        body = {k: v for k, v in record.items() if k not in head}
        body.setdefault("verdict", "unscored")
        body.setdefault("correct", False)
        return {**head, **body}

    def check(self, line: Mapping[str, Any], *, path: str | Path, line_no: int) -> None:
        """Refuse a log line written by a different run.

        The schedule fields (``n_cases_scheduled``, ``n_repetitions``) may grow:
        resuming with more cases or repetitions extends the same run, and its readers
        take the largest schedule recorded (:mod:`clinenv.evaluation.runs`). They may not
        shrink: a line whose schedule, repetition or case index lies beyond this run's is
        refused. A line that has them must hold positive integers.

        Raises:
            RunLogError: schema, env id, environment settings (:func:`env_settings`:
                protocol, preset, seats...), doctor, run seed, episode seed, dataset file,
                case list (``case_list.sha256``), case order or scoring version
                (``scoring_version``, absent: 1) differ, a schedule field is
                malformed, or this run schedules fewer repetitions or cases than the
                log (the message names file, line and field, and both counts).
        """
        def refuse(what: str) -> RunLogError:
            return RunLogError(f"{what}; refusing to resume a different run into the same "
                               "log (use another --out file)", path=path, line=line_no)

        for name, ours in (("env_id", self.env_id), ("doctor", self.doctor),
                           ("run_seed", self.run_seed),
                           ("dataset_sha256", self.dataset_sha256)):
            theirs = line.get(name)
            if theirs != ours:
                where, theirs, ours = leaf_difference(theirs, ours, name)
                why = ("; the dataset file's records differ from those the log was "
                       "written from (a log of an earlier clinenv names the file by the "
                       "sha256 of its bytes: resume it from that very file)"
                       if name == "dataset_sha256" else "")
                raise refuse(f"{where} is {full_json(theirs)} but this run has "
                             f"{full_json(ours)}{why}")
        theirs, ours = env_settings(line.get("env_spec")), env_settings(self.env_spec)
        if full_json(theirs) != full_json(ours):
            where, theirs, ours = leaf_difference(theirs, ours, "env_spec.kwargs")
            raise refuse(f"{where} is {full_json(theirs)} but this run has {full_json(ours)}")
        theirs = line.get("reward_spec")  # an environment without env_spec only
        if full_json(theirs) != full_json(self.reward_spec):
            where, theirs, ours = leaf_difference(theirs, self.reward_spec, "reward_spec")
            raise refuse(f"{where} is {full_json(theirs)} but this run has {full_json(ours)}")
        theirs = _case_list_sha256(line.get("case_list"))
        ours = _case_list_sha256(self.case_list)
        if theirs != ours:
            raise refuse(f"case_list: the log was written with "
                         f"{_case_list_text(line.get('case_list'))} but this run has "
                         f"{_case_list_text(self.case_list)}")
        version = line.get("scoring_version", 1)
        if version != SCORING_VERSION:
            raise refuse(f"scoring_version is {_short(version)} but this clinenv scores "
                         f"with version {SCORING_VERSION} (verdicts of the two do not pool)")
        for name in SCHEDULE:
            value = line.get(name)
            if name in line and not _positive_int(value):
                raise refuse(f"{name} is {_short(value)}, expected an integer >= 1")
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
        self._check_schedule(line, index, rep, path=path, line_no=line_no)

    def _check_schedule(self, line: Mapping[str, Any], index: int, rep: int, *,
                        path: str | Path, line_no: int) -> None:
        """Refuse a schedule smaller than the log's: its readers would count the
        larger schedule's missing episodes, and ``run`` and ``eval`` would disagree."""
        counts = (("n_repetitions", self.n_repetitions, rep + 1, "--repetitions",
                   f"repetition {rep}"),
                  ("n_cases_scheduled", self.n_cases_scheduled,
                   index + 1 if self.case_list is None else 0, "--episodes",
                   f"case index {index}"))
        for name, ours, needed, flag, what in counts:
            if ours is None:
                continue
            recorded = line.get(name)
            if recorded is not None and recorded > ours:
                written = f"the log was written with {flag} {recorded}"
            elif needed > ours:  # a log older than the schedule fields, or beyond them
                written = f"the log holds {what}, so it was run with {flag} {needed} or more"
            else:
                continue
            raise RunLogError(f"{written} but this run has {flag} {ours}: resuming may raise "
                              f"{flag}, never lower it (a smaller run needs another --out "
                              "file)", path=path, line=line_no)


def _case_list_sha256(value: Any) -> Any:
    """The ``sha256`` of a line's ``case_list`` field (``None`` without one)."""
    return value.get("sha256") if isinstance(value, Mapping) else value


def _case_list_text(value: Any) -> str:
    if not isinstance(value, Mapping):
        return "no case list (the first N cases)"
    return f"--cases {value.get('path')} (sha256 {str(value.get('sha256'))[:12]}...)"


#: Schedule fields of a run-log line (absent in logs written before they existed).
SCHEDULE = ("n_cases_scheduled", "n_repetitions")


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


class _Absent:
    def __repr__(self) -> str:
        return "absent"


#: Stands for a key one of two compared JSON objects lacks (:func:`leaf_difference`).
ABSENT: Any = _Absent()


def full_json(value: Any) -> str:
    """``value`` as compact JSON for messages, never cut; ``absent`` for :data:`ABSENT`."""
    if value is ABSENT:
        return "absent"
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def leaf_difference(first: Any, second: Any, path: str) -> tuple[str, Any, Any]:
    """The first place where two JSON values differ, for messages that name it.

    Mappings are walked key by key in the order of their keys (``first``'s, then those
    only in ``second``); anything else is a leaf. A key missing on one side is
    :data:`ABSENT` there.

    Returns:
        ``(dotted path, first's value, second's value)`` there, e.g.
        ``("doctor.config.model", "a", "b")``; ``(path, first, second)`` when the values
        are leaves or do not differ.
    """
    if isinstance(first, Mapping) and isinstance(second, Mapping):
        for key in dict.fromkeys([*first, *second]):
            a, b = first.get(key, ABSENT), second.get(key, ABSENT)
            if full_json(a) != full_json(b):
                return leaf_difference(a, b, f"{path}.{key}")
    return path, first, second


def _short(value: Any, limit: int = 120) -> str:
    """``value`` as compact JSON for messages, cut to ``limit`` characters."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[:limit - 3] + "..."


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

    def keys(self) -> set[KEY]:
        """``{(case_id, repetition), ...}`` present in the log."""
        return {episode_key(ln) for ln in self.lines}

    def episodes(self) -> dict[KEY, dict[str, Any]]:
        """The line that stands for each episode, under the supersession rule (module
        docstring): the latest line of a key, when every earlier line of that key is an
        error line.

        Returns:
            ``{(case_id, repetition): line}`` in order of each key's first line.

        Raises:
            RunLogError: a key's line follows a line of the same key that is not an
                error line (the message names both lines).
        """
        index = EpisodeLines()
        for line, number in zip(self.lines, self.line_numbers, strict=True):
            earlier = index.add(line, number)
            if earlier is not None:
                raise RunLogError(
                    f"episode {episode_key(line)} appears twice (also on line {earlier}); "
                    "only an error line may be followed by another line of its episode; "
                    + dedupe_hint(self.path), path=self.path, line=number)
        return index.lines


def dedupe_hint(path: str | Path) -> str:
    """How to repair a log holding an episode twice (:mod:`clinenv.runlog_dedupe`)."""
    return ("repair it with `clinenv data dedupe " + shlex.quote(str(path))
            + "` (keeps the first line of each episode)")


def episode_key(line: Mapping[str, Any]) -> KEY:
    """A line's ``(case_id, repetition)``."""
    return line["case_id"], line["repetition"]


@dataclass
class EpisodeLines:
    """The line that stands for each episode, fed line by line: the one implementation of
    the supersession rule, used by :meth:`RunLog.episodes`,
    :func:`clinenv.evaluation.summary.summarize` and :func:`clinenv.evaluation.runs.load_runs`.

    The rule: one line per ``(case_id, repetition)``, except that a later line of an
    episode supersedes an earlier error line (:func:`is_error_line`), which stays in the
    file; any other repeated key is a duplicate that every reader refuses
    (docs/evaluation.md, "The run-log line").

    Attributes:
        lines: ``{(case_id, repetition): standing line}``, keys in order of first line.
        where: ``{(case_id, repetition): where}`` of each standing line, ``where`` as
            given to :meth:`add` (a line number, a ``(file, line)`` pair...; never
            ``None``).
        n_superseded: error lines replaced by a later line so far.
    """

    lines: dict[KEY, Any] = field(default_factory=dict)
    where: dict[KEY, Any] = field(default_factory=dict)
    n_superseded: int = 0

    def add(self, line: Mapping[str, Any], where: Any) -> Any:
        """Take the next line (it needs ``case_id`` and ``repetition``).

        Returns:
            ``None`` when the line now stands for its episode (new, or after an error
            line); else the ``where`` of the earlier, non-error line of the same episode
            that forbids it — then nothing changes and the caller reports a duplicate.
        """
        key = episode_key(line)
        earlier = self.lines.get(key)
        if earlier is not None:
            if not is_error_line(earlier):
                return self.where[key]
            self.n_superseded += 1
        self.lines[key] = line
        self.where[key] = where
        return None


def is_error_line(line: Mapping[str, Any]) -> bool:
    """The line is an *error line*: an episode stopped by a model backend that still
    failed after its retries (it has the field ``error``; docs/evaluation.md, "The run-log
    line").

    Under the supersession rule (:class:`EpisodeLines`) a later line of the same episode
    may replace it, and a resumed run runs it again
    (:func:`clinenv.runs.logged.prepare_run`, ``retry_errors``).
    """
    return "error" in line


#: The option of ``clinenv eval``, ``compare``, ``report``, ``cdeg build`` and ``replay``
#: that lets them read privileged lines (:func:`check_privileged`).
ALLOW_PRIVILEGED_FLAG = "--allow-privileged"


class PrivilegedLogError(RunLogError):
    """A run log holds privileged lines (a doctor that saw Y and M wrote them) and the
    reader was not told to allow them; the message names the file, the line and
    :data:`ALLOW_PRIVILEGED_FLAG`."""


def policy_is_privileged(doctor: Any) -> bool:
    """The doctor, or a doctor it wraps (``.doctor``, as the policy wrappers keep it),
    says it is privileged (``privileged = True``, e.g.
    :class:`~clinenv.agents.teacher_doctor.TeacherDoctor`)."""
    for _ in range(16):  # wrappers nest a few levels at most
        if doctor is None:
            return False
        if getattr(doctor, "privileged", False) is True:
            return True
        doctor = getattr(doctor, "doctor", None)
    return False


def is_privileged_line(line: Mapping[str, Any]) -> bool:
    """The line was written by a privileged doctor (field ``privileged`` is ``true``)."""
    return line.get("privileged") is True


def check_privileged(log: RunLog, *, allow: bool = False,
                     why: str = "its outcomes say nothing about a doctor") -> None:
    """Refuse a log with privileged lines unless ``allow``: the one check of every reader
    that must not learn from or report a doctor that saw the target (``clinenv eval``,
    ``compare``, ``report``: :func:`clinenv.evaluation.runs.load_runs`; ``cdeg build``:
    :func:`clinenv.wrappers.cdeg.trajectories.load_trajectories`; ``replay``:
    :func:`clinenv.runs.replay.load_source`). ``clinenv export`` does not call it: its
    rows carry ``privileged`` instead.

    Args:
        log: the read log.
        allow: accept privileged lines (:data:`ALLOW_PRIVILEGED_FLAG`).
        why: what using the log would do wrong, for the message.

    Raises:
        PrivilegedLogError: the first privileged line (file and line named).
    """
    if allow:
        return
    for line, number in zip(log.lines, log.line_numbers, strict=True):
        if is_privileged_line(line):
            doctor = line.get("doctor")
            name = doctor.get("name") if isinstance(doctor, Mapping) else None
            raise PrivilegedLogError(
                f"privileged run (field 'privileged': doctor {name!r} saw the target Y and "
                f"the records M); {why}; pass {ALLOW_PRIVILEGED_FLAG} to use it anyway",
                path=log.path, line=number)


def read_run_log(path: str | Path, *, repair: bool = False) -> RunLog:
    """Read a run log, tolerating a partial last line (left by a crash).

    A partial last line is reported in ``partial_bytes`` and, with ``repair``, cut off; a
    last line without a newline that is a complete JSON object is kept. Complete lines are
    never lost; a missing file reads as empty.

    Args:
        path: the log file.
        repair: truncate a partial last line in place (and fsync).

    Returns:
        A :class:`RunLog`.

    Raises:
        RunLogError: a complete line is not a JSON object of schema :data:`SCHEMA` (named).
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
