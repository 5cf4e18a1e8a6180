"""Template placeholders are not answers.

:func:`is_placeholder` recognises an echoed template (``<single diagnosis>``, ``N/A``)
by its shape: :data:`TEMPLATE_WORDS` in one bracket pair, or one of :data:`FILLERS`.
"""

from __future__ import annotations

import re
from typing import Final

#: Words that make up templates, never a diagnosis or an examination name on their own.
TEMPLATE_WORDS: Final = frozenset({
    "a", "an", "the", "your", "my", "one", "single", "final", "most", "likely", "best",
    "here", "insert", "put", "write", "enter", "fill", "in", "type",
    "diagnosis", "diagnoses", "dx", "answer", "option", "letter", "choice", "label",
    "candidate", "conclusion", "name", "names", "full", "specific", "of", "or", "and",
    "to", "for", "with", "followed", "by", "its",
    "examination", "examinations", "exam", "exams", "test", "tests",
    "id", "ids", "number", "request", "order", "text", "value",
    "reason", "short", "brief", "citing", "observation", "observations", "condition",
    "disease", "illness", "problem", "here's", "e", "g", "eg", "example", "something",
    "placeholder", "majority", "vote", "consensus",
})  # fmt: skip
#: Fillers that stand for an answer without being one (compared case-insensitively,
#: after markdown and surrounding punctuation are removed).
FILLERS: Final = frozenset({
    "...", "…", "n/a", "na", "n.a", "tbd", "tba", "todo", "x", "xx", "xxx", "?",
    "??", "???", "-", "--", "—", "_", "__", "___", "blank", "null",
})  # fmt: skip

#: An option letter (``E``, ``(C)``, ``Option A``, ``Answer: B``): a choice among the
#: candidate labels K, never a placeholder (``X``, a filler, excepted).
_OPTION_LETTER = re.compile(
    r"(?:(?:option|choice|answer)\s*[:\-]?\s*)?\(?[a-wyz]\)?\s*[.):]?", re.IGNORECASE)
_BRACKETS = {"<": ">", "[": "]", "{": "}", "«": "»", "(": ")"}
_MENU_ID = re.compile(r"(?:PE|T)\s*\d+", re.IGNORECASE)
_WORD = re.compile(r"[a-z']+|\d+", re.IGNORECASE)
#: A bracketed template span of a prompt (``<one diagnosis>``, ``[diagnosis]``).
_SPAN = re.compile(r"<[^<>\n]{1,60}>|\[[^\[\]\n]{1,60}\]")
#: A chat-template special token (``<|im_end|>``, ``<think>``): not a template span.
_SPECIAL_TOKEN = re.compile(r"<\|?/?[a-z_]+\|?>")
_EDGE = " \t*_`'\"“”‘’.;:,!"


def _core(text: str) -> str:
    """The first line of ``text`` without markdown emphasis and edge punctuation."""
    return _line(text).strip(_EDGE)


def _line(text: str) -> str:
    """The first line of ``text`` without markdown emphasis and surrounding spaces."""
    line = text.strip().split("\n", 1)[0]
    return line.replace("**", "").replace("__", "").strip(" \t*`")


def is_placeholder(text: str | None) -> bool:
    """Whether ``text`` (an answer or request payload, marker already removed) is a
    template placeholder rather than content. Never raises.

    ``is_placeholder("<single diagnosis>")``, ``is_placeholder("your diagnosis here")``
    and ``is_placeholder("N/A")`` are true; ``is_placeholder("Myasthenia gravis")`` and
    ``is_placeholder("[PE1]")`` are false. ``None``, an empty text and markdown alone
    (``"**"``) are no payload, not a placeholder.
    """
    if text is None:
        return False
    line = _line(str(text))
    if not line:
        return False
    if line.lower() in FILLERS or line.strip(".…-—_?") == "":
        return True
    core = line.strip(_EDGE)
    # a menu id starts with P or T (no other character folds to them)
    if (core[:1] in "PpTt" and _MENU_ID.fullmatch(core)) or _OPTION_LETTER.fullmatch(core):
        return False
    if core.lower() in FILLERS:
        return True
    close = _BRACKETS.get(core[:1])
    if close and core.endswith(close) and core[1:-1].count(core[0]) == 0:
        core = core[1:-1].strip(_EDGE)
        if core.lower() in FILLERS or core.strip(".…-—_?") == "":
            return True
    return _template_only(core)


def has_placeholder(text: str | None) -> bool:
    """:func:`is_placeholder`, or the text holds a template span that is one
    (``<single diagnosis> (e.g. Gout)``, ``<id or name> (for example``)."""
    if text is None:
        return False
    return is_placeholder(text) or any(is_placeholder(s) for s in placeholder_spans(text))


def _template_only(text: str) -> bool:
    """Every word of ``text`` is template vocabulary (and there is at least one)."""
    words = _WORD.findall(text.lower())
    return bool(words) and TEMPLATE_WORDS.issuperset(words)


def placeholder_spans(prompt: str) -> list[str]:
    """The bracketed template spans of a prompt text (``<one diagnosis>``,
    ``[diagnosis]``, ``{diagnosis}``), for the test that every shipped placeholder is
    rejected. :meth:`str.format` fields that are filled before sending (``{budget}``)
    and menu ids are not listed."""
    if "<" not in prompt and "[" not in prompt:  # every span opens with one of them
        return []
    return [s for s in _SPAN.findall(prompt) if not _MENU_ID.fullmatch(s[1:-1].strip())
            and not _SPECIAL_TOKEN.fullmatch(s)]
