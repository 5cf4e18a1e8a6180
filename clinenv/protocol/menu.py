"""Result-blinded, prioritized menu B(A, h_t) (EGIP section 3.2, appendix A.1).

The menu lists the catalog entries not yet requested, ordered by fixed priority rules
over *public names only* — no rule reads a result value — and cut to a display limit.
Requests are still validated against the whole catalog A, so an entry beyond the limit
remains requestable by id or name.

Priority tiers (lower first; source order within a tier): vital signs; other
physical-exam sections; basic laboratory panels; other blood and urine tests; ECG and
imaging; microbiology; specialized tests (biopsy, genetics, antibodies...); the rest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from clinenv.protocol.catalog import Catalog, CatalogEntry

_TIERS: tuple[tuple[int, re.Pattern[str]], ...] = tuple(
    (tier, re.compile(pattern, re.IGNORECASE))
    for tier, pattern in (
        (2, r"complete blood|\bcbc\b|blood count|metabolic panel|electrolyte|chemistr|"
            r"urinalysis|urine analysis|liver function|renal function|kidney function|"
            r"coagulation|glucose|hematolog"),
        (3, r"blood|serum|plasma|urine|level|thyroid|hormon|enzyme|marker|panel|\besr\b|"
            r"crp|troponin|lipid|gas"),
        (4, r"ecg|ekg|electrocardio|x-?ray|radiograph|ultrasound|sonograph|\bct\b|"
            r"tomograph|mri|magnetic|echocardio|imaging|scan|doppler|mammogra|angiogra"),
        (5, r"culture|stain|smear|pcr|swab|microbio|serolog|antigen|viral|bacteri"),
        (6, r"biopsy|patholog|histolog|cytolog|genetic|karyotyp|antibod|immuno|"
            r"electrophoresis|aspirat|puncture|endoscop|colonoscop|bronchoscop|cystoscop"),
    )
)


def priority(entry: CatalogEntry) -> int:
    """Priority tier of an entry from its public name (0 = shown first)."""
    if entry.kind == "physical_exam":
        return 0 if re.search(r"vital", entry.name, re.IGNORECASE) else 1
    for tier, pattern in _TIERS:
        if pattern.search(entry.name) or (entry.group and pattern.search(entry.group)):
            return tier
    return 7


def menu_order(catalog: Catalog) -> tuple[CatalogEntry, ...]:
    """A sorted by menu priority, then catalog order (computed once per case)."""
    return tuple(sorted(catalog, key=lambda e: (priority(e), e.index)))


def build_menu(
    order: Iterable[CatalogEntry], requested: Iterable[str], limit: int | None = 25
) -> list[CatalogEntry]:
    """The menu B(A, h_t): unrequested entries in priority order, at most ``limit``.

    Args:
        order: the catalog in priority order (:func:`menu_order`).
        requested: exam ids already requested in h_t.
        limit: display limit (``None`` for no limit). Must be >= 0.

    Raises:
        ValueError: ``limit`` is negative.
    """
    if limit is not None and limit < 0:
        raise ValueError(f"menu limit must be >= 0, got {limit}")
    done = set(requested)
    items = [e for e in order if e.exam_id not in done]
    return items if limit is None else items[:limit]


@dataclass(frozen=True, slots=True)
class MenuState:
    """The menu B(A, h_t) of one set of requested exams, with what the doctor's view,
    ``info["menu"]`` and ``exam_mask`` read of it. Immutable: a runtime keeps the state
    of its current requests and builds a new one when they change.

    Attributes:
        requested: the requested exam ids it was built for, in request order.
        entries: the menu: unrequested entries in priority order, at most the limit.
        n_hidden: unrequested entries left out by the limit (>= 0).
        items: ``(exam_id, label)`` of each entry of ``entries``, in order.
        open_mask: one byte per entry of A in catalog order, ``1`` where it is
            unrequested, else ``0`` (the exam mask before it is cut or padded).
    """

    requested: tuple[str, ...]
    entries: tuple[CatalogEntry, ...]
    n_hidden: int
    items: tuple[tuple[str, str], ...]
    open_mask: bytes

    @classmethod
    def build(cls, catalog: Catalog, order: Sequence[CatalogEntry],
              requested: Sequence[str], limit: int | None) -> MenuState:
        """The state for ``requested`` over ``catalog`` in priority ``order``
        (:func:`menu_order`) with display ``limit`` (``None``: no limit).

        Raises:
            ValueError: ``limit`` is negative.
        """
        entries = tuple(build_menu(order, requested, limit))
        done = set(requested)
        remaining = len(catalog) - len(done)
        return cls(tuple(requested), entries, max(0, remaining - len(entries)),
                   tuple((e.exam_id, e.label) for e in entries),
                   bytes(e.exam_id not in done for e in catalog.entries))
