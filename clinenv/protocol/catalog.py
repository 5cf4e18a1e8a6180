"""Action catalog A: every examination the stored records M can answer (EGIP section 3.2).

Ids ``PE1...`` (physical-exam sections) and ``T1...`` (tests) in source order; names
only, never a result value (docs/protocols.md, "EGIP's action grammar, step by step").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import JsonValue

from clinenv.cases import Records

ExamKind = Literal["physical_exam", "test"]

#: Normalized top-level test keys that group several tests (AgentClinic data facts 5.4).
GROUPING_KEYS: frozenset[str] = frozenset(
    {
        "imaging",
        "imaging studies",
        "imaging results",
        "imaging and other tests",
        "radiology",
        "x rays",
        "blood tests",
        "blood test",
        "blood work",
        "bloodwork",
        "labs",
        "lab results",
        "lab work",
        "laboratory",
        "laboratory tests",
        "laboratory studies",
        "laboratory results",
        "laboratory test results",
        "laboratory testing results",
        "laboratory findings",
        "lab tests",
        "basic laboratory tests",
        "additional tests",
        "other tests",
        "special tests",
        "special test",
        "screening tests",
        "assessment tools",
        "investigations",
        "diagnostic tests",
    }
)

_SEPARATORS = re.compile(r"[_\s]+")


def readable_name(key: str) -> str:
    """``"Chest_X-Ray"`` -> ``"Chest X-Ray"``: underscores to spaces, whitespace collapsed."""
    return _SEPARATORS.sub(" ", key).strip()


def normalize_name(name: str) -> str:
    """Matching key for a test name: lower case, ``_``/``-``/punctuation to single spaces."""
    text = re.sub(r"[^0-9a-zα-ω]+", " ", name.lower())
    return text.strip()


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One requestable examination.

    Attributes:
        exam_id: public id, ``PE<n>`` for physical-exam sections, ``T<n>`` for tests.
        name: readable name, e.g. ``"Chest CT"``.
        kind: ``"physical_exam"`` or ``"test"``.
        group: readable name of the grouping key the test sits under, or ``None``.
        source_path: keys from the root of M to the record, e.g.
            ``("tests", "Imaging", "Chest_CT")``.
        index: position in the catalog (also the position in the exam mask).
    """

    exam_id: str
    name: str
    kind: ExamKind
    group: str | None
    source_path: tuple[str, ...]
    index: int

    @property
    def label(self) -> str:
        """Menu label: ``"Chest CT (Imaging)"`` for grouped tests, else the name."""
        return f"{self.name} ({self.group})" if self.group else self.name


def _is_group(key: str, value: JsonValue) -> bool:
    if not isinstance(value, dict) or not value:
        return False
    if normalize_name(key) in GROUPING_KEYS:
        return True
    return len(value) >= 2 and all(isinstance(v, dict) for v in value.values())


class Catalog:
    """The action catalog A of one case, built from its records M.

    Args:
        records: the case's stored examination records.

    The catalog is immutable after construction; lookups by id are O(1).
    """

    __slots__ = ("entries", "groups", "_by_id")

    def __init__(self, records: Records) -> None:
        entries: list[CatalogEntry] = []
        for n, key in enumerate(records.physical_exam, start=1):
            entries.append(
                CatalogEntry(f"PE{n}", readable_name(key), "physical_exam", None,
                             ("physical_exam", key), len(entries))
            )
        n_test = 0
        for key, value in records.tests.items():
            if _is_group(key, value):
                assert isinstance(value, Mapping)
                for child in value:
                    n_test += 1
                    entries.append(
                        CatalogEntry(f"T{n_test}", readable_name(child), "test",
                                     readable_name(key), ("tests", key, child), len(entries))
                    )
            elif isinstance(value, dict) and not value:
                continue  # an empty group holds nothing to request
            else:
                n_test += 1
                entries.append(
                    CatalogEntry(f"T{n_test}", readable_name(key), "test", None,
                                 ("tests", key), len(entries))
                )
        self.entries: tuple[CatalogEntry, ...] = tuple(entries)
        groups: dict[str, list[CatalogEntry]] = {}
        for entry in entries:
            if entry.group:
                groups.setdefault(entry.group, []).append(entry)
        #: readable group name -> its member tests (a request for the group returns all)
        self.groups: dict[str, tuple[CatalogEntry, ...]] = {
            name: tuple(members) for name, members in groups.items()}
        self._by_id = {e.exam_id.lower(): e for e in entries}

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self):
        return iter(self.entries)

    def get(self, exam_id: str) -> CatalogEntry | None:
        """The entry with this public id (case-insensitive), or ``None``."""
        return self._by_id.get(exam_id.strip().lower())
