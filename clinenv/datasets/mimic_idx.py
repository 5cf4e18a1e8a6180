"""MIMIC-IDx-style cases supplied by the user (``clinenv.mimic_idx/1`` JSON Lines).

CDEG's in-domain benchmark ("Experimental Setup", Table 1), credentialed and never
bundled; recognised by the ``hadm_id`` key, schema in docs/cdeg.md.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from clinenv.cases import Case, case_from_dict
from clinenv.datasets.flags import (
    caregiver_voice,
    no_recorded_tests,
    target_flags,
)
from clinenv.datasets.icd_codes import normalize_code
from clinenv.datasets.osce import json_type, source_metadata
from clinenv.errors import CaseFormatError

__all__ = ["FORMAT", "KNOWN_KEYS", "TEST_GROUPS", "case_from_mimic_idx", "is_mimic_idx"]

#: Name of the schema (docs/cdeg.md).
FORMAT = "clinenv.mimic_idx/1"
REQUIRED_KEYS = ("hadm_id", "subject_id", "initial_presentation", "patient", "diagnosis")
#: Optional record keys -> the test group of M they fill.
TEST_GROUPS = {"clinical_history": "Clinical_History", "labs": "Laboratory",
               "microbiology": "Microbiology", "imaging": "Imaging"}
KNOWN_KEYS = (*REQUIRED_KEYS, "icd_code", "icd_version", "physical_exam", *TEST_GROUPS)


def is_mimic_idx(record: Any) -> bool:
    """Whether a parsed JSON line looks like a ``clinenv.mimic_idx/1`` record."""
    return isinstance(record, dict) and "hadm_id" in record


def _identifier(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    text = str(value).strip()
    return text or None


def case_from_mimic_idx(record: Any, *, dataset: str, path: str | Path | None = None,
                        line: int | None = None) -> Case:
    """Build a :class:`~clinenv.cases.Case` from one ``clinenv.mimic_idx/1`` record.

    Args:
        record: the parsed JSON line (not modified).
        dataset: ``Case.dataset`` and the case-id prefix.
        path: the source file (only its name goes into ``metadata``).
        line: the 1-based line number.

    Raises:
        CaseFormatError: not an object, a required key missing, or a value of the wrong
            type; ``field`` names the key (e.g. ``"labs"``).
    """
    def fail(reason: str, key: str | None = None) -> CaseFormatError:
        return CaseFormatError(reason, path=path, line=line, field=key)

    if not isinstance(record, dict):
        raise fail(f"expected a JSON object, got {json_type(record)}")
    for key in REQUIRED_KEYS:
        if key not in record:
            raise fail("missing required key", key)
    ids = {}
    for key in ("hadm_id", "subject_id"):
        ids[key] = _identifier(record[key])
        if ids[key] is None:
            raise fail(f"expected a non-empty string or an integer, got "
                       f"{json_type(record[key])}", key)
    texts = {}
    for key in ("initial_presentation", "diagnosis"):
        value = record[key]
        if not isinstance(value, str):
            raise fail(f"expected a string, got {json_type(value)}", key)
        if not value.strip():
            raise fail("must be a non-empty string", key)
        texts[key] = value
    raw_patient = record["patient"]
    if isinstance(raw_patient, str):
        patient: dict[str, Any] = {"History": raw_patient}
    elif isinstance(raw_patient, dict):
        patient = copy.deepcopy(raw_patient)
    else:
        raise fail(f"expected an object or a string, got {json_type(raw_patient)}", "patient")
    trees: dict[str, dict[str, Any]] = {}
    for key in ("physical_exam", *TEST_GROUPS):
        value = record.get(key)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise fail(f"expected an object, got {json_type(value)}", key)
        if value:
            trees[key] = copy.deepcopy(value)
    metadata: dict[str, Any] = {**source_metadata(path, line), "format": FORMAT,
                                "hadm_id": ids["hadm_id"], "patient_id": ids["subject_id"]}
    if record.get("icd_code") is not None:
        code = record["icd_code"]
        if not isinstance(code, str):  # 486 and 038.9 as numbers lose their spelling
            raise fail(f"expected a string, got {json_type(code)}", "icd_code")
        canonical = normalize_code(code)
        if canonical is None:
            raise fail(f"{code!r} is not an ICD code (3-7 letters and digits, dots "
                       "allowed)", "icd_code")
        metadata["icd_code"] = canonical
    if record.get("icd_version") is not None:
        if record["icd_version"] not in (9, 10) or isinstance(record["icd_version"], bool):
            raise fail(f"expected 9 or 10, got {record['icd_version']!r}", "icd_version")
        metadata["icd_version"] = record["icd_version"]
    extra = {k: copy.deepcopy(v) for k, v in record.items() if k not in KNOWN_KEYS}
    if extra:
        metadata["extra"] = extra
    physical_exam = trees.pop("physical_exam", {})
    tests = {TEST_GROUPS[k]: v for k, v in trees.items()}
    diagnosis = texts["diagnosis"]
    data = {
        "case_id": f"{dataset}-{ids['hadm_id']}",
        "dataset": dataset,
        "objective": texts["initial_presentation"],
        "candidates": None,
        "patient": patient,
        "records": {"physical_exam": physical_exam, "tests": tests},
        "target": {"text": diagnosis, "option_index": None},
        "flags": {
            **target_flags(diagnosis, physical_exam, tests, patient),
            "caregiver_voice": caregiver_voice(texts["initial_presentation"]),
            "no_recorded_tests": no_recorded_tests(tests),
        },
        "metadata": metadata,
    }
    return case_from_dict(data, path=path, line=line)
