"""Terminal-input ablations on fixed histories (EGIP section 4.3, Table 3 Panel B, appendix C).

:func:`load_source` and :data:`ABLATIONS` (``"full"``, ``"no_observations"``,
``"no_candidates"``); the runner is :func:`clinenv.runs.replay_run`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clinenv.cases import Case
from clinenv.errors import ClinenvError
from clinenv.icd_map import cached_icd_map
from clinenv.protocol.config import ProtocolConfig
from clinenv.protocol.evidence import EvidenceBundle, Observation
from clinenv.protocol.prepared import PreparedCase
from clinenv.protocol.presets import resolve_preset
from clinenv.runlog import (
    EpisodeLines,
    RunLogError,
    check_privileged,
    dedupe_hint,
    episode_key,
    is_error_line,
    read_run_log,
)

__all__ = ["ABLATIONS", "NAME_SUFFIXES", "ReplayError", "ReplaySource", "SourceEpisode",
           "ablate", "bundle_from_dict", "load_source"]

#: Terminal-input ablations (EGIP Table 3 Panel B); ``"full"`` is the rerun control.
ABLATIONS = ("full", "no_observations", "no_candidates")
#: Suffix of the replay doctor's name (the method label of ``clinenv eval/compare``).
NAME_SUFFIXES = {"full": "/replay", "no_observations": "/no-observations",
                 "no_candidates": "/no-candidates"}
_SOURCES = ("Patient", "Measurement")
_DEFAULT_MAX_TEXT_CHARS = 65_536


class ReplayError(RunLogError):
    """A run log that cannot be replayed, or an output log that cannot be continued;
    the message names the file, the 1-based line and the field."""


@dataclass(frozen=True)
class SourceEpisode:
    """One finished episode of the source log, checked and ready to replay.

    Attributes:
        line_no: its 1-based line in the source file.
        line: the source line (never modified).
        case: the case, loaded from the line's dataset.
        prepared: the case prepared for the line's protocol settings (scoring).
        protocol: the protocol settings of the line's ``env_spec`` kwargs.
        bundle: e_T rebuilt from the line's ``evidence``.
        max_text_chars: the observation text limit of the source environment.
    """

    line_no: int
    line: Mapping[str, Any]
    case: Case
    prepared: PreparedCase
    protocol: ProtocolConfig
    bundle: EvidenceBundle
    max_text_chars: int

    @property
    def key(self) -> tuple[str, int]:
        """``(case_id, repetition)``."""
        return episode_key(self.line)


@dataclass(frozen=True)
class ReplaySource:
    """A checked source log (:func:`load_source`).

    Attributes:
        path: the file.
        sha256: sha256 of its bytes.
        episodes: the episodes to replay, in order of each one's first line.
        n_error_lines: standing error lines skipped (no terminal decision to replay).
        partial_bytes: bytes of a partial last line (left by a crash), ignored.
    """

    path: Path
    sha256: str
    episodes: tuple[SourceEpisode, ...]
    n_error_lines: int
    partial_bytes: int


def ablate(bundle: EvidenceBundle, ablation: str) -> EvidenceBundle:
    """``bundle`` with the ablation applied (``"full"``: unchanged).

    Raises:
        ValueError: an unknown ablation.
    """
    if ablation == "full":
        return bundle
    if ablation == "no_observations":
        return bundle.without_observations()
    if ablation == "no_candidates":
        return bundle.without_candidates()
    raise ValueError(f"ablation must be one of {ABLATIONS}, got {ablation!r}")


def bundle_from_dict(evidence: Any, *, path: str | Path, line: int) -> EvidenceBundle:
    """e_T from a run-log line's ``evidence`` field (the inverse of
    :meth:`~clinenv.protocol.evidence.EvidenceBundle.to_dict`).

    Raises:
        ReplayError: a missing or malformed field (named as ``evidence.observations[2].
            content``).
    """
    def bad(field: str, expected: str, value: Any) -> ReplayError:
        return ReplayError(f"field 'evidence{field}' must be {expected}, got "
                           f"{value!r:.80}", path=path, line=line)

    if not isinstance(evidence, Mapping):
        raise bad("", "an object (the evidence interface e_T)", evidence)
    objective = evidence.get("objective")
    if not isinstance(objective, str):
        raise bad(".objective", "a string", objective)
    candidates = evidence.get("candidates")
    if candidates is not None and (not isinstance(candidates, list) or not all(
            isinstance(c, str) for c in candidates)):
        raise bad(".candidates", "a list of strings or null", candidates)
    items = evidence.get("observations")
    if not isinstance(items, list):
        raise bad(".observations", "a list", items)
    observations = []
    for n, item in enumerate(items):
        where = f".observations[{n}]"
        if not isinstance(item, Mapping):
            raise bad(where, "an object", item)
        checks = (("obs_id", str, False), ("turn", int, False), ("context", str, False),
                  ("content", str, True), ("availability", str, False),
                  ("exam_id", str, True))
        for name, kind, nullable in checks:
            value = item.get(name)
            if not (isinstance(value, kind) and not isinstance(value, bool)
                    or nullable and value is None):
                kind_text = "an integer" if kind is int else "a string"
                raise bad(f"{where}.{name}", f"{'null or ' if nullable else ''}{kind_text}",
                          value)
        if item.get("source") not in _SOURCES:
            raise bad(f"{where}.source", f"one of {_SOURCES}", item.get("source"))
        observations.append(Observation(
            item["obs_id"], item["source"], item["turn"], item["context"], item["content"],
            item["availability"], item["exam_id"]))
    return EvidenceBundle(objective, None if candidates is None else tuple(candidates),
                          tuple(observations))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class _Pools:
    """Case pools by ``(dataset, disclosure)``, loaded once per :func:`load_source`."""

    def __init__(self, data_dir: str | Path | None, allow_download: bool) -> None:
        self.data_dir = None if data_dir is None else str(data_dir)
        self.allow_download = allow_download
        self._pools: dict[tuple[str, str], Any] = {}

    def get(self, dataset: str, disclosure: str, *, path: Path, line: int) -> Any:
        from clinenv.env.case_pool import CasePool

        key = (dataset, disclosure)
        if key not in self._pools:
            try:
                self._pools[key] = CasePool.get(dataset, data_dir=self.data_dir,
                                                disclosure=disclosure,
                                                allow_download=self.allow_download)
            except (ClinenvError, ValueError, OSError) as err:
                raise ReplayError(f"dataset {dataset!r} of this line cannot be loaded: {err}",
                                  path=path, line=line) from None
        return self._pools[key]


def _field(line: Mapping[str, Any], name: str, ok: Any, expected: str, *, path: Path,
           number: int) -> Any:
    value = line.get(name)
    if name not in line or not ok(value):
        raise ReplayError(f"field {name!r} must be {expected}, got "
                          f"{'nothing' if name not in line else repr(value)[:80]}",
                          path=path, line=number)
    return value


def _episode(line: Mapping[str, Any], number: int, path: Path, pools: _Pools) -> SourceEpisode:
    """Check one standing, finished source line and load its case (the checks are
    listed under load_source's Raises)."""
    def is_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0

    def need(name: str, ok: Any, expected: str) -> Any:
        return _field(line, name, ok, expected, path=path, number=number)

    if "replay" in line:
        raise ReplayError("this log is itself a replay (field 'replay'); replay its source "
                          "log instead", path=path, line=number)
    bundle = bundle_from_dict(need("evidence", lambda v: True, "present"),
                              path=path, line=number)
    need("turns", is_int, "an integer >= 0")
    need("seed", lambda v: v is None or is_int(v), "an integer >= 0 or null")
    need("reward", lambda v: isinstance(v, int | float) and not isinstance(v, bool),
         "a number")
    target = need("target", lambda v: isinstance(v, str), "the reference target (a string)")
    dataset = need("dataset", lambda v: isinstance(v, str) and v, "a dataset name")
    spec = line.get("env_spec") if isinstance(line.get("env_spec"), Mapping) else {}
    kwargs = spec.get("kwargs") if isinstance(spec.get("kwargs"), Mapping) else {}
    try:
        kwargs = resolve_preset(kwargs.get("preset"), dict(kwargs))
        loop = line.get("protocol", kwargs.get("protocol", "egip"))
        if loop != "egip":
            raise ReplayError(f"the run used the native protocol {loop!r} (field "
                              "'protocol'), whose terminal input is the transcript, not the "
                              "evidence interface e_T; replay works on EGIP run logs",
                              path=path, line=number)
        protocol = ProtocolConfig(**{k: v for k, v in kwargs.items()
                                     if k in ProtocolConfig.model_fields})
    except ReplayError:
        raise
    except ValueError as err:
        raise ReplayError(f"field 'env_spec.kwargs' holds invalid protocol settings: "
                          f"{' '.join(str(err).split())[:300]}", path=path, line=number) from None
    if protocol.icd_map is not None:  # the answer is scored through it, as in the run
        try:
            cached_icd_map(protocol.icd_map)
        except (OSError, ClinenvError) as err:
            raise ReplayError(f"field 'env_spec.kwargs.icd_map': the run's ICD mapping "
                              f"cannot be read: {err}", path=path, line=number) from None
    pool = pools.get(dataset, str(kwargs.get("disclosure", "presentation")), path=path,
                     line=number)
    expected_sha = line.get("dataset_sha256")
    if expected_sha and pool.sha256 and expected_sha not in (pool.sha256,
                                                             *pool.sha256_aliases):
        raise ReplayError(f"dataset {dataset!r} resolves to a different file than the run "
                          f"used (sha256 {pool.sha256[:12]}..., field 'dataset_sha256' says "
                          f"{str(expected_sha)[:12]}...)", path=path, line=number)
    try:
        case = pool.case(str(line["case_id"]))
    except KeyError:
        raise ReplayError(f"field 'case_id': dataset {dataset!r} has no case "
                          f"{line['case_id']!r}", path=path, line=number) from None
    if case.target.text != target:
        raise ReplayError(f"field 'target' is {target!r} but case {case.case_id!r} of "
                          f"dataset {dataset!r} has {case.target.text!r}; the log does not "
                          "match this dataset", path=path, line=number)
    if bundle.candidates != case.candidates:
        raise ReplayError(f"field 'evidence.candidates' differs from the candidate labels "
                          f"of case {case.case_id!r} in dataset {dataset!r}", path=path,
                          line=number)
    max_chars = kwargs.get("max_text_chars", _DEFAULT_MAX_TEXT_CHARS)
    prepared = pool.prepared(case, accept=protocol.exam_accept, suggest=protocol.exam_suggest)
    return SourceEpisode(number, line, case, prepared, protocol, bundle,
                         int(max_chars) if isinstance(max_chars, int) else
                         _DEFAULT_MAX_TEXT_CHARS)


def load_source(path: str | Path, *, ablation: str = "full",
                data_dir: str | Path | None = None,
                allow_download: bool = False,
                allow_privileged: bool = False) -> ReplaySource:
    """Read and check a source run log for :func:`clinenv.runs.replaying.replay_run`.

    Args:
        path: the run log (not modified).
        ablation: one of :data:`ABLATIONS`; ``"no_candidates"`` needs an episode with K.
        data_dir: folder of the dataset files (else ``CLINENV_DATA_DIR``, the cache).
        allow_download: let the loader download a missing public dataset.
        allow_privileged: replay a privileged doctor's log (refused by default).

    Returns:
        A :class:`ReplaySource`.

    Raises:
        ReplayError: no such file; a line that is not run-log JSON, is a replay line or
            lacks a needed field; a dataset that cannot be loaded or is not the run's; a
            case, target or candidate list that does not match; a duplicate episode; no
            finished episode; ``"no_candidates"`` without K. The file and line are named.
        clinenv.runlog.PrivilegedLogError: a privileged line without ``allow_privileged``.
        ValueError: an unknown ablation.
    """
    if ablation not in ABLATIONS:
        raise ValueError(f"ablation must be one of {ABLATIONS}, got {ablation!r}")
    path = Path(path)
    if not path.is_file():
        raise ReplayError("no such run-log file", path=path)
    log = read_run_log(path)
    check_privileged(log, allow=allow_privileged, why="its evidence was acquired by a "
                     "doctor that knew the answer, so a replayed decision on it measures "
                     "nothing")
    index = EpisodeLines()
    for line, number in zip(log.lines, log.line_numbers, strict=True):
        earlier = index.add(line, number)
        if earlier is not None:
            raise ReplayError(f"episode {episode_key(line)} appears twice (also on line "
                              f"{earlier}); {dedupe_hint(path)}", path=path, line=number)
    pools = _Pools(data_dir, allow_download)
    episodes, n_errors = [], 0
    for key, line in index.lines.items():
        if is_error_line(line):
            n_errors += 1
            continue
        episodes.append(_episode(line, index.where[key], path, pools))
    if not episodes:
        raise ReplayError("no finished episode to replay (the log is empty or holds only "
                          "error lines)", path=path)
    if ablation == "no_candidates" and not any(e.bundle.candidates for e in episodes):
        raise ReplayError(f"ablation no_candidates: no episode of this log (dataset "
                          f"{episodes[0].line['dataset']!r}) has candidate labels K, as on "
                          "MedQA; the ablation would remove nothing",
                          path=path, line=episodes[0].line_no)
    return ReplaySource(path, _sha256(path), tuple(episodes), n_errors, log.partial_bytes)
