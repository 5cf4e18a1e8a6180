"""Built-in responders of the fake chat server (:mod:`clinenv.testing.fake_server`).

A responder is ``responder(body, index) -> str | dict``: called once per returned choice
with the request's JSON body and the choice index. A ``str`` is the message content; a
``dict`` is the whole ``message`` object and may carry ``"finish_reason"`` (default
``"stop"``). Built-ins by name (:data:`RESPONDERS`, also scripts of the ``"scripted"``
backend): ``"ok"``, ``"echo"``, ``"yes"`` and ``"clinician"`` (:func:`clinician_responder`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from clinenv.agents.medagentsim_options import CANDIDATES_ASK, CHOICE_SYSTEM, REASONER_SYSTEM
from clinenv.agents.prompts import (
    AGENTCLINIC_DOCTOR_SYSTEM,
    CONSENSUS_SYSTEM,
    COUNCIL_SYSTEM,
    DIRECT_SYSTEM,
    EGIP_DOCTOR_SYSTEM,
    EVIDENCE_HEADING,
    JUDGE_SYSTEM,
    JUDGE_USER,
    LEDGER_SYSTEM,
    MEASUREMENT_SYSTEM,
    PATIENT_OPENING,
    PATIENT_SYSTEM,
    PROPOSALS_HEADING,
)
from clinenv.agents.terminal_discussion import TEAM_SYSTEM
from clinenv.agents.terminal_full import admissible_ids
from clinenv.llm.scripted import register_script
from clinenv.protocol.evidence import CANDIDATES_HEADING
from clinenv.protocol.render import ACTION_FORMAT_NO_MENU
from clinenv.testing.fake_native import (
    NATIVE_EXAMS,
    TRANSCRIPT_HEADING,
    candidates_reply,
    choice_reply,
    consensus_reply,
    is_consensus,
    is_native_view,
    measurement_reply,
    native_doctor_reply,
    native_label,
    question_reply,
    summary_label,
)

#: ``responder(body, index) -> str | dict`` (docs/testing.md, "Responders").
Responder = Callable[[dict, int], "str | dict"]

#: Part of the evidence interface's terminal instructions (``TERMINAL_INSTRUCTIONS`` in
#: :mod:`clinenv.protocol.evidence`): its presence marks the decision phase.
DECISION_MARKER = "DIAGNOSIS READY: <"
#: Heading of the result-blinded menu in the doctor view (:mod:`clinenv.protocol.render`).
MENU_HEADING = "# Available examinations"
#: The clinician's question once every listed examination has been requested.
FALLBACK_QUESTION = "Any other symptoms?"

_REQUESTED = re.compile(r"REQUEST TEST:\s*(\S+)", re.IGNORECASE)
_OPTION_PREFIX = re.compile(r"^[A-Z]{1,2}\.\s+")
_MEASUREMENT_HEAD = re.compile(r"^\[O\d+\] Measurement .*:$")
_NUMBERED = re.compile(r"^\d+\.\s+")
_WORD = re.compile(r"[^\W\d_]{4,}")
_TRIM = " \t.,;:!?\"'()[]*_`"
_FACTS_MARKER = "\nFacts:\n"
#: The patient's reply when the system prompt lists no facts.
NOT_SURE = "I'm not sure."


def _prefix(template: str) -> str:
    """A prompt template's text before its first ``{field}``."""
    return template.split("{", 1)[0]


#: (role, system prompt prefix) in matching order; no prefix starts another.
_ROLE_PREFIXES = (
    ("patient", _prefix(PATIENT_SYSTEM)), ("judge", JUDGE_SYSTEM),
    ("direct", DIRECT_SYSTEM), ("council", COUNCIL_SYSTEM), ("ledger", LEDGER_SYSTEM),
    ("consensus", CONSENSUS_SYSTEM), ("doctor", EGIP_DOCTOR_SYSTEM),
    ("doctor", _prefix(AGENTCLINIC_DOCTOR_SYSTEM)),
    ("measurement", _prefix(MEASUREMENT_SYSTEM)), ("discussion", TEAM_SYSTEM),
    ("reasoner", REASONER_SYSTEM), ("choice", CHOICE_SYSTEM),
)
#: The diagnosis marker inside a native moderator's "given diagnosis" (the whole final
#: utterance).
_MARKER = "DIAGNOSIS READY:"
#: The judge's question (:data:`~clinenv.agents.prompts.JUDGE_USER`) with its fields.
_JUDGE_QUESTION = re.compile(
    re.escape(JUDGE_USER.split("{target}")[0]) + r"(?P<target>.*?)"
    + re.escape(JUDGE_USER.split("{target}")[1].split("{answer}")[0]) + r"(?P<answer>.*?)"
    + re.escape(JUDGE_USER.split("{answer}")[1]), re.DOTALL)


def content_text(content: Any) -> str:
    """Message content as text (a string, or the text parts of a content-part list)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def last_user_text(body: dict) -> str:
    """The content of the last ``user`` message of a request body (``""`` if none)."""
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return content_text(message.get("content"))
    return ""


def ok_responder(body: dict, index: int) -> str:
    """Always ``"OK"`` (the default responder)."""
    return "OK"


def echo_responder(body: dict, index: int) -> str:
    """The last user message, unchanged."""
    return last_user_text(body)


def yes_responder(body: dict, index: int) -> str:
    """A judge that always answers ``"Yes"``."""
    return "Yes"


def _section(lines: Sequence[str], heading: str) -> list[str]:
    """The non-empty lines under the first line starting with ``heading``, up to the next
    blank line or ``#`` heading."""
    for start, line in enumerate(lines):
        if line.startswith(heading):
            body = []
            for item in lines[start + 1:]:
                if not item.strip() or item.startswith("#"):
                    break
                body.append(item.strip())
            return body
    return []


def _evidence_label(text: str) -> str | None:
    """The evidence label of e_T (:func:`clinician_responder`), or ``None``."""
    lines = text.splitlines()
    candidates = _section(lines, CANDIDATES_HEADING)
    if candidates:
        return _OPTION_PREFIX.sub("", candidates[0])
    finding = None
    for i, line in enumerate(lines[:-1]):
        if _MEASUREMENT_HEAD.match(line) and lines[i + 1].startswith(" "):
            finding = lines[i + 1].strip()
    if finding is None and TRANSCRIPT_HEADING in text:  # a native decision input
        return native_label([text])
    return finding


def _decision(text: str) -> str:
    return _evidence_label(text) or "Unknown"


def role_of(body: dict) -> str:
    """The clinenv seat a request comes from, by its system prompt (the first message):
    ``"patient"``, ``"judge"``, ``"direct"``, ``"council"``, ``"ledger"``, ``"consensus"``,
    ``"measurement"``, ``"discussion"``, ``"reasoner"`` and ``"choice"`` (MedAgentSim's
    option step) or ``"doctor"`` (the EGIP or AgentClinic doctor
    prompt, any other system prompt, or none). A prompt template matches on its text
    before the first ``{field}``."""
    messages = body.get("messages") or []
    first = messages[0] if messages and isinstance(messages[0], dict) else {}
    system = content_text(first.get("content")) if first.get("role") == "system" else ""
    for role, prefix in _ROLE_PREFIXES:
        if system.startswith(prefix):
            return role
    return "doctor"


def _between(text: str, start: str, end: str | None) -> str:
    """The part of ``text`` after the line ``start`` and before the line ``end`` (all of
    ``text`` when ``start`` is missing; up to the end when ``end`` is)."""
    head = text.find(start + "\n")
    if head < 0:
        return text
    body = text[head + len(start) + 1:]
    if end is not None:
        stop = body.find("\n" + end)
        body = body[:stop] if stop >= 0 else body
    return body


def _proposals(text: str) -> list[str]:
    """The numbered council proposals of a Ledger or Consensus request."""
    return [_NUMBERED.sub("", line) for line in _section(text.splitlines(), PROPOSALS_HEADING)
            if _NUMBERED.match(line)]


def _observation_ids(evidence: str) -> list[str]:
    """Admissible ids of e_T without ``S0``; ``["S0"]`` when there is no other."""
    return [i for i in admissible_ids(evidence) if i != "S0"] or ["S0"]


def _council(text: str) -> str:
    return f"DIAGNOSIS: {_decision(text)}\nBASIS: {', '.join(_observation_ids(text))}"


def _ledger(text: str) -> str:
    evidence = _between(text, EVIDENCE_HEADING, PROPOSALS_HEADING)
    ids = ", ".join(_observation_ids(evidence))
    return "\n".join(f"{p}: supported by {ids}." for p in _proposals(text)) or (
        f"No proposal; the evidence holds {ids}.")


def _consensus(body: dict) -> str:
    text = next((content_text(m.get("content")) for m in body.get("messages") or []
                 if isinstance(m, dict) and m.get("role") == "user"), "")
    evidence = _between(text, EVIDENCE_HEADING, PROPOSALS_HEADING)
    diagnosis = next(iter(_proposals(text)), None) or _evidence_label(evidence)
    if not diagnosis:
        return json.dumps({"diagnosis": "", "support": [], "conflict": [],
                           "insufficient": True})
    return json.dumps({"diagnosis": diagnosis, "support": _observation_ids(evidence),
                       "conflict": [], "insufficient": False})


def _facts(system: str) -> list[tuple[str, str]]:
    """``(label, fact)`` pairs of the ``Facts:`` block of a patient system prompt (the
    layout of :func:`clinenv.agents.llm_patient.render_facts`); a list item's label is
    its parent's."""
    block = system.split(_FACTS_MARKER, 1)[1] if _FACTS_MARKER in system else ""
    facts, parents = [], []  # parents: (indent, label)
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip())
        item = line.strip()
        if not item or item == "(none)":
            continue
        while parents and parents[-1][0] >= indent:
            parents.pop()
        if item.startswith("- "):
            facts.append((parents[-1][1] if parents else "", item[2:].strip()))
        elif item.endswith(":"):
            parents.append((indent, item[:-1]))
        else:
            label, _, value = item.partition(": ")
            facts.append((label, value) if value else ("", item))
    return facts


def _words_of(text: str) -> set[str]:
    return {w.lower().removesuffix("s") for w in _WORD.findall(text)}


def _patient(body: dict) -> str:
    messages = body.get("messages") or []
    facts = _facts(content_text(messages[0].get("content")))
    if not facts:
        return NOT_SURE
    question = last_user_text(body).replace(PATIENT_OPENING, "")
    asked = _words_of(question)
    best = max(facts, key=lambda f: len(asked & _words_of(f"{f[0]} {f[1]}")))
    if not asked & _words_of(f"{best[0]} {best[1]}"):
        best = next((f for f in facts if "symptom" in f[0].lower()), facts[0])
    return best[1].rstrip(" .") + "."


def _same_text(a: str, b: str) -> bool:
    def norm(text: str) -> str:
        return " ".join(text.split()).casefold().strip(_TRIM)
    return norm(a) == norm(b)


def _judge(body: dict) -> str:
    for message in body.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "user":
            found = _JUDGE_QUESTION.search(content_text(message.get("content")))
            if found:
                answer = found["answer"]
                if _MARKER in answer:  # a native moderator: the whole final utterance
                    answer = answer.rsplit(_MARKER, 1)[1].split("\n", 1)[0]
                return "Yes" if _same_text(found["target"], answer) else "No"
    return "No"


def _acquire(body: dict, text: str) -> str:
    requested = set()
    said = []
    for message in body.get("messages") or []:
        if isinstance(message, dict):
            content = content_text(message.get("content")).replace("*", "")
            requested.update(m.upper() for m in _REQUESTED.findall(content))
            said.append(content.lower())
    if ACTION_FORMAT_NO_MENU in text:  # no menu: request by name, as the scripted doctor
        everything = "\n".join(said)
        for name in NATIVE_EXAMS:
            if f"request test: {name}".lower() not in everything:
                return f"REQUEST TEST: {name}"
        return FALLBACK_QUESTION
    for line in _section(text.splitlines(), MENU_HEADING):
        if line.startswith(("...", "(")):
            continue
        exam_id = line.split()[0]
        if exam_id.upper() not in requested:
            return f"REQUEST TEST: {exam_id}"
    return FALLBACK_QUESTION


def clinician_responder(body: dict, index: int) -> str:
    """A deterministic player of every LLM seat of clinenv (doctor, terminal strategies,
    patient, judge, measurement agent, MedAgentSim's discussion team), chosen by
    :func:`role_of`.

    It reads only the request's messages (``index`` is ignored), so concurrent and
    sequential runs get the same replies. What each seat gets: docs/testing.md, "The
    clinician".

    Args:
        body: the request's JSON body (``messages``).
        index: the choice index (unused).

    Returns:
        The message content.
    """
    role = role_of(body)
    text = last_user_text(body)
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if role == "patient":
        return _patient(body)
    if role == "judge":
        return _judge(body)
    if role == "measurement":
        return measurement_reply(content_text(messages[0].get("content")), text)
    if role == "reasoner":  # MedAgentSim's option step (question, candidates)
        return (candidates_reply(text) if text.startswith(CANDIDATES_ASK.split("{")[0])
                else question_reply(text))
    if role == "choice":
        return choice_reply(text)
    if role == "discussion" and is_consensus(text):
        return consensus_reply(text)
    if role == "discussion" and summary_label(text):
        return f"DIAGNOSIS READY: {summary_label(text)}"
    if role == "council":
        return _council(text)
    if role == "ledger":
        return _ledger(text)
    if role == "consensus":
        return _consensus(body)
    if role in ("direct", "discussion") or DECISION_MARKER in text:
        return f"DIAGNOSIS READY: {_decision(text)}"
    if is_native_view(text):
        users = [content_text(m.get("content")) for m in messages if m.get("role") == "user"]
        said = "\n".join(content_text(m.get("content")) for m in messages
                         if m.get("role") in ("user", "assistant"))
        return native_doctor_reply(users, said)
    return _acquire(body, text)


def cycling_responder(replies: Sequence[str | dict]) -> Responder:
    """A responder whose n-th choice overall (across requests) is
    ``replies[n % len(replies)]``; a ``dict`` reply as for any responder."""
    count = [0]

    def respond(body: dict, index: int) -> str | dict:
        reply = replies[count[0] % len(replies)]
        count[0] += 1
        return reply

    return respond


#: Built-in responders by name (the command line's ``--responder`` choices).
RESPONDERS: dict[str, Responder] = {
    "ok": ok_responder,
    "echo": echo_responder,
    "yes": yes_responder,
    "clinician": clinician_responder,
}


def resolve_responder(responder: Responder | str | None) -> Responder:
    """A responder function from a function, a :data:`RESPONDERS` name or ``None`` (ok).

    Raises:
        ValueError: an unknown name.
    """
    if responder is None:
        return ok_responder
    if isinstance(responder, str):
        try:
            return RESPONDERS[responder]
        except KeyError:
            raise ValueError(f"responder must be a function or one of {sorted(RESPONDERS)}, "
                             f"got {responder!r}") from None
    return responder


def as_script(responder: Responder) -> Any:
    """``responder`` as a :class:`~clinenv.llm.scripted.ScriptedChatModel` reply
    function (``(messages, config, index) -> str``).

    Raises:
        TypeError: (when called) the responder returned a message object, not a str.
    """
    def reply(messages: list[dict[str, str]], config: Any, index: int) -> str:
        result = responder({"messages": messages}, index)
        if not isinstance(result, str):
            raise TypeError(f"responder {getattr(responder, '__name__', responder)!r} must "
                            "return a str for scripted use")
        return result

    return reply


for _name, _responder in RESPONDERS.items():
    register_script(_name, as_script(_responder))
