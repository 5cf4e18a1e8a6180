"""The doctor's own words inside the views: quoted so they cannot pass for the
environment's lines.

:func:`quote_lines`, :func:`one_line` and :func:`indent_lines` keep replies from forging
headings or observation lines; :func:`echoes_prompt` flags a reply that restates the view.
"""

from __future__ import annotations

import re
from typing import Final

#: Headings the environment writes (EGIP view, e_T, native view).
VIEW_HEADINGS: Final = (
    "Task", "Candidate labels", "Interaction so far", "Available examinations",
    "Your turn", "Objective (S0)", "Acquired observations", "Instructions",
    "Latest response", "Consultation transcript", "Final discussion",
)  # fmt: skip
QUOTE_PREFIX: Final = "  > "

_HEADING = re.compile(
    r"^\s{0,3}#{1,6}\s*(?:" + "|".join(re.escape(h) for h in VIEW_HEADINGS) + r")\b",
    re.IGNORECASE | re.MULTILINE,
)
_ENV_LINE = re.compile(
    r"^\s*(?:\[round\s+\d+\]|\[(?:O\d+|S0)\]\s|Round\s+\d+\s+of\s+\d+\."
    r"|Turn\s+\d+\s+of\s+\d+\.|Interface:|Examiner\s*\[|Measurement agent\s*\[)",
    re.IGNORECASE | re.MULTILINE,
)
#: :data:`_ENV_LINE` tried at one position (a line start) only.
_ENV_LINE_AT = re.compile(_ENV_LINE.pattern[1:], re.IGNORECASE)
_NEWLINES = re.compile(r"\s*\n\s*")


def quote_lines(text: str) -> str:
    """``text`` with every line after the first prefixed by :data:`QUOTE_PREFIX`."""
    if "\n" not in text:
        return text
    first, *rest = text.split("\n")
    return "\n".join([first, *(QUOTE_PREFIX + line for line in rest)])


def indent_lines(text: str, prefix: str = "    ") -> str:
    """``text`` with every line after the first indented by ``prefix``: a seat's reply
    (a patient's, a measurement agent's) inside a view, so that none of its lines
    stands at the start of a line as the environment's own lines do."""
    return text.replace("\n", "\n" + prefix)


def one_line(text: str) -> str:
    """``text`` on one line: each line break (with the spaces around it) becomes
    `` / ``."""
    text = text.strip()
    return _NEWLINES.sub(" / ", text) if "\n" in text else text


def echoes_prompt(text: str) -> bool:
    """Whether a doctor reply restates the environment's view: a line that opens with one
    of its headings (:data:`VIEW_HEADINGS`), a round marker or footer (``[round 2]``,
    ``Round 3 of 19.``), an observation id (``[O1] ...``) or an environment role line
    (``Interface:``, ``Examiner [``)."""
    return bool(("#" in text and _HEADING.search(text)) or _env_line(text))


def _env_line(text: str) -> bool:
    """``_ENV_LINE.search(text)``, trying only the line starts (where ``^`` can match)
    rather than every position."""
    start = 0
    while True:
        if _ENV_LINE_AT.match(text, start):
            return True
        start = text.find("\n", start) + 1
        if not start:
            return False
