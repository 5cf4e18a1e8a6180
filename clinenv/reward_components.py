"""Reward components: one pure function from an episode record and its case to numbers.

:func:`reward_components` returns :class:`RewardComponents`; pass the case as the
environment played it (``env.unwrapped.pool.case(case_id)``). Definitions: docs/rewards.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from clinenv.cases import Case
from clinenv.protocol.catalog import Catalog, CatalogEntry, normalize_name
from clinenv.protocol.extra_actions import HISTORY_RECORD
from clinenv.protocol.menu import priority

__all__ = ["COMPONENTS", "DEFAULT_EXAM_COSTS", "TIERS", "ReadOnlyDict", "RewardComponents",
           "exam_tier", "is_history", "reward_components"]

#: The menu's priority tiers (:func:`clinenv.protocol.menu.priority`, 0..7), by name.
TIERS: tuple[str, ...] = ("vital_signs", "physical_exam", "basic_labs", "blood_urine",
                          "ecg_imaging", "microbiology", "specialized", "other")

#: Default cost of one exam by tier, in hand-set relative units (a basic lab panel = 1).
#: An assumption, not prices or measured discomfort: vital signs 0.1, another physical
#: examination section 0.2, basic panels (CBC, metabolic panel, urinalysis...) 1, other
#: blood and urine tests 1, ECG and imaging 3, microbiology 2, specialized tests
#: (biopsy, genetics, antibodies, endoscopy...) 5, the rest 2.
class ReadOnlyDict(dict):  # type: ignore[type-arg]
    """A ``dict`` that refuses changes (``TypeError``), for tables shared by every
    environment (:data:`DEFAULT_EXAM_COSTS`, a reward spec's ``weights`` and
    ``exam_costs``); unlike ``types.MappingProxyType`` it pickles, deep-copies, passes
    ``dataclasses.asdict`` and JSON, and equals the plain dict of its items. Copy it
    (``dict(table)``) to edit."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("this table is read-only (shared by every environment); edit a "
                        "copy, dict(table)")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (dict(self),))

    def __copy__(self) -> ReadOnlyDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> ReadOnlyDict:
        return self  # immutable, and its values are numbers


#: Read-only (:class:`ReadOnlyDict`): copy it (``dict(DEFAULT_EXAM_COSTS)``) to edit.
DEFAULT_EXAM_COSTS: Mapping[str, float] = ReadOnlyDict({
    "vital_signs": 0.1, "physical_exam": 0.2, "basic_labs": 1.0, "blood_urine": 1.0,
    "ecg_imaging": 3.0, "microbiology": 2.0, "specialized": 5.0, "other": 2.0})


@dataclass(frozen=True)
class RewardComponents:
    """The components of one episode (docs/rewards.md); frozen.

    Attributes:
        diagnosis: 1.0 or 0.0.
        workup_recall, workup_precision, workup_f1: in [0, 1], or ``None`` (undefined).
        exam_spend: >= 0 in the cost table's units, or ``None`` (native protocols).
        turns: acquisition rounds used, >= 0.
        invalid_actions: >= 0.
        format: 1 or 0.
    """

    diagnosis: float
    workup_recall: float | None
    workup_precision: float | None
    workup_f1: float | None
    exam_spend: float | None
    turns: int
    invalid_actions: int
    format: int

    def to_dict(self) -> dict[str, Any]:
        """The components by name, in :data:`COMPONENTS` order (JSON-ready)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RewardComponents:
        """Components from :meth:`to_dict` (a run-log line's ``reward_components``).

        Raises:
            ValueError: a component is missing or an extra key is present.
        """
        missing = [name for name in COMPONENTS if name not in data]
        extra = sorted(set(data) - set(COMPONENTS))
        if missing or extra:
            raise ValueError(f"reward components: missing {missing}, unknown {extra}")
        return cls(**{name: data[name] for name in COMPONENTS})

    def __getitem__(self, name: str) -> Any:
        """The component ``name`` (``components["workup_f1"]``).

        Raises:
            KeyError: not a component name.
        """
        if name not in COMPONENTS:
            raise KeyError(name)
        return getattr(self, name)


#: Component names, in order.
COMPONENTS: tuple[str, ...] = tuple(f.name for f in fields(RewardComponents))


def exam_tier(entry: Any) -> str:
    """The tier name (:data:`TIERS`) of a catalog entry: its menu priority."""
    return TIERS[priority(entry)]


def _finished(record: Mapping[str, Any]) -> bool:
    """The episode ended with an answer step and no backend error."""
    if "error" in record:
        return False
    if "phase" in record:
        return record["phase"] == "done"
    return bool(record.get("terminated", False))


def _verdict(record: Mapping[str, Any]) -> str:
    verdict = record.get("verdict")
    if verdict is None:
        return "correct" if record.get("correct") is True else "unscored"
    return str(verdict)


#: The clinical-history record's name, normalized (:data:`~clinenv.protocol.
#: extra_actions.HISTORY_RECORD`, what ``REVIEW HISTORY`` requests).
_HISTORY = normalize_name(HISTORY_RECORD)


def is_history(entry: CatalogEntry) -> bool:
    """The entry is the clinical-history record (test group ``Clinical_History``, the
    record ``REVIEW HISTORY`` reads): history, not an examination, so no part of the
    workup (docs/rewards.md)."""
    return normalize_name(entry.name) == _HISTORY or any(
        normalize_name(str(part)) == _HISTORY for part in entry.source_path)


def _orders(events: Any, case_id: str) -> tuple[list[str], set[str]]:
    """``(recorded exam ids in order of first request, normalized unrecorded names)``
    of the measurement events; a request of the clinical-history record (a history
    review) left out of the unrecorded names (its recorded ids are left out by the
    caller, which has the catalog)."""
    recorded: dict[str, None] = {}
    missing: set[str] = set()
    if not isinstance(events, list):
        raise ValueError(f"record of case {case_id!r}: field 'events' must be a list, "
                         f"got {type(events).__name__}")
    for event in events:
        if not isinstance(event, Mapping) or event.get("source") != "measurement":
            continue
        exam_id = event.get("exam_id")
        if exam_id:
            for one in str(exam_id).split(","):
                recorded.setdefault(one.strip(), None)
        else:
            name = normalize_name(str(event.get("request") or event.get("name") or ""))
            if name != _HISTORY:
                missing.add(name)
    return list(recorded), missing


def reward_components(record: Mapping[str, Any], case: Case, *,
                      exam_costs: Mapping[str, float] | None = None) -> RewardComponents:
    """The components of one episode (docs/rewards.md).

    Args:
        record: a run-log line or :meth:`clinenv.env.EGIPEnv.episode_record` (finished
            or not); read, never changed.
        case: the case the episode played (module docstring).
        exam_costs: cost per tier name (:data:`TIERS`); tiers left out cost as in
            :data:`DEFAULT_EXAM_COSTS`; default that table.

    Raises:
        ValueError: the record is of another case, lacks ``events`` or ``turns``, or
            names an exam id the case's catalog does not hold.
    """
    case_id = case.case_id
    if record.get("case_id") not in (None, case_id):
        raise ValueError(f"the record is of case {record.get('case_id')!r}, not "
                         f"{case_id!r}")
    for name in ("events", "turns"):
        if name not in record:
            raise ValueError(f"record of case {case_id!r}: field {name!r} is missing")
    finished = _finished(record)
    verdict = _verdict(record) if finished else "unscored"
    status = record.get("answer_status", "answer")
    diagnosis = 1.0 if verdict == "correct" else 0.0
    scored = int(verdict in ("correct", "wrong") and status == "answer")
    turns, invalid = int(record["turns"]), int(record.get("invalid_actions") or 0)
    if record.get("protocol", "egip") != "egip":
        return RewardComponents(diagnosis, None, None, None, None, turns, invalid, scored)
    costs = dict(DEFAULT_EXAM_COSTS)
    costs.update(exam_costs or {})
    catalog = Catalog(case.records)
    ordered, missing = _orders(record["events"], case_id)
    entries = []
    for exam_id in ordered:
        entry = catalog.get(exam_id)
        if entry is None:
            raise ValueError(f"record of case {case_id!r} orders exam {exam_id!r}, which "
                             "the case's catalog does not hold: pass the case the episode "
                             "played")
        if not is_history(entry):  # a history review is no order
            entries.append(entry)
    spend = float(math.fsum(costs[exam_tier(e)] for e in entries))
    exams = sum(not is_history(e) for e in catalog)  # |A| without the history record
    if not exams:
        return RewardComponents(diagnosis, None, None, None, spend, turns, invalid, scored)
    hits = len(entries)
    recall = hits / exams
    precision = hits / (hits + len(missing)) if hits + len(missing) else None
    if precision is None or precision + recall == 0:
        f1 = 0.0
    else:
        f1 = 2 * precision * recall / (precision + recall)
    return RewardComponents(diagnosis, recall, precision, f1, spend, turns, invalid, scored)
