"""A scripted policy for the patient seat of the PettingZoo game (``patient_0``).

It answers with the fact line of its view sharing the most content words with the
question (else :data:`NOT_SURE`); a baseline, not a realistic patient.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from clinenv.protocol.seat_views import FACTS_HEADER, QUESTION_HEADER

#: Reply when no fact shares a word with the question.
NOT_SURE = "I'm not sure."
#: Letters of a word that are compared ("smoker" and "smoke" meet).
PREFIX = 5
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("""a an the and or of to in on at for with you your do does did is are
was were have has had any how what when where which who why can could would tell me
about there been this that it ever take""".split())
_OPENING = re.compile(r"brings you|what seems|how can i help|tell me about your",
                      re.IGNORECASE)
_PRIMARY = re.compile(r"primary|complaint", re.IGNORECASE)


def _section(text: str, header: str) -> str:
    start = text.find(header)
    if start < 0:
        return ""
    start += len(header)
    end = text.find("\n# ", start)
    return text[start:end if end >= 0 else None].strip()


def _words(text: str) -> set[str]:
    return {w[:PREFIX] for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 2}


class ScriptedPatient:
    """Answers the pending question with the best-overlapping fact line of P.

    ``act(observation, info) -> str``, like the doctor policies; stateless.
    """

    name = "scripted-patient"

    def reset(self, *, seed: int | None = None) -> None:
        """Nothing to reset (deterministic and stateless)."""

    def act(self, observation: Mapping[str, Any], info: Mapping[str, Any]) -> str:
        """The reply to the question in ``observation["text"]``."""
        text = observation["text"]
        question = _section(text, QUESTION_HEADER)
        facts = []  # (label, value)
        for line in _section(text, FACTS_HEADER).splitlines():
            label, _, value = line.strip().partition(":")
            if value.strip():
                facts.append((label, value.strip()))
        if not facts:
            return NOT_SURE
        if _OPENING.search(question):
            primary = [value for label, value in facts if _PRIMARY.search(label)]
            return (primary or [facts[0][1]])[0]
        asked = _words(question)
        overlap = [len(asked & _words(f"{label} {value}")) for label, value in facts]
        best = max(range(len(facts)), key=lambda i: (overlap[i], -i))
        return facts[best][1] if overlap[best] else NOT_SURE
