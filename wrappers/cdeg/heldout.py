"""Held-out use of a CDEG graph: no edge mined from the case being solved, and a warning
when the evaluation cases are construction cases.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

from clinenv.wrappers.cdeg.graph import CDEGraph, RevisionEdge

__all__ = ["ConstructionOverlapWarning", "OverlapWarner", "construction_cases",
           "own_case_edges"]


class ConstructionOverlapWarning(UserWarning):
    """A CDEG-wrapped run meets a case the graph was built from (docs/cdeg.md)."""


def construction_cases(graph: CDEGraph) -> dict[str, frozenset[str]] | None:
    """The graph's construction cases by dataset, or ``None`` when the graph does not
    record them (a graph built before they were recorded, or made by hand).

    Raises:
        ValueError: ``metadata["construction_cases"]`` is not ``{dataset: [case_id,
            ...]}``.
    """
    found = graph.metadata.get("construction_cases")
    if found is None:
        return None
    if not isinstance(found, Mapping) or not all(
            isinstance(ids, list | tuple) for ids in found.values()):
        raise ValueError("graph metadata field 'construction_cases' must map each dataset "
                         f"to a list of case ids, got {type(found).__name__}")
    return {str(d): frozenset(str(c) for c in ids) for d, ids in found.items()}


def own_case_edges(edges: tuple[RevisionEdge, ...], dataset: str, case_id: str,
                   construction: Mapping[str, frozenset[str]] | None) -> list[int]:
    """Indices (into ``edges``) of the edges mined from case ``(dataset, case_id)``
    (docs/cdeg.md).

    Args:
        edges: the graph's revision edges, in the order of an
            :class:`~clinenv.wrappers.cdeg.retrieval.EdgeIndex`.
        dataset: the case's dataset (``""``: unknown, the id alone decides).
        case_id: the case.
        construction: :func:`construction_cases` of the graph.
    """
    if construction is not None and dataset and case_id not in construction.get(
            dataset, ()):
        return []
    return [k for k, edge in enumerate(edges) if case_id in edge.cases]


class OverlapWarner:
    """Warn once when an evaluated case is one of the graph's construction cases.

    Args:
        graph: the CDEG graph.
        name: how the message names the graph (e.g. its file).
        emit: called with the message instead of ``warnings.warn(message,
            ConstructionOverlapWarning)``.

    Attributes:
        warned: the warning was given.
        n_overlapping: distinct construction cases met so far.
    """

    def __init__(self, graph: CDEGraph, *, name: str = "the CDEG graph",
                 emit: Callable[[str], Any] | None = None) -> None:
        self.construction = construction_cases(graph)
        self.edge_cases = frozenset(c for e in graph.revisions for c in e.cases)
        self.name = name
        self.emit = emit
        self.warned = False
        self._met: set[tuple[str, str]] = set()

    @property
    def n_overlapping(self) -> int:
        """Distinct construction cases met so far."""
        return len(self._met)

    def is_construction_case(self, dataset: str, case_id: str) -> bool:
        """Whether ``(dataset, case_id)`` is a construction case of the graph."""
        if self.construction is None:
            return case_id in self.edge_cases
        if not dataset:
            return any(case_id in ids for ids in self.construction.values())
        return case_id in self.construction.get(dataset, ())

    def check(self, dataset: str, case_id: str) -> bool:
        """Note one evaluated case; warn on the first construction case met.

        Returns:
            Whether the case is a construction case.
        """
        if not self.is_construction_case(dataset, case_id):
            return False
        self._met.add((dataset, case_id))
        if not self.warned:
            self.warned = True
            self._warn(self._message(dataset, case_id))
        return True

    def _message(self, dataset: str, case_id: str) -> str:
        if self.construction is None:
            what = ("a source case of its revision edges (the graph does not record its "
                    "construction cases)")
        else:
            n = sum(len(ids) for ids in self.construction.values())
            what = f"one of the {n} construction cases the graph was built from"
        of = f" of {dataset}" if dataset else ""
        return (f"{self.name}: case {case_id!r}{of} is {what}, so this run is not a "
                "held-out evaluation: edges mined from the case being solved are skipped, "
                "but the graph learnt from the cases it is evaluated on; split the cases "
                "with `clinenv data split` and evaluate on the evaluation list "
                "(`clinenv run --cases`)")

    def _warn(self, message: str) -> None:
        if self.emit is not None:
            self.emit(message)
        else:
            warnings.warn(message, ConstructionOverlapWarning, stacklevel=4)
