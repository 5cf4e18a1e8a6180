"""Role-specific views R (EGIP section 3.2, Eq. 2).

Plain frozen objects: each role gets only what its rules permit (the doctor never Y,
the patient never M or Y, the examiner one record).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pydantic import JsonValue

#: Replaces a patient fact whose every sentence names the target.
WITHHELD_TEXT = "(not something I can describe)"


@dataclass(frozen=True, slots=True)
class PatientView:
    """What the patient simulator may see when answering one question.

    Attributes:
        facts: P as a tree ``{field: value}``; sentences naming the target are removed.
        dialogue: earlier ``(doctor question, patient reply)`` pairs, oldest first; the
            questions are the doctor's own words.
        question: the doctor's current question (free text), its own words only.
        caregiver_voice: a caregiver answers for a patient too young to self-report.
        notes: what the patient heard besides the dialogue, as ``(position, text)``
            pairs, oldest first: ``position`` is the number of dialogue questions asked
            before it (``len(dialogue)``: heard just before the current question). Only
            the native protocols fill it, with the measurement results the patient
            hears (AgentClinic, weakness W5; setting ``patient_sees_results``). A chat
            patient shows them in order (:meth:`heard_questions`); a retrieval patient
            matches ``question`` alone, so results never change which fact answers.
    """

    facts: Mapping[str, JsonValue]
    dialogue: tuple[tuple[str, str], ...]
    question: str
    caregiver_voice: bool = False
    notes: tuple[tuple[int, str], ...] = ()

    def heard_questions(self) -> list[str]:
        """The doctor turns as a chat patient hears them: one text per dialogue question
        and then the current one (``len(dialogue) + 1`` texts), each preceded by the
        :attr:`notes` at its position, one per line."""
        questions = [q for q, _ in self.dialogue] + [self.question]
        heard = []
        for i, question in enumerate(questions):
            before = [text for at, text in self.notes if at == i]
            heard.append("\n".join([*before, question]))
        return heard


@dataclass(frozen=True, slots=True)
class ExaminerView:
    """What the examiner sees: the validated request and the one matching record.

    Attributes:
        request: the request text as the doctor phrased it.
        exam_id: public id of the matched catalog entry, or ``None`` for a miss.
        name: readable name of the matched entry (or the request for a miss).
        record: the stored record subtree for the entry, ``None`` for a miss.
    """

    request: str
    exam_id: str | None
    name: str
    record: JsonValue


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _withhold(value: JsonValue, names: Callable[[str], bool]) -> JsonValue:
    if isinstance(value, str):
        if not names(value):
            return value
        kept = [s for s in _SENTENCE_END.split(value) if not names(s)]
        return " ".join(kept) if kept else WITHHELD_TEXT
    if isinstance(value, list):
        return [_withhold(v, names) for v in value]
    if isinstance(value, dict):
        return {k: _withhold(v, names) for k, v in value.items()}
    return value


def withhold_target(facts: Mapping[str, JsonValue], target: str) -> FrozenFacts:
    """P for the patient view with every sentence that names the target removed.

    "Names the target" is the same rule that sets ``CaseFlags.target_in_patient_facts``
    (:func:`clinenv.datasets.flags.names_target`: the whole target, its main noun phrase
    or its text without parentheses, case- and accent-insensitive, on word boundaries).
    A leaf left empty becomes :data:`WITHHELD_TEXT`. The input is not modified.
    """
    from clinenv.datasets.flags import names_target

    def names(text: str) -> bool:
        return names_target(target, text)

    if not names_target(target, dict(facts)):  # no leaf names it (most cases): P as given
        return FrozenFacts(facts)
    return FrozenFacts({k: _withhold(v, names) for k, v in facts.items()})


def _freeze(tree: JsonValue) -> object:
    if isinstance(tree, Mapping):
        return (dict, *((key, _freeze(value)) for key, value in tree.items()))
    if isinstance(tree, list | tuple):
        return (list, *map(_freeze, tree))
    return tree


class FrozenFacts(Mapping):
    """An immutable, hashable view of a patient-facts tree P.

    Equal trees are equal and hash alike, so simulators can memoize per-P work (such as a
    retrieval index) across episodes and environments without keying on object ids.
    The hash is computed once, at construction.

    Args:
        facts: the P tree ``{field: value}``; it is copied, so later changes to the input
            do not show through.
    """

    __slots__ = ("_data", "_key", "_hash")

    def __init__(self, facts: Mapping[str, JsonValue]) -> None:
        import copy

        self._data = copy.deepcopy(dict(facts))
        self._key = _freeze(self._data)
        self._hash = hash(self._key)

    def __getitem__(self, key: str) -> JsonValue:
        return copy_of(self._data[key])

    def __iter__(self):
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenFacts):
            return self is other or (self._hash == other._hash and self._key == other._key)
        return isinstance(other, Mapping) and self._data == dict(other)

    def __repr__(self) -> str:
        return f"FrozenFacts({self._data!r})"


def copy_of(value: JsonValue) -> JsonValue:
    """A deep copy of a JSON value (leaves are immutable and shared)."""
    if isinstance(value, dict):
        return {k: copy_of(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_of(v) for v in value]
    return value
