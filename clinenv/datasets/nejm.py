"""Convert AgentClinic NEJM records (NEJM, NEJM_Ext) into cases.

Keys mapped onto EGIP's notation (section 3.1; AgentClinic data facts 5.6-5.7); the
mapping and the ``disclosure`` settings are in docs/api/cases.md.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, Literal

from clinenv.cases import Case, case_from_dict
from clinenv.datasets.flags import (
    caregiver_voice,
    no_recorded_tests,
    patient_facts_contain_findings,
    target_flags,
)
from clinenv.datasets.nejm_split import split_test_findings
from clinenv.datasets.osce import json_type, source_metadata
from clinenv.errors import CaseFormatError

Disclosure = Literal["question", "presentation", "vignette"]
DISCLOSURES: tuple[str, ...] = ("question", "presentation", "vignette")

#: Question used when a vignette has no question sentence (AgentClinic's NEJM prompt).
DEFAULT_QUESTION = "What is the most likely diagnosis?"

KNOWN_KEYS = ("question", "patient_info", "physical_exams", "answers", "type", "image_url")

_ABBREVIATIONS = frozenset(
    "dr mr mrs ms vs e.g i.e etc st no fig approx mt sp spp al ca".split()
)
_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]\u201d\u2019]*\s+(?=[\"'(\[\u201c]?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """Split a vignette into sentences (abbreviations such as "Dr." and "C." kept)."""
    sentences, start = [], 0
    for m in _BOUNDARY.finditer(text):
        before = text[start:m.start()].rstrip("\"')]\u201d\u2019")
        last_word = before.split()[-1] if before.split() else ""
        token = last_word.rstrip(".!?").lower()
        if before.endswith(".") and (token in _ABBREVIATIONS or re.fullmatch(r"[a-z]", token)):
            continue
        sentences.append(text[start:m.start()].strip())
        start = m.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return [s for s in sentences if s]


def final_question(vignette: str) -> str | None:
    """The last sentence of the vignette that ends with ``?``, or ``None``."""
    for sentence in reversed(split_sentences(vignette)):
        if sentence.rstrip("\"')\u201d").endswith("?"):
            return sentence
    return None


def asks_for_diagnosis(question: str) -> bool:
    """Whether a question sentence asks for a diagnosis ("...most likely diagnosis?")."""
    return re.search(r"\bdiagnos", question, re.IGNORECASE) is not None


def objective_for(vignette: str, disclosure: Disclosure = "presentation") -> str:
    """s0 for a NEJM vignette under a disclosure setting.

    Args:
        vignette: the record's ``question`` text.
        disclosure: ``"question"``, ``"presentation"`` or ``"vignette"``.

    Raises:
        ValueError: unknown disclosure setting.
    """
    if disclosure not in DISCLOSURES:
        raise ValueError(f"disclosure must be one of {DISCLOSURES}, got {disclosure!r}")
    text = vignette.strip()
    if disclosure == "vignette":
        return text
    question = final_question(text) or DEFAULT_QUESTION
    if disclosure == "question":
        return question
    sentences = split_sentences(text)
    first = sentences[0] if sentences else ""
    if not first or first == question:
        return question
    return f"{first} {question}"


def _answers(raw: Any, fail) -> tuple[tuple[str, ...], int]:
    if not isinstance(raw, list) or not raw:
        raise fail(f"expected a non-empty array, got {json_type(raw)}", "answers")
    texts, correct = [], []
    for i, option in enumerate(raw):
        if not isinstance(option, dict):
            raise fail(f"expected an object, got {json_type(option)}", f"answers[{i}]")
        text = option.get("text")
        if not isinstance(text, str) or not text.strip():
            raise fail(f"expected a non-empty string, got {json_type(text)}",
                       f"answers[{i}].text")
        flag = option.get("correct")
        if not isinstance(flag, bool):
            raise fail(f"expected a boolean, got {json_type(flag)}", f"answers[{i}].correct")
        texts.append(text)
        if flag:
            correct.append(i)
    if len(correct) != 1:
        raise fail(f"expected exactly one correct answer, found {len(correct)}", "answers")
    return tuple(texts), correct[0]


def case_from_nejm(
    record: Any,
    *,
    dataset: str,
    index: int,
    disclosure: Disclosure = "presentation",
    path: str | Path | None = None,
    line: int | None = None,
) -> Case:
    """Build a :class:`~clinenv.cases.Case` from one NEJM record.

    Args:
        record: the parsed JSON line; not modified.
        dataset: dataset name for ``Case.dataset`` and the case id.
        index: 1-based position in the file; the id is ``f"{dataset}-{index:04d}"``.
        disclosure: what s0 discloses: ``"question"``, ``"presentation"`` or ``"vignette"``.
        path: the source file (only its name goes into ``metadata``).
        line: the 1-based line number.

    Returns:
        The case with per-record flags (``near_duplicate_of`` is set by the loader).

    Raises:
        CaseFormatError: not an object, a required key (``question``, ``patient_info``,
            ``answers``) missing, a wrong type, or not exactly one correct answer
            (``field="answers"``).
        ValueError: unknown disclosure setting.
    """

    def fail(reason: str, key: str | None = None) -> CaseFormatError:
        return CaseFormatError(reason, path=path, line=line, field=key)

    if not isinstance(record, dict):
        raise fail(f"expected a JSON object, got {json_type(record)}")
    for key in ("question", "patient_info", "answers"):
        if key not in record:
            raise fail("missing required key", key)
    vignette = record["question"]
    if not isinstance(vignette, str) or not vignette.strip():
        raise fail(f"expected a non-empty string, got {json_type(vignette)}", "question")
    patient_info = record["patient_info"]
    if not isinstance(patient_info, str):
        raise fail(f"expected a string, got {json_type(patient_info)}", "patient_info")
    candidates, option_index = _answers(record["answers"], fail)

    metadata = source_metadata(path, line)
    exams = record.get("physical_exams")
    if exams is None:
        metadata["missing_keys"] = ["physical_exams"]
        exams = ""
    elif not isinstance(exams, str):
        raise fail(f"expected a string, got {json_type(exams)}", "physical_exams")
    tests = split_test_findings(exams)

    if "type" in record:
        labels = record["type"]
        if isinstance(labels, str):
            labels = [labels]
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            raise fail(f"expected an array of strings, got {json_type(labels)}", "type")
        metadata["question_type"] = list(labels)
    if "image_url" in record:
        image_url = record["image_url"]
        if image_url is not None and not isinstance(image_url, str):
            raise fail(f"expected a string, got {json_type(image_url)}", "image_url")
        metadata["image_url"] = image_url
    question = final_question(vignette)
    metadata["vignette"] = vignette
    metadata["final_question"] = question
    metadata["physical_exams_text"] = exams
    extra = {k: copy.deepcopy(v) for k, v in record.items() if k not in KNOWN_KEYS}
    if extra:
        metadata["extra"] = extra

    target = candidates[option_index]
    patient = {"Patient_Info": patient_info}
    sentences = split_sentences(vignette)
    data = {
        "case_id": f"{dataset}-{index:04d}",
        "dataset": dataset,
        "objective": objective_for(vignette, disclosure),
        "candidates": list(candidates),
        "patient": patient,
        "records": {"physical_exam": {}, "tests": tests},
        "target": {"text": target, "option_index": option_index},
        "flags": {
            **target_flags(target, {}, tests, patient),
            "patient_facts_contain_findings": patient_facts_contain_findings(patient_info),
            "caregiver_voice": caregiver_voice(sentences[0] if sentences else vignette),
            "non_diagnostic_target": question is not None and not asks_for_diagnosis(question),
            "no_recorded_tests": no_recorded_tests(tests),
        },
        "metadata": metadata,
    }
    return case_from_dict(data, path=path, line=line)
