"""The doctor's own words inside the views: quoted so they cannot pass for the
environment's lines.

The environment writes section headings (``# Task``, ``# Available examinations``...),
round markers (``[round 3]``), role lines (``Patient: ...``, ``Examiner [T1 ...]:``) and,
in e_T, observation lines (``[O2] Measurement ...``). A doctor reply that echoes the
prompt would, rendered verbatim, forge them. Two rules, applied by every renderer:

- :func:`quote_lines` -- a doctor utterance in a history or transcript: its first line
  follows the ``Doctor:`` label, every further line is quoted as ``  > ...``, a prefix
  the environment never writes at the start of a line;
- :func:`one_line` -- the doctor's words inside an environment line (a question shown as
  the context of a patient reply, a request name): newlines become `` / ``.

The simulators' replies get the same care (:func:`indent_lines`): a patient reply's
further lines are indented, as examination results already are, so an LLM patient
cannot forge an observation line of e_T (``[O9] Measurement ...``) or a heading.

:func:`echoes_prompt` flags a reply that restates the environment's view (a heading,
a round marker or footer, an observation line or a role line of its own), for
``info["action_flags"]`` (``"echoes_prompt"``).
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
