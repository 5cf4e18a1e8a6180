"""A deterministic clinic behind a real local server, for rollout, environment and CLI tests.

:func:`clinic_responder` answers every LLM agent of clinenv from the request alone; what
each gets: docs/testing.md, "The clinic". The tests' fixtures ``server`` and ``model``
are in tests/conftest.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from clinenv.agents.prompts import (
    CONSENSUS_SYSTEM,
    COUNCIL_SYSTEM,
    JUDGE_SYSTEM,
    LEDGER_SYSTEM,
    PATIENT_SYSTEM,
)
from clinenv.testing.fake_server import (
    DECISION_MARKER,
    clinician_responder,
    last_user_text,
)

#: Every reply of the LLM patient.
PATIENT_REPLY = "It started two days ago and it keeps getting worse."
#: The part of the patient system prompt before its first field.
PATIENT_PREFIX = PATIENT_SYSTEM.split("{")[0]

_CONSISTENT = re.compile(r"consistent with (?:an? )?([^.;\n]+)", re.IGNORECASE)
_CANDIDATE = re.compile(r"^\s*A\.\s+(.+)$", re.MULTILINE)


def role_of(body: dict) -> str:
    """Which clinenv agent sent a request: ``"patient"``, ``"judge"``, ``"council"``,
    ``"ledger"``, ``"consensus"`` or ``"doctor"``, by its system prompt."""
    messages = body.get("messages") or []
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    if system.startswith(PATIENT_PREFIX):
        return "patient"
    for role, prompt in (("judge", JUDGE_SYSTEM), ("council", COUNCIL_SYSTEM),
                         ("ledger", LEDGER_SYSTEM), ("consensus", CONSENSUS_SYSTEM)):
        if system == prompt:
            return role
    return "doctor"


def evidence_diagnosis(text: str) -> str:
    """What an acquired report calls "consistent with X", else the first candidate label
    (``A. ...``), else ``"Undetermined"``."""
    found = _CONSISTENT.search(text)
    if found:
        return found.group(1).strip()
    option = _CANDIDATE.search(text)
    return option.group(1).strip() if option else "Undetermined"


def clinic_responder(judge_reply: str = "Yes") -> Callable[[dict, int], str]:
    """The clinic's responder, for a :class:`~clinenv.testing.fake_server.FakeChatServer`
    (docs/testing.md, "The clinic"); the judge answers ``judge_reply``."""
    def reply(body: dict, index: int) -> str:
        role = role_of(body)
        text = last_user_text(body)
        if role == "patient":
            return PATIENT_REPLY
        if role == "judge":
            return judge_reply
        if role == "council":
            return f"DIAGNOSIS: {evidence_diagnosis(text)}\nBASIS: O1"
        if role == "ledger":
            return "The acquired reports support the proposal (O1)."
        if role == "consensus":
            return json.dumps({"diagnosis": evidence_diagnosis(text), "support": ["O1"],
                               "conflict": [], "insufficient": False})
        if DECISION_MARKER in text:
            return f"DIAGNOSIS READY: {evidence_diagnosis(text)}"
        return clinician_responder(body, index)

    return reply


def without_volatile(lines: list[dict]) -> list[dict]:
    """Log lines without their non-deterministic fields (``timing``, ``llm``)."""
    return [{k: v for k, v in line.items() if k not in ("timing", "llm")} for line in lines]
