"""Evidence atoms: one normalized clinical finding with its attributes (CDEG "Methods").

Concept, polarity, temporal status, direction, anatomy, optional UMLS CUI;
:meth:`EvidenceAtom.key` is the exact part of hybrid matching.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: Allowed values of :attr:`EvidenceAtom.polarity`.
Polarity = Literal["present", "absent"]
#: Allowed values of :attr:`EvidenceAtom.temporal`: a current finding, a past history
#: item, or unknown.
Temporal = Literal["current", "past", "unknown"]
#: Allowed values of :attr:`EvidenceAtom.direction` (numeric or qualitative result
#: direction); ``None`` for findings without one (a symptom, an imaging sign).
Direction = Literal["high", "low", "normal", "abnormal"]

_SPACES = re.compile(r"\s+")
#: A trailing catalog group in an exam name: ``"Chest X-Ray (Imaging)"``.
_GROUP = re.compile(r"\s*\([^()]*\)\s*$")


def strip_group(name: str) -> str:
    """An exam name without its trailing "(Group)" and outer spaces: ``"Chest X-Ray
    (Imaging)"`` -> ``"Chest X-Ray"`` (menus and run logs name exams either way)."""
    return _GROUP.sub("", str(name)).strip()


def normalize_concept(text: str) -> str:
    """Lower-case, trim, collapse whitespace and drop trailing punctuation."""
    return _SPACES.sub(" ", str(text)).strip().strip(".;:,").strip().lower()


class EvidenceAtom(BaseModel):
    """One evidence atom (hashable, immutable).

    Attributes:
        concept: the normalized clinical concept, e.g. ``"troponin i"``, ``"fever"``,
            ``"lobar consolidation"`` (lower case, single spaces; never empty).
        polarity: ``"present"`` or ``"absent"`` (a negated finding: "no fever").
        temporal: ``"current"``, ``"past"`` (history of...) or ``"unknown"``.
        direction: ``"high"``, ``"low"``, ``"normal"``, ``"abnormal"`` or ``None``.
        anatomy: normalized anatomical context (``"right lower lobe"``) or ``None``.
        cui: a UMLS concept id (``"C0015967"``) when the extractor knows one, else
            ``None``; not part of :meth:`key` (extractors differ in what they know).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    concept: str = Field(min_length=1)
    polarity: Polarity = "present"
    temporal: Temporal = "current"
    direction: Direction | None = None
    anatomy: str | None = None
    cui: str | None = None

    @field_validator("concept")
    @classmethod
    def _concept(cls, value: str) -> str:
        value = normalize_concept(value)
        if not value:
            raise ValueError("concept is empty after normalization")
        return value

    @field_validator("anatomy")
    @classmethod
    def _anatomy(cls, value: str | None) -> str | None:
        if value is None:
            return None
        return normalize_concept(value) or None

    def key(self) -> str:
        """The exact-match key: ``concept|polarity|temporal|direction|anatomy``."""
        return "|".join([self.concept, self.polarity, self.temporal,
                         self.direction or "", self.anatomy or ""])

    def text(self) -> str:
        """A readable phrase: ``"no fever"``, ``"high troponin i"``,
        ``"history of asthma"``, ``"lobar consolidation (right lower lobe)"``."""
        words = self.concept
        if self.direction is not None:
            words = f"{self.direction} {words}"
        if self.polarity == "absent":
            words = f"no {words}"
        if self.temporal == "past":
            words = f"history of {words}"
        if self.anatomy:
            words = f"{words} ({self.anatomy})"
        return words
