"""Optional fidelity rewards for the patient and examiner seats.

With ``fidelity_weight > 0`` a seat loses that weight per ``"<kind>: <what>"`` error of
its reply, judged on the record values that hold a digit (EGIP section 3.2: the patient
sees P only, the examiner one record).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from pydantic import JsonValue

from clinenv.cases import Records
from clinenv.datasets.availability import is_unavailable

_SPACE = re.compile(r"\s+")
_DIGIT = re.compile(r"\d")
#: A number: digits, optionally joined by ``.``, ``,``, ``/`` or ``:`` to more digits.
_NUMBER = re.compile(r"\d+(?:[.,/:]\d+)*")
#: Words by which a reply acknowledges that a result is not available (normalized).
UNAVAILABLE_WORDS = ("pending", "not available", "unavailable", "not provided",
                     "not recorded", "not reported", "not performed", "not done",
                     "not specified", "awaiting", "no result")


def normalize(text: str) -> str:
    """Case-folded text with runs of whitespace collapsed to one space."""
    return _SPACE.sub(" ", text.casefold()).strip()


def contains(text: str, value: str) -> bool:
    """Whether normalized ``value`` occurs in normalized ``text`` as whole tokens.

    The character before the match must not be a word character nor a digit followed
    by ``.`` or ``,``; the character after it must not be a word character nor ``.``
    or ``,`` followed by a digit. So ``"5%"`` is not in ``"25%"`` or ``"2.5%"``, and
    ``"6.7"`` is in ``"was 6.7."`` but not in ``"16.7"`` or ``"6.75"``.
    """
    if not value:
        return False
    pattern = r"(?<!\w)(?<!\d[.,])" + re.escape(value) + r"(?!\w)(?![.,]\d)"
    return re.search(pattern, text) is not None


def _keyed_leaves(tree: JsonValue, key: str | None = None,
                  ) -> Iterator[tuple[str | None, JsonValue]]:
    """``(nearest key, leaf)`` for every leaf (depth first; list items keep the key)."""
    if isinstance(tree, dict):
        for name, value in tree.items():
            yield from _keyed_leaves(value, str(name))
    elif isinstance(tree, list):
        for value in tree:
            yield from _keyed_leaves(value, key)
    else:
        yield key, tree


def _strings(tree: JsonValue) -> Iterator[str]:
    """The string leaves of ``tree``."""
    return (leaf for _, leaf in _keyed_leaves(tree) if isinstance(leaf, str))


def _keys(tree: JsonValue) -> Iterator[str]:
    if isinstance(tree, dict):
        for name, value in tree.items():
            yield str(name)
            yield from _keys(value)
    elif isinstance(tree, list):
        for value in tree:
            yield from _keys(value)


def record_values(tree: JsonValue) -> tuple[str, ...]:
    """The normalized, digit-bearing string leaves of a records tree, deduplicated.

    Args:
        tree: a subtree of M, or a :class:`~clinenv.cases.Records` object's two trees
            given as ``{"physical_exam": ..., "tests": ...}``.

    Returns:
        Values in first-seen order.
    """
    values = (normalize(leaf) for leaf in _strings(tree))
    return tuple(dict.fromkeys(v for v in values if _DIGIT.search(v)))


def leakable_values(records: Records, patient_facts: JsonValue) -> tuple[str, ...]:
    """Record values of M that P does not hold as whole tokens (what a patient cannot
    know)."""
    facts = normalize(" ".join(_strings(patient_facts)))
    tree = {"physical_exam": records.physical_exam, "tests": records.tests}
    return tuple(v for v in record_values(tree) if not contains(facts, v))


def patient_leaks(reply: str, leakable: tuple[str, ...]) -> list[str]:
    """``"leaked: <value>"`` for each value of ``leakable`` (:func:`leakable_values`)
    found in ``reply``, in the order of ``leakable``."""
    text = normalize(reply)
    return [f"leaked: {v}" for v in leakable if contains(text, v)]


def examiner_errors(reply: str, record: JsonValue, request: Iterable[str] = ()) -> list[str]:
    """Omissions, invented numbers and invented results of an examiner ``reply``.

    Args:
        reply: the examiner seat's reply text.
        record: the requested stored record (a leaf, a subtree, or ``{test name:
            subtree}`` for a group request).
        request: texts the examiner may echo (the request, the exam id and name).

    Returns:
        ``"omitted: <value>"`` (record order), then ``"invented: <number>"`` (reply
        order, each number once), then ``"invented: result for unavailable <field>"``
        (record order). Numbers are ``\\d+`` with ``.``, ``,``, ``/``, ``:`` joined
        parts; one is invented when neither the record (keys and values) nor
        ``request`` holds it. An unavailable leaf (``"Pending"``...) counts as an
        invented result unless the reply admits unavailability
        (:data:`UNAVAILABLE_WORDS`). Empty for a faithful reply.
    """
    text = normalize(reply)
    errors = [f"omitted: {v}" for v in record_values(record) if not contains(text, v)]
    known = normalize(" ".join([*(str(leaf) for _, leaf in _keyed_leaves(record)),
                                *_keys(record), *request]))
    numbers = dict.fromkeys(m.group() for m in _NUMBER.finditer(text))
    errors += [f"invented: {n}" for n in numbers if not _has_number(known, n)]
    if not any(contains(text, word) for word in UNAVAILABLE_WORDS):
        errors += [f"invented: result for unavailable {_field(key)}"
                   for key, leaf in _keyed_leaves(record) if is_unavailable(leaf)]
    return errors


def _has_number(text: str, number: str) -> bool:
    """``number`` occurs in ``text`` not glued to other digits (``"4"`` is in ``"t4"``
    but not in ``"14"`` or ``"4.5"``)."""
    pattern = r"(?<!\d)(?<!\d[.,/:])" + re.escape(number) + r"(?!\d)(?![.,/:]\d)"
    return re.search(pattern, text) is not None


def _field(key: str | None) -> str:
    """A record key as words (``Sputum_Culture`` -> ``sputum culture``); ``record`` for
    a record that is a single leaf."""
    return normalize(key.replace("_", " ")) if key else "record"
