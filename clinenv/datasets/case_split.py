"""A held-out split of a dataset's cases: construction cases (for CDEG graph
construction, or any experience memory) and evaluation cases, disjoint.

CDEG's graph-construction split, at the patient level; :func:`split_cases` is pure and
the same on every machine (rules: docs/api/cases.md).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

from clinenv.cases import Case

__all__ = ["CaseSplit", "split_cases"]


@dataclass(frozen=True)
class CaseSplit:
    """A split of one dataset's cases.

    Attributes:
        construction: construction case ids, in dataset order.
        evaluation: evaluation case ids, in dataset order (disjoint from
            ``construction``; together they hold every case).
        fraction: the requested construction fraction, in (0, 1).
        seed: the seed (>= 0).
        n_duplicate_groups: near-duplicate groups of two or more cases (each kept on one
            side).
    """

    construction: tuple[str, ...]
    evaluation: tuple[str, ...]
    fraction: float
    seed: int
    n_duplicate_groups: int = 0


def _group_key(seed: int, root: str) -> str:
    return hashlib.sha256(f"clinenv.split/{seed}/{root}".encode()).hexdigest()


def _n_duplicate_groups(cases: Sequence[Case]) -> int:
    """Near-duplicate groups of two or more cases (patient groups not counted)."""
    sizes: dict[str, int] = {}
    for case in cases:
        key = case.flags.near_duplicate_of or case.case_id
        sizes[key] = sizes.get(key, 0) + 1
    return sum(n > 1 for n in sizes.values())


def _group_roots(cases: Sequence[Case]) -> list[str]:
    """Each case's group name : ``near_duplicate_of`` or the case's
    own id, and for a patient's cases the name of the patient's first group."""
    keys = [c.flags.near_duplicate_of or c.case_id for c in cases]
    parent: dict[str, str] = {}
    seen: dict[str, int] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        seen.setdefault(x, len(seen))
        while parent[x] != x:
            parent[x] = x = parent[parent[x]]
        return x

    patients: dict[str, str] = {}
    for case, key in zip(cases, keys, strict=True):
        root = find(key)
        patient = case.metadata.get("patient_id")
        if isinstance(patient, str):
            other = find(patients.setdefault(patient, root))
            if other != root:  # the group met first names the merged group
                first, second = sorted((root, other), key=seen.__getitem__)
                parent[second] = first
    return [find(key) for key in keys]


def split_cases(cases: Sequence[Case], fraction: float, seed: int = 0) -> CaseSplit:
    """Split ``cases`` into construction and evaluation cases (rules: docs/api/cases.md).

    Args:
        cases: the dataset's cases, in dataset order (distinct ``case_id``).
        fraction: share of the cases for construction, strictly between 0 and 1.
        seed: any integer >= 0; the same seed gives the same split.

    Returns:
        A :class:`CaseSplit`.

    Raises:
        ValueError: ``fraction`` not a number in (0, 1), ``seed`` not an integer >= 0,
            duplicate case ids, or a split that leaves one side empty (the message gives
            the case count and what would have been needed).
    """
    if isinstance(fraction, bool) or not isinstance(fraction, int | float) \
            or not 0.0 < float(fraction) < 1.0:
        raise ValueError(f"the construction fraction must be a number in (0, 1), got "
                         f"{fraction!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"the seed must be an integer >= 0, got {seed!r}")
    ids = [c.case_id for c in cases]
    if len(set(ids)) != len(ids):
        raise ValueError("the cases hold a case id twice")
    groups: dict[str, list[int]] = {}
    for i, root in enumerate(_group_roots(cases)):
        groups.setdefault(root, []).append(i)
    n = len(ids)
    target = math.floor(float(fraction) * n + 0.5)
    taken: list[int] = []
    for root in sorted(groups, key=lambda r: _group_key(seed, r)):
        if len(taken) + len(groups[root]) <= target:
            taken.extend(groups[root])
    construction = set(taken)
    if not construction or len(construction) == n:
        side = "construction" if not construction else "evaluation"
        raise ValueError(f"a construction fraction of {fraction:g} leaves no {side} case "
                         f"({n} cases, {target} for construction); choose a fraction that "
                         "leaves at least one case on each side")
    return CaseSplit(
        construction=tuple(ids[i] for i in sorted(construction)),
        evaluation=tuple(c for i, c in enumerate(ids) if i not in construction),
        fraction=float(fraction), seed=seed,
        n_duplicate_groups=_n_duplicate_groups(cases))
