"""Built-in responders of the fake chat server (:mod:`clinenv.llm.fake_server`).

A responder is ``responder(body, index) -> str | dict``: called once per returned
choice with the request's JSON body and the choice index within the request. A ``str``
is the message content; a ``dict`` is the whole ``message`` object (for example
``{"role": "assistant", "content": None, "reasoning": "..."}``) and may carry a
``"finish_reason"`` key (default ``"stop"``).

Built-ins, selectable by name (:data:`RESPONDERS`): ``"ok"`` (replies ``OK``),
``"echo"`` (the last user message), ``"yes"`` (a judge that always answers ``Yes``) and
``"clinician"`` (:func:`clinician_responder`, a deterministic EGIP doctor that reads only
the request's messages).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from clinenv.protocol.evidence import CANDIDATES_HEADING

#: ``responder(body, index) -> str | dict`` (see the module docstring).
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


def _decision(text: str) -> str:
    lines = text.splitlines()
    candidates = _section(lines, CANDIDATES_HEADING)
    if candidates:
        return _OPTION_PREFIX.sub("", candidates[0])
    finding = None
    for i, line in enumerate(lines[:-1]):
        if _MEASUREMENT_HEAD.match(line) and lines[i + 1].startswith(" "):
            finding = lines[i + 1].strip()
    return finding or "Unknown"


def clinician_responder(body: dict, index: int) -> str:
    """A deterministic EGIP doctor that reads only the request's messages.

    - Decision phase (the last user message contains :data:`DECISION_MARKER`, i.e. it is
      the evidence interface e_T): ``"DIAGNOSIS READY: <label>"`` where ``<label>`` is
      the first candidate label (its ``A.`` prefix removed) when the message has a
      candidate block, else the first line of the last recorded measurement result among
      the acquired observations, else ``"Unknown"``.
    - Acquisition: ``"REQUEST TEST: <id>"`` for the first id of the last user message's
      ``# Available examinations`` menu that no message of the conversation has
      requested yet (``REQUEST TEST: <id>`` anywhere in the messages, any case, ``*``
      ignored; so both the full view and a chat history in delta format work);
      :data:`FALLBACK_QUESTION` when none is left or there is no menu.

    The same request always gets the same reply; ``index`` is ignored.
    """
    text = last_user_text(body)
    if DECISION_MARKER in text:
        return f"DIAGNOSIS READY: {_decision(text)}"
    requested = set()
    for message in body.get("messages") or []:
        if isinstance(message, dict):
            content = content_text(message.get("content")).replace("*", "")
            requested.update(m.upper() for m in _REQUESTED.findall(content))
    for line in _section(text.splitlines(), MENU_HEADING):
        if line.startswith(("...", "(")):
            continue
        exam_id = line.split()[0]
        if exam_id.upper() not in requested:
            return f"REQUEST TEST: {exam_id}"
    return FALLBACK_QUESTION


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
