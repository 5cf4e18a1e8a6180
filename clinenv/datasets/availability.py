"""Result availability: which stored values say that no result exists.

EGIP appendix A.1: a whole normalised value that matches a missing-value marker is
unavailable; a value that reports a finding, negatives included, is a finding.
"""

from __future__ import annotations

import re

from pydantic import JsonValue

#: Normalized whole values that mean "no result stored" (lower case, no trailing period).
MISSING_VALUE_MARKERS: frozenset[str] = frozenset(
    {
        "",
        "-",
        "--",
        "?",
        "tbd",
        "to be determined",
        "pending",
        "results pending",
        "result pending",
        "awaiting results",
        "not provided",
        "data not provided",
        "information not provided",
        "not specified",
        "unspecified",
        "not mentioned",
        "not available",
        "unavailable",
        "not recorded",
        "not reported",
        "not performed",
        "not done",
        "not assessed",
        "not indicated in the scenario provided",
        "not applicable",
        "n/a",
        "na",
        "none provided",
        "none given",
        "none recorded",
        "none reported",
        "none available",
        "unknown",
        "null",
        "no data",
        "no result",
        "no results",
    }
)

#: Verbs after "not" (optionally "not yet") that say a result was never obtained or given.
NO_RESULT_VERBS: frozenset[str] = frozenset(
    {
        "provided", "specified", "available", "recorded", "reported", "performed",
        "done", "assessed", "mentioned", "measured", "obtained", "documented",
        "indicated", "given", "applicable", "tested", "collected", "conducted",
        "evaluated", "examined", "checked", "ordered", "included", "known", "stated",
        "described", "listed", "sent", "drawn", "completed",
    }
)  # fmt: skip

#: Subjects of a missing-data phrase ("Data not provided", "Results unavailable").
_DATA_NOUNS = r"(?:data|information|info|details?|results?|values?|findings?|records?|report)"
_VERBS = "|".join(sorted(NO_RESULT_VERBS))
#: A qualifier after a placeholder head: a preposition (or adverb) and what follows, unless
#: a "but" clause follows ("Not specified, but imagine findings of ...": a finding).
_QUALIFIER = (r"(?:[ ,]+(?:for|in|at|due|because|given|on|during|as|by|owing|since|until"
              r"|per|to|from|yet|this|so|currently|here)\b(?:(?!\bbut\b).)*)?")
_HEADS = [
    rf"(?:not|never) (?:yet )?(?:been )?(?:{_VERBS})",
    r"n/a|na|unknown|unspecified|unavailable|undetermined|to be determined|tbd",
    r"none (?:provided|given|recorded|reported|available|documented|specified)",
    r"(?:(?:the )?[a-z0-9-]+(?: [a-z0-9-]+){0,2} )?(?:(?:is|are) )?(?:still )?pending",
    r"awaiting(?: [a-z0-9-]+){0,3}",
    rf"(?:the )?(?:\w+ )?{_DATA_NOUNS} (?:(?:is|are|was|were) )?(?:not (?:yet )?(?:{_VERBS})"
    r"|unavailable|unknown|pending|missing)",
    r"no (?:additional |further |other )?(?:data|information|info|details|results?|records?)"
    rf"(?: (?:(?:is|are|was|were) )?"
    rf"(?:available|{_VERBS}))?",
]
_PLACEHOLDER = re.compile(rf"^(?:{'|'.join(_HEADS)}){_QUALIFIER}$")

_SPACE = re.compile(r"\s+")
_WOULD = re.compile(r"^(?:would|will|should|may|might)\s+(?:show|reveal|be|demonstrate)\b")


def normalize_marker(value: str) -> str:
    """Lower-case, collapse whitespace, strip surrounding punctuation and brackets."""
    text = _SPACE.sub(" ", value).strip().lower()
    return text.strip(" .;:!()[]\"'")


def is_unavailable(value: JsonValue) -> bool:
    """Whether one stored leaf says that no result exists (the rule in the module
    docstring).

    Args:
        value: a leaf of a record tree (str, bool, number or ``None``); lists and dicts
            are unavailable only when every leaf inside them is.

    Returns:
        ``True`` for ``None``, empty containers, the markers in
        :data:`MISSING_VALUE_MARKERS`, "not" with one of :data:`NO_RESULT_VERBS`,
        pending and missing-data phrases, and hypothetical phrasing such as
        ``"would show ..."``; ``False`` for findings,
        recorded negatives (``"None"``, ``"Negative"``, ``"Not detected"``) included,
        and for booleans and numbers.
    """
    if value is None:
        return True
    if isinstance(value, bool | int | float):
        return False
    if isinstance(value, str):
        norm = normalize_marker(value)
        return (norm in MISSING_VALUE_MARKERS or bool(_PLACEHOLDER.match(norm))
                or bool(_WOULD.match(norm)))
    if isinstance(value, list):
        return all(is_unavailable(v) for v in value)
    if isinstance(value, dict):
        return all(is_unavailable(v) for v in value.values())
    return False
