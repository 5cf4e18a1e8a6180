"""Convert AgentClinic OSCE records (MedQA, MedQA_Ext, MIMIC-IV) into cases.

``{"OSCE_Examination": {...}}`` lines (AgentClinic data facts, section 5.3) mapped onto
EGIP's notation (section 3.1); the mapping is in docs/api/cases.md.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from clinenv.cases import Case, case_from_dict
from clinenv.datasets.flags import (
    caregiver_voice,
    iter_leaf_texts,
    no_recorded_tests,
    target_flags,
)
from clinenv.errors import CaseFormatError

ROOT = "OSCE_Examination"
REQUIRED_KEYS = ("Objective_for_Doctor", "Patient_Actor", "Correct_Diagnosis")
OPTIONAL_TREE_KEYS = ("Physical_Examination_Findings", "Test_Results")
KNOWN_KEYS = REQUIRED_KEYS + OPTIONAL_TREE_KEYS


def json_type(value: Any) -> str:
    """The JSON type name of a parsed value (``"string"``, ``"array"``...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def source_metadata(path: str | Path | None, line: int | None) -> dict[str, Any]:
    """``{"source_file": file name only, "source_line": line}`` (never an absolute path)."""
    return {"source_file": None if path is None else Path(path).name, "source_line": line}


def _demographics(patient: dict[str, Any], objective: str) -> str:
    for key, value in patient.items():
        if "demograph" in key.lower() and isinstance(value, str):
            return value
    first = next(iter_leaf_texts(patient), "")
    return f"{objective} {first}"


def case_from_osce(
    record: Any,
    *,
    dataset: str,
    index: int,
    path: str | Path | None = None,
    line: int | None = None,
) -> Case:
    """Build a :class:`~clinenv.cases.Case` from one OSCE record.

    Args:
        record: the parsed JSON line, ``{"OSCE_Examination": {...}}``; not modified.
        dataset: dataset name for ``Case.dataset`` and the case id.
        index: 1-based position of the record in its file; the id is
            ``f"{dataset}-{index:04d}"``.
        path: the source file (only its name goes into ``metadata``).
        line: the 1-based line number in the file.

    Returns:
        The case, with per-record flags set (``near_duplicate_of`` is set later, by the
        loader, across the whole file).

    Raises:
        CaseFormatError: not an object, a required key missing, or a value of the wrong
            type; ``field`` is the dotted key, e.g. ``"OSCE_Examination.Test_Results"``.
    """

    def fail(reason: str, key: str | None = None) -> CaseFormatError:
        return CaseFormatError(reason, path=path, line=line,
                               field=ROOT if key is None else f"{ROOT}.{key}")

    if not isinstance(record, dict):
        raise CaseFormatError(f"expected a JSON object, got {json_type(record)}",
                              path=path, line=line)
    if ROOT not in record:
        raise fail("missing required key")
    exam = record[ROOT]
    if not isinstance(exam, dict):
        raise fail(f"expected an object, got {json_type(exam)}")
    for key in REQUIRED_KEYS:
        if key not in exam:
            raise fail("missing required key", key)

    objective = exam["Objective_for_Doctor"]
    if not isinstance(objective, str):
        raise fail(f"expected a string, got {json_type(objective)}", "Objective_for_Doctor")
    raw_patient = exam["Patient_Actor"]
    if isinstance(raw_patient, str):
        patient: dict[str, Any] = {"Patient_Actor": raw_patient}
    elif isinstance(raw_patient, dict):
        patient = copy.deepcopy(raw_patient)
    else:
        raise fail(f"expected an object or a string, got {json_type(raw_patient)}",
                   "Patient_Actor")
    diagnosis = exam["Correct_Diagnosis"]
    if not isinstance(diagnosis, str):
        raise fail(f"expected a string, got {json_type(diagnosis)}", "Correct_Diagnosis")
    if not diagnosis.strip():
        raise fail("must be a non-empty string", "Correct_Diagnosis")

    trees: dict[str, dict[str, Any]] = {}
    missing: list[str] = []
    for key in OPTIONAL_TREE_KEYS:
        value = exam.get(key)
        if value is None:
            missing.append(key)
            value = {}
        elif not isinstance(value, dict):
            raise fail(f"expected an object, got {json_type(value)}", key)
        trees[key] = copy.deepcopy(value)

    physical_exam, tests = trees["Physical_Examination_Findings"], trees["Test_Results"]
    metadata = source_metadata(path, line)
    if missing:
        metadata["missing_keys"] = missing
    extra = {k: copy.deepcopy(v) for k, v in exam.items() if k not in KNOWN_KEYS}
    if extra:
        metadata["extra"] = extra
    extra_top = {k: copy.deepcopy(v) for k, v in record.items() if k != ROOT}
    if extra_top:
        metadata["extra_top_level"] = extra_top

    data = {
        "case_id": f"{dataset}-{index:04d}",
        "dataset": dataset,
        "objective": objective,
        "candidates": None,
        "patient": patient,
        "records": {"physical_exam": physical_exam, "tests": tests},
        "target": {"text": diagnosis, "option_index": None},
        "flags": {
            **target_flags(diagnosis, physical_exam, tests, patient),
            "caregiver_voice": caregiver_voice(_demographics(patient, objective)),
            "no_recorded_tests": no_recorded_tests(tests),
        },
        "metadata": metadata,
    }
    return case_from_dict(data, path=path, line=line)
