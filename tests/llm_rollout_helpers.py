"""A deterministic clinic behind a real local server, for rollout, environment and CLI tests.

:func:`clinic_responder` answers every LLM agent of clinenv from the request alone (no
hidden state, so concurrent and sequential runs get the same replies):

- the doctor in acquisition: the fake server's :func:`clinician_responder` (it requests
  every menu examination in order, then asks a fixed question);
- the doctor's terminal calls (Direct, Vote's samples): ``DIAGNOSIS READY: X`` where X is
  what an acquired report calls "consistent with X" (else the first candidate label,
  else "Undetermined");
- Full's council (``DIAGNOSIS: X``), ledger (a sentence) and consensus (a JSON object
  citing ``O1``);
- the patient: :data:`PATIENT_REPLY`; the judge: ``judge_reply``.

The fixtures ``server`` (that clinic on a started server) and ``model`` (an OpenAI client
of it) are defined here as :func:`clinic_server` and :func:`clinic_model`; importing them
into a test module registers them there under those names.

Use ``from llm_rollout_helpers import ...`` (pytest puts ``tests/`` on ``sys.path``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator

import pytest

from clinenv.agents.prompts import (
    CONSENSUS_SYSTEM,
    COUNCIL_SYSTEM,
    JUDGE_SYSTEM,
    LEDGER_SYSTEM,
    PATIENT_SYSTEM,
)
from clinenv.llm.openai_backend import OpenAIChatModel
from clinenv.testing.fake_server import (
    DECISION_MARKER,
    FakeChatServer,
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
    """The diagnosis a reader of ``text`` would name (see the module docstring)."""
    found = _CONSISTENT.search(text)
    if found:
        return found.group(1).strip()
    option = _CANDIDATE.search(text)
    return option.group(1).strip() if option else "Undetermined"


def clinic_responder(judge_reply: str = "Yes") -> Callable[[dict, int], str]:
    """The responder of a :class:`~clinenv.testing.fake_server.FakeChatServer` (see above)."""
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


@pytest.fixture(name="server")
def clinic_server() -> Iterator[FakeChatServer]:
    """Fixture ``server``: a started :class:`FakeChatServer` on 127.0.0.1 answering with
    :func:`clinic_responder` (judge reply ``"Yes"``, no delay); stopped after the test."""
    with FakeChatServer(clinic_responder()) as srv:
        yield srv


@pytest.fixture(name="model")
def clinic_model(server: FakeChatServer) -> Iterator[OpenAIChatModel]:
    """Fixture ``model``: an :class:`OpenAIChatModel` named ``"fake-model"`` on ``server``
    without retries (an injected fault reaches the caller at once); closed after."""
    chat = OpenAIChatModel("fake-model", base_url=server.base_url, max_retries=0)
    yield chat
    chat.close()
