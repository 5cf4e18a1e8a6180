"""Role-specific views R (EGIP section 3.2, Eq. 2).

Each role gets only what its rules permit:

- doctor: x_t = R(s0, K, h_t, menu) — objective, candidates, the doctor-visible history
  and the result-blinded menu; never Y, never an unrequested record, never undisclosed P;
- patient: P (minus sentences that name Y) and the dialogue so far — never M, never Y;
- examiner: the validated request and the one matching stored record.

Views are plain frozen objects; the rendering of the doctor view to text lives in
:mod:`clinenv.protocol.render`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import JsonValue

#: Replaces a patient fact whose every sentence names the target.
WITHHELD_TEXT = "(not something I can describe)"


@dataclass(frozen=True, slots=True)
class PatientView:
    """What the patient simulator may see when answering one question.

    Attributes:
        facts: P as a tree ``{field: value}``; sentences naming the target are removed.
        dialogue: earlier ``(doctor question, patient reply)`` pairs, oldest first.
        question: the doctor's current question (free text).
        caregiver_voice: a caregiver answers for a patient too young to self-report.
    """

    facts: Mapping[str, JsonValue]
    dialogue: tuple[tuple[str, str], ...]
    question: str
    caregiver_voice: bool = False


@dataclass(frozen=True, slots=True)
class ExaminerView:
    """What the examiner sees: the validated request and the one matching record.

    Attributes:
        request: the request text as the doctor phrased it.
        exam_id: public id of the matched catalog entry, or ``None`` for a miss.
        name: readable name of the matched entry (or the request for a miss).
        record: the stored record subtree for the entry, ``None`` for a miss.
    """

    request: str
    exam_id: str | None
    name: str
    record: JsonValue


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _withhold(value: JsonValue, target: str) -> JsonValue:
    if isinstance(value, str):
        if target not in value.lower():
            return value
        kept = [s for s in _SENTENCE_END.split(value) if target not in s.lower()]
        return " ".join(kept) if kept else WITHHELD_TEXT
    if isinstance(value, list):
        return [_withhold(v, target) for v in value]
    if isinstance(value, dict):
        return {k: _withhold(v, target) for k, v in value.items()}
    return value


def withhold_target(facts: Mapping[str, JsonValue], target: str) -> dict[str, JsonValue]:
    """P for the patient view with every sentence that names the target removed.

    Matching is a case-insensitive substring test of the whole target text (targets of
    fewer than 4 characters are not matched, to avoid removing unrelated words). A leaf
    left empty becomes :data:`WITHHELD_TEXT`. The input is not modified.
    """
    needle = target.strip().lower()
    if len(needle) < 4:
        return {k: v for k, v in facts.items()}
    return {k: _withhold(v, needle) for k, v in facts.items()}
