"""Result-blinded, prioritized menu B(A, h_t) (EGIP section 3.2, appendix A.1).

Fixed priority tiers over public names only, cut to a display limit; every entry of A
stays requestable (tiers and the ``target_in_menu`` setting: docs/protocols.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from clinenv.cases import Case
from clinenv.protocol.catalog import Catalog, CatalogEntry, normalize_name

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


# ---------------------------------------------------------- menus that name the target
#: ``ProtocolConfig.target_in_menu`` values.
TARGET_IN_MENU_SETTINGS = ("keep", "exclude", "neutral")
#: The name a test group (and an examination section) gets when what is left of it
#: without the target's words is empty or template vocabulary only ("Specific Tests",
#: which the request parser would read as a placeholder).
NEUTRAL_GROUP_NAME = "Test_panel"
NEUTRAL_SECTION_NAME = "Examination_section"


def _neutral_name(key: str, target: str, taken: set[str], fallback: str) -> str:
    """``key`` without the words of ``target`` (``Varicella_Serology`` -> ``Serology``),
    ``fallback`` when that is empty or a placeholder
    (:func:`clinenv.protocol.placeholders.is_placeholder`), made unique against the
    normalized names in ``taken`` by a number (``Test_panel_2``)."""
    from clinenv.datasets.flags import target_phrases
    from clinenv.protocol.placeholders import is_placeholder

    drop = {w for p in target_phrases(target) for w in normalize_name(p).split()}
    kept = [w for w in re.split(r"[_\s]+", key) if w and normalize_name(w) not in drop
            and normalize_name(w) not in ("of", "the", "and", "for", "to", "in")]
    base = "_".join(kept)
    if not base or is_placeholder(" ".join(kept)):
        base = fallback
    name, n = base, 1
    while normalize_name(name) in taken:
        n += 1
        name = f"{base}_{n}"
    return name


def _renamed(tree: dict[str, JsonValue], target: str, fallback: str
             ) -> tuple[dict[str, JsonValue], dict[str, str]]:
    from clinenv.datasets.flags import names_target_in_menu

    taken = {normalize_name(k) for k in tree}
    out: dict[str, JsonValue] = {}
    renamed: dict[str, str] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value and names_target_in_menu(target, [key]):
            new = _neutral_name(key, target, taken, fallback)
            taken.add(normalize_name(new))
            renamed[key] = new
            key = new
        out[key] = value
    return out, renamed


def neutral_group_names(case: Case) -> Case:
    """``case`` with its group names worded neutrally (``target_in_menu="neutral"``).

    A group name is a top-level key of the tests or of the physical examination whose
    value holds named results (an object): a catalog group, or a test kept whole whose
    sub-results the lookup shows. Each one that names the target
    (:func:`clinenv.datasets.flags.names_target_in_menu`) loses the target's words
    (``Varicella_Serology`` -> ``Serology``; :data:`NEUTRAL_GROUP_NAME`, or
    :data:`NEUTRAL_SECTION_NAME` for a section, when nothing but template words is left,
    as of ``Varicella_Specific_Tests``; numbered when the name is taken). Test names
    and every result are kept, so a test named after the target (``Varicella_PCR``)
    still names it: leave such cases out with ``"exclude"``. The renamed keys are in
    ``metadata["renamed_groups"]`` (old -> new); the case itself is not changed (a copy
    is returned; the same object when nothing is renamed).
    """
    from clinenv.cases import Records

    target = case.target.text
    exam, renamed_exam = _renamed(dict(case.records.physical_exam), target,
                                  NEUTRAL_SECTION_NAME)
    tests, renamed_tests = _renamed(dict(case.records.tests), target, NEUTRAL_GROUP_NAME)
    if not renamed_exam and not renamed_tests:
        return case
    metadata = {**case.metadata, "renamed_groups": {**renamed_exam, **renamed_tests}}
    return case.model_copy(update={"records": Records(physical_exam=exam, tests=tests),
                                   "metadata": metadata})


def menu_setting_cases(cases: Sequence[Case], setting: str, *, name: str = "the dataset"
                       ) -> list[Case]:
    """The cases an environment plays under ``ProtocolConfig.target_in_menu``.

    Args:
        cases: the dataset's cases.
        setting: ``"keep"`` (all, as recorded), ``"exclude"`` (those whose menu does not
            name the target, :func:`clinenv.datasets.flags.target_in_menu`, computed
            from the records so that a canonical file without the flag is read alike) or
            ``"neutral"`` (all, through :func:`neutral_group_names`).
        name: the dataset's name, for the message.

    Raises:
        ValueError: an unknown setting, or ``"exclude"`` leaving no case.
    """
    from clinenv.datasets.flags import target_in_menu

    if setting not in TARGET_IN_MENU_SETTINGS:
        raise ValueError(f"target_in_menu must be one of {TARGET_IN_MENU_SETTINGS}, "
                         f"got {setting!r}")
    if setting == "keep":
        return list(cases)
    if setting == "neutral":
        return [neutral_group_names(c) for c in cases]
    kept = [c for c in cases if not target_in_menu(c.target.text, c.records.physical_exam,
                                                     c.records.tests)]
    if not kept:
        raise ValueError(f"target_in_menu='exclude' leaves no case of {name}: the menu of "
                         f"each of its {len(cases)} cases names the target")
    return kept
