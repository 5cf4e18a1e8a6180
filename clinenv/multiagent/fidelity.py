"""Optional fidelity rewards for the patient and examiner seats.

The simulator seats earn 0 by default. For training a simulator, ``fidelity_weight > 0``
in :class:`clinenv.multiagent.aec.EGIPAECEnv` subtracts ``fidelity_weight`` per fidelity
error of a seat's reply. An error is judged on *record values*: the string leaves of the
stored records M that contain a digit (``"38.9 °C"``, ``"12,500/mm3"``, ``"120/80
mmHg"``), compared after case folding and whitespace collapsing.

- patient (:func:`patient_leaks`): a record value that P does not hold, found in the
  reply. The patient sees P only (EGIP section 3.2), so quoting a measurement it cannot
  know is a fabrication or a leak.
- examiner (:func:`examiner_omissions`): a record value of the requested record(s) that
  the reply does not reproduce.

This is a deliberately simple, deterministic signal: values in prose records (NEJM's
free-text blocks are long leaves) rarely reappear verbatim, so it mostly rewards exact
reporting of short measurements; a learned or LLM-judged fidelity score can replace it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from pydantic import JsonValue

from clinenv.cases import Records

_SPACE = re.compile(r"\s+")
_DIGIT = re.compile(r"\d")


def normalize(text: str) -> str:
    """Case-folded text with runs of whitespace collapsed to one space."""
    return _SPACE.sub(" ", text.casefold()).strip()


def _string_leaves(tree: JsonValue) -> Iterator[str]:
    if isinstance(tree, dict):
        for value in tree.values():
            yield from _string_leaves(value)
    elif isinstance(tree, list):
        for value in tree:
            yield from _string_leaves(value)
    elif isinstance(tree, str):
        yield tree


def record_values(tree: JsonValue) -> tuple[str, ...]:
    """The normalized, digit-bearing string leaves of a records tree, deduplicated.

    Args:
        tree: a subtree of M, or a :class:`~clinenv.cases.Records` object's two trees
            given as ``{"physical_exam": ..., "tests": ...}``.

    Returns:
        Values in first-seen order.
    """
    values = (normalize(leaf) for leaf in _string_leaves(tree))
    return tuple(dict.fromkeys(v for v in values if _DIGIT.search(v)))


def leakable_values(records: Records, patient_facts: JsonValue) -> tuple[str, ...]:
    """Record values of M that P does not hold (what a patient cannot know)."""
    facts = normalize(" ".join(_string_leaves(patient_facts)))
    tree = {"physical_exam": records.physical_exam, "tests": records.tests}
    return tuple(v for v in record_values(tree) if v not in facts)


def patient_leaks(reply: str, leakable: tuple[str, ...]) -> list[str]:
    """The values of ``leakable`` (from :func:`leakable_values`) found in ``reply``."""
    text = normalize(reply)
    return [v for v in leakable if v in text]


def examiner_omissions(reply: str, record: JsonValue) -> list[str]:
    """The record values of the requested ``record`` that ``reply`` does not contain."""
    text = normalize(reply)
    return [v for v in record_values(record) if v not in text]
