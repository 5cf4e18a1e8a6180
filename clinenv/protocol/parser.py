"""The doctor-action parser: free text in, one typed action out.

Markers per EGIP section 3.2 and AgentClinic, lenient or strict; reasoning blocks are
removed first (docs/protocols.md, "EGIP's action grammar, step by step").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from clinenv.protocol.doctor_text import echoes_prompt
from clinenv.protocol.placeholders import has_placeholder, is_placeholder
from clinenv.protocol.turns import own_turn

#: ``"knowledge_query"``: CDEG's knowledge retrieval (:mod:`clinenv.protocol.extra_actions`),
#: and ``"placeholder"``: a request or answer that is a template placeholder
#: (:func:`clinenv.protocol.runtime.reads_as_placeholder`), made by the runtime, never by
#: :func:`parse_action`.
ActionKind = Literal["question", "test_request", "diagnosis", "empty", "knowledge_query",
                     "placeholder"]

_THINK_BLOCK = re.compile(r"<think>(.*?)</think>", re.IGNORECASE | re.DOTALL)
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_MD_NOISE = re.compile(r"[*`]+|^\s{0,3}#{1,6}\s*|^\s*>\s?", re.MULTILINE)
_DIAG = re.compile(r"diagnosis\s+ready\s*:", re.IGNORECASE)
_TEST = re.compile(r"request\s+tests?\s*:", re.IGNORECASE)
_BARE_DIAG = re.compile(
    r"^\s*(?:final\s+|most\s+likely\s+|working\s+)?(?:diagnosis|answer)\s*(?:is)?\s*[:\-]\s*",
    re.IGNORECASE | re.MULTILINE,
)
_MENU_ID = re.compile(r"^\s*\[?\s*((?:PE|T)\s*\d+)\s*\]?\s*\.?\s*$", re.IGNORECASE)
_EDGE = " \t*_#`'\"“”‘’<>.;:,"
_PAIRS = {")": "(", "]": "[", "}": "{"}


@dataclass(frozen=True, slots=True)
class DoctorAction:
    """One parsed doctor utterance.

    Attributes:
        kind: ``"question"``, ``"test_request"``, ``"diagnosis"`` or ``"empty"``.
        text: the visible utterance (reasoning removed, surrounding whitespace stripped).
        payload: the question, the requested test (id or name) or the diagnosis; ``""``
            for an empty action.
        reasoning: text removed from ``<think>`` blocks, or ``None``.
        test_payload: when an utterance carries both markers, the test request found
            beside the diagnosis (the runtime decides which one applies in each phase).
        format_miss: a note when the utterance looks like an attempted marker that the
            current mode does not accept (e.g. lower-case markers in strict mode).
        flags: what the reading found: among ``"wrote_past_turn"``,
            ``"placeholder"`` and ``"echoes_prompt"``; ``()`` for a clean utterance.
    """

    kind: ActionKind
    text: str
    payload: str
    reasoning: str | None = None
    test_payload: str | None = None
    format_miss: str | None = None
    flags: tuple[str, ...] = ()

    def with_flags(self, *flags: str) -> DoctorAction:
        """A copy with ``flags`` added (kept in order, without repeats)."""
        merged = tuple(dict.fromkeys((*self.flags, *flags)))
        return DoctorAction(self.kind, self.text, self.payload, self.reasoning,
                            self.test_payload, self.format_miss, merged)


def split_reasoning(raw: str) -> tuple[str, str | None]:
    """Split ``raw`` into (visible text, reasoning) by ``<think>`` tags.

    Handles closed blocks (several, or empty), a dangling ``</think>`` (the opening tag was
    part of the prompt template) and an unterminated ``<think>`` (everything after it is
    reasoning, e.g. a reply cut off by ``max_tokens``).
    """
    if "<" not in raw:  # every tag opens with "<": no reasoning, nothing to remove
        return raw.strip(), None
    parts: list[str] = []

    def _keep(m: re.Match[str]) -> str:
        parts.append(m.group(1).strip())
        return "\n"

    text = _THINK_BLOCK.sub(_keep, raw)
    close = _THINK_CLOSE.search(text)
    if close:
        parts.insert(0, text[: close.start()].strip())
        text = text[close.end():]
    open_ = _THINK_OPEN.search(text)
    if open_:
        parts.append(text[open_.end():].strip())
        text = text[: open_.start()]
    reasoning = "\n\n".join(p for p in parts if p)
    had_tags = bool(parts) or text != raw
    return text.strip(), (reasoning if had_tags else None)


def _closes_at_end(line: str, open_: str, close: str) -> bool:
    """Whether the bracket opening ``line`` is closed by its last character."""
    depth = 0
    for i, char in enumerate(line):
        depth += (char == open_) - (char == close)
        if depth == 0:
            return i == len(line) - 1
    return False


def _strip_unbalanced(line: str) -> str:
    """Strip edge punctuation, and brackets where they are unbalanced or wrap it all."""
    while True:
        before = line
        line = line.strip(_EDGE)
        if line[-1:] in _PAIRS and line.count(_PAIRS[line[-1]]) < line.count(line[-1]):
            line = line[:-1]
        if line and line[0] in "([{":
            close = {v: k for k, v in _PAIRS.items()}[line[0]]
            if line.count(close) < line.count(line[0]):
                line = line[1:]
            elif line[-1] == close and _closes_at_end(line, line[0], close):
                line = line[1:-1]  # a wrapping pair, as in a "[diagnosis]" template
        if line == before:
            return line


def clean_payload(text: str) -> str:
    """The first line of ``text`` without markdown emphasis, quotes, end stops and
    unbalanced brackets (``"Type 2 diabetes (T2DM)."`` keeps its parentheses)."""
    line = text.strip().split("\n", 1)[0]
    line = line.replace("**", "").replace("__", "")
    return _strip_unbalanced(line).strip()


def _marker_hints(text: str) -> tuple[bool, bool]:
    """Whether ``text`` may hold a :data:`_DIAG` and a :data:`_TEST` marker.

    Every match of ``_DIAG`` holds "ready" and every match of ``_TEST`` holds "que", in
    any letter case (no other character folds to these letters under ``IGNORECASE``), so
    a text whose lower case lacks them needs no search for that marker.
    """
    low = text.lower()
    return "ready" in low, "que" in low


def _raw_after(pattern: re.Pattern[str], text: str,
               hints: tuple[bool, bool] = (True, True)) -> str | None:
    """The text after ``pattern`` up to another action marker, uncleaned; ``hints``
    (:func:`_marker_hints` of ``text``) skip the searches for markers it cannot hold."""
    m = pattern.search(text)
    if m is None:
        return None
    rest = text[m.end():]
    cuts = []
    if hints[0] and (n := _DIAG.search(rest)):
        cuts.append(n.start())
    if hints[1] and (n := _TEST.search(rest)):
        cuts.append(n.start())
    return rest[: min(cuts)] if cuts else rest


def _after(pattern: re.Pattern[str], text: str) -> str | None:
    """The payload after ``pattern``, cut where another action marker begins."""
    raw = _raw_after(pattern, text)
    return None if raw is None else clean_payload(raw)


def _placeholder(raw: str | None, payload: str | None) -> bool:
    """Whether a marker's payload, as written or cleaned, is a template placeholder."""
    if raw is None:
        return False
    first = raw.strip().split("\n", 1)[0]
    return has_placeholder(first) or (payload != first and is_placeholder(payload))


def parse_action(
    raw: str, *, strict: bool = False, accept_bare_diagnosis: bool = False,
    speaker_lines: bool = True,
) -> DoctorAction:
    """Parse one doctor utterance. Never raises.

    Args:
        raw: the doctor's text as generated (any length, any Unicode).
        strict: AgentClinic-compatible case-sensitive markers (docs/protocols.md).
        accept_bare_diagnosis: also accept ``Diagnosis: X`` / ``Final diagnosis: X`` lines
            (lenient mode only; used for the terminal answer).
        speaker_lines: end the doctor's turn at a new line opening another speaker's
            turn too (:func:`~clinenv.protocol.turns.cut_turn`); ``False`` cuts at
            chat-template tokens only (a final answer listing ``Patient: ...`` findings).

    Returns:
        The parsed :class:`DoctorAction`.
    """
    if not isinstance(raw, str):
        raw = "" if raw is None else str(raw)
    visible, reasoning = split_reasoning(raw)
    visible, cut = own_turn(visible, "doctor", speaker_lines=speaker_lines)
    flags = ("wrote_past_turn",) if cut else ()
    if echoes_prompt(visible):
        flags += ("echoes_prompt",)
    action = _parse_visible(visible, reasoning, strict, accept_bare_diagnosis)
    return action.with_flags(*flags) if flags else action


def _parse_visible(visible: str, reasoning: str | None, strict: bool,
                   accept_bare_diagnosis: bool) -> DoctorAction:
    """:func:`parse_action` on the visible text of the doctor's own turn."""
    if not visible:
        return DoctorAction("empty", "", "", reasoning)
    if strict:
        diag = visible.split("DIAGNOSIS READY", 1)
        test = visible.split("REQUEST TEST", 1)
        miss = None
        if len(diag) == 1 and len(test) == 1 and (_DIAG.search(visible) or _TEST.search(visible)):
            miss = "marker not in AgentClinic's exact upper-case form"
        if len(diag) == 2:
            raw = diag[1].lstrip(" :").split("REQUEST TEST", 1)[0]
            payload = clean_payload(raw)
            test_payload = clean_payload(test[1].lstrip(" :")) if len(test) == 2 else None
            action = DoctorAction("diagnosis", visible, payload, reasoning, test_payload)
            return action.with_flags("placeholder") if _placeholder(raw, payload) else action
        if len(test) == 2:
            raw = test[1].lstrip(" :")
            action = DoctorAction("test_request", visible, clean_payload(raw), reasoning)
            return (action.with_flags("placeholder") if _placeholder(raw, action.payload)
                    else action)
        return DoctorAction("question", visible, visible, reasoning, format_miss=miss)

    # every markdown-noise match holds one of * ` # > (most utterances hold none)
    noisy = "*" in visible or "`" in visible or "#" in visible or ">" in visible
    flat = _MD_NOISE.sub("", visible) if noisy else visible
    hints = _marker_hints(flat)
    raw_diagnosis = _raw_after(_DIAG, flat, hints) if hints[0] else None
    raw_test = _raw_after(_TEST, flat, hints) if hints[1] else None
    test = None if raw_test is None else clean_payload(raw_test)
    menu_id = _MENU_ID.match(flat) if test is None else None
    if menu_id:
        test = menu_id.group(1).replace(" ", "").upper()
    if raw_diagnosis is None and accept_bare_diagnosis:
        raw_diagnosis = _raw_after(_BARE_DIAG, flat, hints)
    if raw_diagnosis is not None:
        diagnosis = clean_payload(raw_diagnosis)
        action = DoctorAction("diagnosis", visible, diagnosis, reasoning, test)
        return (action.with_flags("placeholder") if _placeholder(raw_diagnosis, diagnosis)
                else action)
    if test is not None:
        action = DoctorAction("test_request", visible, test, reasoning)
        return action.with_flags("placeholder") if _placeholder(raw_test, test) else action
    return DoctorAction("question", visible, visible, reasoning)
