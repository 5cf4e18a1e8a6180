"""Work units and their grouping by case.

A unit is one scheduled episode ``(case_index, repetition, seed)``, idempotent; whole
case groups go to one runner, so a case's repetitions share a server's prefix cache.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, MutableSequence

__all__ = ["Unit", "case_groups", "take_tail_group"]

#: One scheduled episode: ``(case_index, repetition, seed)``.
Unit = tuple[int, int, int]


def case_groups(units: Iterable[Unit]) -> list[list[Unit]]:
    """The units grouped by case: groups in order of each case's first unit, units in
    their given order within a group.

    >>> case_groups([(0, 0, 5), (1, 0, 6), (0, 1, 7)])
    [[(0, 0, 5), (0, 1, 7)], [(1, 0, 6)]]
    """
    groups: dict[int, list[Unit]] = {}
    for unit in units:
        groups.setdefault(unit[0], []).append(unit)
    return list(groups.values())


def take_tail_group(queue: MutableSequence[Unit],
                    busy_cases: Collection[int]) -> list[Unit] | None:
    """Remove and return the last case group of a runner's ``queue`` when that case has
    no unit in flight on the runner (``busy_cases``), so another runner can take the
    whole case; else leave the queue as it is and return ``None``.

    >>> queue = [(0, 1, 5), (2, 0, 6), (2, 1, 7)]
    >>> take_tail_group(queue, busy_cases={0})
    [(2, 0, 6), (2, 1, 7)]
    >>> queue, take_tail_group(queue, busy_cases={0})
    ([(0, 1, 5)], None)
    """
    if not queue or queue[-1][0] in busy_cases:
        return None
    case = queue[-1][0]
    group: list[Unit] = []
    while queue and queue[-1][0] == case:
        group.append(queue.pop())
    group.reverse()
    return group
