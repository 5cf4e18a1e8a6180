"""Agreement between two reviewers: percent agreement and Cohen's kappa (EGIP §4.5).

κ = (p_o − p_e) / (1 − p_e) (Cohen 1960), NaN when ``p_e = 1``; the same as
``sklearn.metrics.cohen_kappa_score`` (unweighted). EGIP's figures: docs/analyses.md.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Agreement", "cohen_kappa"]


@dataclass(frozen=True)
class Agreement:
    """Agreement of two reviewers over their co-rated items.

    Attributes:
        n_items: items rated by both.
        n_agree: items with the same rating.
        agreement: ``100 * n_agree / n_items`` (percent).
        expected: chance agreement ``p_e`` (a proportion in [0, 1]).
        kappa: Cohen's κ in [−1, 1]; NaN when ``p_e = 1``.
        categories: the categories of the contingency table, in order.
        table: ``(k, k)`` counts, rows the first reviewer's rating, columns the second's.
    """

    n_items: int
    n_agree: int
    agreement: float
    expected: float
    kappa: float
    categories: tuple[Hashable, ...]
    table: np.ndarray


def cohen_kappa(first: Sequence[Hashable], second: Sequence[Hashable], *,
                categories: Sequence[Hashable] | None = None) -> Agreement:
    """Percent agreement and unweighted Cohen's κ of two reviewers' ratings.

    Args:
        first: the first reviewer's rating of each co-rated item.
        second: the second reviewer's ratings of the same items, in the same order.
        categories: the possible ratings, the order of the contingency table (default:
            the ratings seen, in order of first appearance in ``first`` then
            ``second``). Categories nobody used change nothing.

    Returns:
        An :class:`Agreement`.

    Raises:
        ValueError: the sequences differ in length, are empty, or hold a rating outside
            ``categories`` (named, with its position).
    """
    a, b = list(first), list(second)
    if len(a) != len(b):
        raise ValueError(f"the two reviewers' ratings differ in length: {len(a)} and "
                         f"{len(b)} (give the ratings of the same items in the same order)")
    if not a:
        raise ValueError("no co-rated items: Cohen's kappa needs at least one item both "
                         "reviewers rated")
    cats = list(dict.fromkeys([*a, *b]) if categories is None else dict.fromkeys(categories))
    index = {c: i for i, c in enumerate(cats)}
    table = np.zeros((len(cats), len(cats)), dtype=np.int64)
    for pos, (x, y) in enumerate(zip(a, b, strict=True)):
        for who, value in (("first", x), ("second", y)):
            if value not in index:
                raise ValueError(f"{who} reviewer's rating {value!r} at item {pos} is not "
                                 f"one of the categories {cats}")
        table[index[x], index[y]] += 1
    n = len(a)
    n_agree = int(np.trace(table))
    p_o = n_agree / n
    p_e = float((table.sum(axis=1) / n) @ (table.sum(axis=0) / n))
    kappa = math.nan if p_e >= 1.0 - 1e-15 else (p_o - p_e) / (1.0 - p_e)
    return Agreement(n_items=n, n_agree=n_agree, agreement=100.0 * p_o, expected=p_e,
                     kappa=float(kappa), categories=tuple(cats), table=table)
