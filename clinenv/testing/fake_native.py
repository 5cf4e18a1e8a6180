"""The clinician responder's native seats: measurement agent, native doctor, discussion.

Parts of :func:`clinenv.testing.fake_responders.clinician_responder` for the native
AgentClinic / MedAgentSim protocols and EGIP's native measurement access; like the rest
of the clinician they read only the request's messages. Their replies: docs/testing.md,
"Native seats of the clinician".
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable

from clinenv.agents.evidence_reading import (
    evidence_text,
    last_native_turn,
    named_diagnosis,
)
from clinenv.agents.medagentsim_options import CANDIDATES_ASK, PADDING
from clinenv.agents.prompts import (
    MEASUREMENT_RULE_NORMAL,
    MEASUREMENT_SYSTEM,
    MEASUREMENT_USER,
)
from clinenv.agents.scripted_doctor import EXAM_NAMES, HISTORY_QUESTIONS
from clinenv.agents.terminal_medagentsim import CONSENSUS_ASK
from clinenv.cases import Records
from clinenv.env.record_reader import NORMAL_READINGS, NOT_RECORDED, NativeRecordReader
from clinenv.protocol.measurement_view import MeasurementView

#: The native doctor's first utterance (to the patient).
OPENING_QUESTION = HISTORY_QUESTIONS[0]
#: The examinations the native doctor requests by name, in order, before its diagnosis.
NATIVE_EXAMS: tuple[str, ...] = EXAM_NAMES[:8]
#: A native doctor observation (:mod:`clinenv.protocol.native_render`) has this section.
LATEST_HEADING = "\n# Latest response\n"
#: MedAgentSim's decision observation (the transcript) has this section.
TRANSCRIPT_HEADING = "\n# Consultation transcript\n"
#: Heads the records in the measurement agent's system prompt.
_RECORDS_HEAD = MEASUREMENT_SYSTEM.split("{records}")[0].split("{missing_rule}")[1]
#: Heads the doctor's request in the measurement agent's user message.
_REQUEST_HEAD = MEASUREMENT_USER.split("{request}")[0].split("{history}")[1]
_PROPOSALS = re.compile(r"^Proposals by count: (.+?) \(\d+\)(?:,|$)", re.MULTILINE)
_WORD = re.compile(r"[^\W\d_]{4,}")
#: Where a free-text record splits into items: line breaks, bullets, numbered items.
_ITEM_BREAK = re.compile(r"\n|\s+[-•]\s+|\s+\d+\.\s+")
_GENERIC = frozenset({"test", "tests", "request", "results", "result"})


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)} - _GENERIC


def _osce_records(text: str) -> Records | None:
    """The records of an OSCE ``repr`` block, or ``None`` for free text."""
    try:
        data = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    tests = data.get("tests")
    exams = {k: v for k, v in data.items() if k != "tests"}
    try:
        return Records(physical_exam=exams, tests=tests if isinstance(tests, dict) else {})
    except ValueError:  # pydantic's ValidationError: an odd tree
        return None


def measurement_reply(system: str, user: str) -> str:
    """The measurement agent's reply to a request (docs/testing.md, "Native seats of the
    clinician").

    Args:
        system: the system prompt (:data:`~clinenv.agents.prompts.MEASUREMENT_SYSTEM`
            with its rule and records).
        user: the last user message (:data:`~clinenv.agents.prompts.MEASUREMENT_USER`).
    """
    normal = MEASUREMENT_RULE_NORMAL in system
    records_text = system.split(_RECORDS_HEAD, 1)[1] if _RECORDS_HEAD in system else ""
    request = user.rsplit(_REQUEST_HEAD, 1)[-1]
    records = _osce_records(records_text)
    if records is not None:
        view = MeasurementView(records_text, records, request, normal_readings=normal)
        return NativeRecordReader().measure(view)
    asked = _words(request)
    found = [item for item in (part.strip() for part in _ITEM_BREAK.split(records_text))
             if item and asked & _words(item)]
    if found:
        return "RESULTS: " + "; ".join(found)
    return NORMAL_READINGS if normal else NOT_RECORDED


def is_native_view(text: str) -> bool:
    """``text`` is a native acquisition observation (view or delta format)."""
    return LATEST_HEADING in "\n" + text and "# Your turn\nTurn " in text


def native_label(texts: Iterable[str]) -> str | None:
    """The diagnosis named in the evidence of native observations, or ``None``
    (docs/testing.md, "Native seats of the clinician"); ``texts`` are the user messages
    of the conversation, oldest first."""
    return named_diagnosis("\n".join(evidence_text(t) for t in texts))


def native_doctor_reply(user_texts: list[str], said: str) -> str:
    """The native doctor's next utterance (docs/testing.md, "Native seats of the clinician").

    Args:
        user_texts: the user messages of the conversation, oldest first (the last one is
            the current observation).
        said: everything the conversation holds (all messages joined), where earlier
            utterances are looked up (case-insensitively).
    """
    label = native_label(user_texts) or "Unknown"
    if last_native_turn(user_texts[-1]):
        return f"DIAGNOSIS READY: {label}"
    said = said.lower()
    if OPENING_QUESTION.lower() not in said:
        return OPENING_QUESTION
    for name in NATIVE_EXAMS:
        if f"request test: {name}".lower() not in said:
            return f"REQUEST TEST: {name}"
    return f"DIAGNOSIS READY: {label}"


def summary_label(text: str) -> str | None:
    """The first proposal of a discussion summary request's ``Proposals by count:`` line
    (``"none"`` reads as ``None``)."""
    found = _PROPOSALS.search(text)
    return found.group(1).strip() if found else None


#: The published consensus reply of the clinician when no option was picked: no marker.
NO_CONSENSUS = "The team could not agree on a final diagnosis for this patient."
#: Heads the opinions in the candidate call (:data:`CANDIDATES_ASK`).
_OPINIONS_HEAD = CANDIDATES_ASK.split("{opinions}")[0].split("{question}")[1]
#: Introduces the pick in the consensus call (:data:`CONSENSUS_ASK`).
_PICK_HEAD = CONSENSUS_ASK.split("{pick}")[0].split("{opinions}")[1]
_MARKED = re.compile(r"DIAGNOSIS READY:\s*(.+)")
_SHOWN = re.compile(r"^([A-D])\. (.+)$", re.MULTILINE)
_PADDED = re.compile("^" + re.escape(PADDING).replace(r"\{k\}", r"\d+") + "$")


def question_reply(text: str) -> str:
    """The structured question for a question request ``text``: a fixed sentence, plus
    "Findings are consistent with <label>." when :func:`native_label` finds one."""
    label = native_label([text])
    found = f" Findings are consistent with {label}." if label else ""
    return ("Provide the most likely final diagnosis for the following patient, who was "
            f"seen in the consultation above.{found} What is the final diagnosis for this "
            "patient?")


def candidates_reply(text: str) -> str:
    """The distinct diagnoses the opinions of a candidate request name, as JSON."""
    opinions = text.split(_OPINIONS_HEAD, 1)[-1]
    named = [m.strip() for m in _MARKED.findall(opinions)]
    return json.dumps([n for n in dict.fromkeys(named) if n and n != "Unknown"])


def choice_reply(text: str) -> str:
    """``Answer: [X]`` for the shown option the question names after "consistent with"
    (case-insensitively), else a reply without a letter."""
    named = named_diagnosis(text.split("\nA. ", 1)[0])
    for letter, option in _SHOWN.findall(text):
        if named and option.strip().lower() == named.lower():
            return f"The findings fit {option.strip()} best. Answer: [{letter}]"
    return "None of these options can be chosen from the findings given."


def is_consensus(text: str) -> bool:
    """``text`` is the user message of the published consensus call."""
    return text.startswith(CONSENSUS_ASK.split("{opinions}")[0])


def consensus_reply(text: str) -> str:
    """The published consensus reply: ``DIAGNOSIS READY: <pick>`` for a handed-over pick
    that is not padding, else :data:`NO_CONSENSUS`."""
    pick = text.split(_PICK_HEAD, 1)[1].split("\n", 1)[0].strip() if _PICK_HEAD in text else ""
    if pick and not _PADDED.match(pick):
        return f"After the discussion the team agrees.\nDIAGNOSIS READY: {pick}"
    return NO_CONSENSUS
