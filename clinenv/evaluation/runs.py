"""Run logs as evaluation inputs: read, group into runs, pair two runs case by case.

:func:`load_runs` (refusals: :class:`RunsError`) and :func:`align`; the checks and the
schedule rule are in docs/evaluation.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from clinenv.datasets.registry import records_digest_of
from clinenv.errors import ClinenvError
from clinenv.evaluation.labels import doctor_model, method_label, with_models
from clinenv.evaluation.metrics import VERDICTS, is_unparsed, is_unscored
from clinenv.runlog import (
    EpisodeLines,
    RunLog,
    RunLogError,
    check_privileged,
    dedupe_hint,
    full_json,
    leaf_difference,
    read_run_log,
)

__all__ = [
    "Alignment", "CaseMismatchError", "LogSpec", "MixedScoringError", "Run", "RunsError",
    "align", "check_scoring_versions", "load_runs", "parse_run_spec", "scoring_version",
]

#: Id given to a scheduled case of which the log holds no line (``{}``: its index).
PLACEHOLDER = "<case {}>"

#: Fields that must agree on every line of one run.
IDENTITY = ("env_id", "dataset", "dataset_sha256", "doctor", "run_seed")


class RunsError(RunLogError):
    """Run logs that cannot be evaluated as given; the message names file and line."""


class MixedScoringError(RunsError):
    """Run logs of different scoring versions given to be pooled or paired."""


def scoring_version(line: Mapping[str, Any]) -> int:
    """The scoring version of a run-log line: its ``scoring_version`` (an integer), or 1
    for a line written before the field existed."""
    value = line.get("scoring_version", 1)
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def _versions_text(where: Mapping[int, Sequence[str]]) -> str:
    """``"version 1 (a.jsonl), version 2 (b.jsonl, c.jsonl)"``."""
    return ", ".join(f"version {v} ({', '.join(dict.fromkeys(where[v]))})"
                     for v in sorted(where))


def check_scoring_versions(runs: Sequence[Run], *, what: str = "pool") -> None:
    """Refuse runs whose lines were scored under different scoring versions.

    Args:
        runs: the runs to be reported together.
        what: the verb of the message (``"pool"``, ``"pair"``).

    Raises:
        MixedScoringError: more than one version among the runs' lines; the message
            names every version with its files and says how to go on.
    """
    where: dict[int, list[str]] = {}
    for run in runs:
        for version, paths in run.scoring_versions.items():
            where.setdefault(version, []).extend(paths)
    if len(where) > 1:
        files = [p for v in sorted(where) for p in where[v]]
        raise MixedScoringError(
            f"cannot {what} run logs scored under different scoring versions: "
            f"{_versions_text(where)}; verdicts under the same ids differ between "
            "versions (a line without scoring_version is version 1). Rerun or replay the "
            "older logs with this clinenv, or pass --mixed-scoring (mixed_scoring=True) "
            "to report them together anyway", path=files[-1])


class CaseMismatchError(ClinenvError, ValueError):
    """Two runs to be paired hold different case sets.

    Attributes:
        only_base: case ids present only in the baseline run, in its order.
        only_method: case ids present only in the method run, in its order.
    """

    def __init__(self, message: str, *, only_base: Sequence[str],
                 only_method: Sequence[str]) -> None:
        super().__init__(message)
        self.only_base = list(only_base)
        self.only_method = list(only_method)


@dataclass(frozen=True)
class LogSpec:
    """One log file named on the command line, with an optional method label."""

    path: Path
    label: str | None = None


def parse_run_spec(text: str) -> LogSpec:
    """``"path"`` or ``"LABEL=path"`` as a :class:`LogSpec`.

    An argument that names an existing file is a path even when it contains ``=``;
    otherwise the text before the first ``=`` is the label.

    Raises:
        RunsError: an empty label or path (``"=x.jsonl"``, ``"label="``).
    """
    if "=" not in text or Path(text).is_file():
        return LogSpec(Path(text))
    label, _, path = text.partition("=")
    if not label.strip() or not path:
        raise RunsError("expected PATH or LABEL=PATH with a non-empty label and path",
                        path=text)
    return LogSpec(Path(path), label.strip())


@dataclass(frozen=True)
class Run:
    """The episodes of one method on one dataset.

    Attributes:
        label: the method label.
        dataset: the dataset name of the lines.
        env_id: the environment id of the lines.
        doctor: ``{"name", "config"}`` of the doctor policy.
        run_seed: the run seed (``None`` when the lines have none).
        dataset_sha256: records digest of the dataset file (``None`` for in-memory cases).
        records: the standing run-log line of each episode.
        sources: ``(file, 1-based line)`` of each record.
        partial_bytes: bytes of partial last lines (left by crashes) skipped in the files.
        n_cases_scheduled: cases per repetition in the run's plan.
        schedule_inferred: the schedule was inferred (an old log).
        n_superseded: error lines replaced by a later line of the same episode.
    """

    label: str
    dataset: str
    env_id: str
    doctor: Mapping[str, Any]
    run_seed: int | None
    dataset_sha256: str | None
    records: tuple[Mapping[str, Any], ...]
    sources: tuple[tuple[str, int], ...]
    partial_bytes: int = 0
    n_cases_scheduled: int = 0
    schedule_inferred: bool = False
    n_superseded: int = 0
    _case_ids: tuple[str, ...] = field(default=(), repr=False)
    _n_repetitions: int = field(default=1, repr=False)

    @property
    def paths(self) -> tuple[str, ...]:
        """The log files of this run, in the order given."""
        return tuple(dict.fromkeys(p for p, _ in self.sources))

    @property
    def case_ids(self) -> tuple[str, ...]:
        """The scheduled cases in dataset order (``case_index``; first appearance without
        one); a scheduled case with no line is :data:`PLACEHOLDER`."""
        return self._case_ids

    @property
    def n_repetitions(self) -> int:
        """Scheduled repetitions per case: the largest ``n_repetitions`` recorded in the
        run's lines or the largest repetition + 1, whichever is larger (older logs: the
        latter; docs/evaluation.md, "Which logs load")."""
        return self._n_repetitions

    @property
    def n_scheduled(self) -> int:
        """Scheduled episodes: :attr:`n_cases_scheduled` × :attr:`n_repetitions`."""
        return self.n_cases_scheduled * self.n_repetitions

    @property
    def scoring_versions(self) -> dict[int, tuple[str, ...]]:
        """``{scoring version: files}`` of the run's lines (:func:`scoring_version`)."""
        where: dict[int, dict[str, None]] = {}
        for record, (path, _) in zip(self.records, self.sources, strict=True):
            where.setdefault(scoring_version(record), {})[path] = None
        return {v: tuple(paths) for v, paths in sorted(where.items())}

    def n_unscored(self, case_ids: Iterable[str] | None = None) -> int:
        """Episodes without an identifiable answer (the papers' U:
        :func:`clinenv.evaluation.metrics.is_unscored`, whatever the protocol's
        verdict), optionally over some cases. Missing episodes are :meth:`n_missing`."""
        keep = None if case_ids is None else set(case_ids)
        return sum(is_unscored(r) for r in self.records
                   if keep is None or r["case_id"] in keep)

    def n_unparsed(self, case_ids: Iterable[str] | None = None) -> int:
        """Episodes with an identifiable answer whose judge reply could not be read
        (:func:`clinenv.evaluation.metrics.is_unparsed`; counted apart from U)."""
        keep = None if case_ids is None else set(case_ids)
        return sum(is_unparsed(r) for r in self.records
                   if keep is None or r["case_id"] in keep)

    def n_missing(self, case_ids: Iterable[str] | None = None) -> int:
        """Scheduled ``(case, repetition)`` episodes absent from the log, optionally over
        some of the scheduled cases."""
        if case_ids is None:
            return self.n_scheduled - len(self.records)
        keep = set(case_ids)
        present = sum(r["case_id"] in keep for r in self.records)
        return len(keep) * self.n_repetitions - present

    def matrix(self, case_ids: Sequence[str] | None = None) -> np.ndarray:
        """Correctness ``(n_cases, n_repetitions)`` over scheduled cases: 1 correct, 0 not.

        Every row is a scheduled case and every column a scheduled repetition, so a
        cell without a line is a missing scheduled output and is 0 (not correct), never
        NaN.

        Args:
            case_ids: scheduled cases, the rows in this order (default: :attr:`case_ids`).
        """
        from clinenv.evaluation.metrics import correctness_matrix

        ids = list(self.case_ids if case_ids is None else case_ids)
        matrix, _ = correctness_matrix(list(self.records), case_ids=ids,
                                       n_repetitions=self.n_repetitions)
        return np.nan_to_num(matrix, nan=0.0)

    def describe(self) -> str:
        """``label on dataset (file, ...)`` for messages."""
        return f"{self.label!r} on {self.dataset!r} ({', '.join(self.paths)})"


# ------------------------------------------------------------------------- loading
def _check_line(line: Mapping[str, Any], path: str, number: int, *, labelled: bool) -> None:
    def bad(reason: str) -> RunsError:
        return RunsError(reason, path=path, line=number)

    if not isinstance(line["case_id"], str) or not line["case_id"]:
        raise bad(f"case_id must be a non-empty string, got {line['case_id']!r}")
    rep = line["repetition"]
    if isinstance(rep, bool) or not isinstance(rep, int) or rep < 0:
        raise bad(f"repetition must be an integer >= 0, got {rep!r}")
    if line.get("verdict") not in VERDICTS:
        raise bad(f"verdict must be one of {', '.join(VERDICTS)}, got "
                  f"{line.get('verdict')!r}")
    doctor = line.get("doctor")
    if not labelled and (not isinstance(doctor, Mapping)
                         or not isinstance(doctor.get("name"), str)):
        raise bad("missing doctor.name (the method label); name the log LABEL=path or "
                  "write it with clinenv run")
    for key in ("n_cases_scheduled", "n_repetitions"):
        value = line.get(key)
        if key in line and (isinstance(value, bool) or not isinstance(value, int)
                            or value < 1):
            raise bad(f"{key} must be an integer >= 1, got {value!r}")
    if not isinstance(line.get("dataset"), str) or not line["dataset"]:
        raise bad("missing dataset name")


def _identity(line: Mapping[str, Any]) -> tuple[str, ...]:
    """The :data:`IDENTITY` fields as canonical JSON (key order does not matter)."""
    return tuple(_identity_value(line, k) for k in IDENTITY)


def _first_difference(first: Mapping[str, Any], other: Mapping[str, Any], where: str) -> str:
    """``"doctor.config.model is "b" here but "a" <where>"`` for the first differing leaf
    of the first :data:`IDENTITY` field that differs, both values in full."""
    for key in IDENTITY:
        if _identity_value(first, key) != _identity_value(other, key):
            path, theirs, ours = leaf_difference(other.get(key), first.get(key), key)
            return f"{path} is {full_json(theirs)} here but {full_json(ours)} {where}"
    return "no difference"  # pragma: no cover - only called when the identities differ


def _identity_value(line: Mapping[str, Any], key: str) -> str:
    return json.dumps(line.get(key), sort_keys=True)


def _label_hint(label: str, paths: Sequence[str]) -> str:
    """``'scripted-1=a.jsonl' 'scripted-2=b.jsonl'``: shell-quoted ``LABEL=path``
    arguments that name each log apart."""
    import shlex

    return " ".join(shlex.quote(f"{label}-{i}={p}") for i, p in enumerate(paths, 1))


@dataclass
class _Group:
    label: str
    first: Mapping[str, Any]
    first_at: tuple[str, int]
    episodes: EpisodeLines = field(default_factory=EpisodeLines)  # where: (file, line)
    partial_bytes: int = 0


def load_runs(specs: Iterable[LogSpec | str | Path], *,
              mixed_scoring: bool = False, allow_privileged: bool = False) -> list[Run]:
    """Read run logs and group their lines into runs by ``(label, dataset)``.

    Args:
        specs: log files, as :class:`LogSpec`, ``"LABEL=path"`` or paths.
        mixed_scoring: accept lines of different scoring versions.
        allow_privileged: accept lines of a privileged doctor (``"privileged": true``).

    Returns:
        The runs, in order of first appearance.

    Raises:
        MixedScoringError: lines of different scoring versions without ``mixed_scoring``.
        clinenv.runlog.PrivilegedLogError: a privileged line without ``allow_privileged``.
        RunsError: a missing or empty file, a malformed or mixed file, a duplicate
            episode, or files of one label and dataset from different runs.
        RunLogError: a line is not valid run-log JSON.
    """
    loaded: set[Path] = set()
    logs = [_read_checked(spec if isinstance(spec, LogSpec) else parse_run_spec(str(spec)),
                          loaded, allow_privileged) for spec in specs]
    labels = with_models([spec.label or method_label(log.lines[0]) for spec, log in logs],
                         [None if spec.label else doctor_model(log.lines[0].get("doctor"))
                          for spec, log in logs])
    groups: dict[tuple[str, str], _Group] = {}
    for (spec, log), label in zip(logs, labels, strict=True):
        path = str(spec.path)
        head, head_no = log.lines[0], log.line_numbers[0]
        key = (label, head["dataset"])
        group = groups.get(key)
        if group is None:
            group = groups[key] = _Group(label, head, (path, head_no))
        elif _identity(group.first) != _identity(head):
            raise RunsError(
                f"two different runs are labelled {label!r} on dataset {head['dataset']!r}: "
                + _first_difference(group.first, head, f"in {group.first_at[0]}")
                + "; give each log its own label with LABEL=path, e.g. "
                + _label_hint(label, [group.first_at[0], path]), path=path, line=head_no)
        group.partial_bytes += log.partial_bytes
        for line, number in zip(log.lines, log.line_numbers, strict=True):
            earlier = group.episodes.add(line, (path, number))
            if earlier is not None:
                hint = ("; " + dedupe_hint(path) if earlier[0] == path else
                        "; logs with the same settings are read as parts of one run: to "
                        "compare two such runs, give each log its own label with "
                        "LABEL=path, e.g. " + _label_hint(label, [earlier[0], path]))
                raise RunsError(
                    f"duplicate episode (case_id {line['case_id']!r}, repetition "
                    f"{line['repetition']}) of run {label!r} on {head['dataset']!r}, "
                    "first at {}, line {} (only an error line may be followed by another "
                    "line of its episode)".format(*earlier) + hint, path=path, line=number)
    runs = [_to_run(g) for g in groups.values()]
    if not mixed_scoring:
        check_scoring_versions(runs)
    return runs


def _read_checked(spec: LogSpec, loaded: set[Path],
                  allow_privileged: bool = False) -> tuple[LogSpec, RunLog]:
    """Read one log and check its lines (:func:`_check_line`, one run per file;
    :func:`~clinenv.runlog.check_privileged`); adds its resolved path to ``loaded``.
    Raises :class:`RunsError` as :func:`load_runs`."""
    path = str(spec.path)
    if spec.path.is_dir():
        raise RunsError("is a folder, not a run-log file; give the .jsonl files in it",
                        path=path)
    if not spec.path.is_file():
        raise RunsError("no such run-log file", path=path)
    if spec.path.resolve() in loaded:
        raise RunsError("this log is given twice", path=path)
    loaded.add(spec.path.resolve())
    log = read_run_log(spec.path)
    if not log.lines:
        raise RunsError("no episodes in this run log", path=path)
    check_privileged(log, allow=allow_privileged, why="evaluating it would score a doctor "
                     "that was given the answer")
    head, head_no = log.lines[0], log.line_numbers[0]
    for line, number in zip(log.lines, log.line_numbers, strict=True):
        _check_line(line, path, number, labelled=spec.label is not None)
        if _identity(line) != _identity(head):
            raise RunsError(
                "mixed runs in one file: "
                + _first_difference(head, line, f"on line {head_no}")
                + "; write each run to its own log", path=path, line=number)
    return spec, log


def _schedule(records: Sequence[Mapping[str, Any]]) -> tuple[list[str], int, bool]:
    """``(scheduled case ids, repetitions, inferred)`` of a run's lines."""
    order: dict[str, tuple[int, int]] = {}
    index_of: dict[str, int] = {}
    for n, rec in enumerate(records):
        index = rec.get("case_index")
        indexed = isinstance(index, int) and not isinstance(index, bool) and index >= 0
        rank = (int(index), n) if indexed else (1 << 62, n)
        if rec["case_id"] not in order or rank < order[rec["case_id"]]:
            order[rec["case_id"]] = rank
        if indexed:
            index_of.setdefault(rec["case_id"], int(index))
    seen = sorted(order, key=order.__getitem__)
    n_reps = 1 + max(int(r["repetition"]) for r in records)
    cases = [r["n_cases_scheduled"] for r in records if "n_cases_scheduled" in r]
    reps = [r["n_repetitions"] for r in records if "n_repetitions" in r]
    inferred = not cases and not reps
    n_reps = max([n_reps, *reps])
    listed: dict[str, None] = {}
    for rec in records:  # runs over case lists (clinenv run --cases): exactly their cases
        field_ = rec.get("case_list")
        if isinstance(field_, Mapping) and isinstance(field_.get("case_ids"), list):
            listed.update(dict.fromkeys(str(c) for c in field_["case_ids"]))
    if listed:
        return [*listed, *(c for c in seen if c not in listed)], n_reps, False
    if inferred:  # an old log: the cases seen are the schedule
        return seen, n_reps, True
    n_cases = max([len(seen), *cases, *(i + 1 for i in index_of.values())])
    if index_of and len(set(index_of.values())) == len(index_of):
        at = {i: c for c, i in index_of.items()}
        ids = [at.get(i, PLACEHOLDER.format(i)) for i in range(n_cases)]
        ids += [c for c in seen if c not in index_of]  # lines without case_index
    else:
        ids = seen + [PLACEHOLDER.format(i) for i in range(len(seen), n_cases)]
    return ids, n_reps, inferred


def _to_run(group: _Group) -> Run:
    records = list(group.episodes.lines.values())
    ids, n_reps, inferred = _schedule(records)
    first = group.first
    return Run(
        label=group.label, dataset=first["dataset"], env_id=str(first.get("env_id")),
        doctor=first.get("doctor") or {"name": group.label, "config": {}},
        run_seed=first.get("run_seed"),
        dataset_sha256=records_digest_of(first.get("dataset_sha256")), records=tuple(records),
        sources=tuple(group.episodes.where.values()), partial_bytes=group.partial_bytes,
        n_cases_scheduled=len(ids), schedule_inferred=inferred,
        n_superseded=group.episodes.n_superseded, _case_ids=tuple(ids),
        _n_repetitions=n_reps,
    )


# ------------------------------------------------------------------------- pairing
@dataclass(frozen=True)
class Alignment:
    """Two runs paired case by case.

    Attributes:
        base: the baseline run.
        method: the method run.
        case_ids: the paired cases, in the baseline's order.
        a: baseline correctness ``(n_cases, n_repetitions)`` (1 / 0 / NaN).
        b: method correctness, same rows (its own number of repetitions).
        only_base: case ids dropped because only the baseline has them.
        only_method: case ids dropped because only the method has them.
    """

    base: Run
    method: Run
    case_ids: tuple[str, ...]
    a: np.ndarray
    b: np.ndarray
    only_base: tuple[str, ...] = ()
    only_method: tuple[str, ...] = ()

    @property
    def n_dropped(self) -> int:
        """Cases dropped by ``intersect=True`` (0 when the case sets agree)."""
        return len(self.only_base) + len(self.only_method)


def _ids(ids: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f", ... ({len(ids) - limit} more)" if len(ids) > limit else "")


def _indexed(run: Run) -> dict[int, str]:
    """``{case_index: case_id}`` from the run's lines."""
    return {int(r["case_index"]): r["case_id"] for r in run.records
            if isinstance(r.get("case_index"), int) and not isinstance(r["case_index"], bool)}


def _resolved(run: Run, other: Run) -> list[str]:
    """``run.case_ids`` with each placeholder (a scheduled case without any line) named
    after the case of the same index in ``other``, when both runs used the same dataset
    file (same sha256, hence the same case order)."""
    ids = list(run.case_ids)
    if not run.dataset_sha256 or run.dataset_sha256 != other.dataset_sha256:
        return ids
    theirs, have = _indexed(other), set(ids)
    for i, case in enumerate(ids):
        if case == PLACEHOLDER.format(i) and theirs.get(i) not in (None, *have):
            ids[i] = theirs[i]
    return ids


def align(base: Run, method: Run, *, intersect: bool = False,
          mixed_scoring: bool = False) -> Alignment:
    """Paired correctness matrices of ``method`` against ``base`` on the same cases.

    A scheduled case with no line (``<case N>``) pairs by case index when both runs used the
    same dataset file; its cells count as not correct.

    Args:
        base: the baseline run.
        method: the method run (same dataset).
        intersect: keep only the common cases instead of refusing different case sets.
        mixed_scoring: pair runs scored under different scoring versions.

    Raises:
        MixedScoringError: different scoring versions and ``mixed_scoring`` false.
        RunsError: the runs are on different datasets or dataset files.
        CaseMismatchError: the case sets differ and ``intersect`` is false, or no case is
            common.
    """
    if not mixed_scoring:
        check_scoring_versions([base, method], what="pair")
    if base.dataset != method.dataset:
        raise RunsError(f"cannot pair runs on different datasets: {method.describe()} "
                        f"against {base.describe()}", path=method.paths[0])
    if (base.dataset_sha256 and method.dataset_sha256
            and base.dataset_sha256 != method.dataset_sha256):
        raise RunsError(f"cannot pair runs on different files of dataset {base.dataset!r} "
                        f"(sha256 {method.dataset_sha256[:12]}... in {method.describe()}, "
                        f"{base.dataset_sha256[:12]}... in {base.describe()})",
                        path=method.paths[0])
    base_ids, method_ids = _resolved(base, method), _resolved(method, base)
    in_method, in_base = set(method_ids), set(base_ids)
    only_base = [c for c in base_ids if c not in in_method]
    only_method = [c for c in method_ids if c not in in_base]
    common = [c for c in base_ids if c in in_method]
    names = (f"{method.label!r} ({', '.join(method.paths)}) and baseline {base.label!r} "
             f"({', '.join(base.paths)})")
    if not common:
        raise CaseMismatchError(f"no case in common on {base.dataset!r} between {names}",
                                only_base=only_base, only_method=only_method)
    if (only_base or only_method) and not intersect:
        parts = []
        if only_base:
            parts.append(f"{len(only_base)} case(s) missing from {method.label!r}: "
                         f"{_ids(only_base)}")
        if only_method:
            parts.append(f"{len(only_method)} case(s) missing from baseline {base.label!r}: "
                         f"{_ids(only_method)}")
        raise CaseMismatchError(f"different case sets on {base.dataset!r} in {names}: "
                                + "; ".join(parts) + " (use --intersect / intersect=True "
                                "to compare the common cases)",
                                only_base=only_base, only_method=only_method)
    a, b = base.matrix(common), method.matrix(common)
    return Alignment(base, method, tuple(common), a, b, tuple(only_base), tuple(only_method))
