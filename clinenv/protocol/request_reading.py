"""Reading a ``REQUEST TEST:`` payload before it is matched against the catalog A.

Ids with trailing words, several exams, templates and sentences are read as in the
table of docs/protocols.md, "EGIP's action grammar, step by step".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from clinenv.protocol.exam_matching import ExamMatch, ExamMatcher
from clinenv.protocol.placeholders import has_placeholder

Reading = Literal["exam", "placeholder", "multiple", "not_a_name", "invalid_id"]

#: More words than this is a sentence, not an examination name.
MAX_NAME_WORDS = 12

_ID = r"\[?\s*(?:PE|T)\s*\d+\s*\]?"
_LEADING_ID = re.compile(rf"^({_ID})(?=$|[\s\-–—:(,;.])(.*)$", re.IGNORECASE | re.DOTALL)
_ANY_ID = re.compile(rf"(?<![\w-])({_ID})(?![\w-])", re.IGNORECASE)
#: An id written loosely (``PE-1``, ``T #3``): the id it means.
_LOOSE_ID = re.compile(r"^\[?\s*(PE|T)\s*[-#_.]\s*(\d+)\s*\]?$", re.IGNORECASE)
#: A number or a numbered exam that is not a menu id (``1``, ``#2``, ``Exam 1``,
#: ``Test #3``, ``Option 2``).
_NOT_AN_ID = re.compile(r"^(?:(?:exam(?:ination)?|test|option|item|no\.?|number)\s*)?#?\s*\d+$",
                        re.IGNORECASE)
_SEPARATED = re.compile(r"^\s*(?:[-–—:(,;.]|to\b|for\b|in\s+order\b|so\b|because\b)",
                        re.IGNORECASE)
_LIST = re.compile(r"\s*(?:,|;|\+|&|\band\b|\bplus\b|\s/\s)\s*", re.IGNORECASE)
_EXAMPLE = re.compile(r"\b(?:for\s+example\b|e\.\s?g\.|such\s+as\b|for\s+instance\b)",
                      re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class RequestReading:
    """What one request payload says.

    Attributes:
        reading: ``"exam"``, ``"placeholder"``, ``"multiple"`` or ``"not_a_name"``.
        payload: the examination to match (``"exam"``: the id alone when an id led the
            payload), else the payload as written.
        parts: the several requests of a ``"multiple"`` reading.
        match: the catalog match of ``payload`` (``"exam"`` readings), else ``None``.
    """

    reading: Reading
    payload: str
    parts: tuple[str, ...] = ()
    match: ExamMatch | None = None


def _norm_id(text: str) -> str:
    return re.sub(r"[\s\[\]]", "", text).upper()


def read_request(payload: str, matcher: ExamMatcher) -> RequestReading:
    """Read one ``REQUEST TEST:`` payload (table in docs/protocols.md). Never raises.

    Args:
        payload: the text after the marker (first line, markdown removed).
        matcher: the case's exam matcher; it tells whether each part of a list names a
            recorded examination, and whether the words after an id name its entry.
    """
    text = payload.strip()
    if has_placeholder(text):
        return RequestReading("placeholder", text)
    loose = _LOOSE_ID.match(text)
    if loose:
        text = f"{loose.group(1).upper()}{loose.group(2)}"
    whole = matcher.match(text)
    if whole.status == "matched" and whole.score >= 100.0:  # an id or an exact name
        return RequestReading("exam", text, match=whole)
    if _NOT_AN_ID.match(text):
        return RequestReading("invalid_id", text)
    ids = list(dict.fromkeys(_norm_id(m) for m in _ANY_ID.findall(text)))
    if len(ids) > 1:
        return RequestReading("multiple", text, tuple(ids))
    lead = _LEADING_ID.match(text)
    if lead:
        exam_id, rest = _norm_id(lead.group(1)), lead.group(2)
        if not rest.strip() or _SEPARATED.match(rest) or _names_entry(matcher, exam_id,
                                                                     rest):
            return RequestReading("exam", exam_id, match=matcher.match(exam_id))
    if _EXAMPLE.search(text):
        return RequestReading("not_a_name", text)
    if whole.status != "matched":
        parts = [p for p in _LIST.split(text) if p.strip()]
        if len(parts) > 1 and all(matcher.match(p).status == "matched" for p in parts):
            return RequestReading("multiple", text, tuple(parts))
        if len(text.split()) > MAX_NAME_WORDS or text.endswith("?"):
            return RequestReading("not_a_name", text)
    return RequestReading("exam", text, match=whole)


def _names_entry(matcher: ExamMatcher, exam_id: str, rest: str) -> bool:
    """Whether ``rest`` names the entry ``exam_id`` (a menu line copied whole:
    ``T1  Complete blood count``)."""
    entry = matcher.catalog.get(exam_id)
    if entry is None:
        return False
    match = matcher.match(rest)
    return match.status == "matched" and entry in match.entries
