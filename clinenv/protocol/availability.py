"""Result availability: which stored values are placeholders rather than results.

EGIP appendix A.1: "Availability is determined by matching the normalized whole value
against predefined missing-value markers." A stored leaf such as ``"Pending"`` or
``"Not provided"`` means the record holds no result; it must be reported as
*unavailable*, never read as a finding (AgentClinic data facts, section 5.5).

Only the *whole* normalized value is matched: ``"Not detected"`` and ``"Not oriented to
time"`` are findings, not placeholders.
"""

from __future__ import annotations

import re

from pydantic import JsonValue

#: Normalized whole values that mean "no result stored" (lower case, no trailing period).
MISSING_VALUE_MARKERS: frozenset[str] = frozenset(
    {
        "",
        "pending",
        "pending at the time of examination",
        "results pending",
        "awaiting results",
        "not provided",
        "data not provided",
        "information not provided",
        "not specified",
        "unspecified",
        "not mentioned",
        "not available",
        "not recorded",
        "not reported",
        "not performed",
        "not done",
        "not assessed",
        "not indicated in the scenario provided",
        "not applicable",
        "not applicable for age",
        "not applicable for age in this scenario",
        "n/a",
        "na",
        "none provided",
        "unknown",
        "none",
        "null",
    }
)

_SPACE = re.compile(r"\s+")
_WOULD = re.compile(r"^(?:would|will|should|may|might)\s+(?:show|reveal|be|demonstrate)\b")


def normalize_marker(value: str) -> str:
    """Lower-case, collapse whitespace, strip surrounding punctuation and brackets."""
    text = _SPACE.sub(" ", value).strip().lower()
    return text.strip(" .;:!()[]\"'")


def is_unavailable(value: JsonValue) -> bool:
    """Whether one stored leaf is a placeholder instead of a result.

    Args:
        value: a leaf of a record tree (str, bool, number or ``None``); lists and dicts
            are unavailable only when every leaf inside them is.

    Returns:
        ``True`` for ``None``, empty containers, the markers in
        :data:`MISSING_VALUE_MARKERS`, and hypothetical phrasing such as
        ``"would show ..."``.
    """
    if value is None:
        return True
    if isinstance(value, bool | int | float):
        return False
    if isinstance(value, str):
        norm = normalize_marker(value)
        return norm in MISSING_VALUE_MARKERS or bool(_WOULD.match(norm))
    if isinstance(value, list):
        return all(is_unavailable(v) for v in value)
    if isinstance(value, dict):
        return all(is_unavailable(v) for v in value.values())
    return False
