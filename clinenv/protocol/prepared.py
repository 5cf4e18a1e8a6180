"""Per-case protocol artifacts that never change during an episode.

Catalog, name index, menu order, withheld patient facts and lookups, built once per case
and shared read-only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from clinenv.cases import Case
from clinenv.protocol.catalog import Catalog, CatalogEntry
from clinenv.protocol.exam_matching import ExamMatcher
from clinenv.protocol.history import Availability
from clinenv.protocol.lookup import lookup
from clinenv.protocol.menu import menu_order
from clinenv.protocol.views import FrozenFacts, withhold_target


@dataclass(frozen=True, slots=True)
class PreparedCase:
    """A case with its immutable protocol artifacts.

    Attributes:
        case: the case.
        catalog: its action catalog A.
        matcher: the exam-name index over A (thresholds fixed at build time).
        menu_order: A sorted by menu priority (the menu filters and cuts this order).
        patient_facts: P as the patient view shows it (target sentences withheld).
        results: ``{exam_id: (recorded_value_text, availability)}``, the record lookup O
            (:func:`~clinenv.protocol.lookup.lookup`) of every catalog entry; read-only.
    """

    case: Case
    catalog: Catalog
    matcher: ExamMatcher
    menu_order: tuple[CatalogEntry, ...]
    patient_facts: FrozenFacts
    results: Mapping[str, tuple[str | None, Availability]]

    @classmethod
    def build(cls, case: Case, *, accept: float = 88.0, suggest: float = 75.0) -> PreparedCase:
        """Build the artifacts of ``case`` (exam-matching thresholds 0-100)."""
        catalog = Catalog(case.records)
        matcher = ExamMatcher.for_records(catalog, case.records, accept=accept,
                                          suggest=suggest)
        order = menu_order(catalog)
        results = {e.exam_id: lookup(case.records, e) for e in catalog}
        return cls(case, catalog, matcher, order,
                   withhold_target(case.patient, case.target.text), results)
