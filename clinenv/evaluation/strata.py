"""Strata that ``--by`` derives from run-log lines: case flags, and the episode's exam noise.

A line's ``case_strata`` holds the dataset's strata; these add one key per line
(docs/evaluation.md, "Strata").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from clinenv.cases import CaseFlags
from clinenv.evaluation.runs import Run, RunsError

__all__ = ["EPISODE_STRATA", "EXAM_NOISE", "exam_noise_stratum", "with_derived_strata"]

#: ``--by exam_noise``: ``"noised"`` when a result of the episode was made unavailable or
#: delayed by ``EnvConfig.exam_noise``, else ``"clean"``; runs without noise are in none.
EXAM_NOISE = "exam_noise"
#: Strata of episodes, not cases: a case's repetitions may fall in different ones.
EPISODE_STRATA = frozenset({EXAM_NOISE})


def _ran_with_noise(record: Mapping[str, Any]) -> bool:
    kwargs = ((record.get("env_spec") or {}).get("kwargs") or {})
    return any(float(p) > 0 for p in (kwargs.get("exam_noise") or {}).values())


def exam_noise_stratum(record: Mapping[str, Any]) -> str | None:
    """``"noised"`` or ``"clean"`` for one run-log line (:data:`EXAM_NOISE`): noised when
    an event has ``noise: true`` or a result was still delayed when the episode ended
    (an interface note ``result_delayed`` whose result never came); ``None`` (no stratum)
    for a line whose run had no exam noise."""
    if not _ran_with_noise(record):
        return None
    noised = any(event.get("noise") or event.get("kind") == "result_delayed"
                 for event in record.get("events") or ())
    return "noised" if noised else "clean"


def with_derived_strata(runs: Sequence[Run], by: str | None) -> list[Run]:
    """The runs with ``case_strata[by]`` set on every line when ``by`` is derived here:
    a case flag (a :class:`~clinenv.cases.CaseFlags` field no line's ``case_strata``
    holds) gives ``"True"``/``"False"`` (a line without the flag, from an older log, is in
    no stratum); :data:`EXAM_NOISE` gives ``"noised"``/``"clean"``. Other ``by`` values
    (``None``, a dataset stratum) leave the runs as they are.

    Raises:
        RunsError: no line records the flag (logs written before it existed, or
            ``target_in_bias`` without a bias), or, for :data:`EXAM_NOISE`, no line ran
            with exam noise.
    """
    records = [r for run in runs for r in run.records]
    logs = ", ".join(p for run in runs for p in run.paths)
    where = runs[0].paths[0] if runs else "<arguments>"
    if by == EXAM_NOISE:
        if not any(_ran_with_noise(r) for r in records):
            raise RunsError(f"--by {EXAM_NOISE}: no line of {logs} ran with exam noise "
                            "(clinenv run --exam-noise), so no episode has an exam_noise stratum",
                            path=where)
        return _set(runs, by, exam_noise_stratum)
    if by not in CaseFlags.model_fields or any(by in (r.get("case_strata") or {})
                                               for r in records):
        return list(runs)
    if not any(by in (r.get("case_flags") or {}) for r in records):
        if by == "target_in_bias":  # recorded by runs with a bias only
            raise RunsError(f"--by {by}: no line of {logs} records case_flags.{by}, which "
                            "only runs with --patient-bias or --doctor-bias record",
                            path=where)
        raise RunsError(f"--by {by}: no line of {logs} records case_flags.{by} (logs "
                        "written before that flag existed); run the cases again to "
                        "stratify by it", path=where)

    def flag(record: Mapping[str, Any]) -> str | None:
        value = (record.get("case_flags") or {}).get(by)
        return None if value is None else str(value)

    return _set(runs, by, flag)


def _set(runs: Sequence[Run], key: str, value_of) -> list[Run]:
    out = []
    for run in runs:
        records = []
        for rec in run.records:
            strata = dict(rec.get("case_strata") or {})
            value = value_of(rec)
            if value is not None:
                strata[key] = value
            records.append({**rec, "case_strata": strata})
        out.append(replace(run, records=tuple(records)))
    return out
