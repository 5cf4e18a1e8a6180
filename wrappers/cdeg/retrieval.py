"""Graph retrieval of CDEG's evidence-state intervention: global and localized.

CDEG paper, "Graph Retrieval": coverage (Eq. 7) must exceed the threshold; ties go to
``support``, then the earlier edge; counts update incrementally as S_t grows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from clinenv.embeddings.base import Similarity
from clinenv.embeddings.similarity import KeyIndex
from clinenv.wrappers.cdeg.atoms import normalize_concept
from clinenv.wrappers.cdeg.graph import CDEGraph, RevisionEdge
from clinenv.wrappers.cdeg.thresholds import COVERAGE_THRESHOLD, DIAGNOSIS_THRESHOLD

__all__ = ["BASES", "COVERAGE_THRESHOLD", "DIAGNOSIS_THRESHOLD", "CoverageBasis",
           "CoverageCounter", "DiagnosisMatch", "DiagnosisMatcher", "EdgeIndex", "Retrieved",
           "edge_ids", "missing_only_edges"]
CoverageBasis = Literal["edge", "edge+context"]
BASES = ("edge", "edge+context")


def edge_ids(edge: RevisionEdge, basis: CoverageBasis = "edge") -> tuple[str, ...]:
    """E_{s->t} of ``edge`` under ``basis`` (no repeats, graph order)."""
    ids = edge.evidence_ids()
    if basis == "edge+context":
        ids = tuple(dict.fromkeys(ids + edge.context))
    return ids


def missing_only_edges(graph: CDEGraph) -> int:
    """Revision edges whose E_{s->t} under ``"edge"`` is only missing evidence. Their
    coverage stays 0 until the doctor acquires that evidence itself, so under the
    literal Eq. 7 they can never prompt its acquisition; ``"edge+context"`` makes them
    retrievable."""
    return sum(1 for e in graph.revisions if e.missing and not (e.ignored or e.blocking))


@dataclass(frozen=True)
class Retrieved:
    """A retrieved revision edge and its coverage (a float in ``[0, 1]``)."""

    edge: RevisionEdge
    coverage: float


class CoverageCounter:
    """``|S_t ∩ E_{s->t}|`` of every edge of an :class:`EdgeIndex`, for one episode.

    Attributes:
        hits: ``int32`` array ``(n_edges,)``, in the index's edge order.
        excluded: ``bool`` array ``(n_edges,)``: edges this episode must never retrieve
            (:meth:`exclude`; the edges mined from the case being solved,
            :func:`clinenv.wrappers.cdeg.heldout.own_case_edges`).
    """

    def __init__(self, index: EdgeIndex) -> None:
        self.index = index
        self.hits = np.zeros(len(index.edges), dtype=np.int32)
        self.excluded = np.zeros(len(index.edges), dtype=bool)
        self._ids: set[str] = set()

    def exclude(self, edges: list[int] | tuple[int, ...]) -> None:
        """Never retrieve these edges (indices in the index's edge order) this episode."""
        self.excluded[np.asarray(edges, dtype=np.intp)] = True

    def add(self, evidence_id: str) -> None:
        """Add one evidence node to S_t (a repeat changes nothing)."""
        if evidence_id in self._ids:
            return
        self._ids.add(evidence_id)
        touched = self.index.by_evidence.get(evidence_id)
        if touched is not None:
            self.hits[touched] += 1

    def coverage(self) -> np.ndarray:
        """cov_t of every edge (Eq. 7): ``float64`` ``(n_edges,)``; 0 for an empty edge."""
        return self.hits / self.index.sizes


class EdgeIndex:
    """The revision edges E_D of one graph, indexed for retrieval (built once).

    Args:
        graph: the CDEG graph.
        basis: ``"edge"`` or ``"edge+context"`` (docs/cdeg.md).

    Raises:
        ValueError: an unknown ``basis``.
    """

    def __init__(self, graph: CDEGraph, basis: CoverageBasis = "edge") -> None:
        if basis not in BASES:
            raise ValueError(f"coverage basis must be one of {BASES}, got {basis!r}")
        self.basis = basis
        self.edges = tuple(graph.revisions)
        ids = [edge_ids(e, basis) for e in self.edges]
        # an edge without evidence has coverage 0 (graph.coverage): size 1, no hits
        self.sizes = np.array([max(1, len(i)) for i in ids], dtype=np.float64)
        self.support = np.array([e.support for e in self.edges], dtype=np.int64)
        by_evidence: dict[str, list[int]] = {}
        for k, refs in enumerate(ids):
            for ref in refs:
                by_evidence.setdefault(ref, []).append(k)
        self.by_evidence = {k: np.array(v, dtype=np.intp) for k, v in by_evidence.items()}
        # candidate order for ties: more support first, then graph order
        self.order = np.lexsort((np.arange(len(self.edges)), -self.support)).astype(np.intp)
        by_source: dict[str, list[int]] = {}
        for k in self.order:
            by_source.setdefault(self.edges[k].source, []).append(int(k))
        self.by_source = {k: np.array(v, dtype=np.intp) for k, v in by_source.items()}

    def counter(self) -> CoverageCounter:
        """A fresh :class:`CoverageCounter` (empty S_t)."""
        return CoverageCounter(self)

    def global_best(self, counter: CoverageCounter,
                    threshold: float = COVERAGE_THRESHOLD) -> Retrieved | None:
        """Global retrieval: the edge of E_D with the highest coverage, if ``> threshold``."""
        return self._best(counter, self.order, threshold)

    def local_best(self, counter: CoverageCounter, source: str,
                   threshold: float = COVERAGE_THRESHOLD) -> Retrieved | None:
        """Localized retrieval: the best outgoing edge of diagnosis node ``source``, if
        its coverage is ``> threshold``."""
        candidates = self.by_source.get(source)
        if candidates is None:
            return None
        return self._best(counter, candidates, threshold)

    def _best(self, counter: CoverageCounter, candidates: np.ndarray,
              threshold: float) -> Retrieved | None:
        if len(candidates) == 0:
            return None
        cov = counter.hits[candidates] / self.sizes[candidates]
        cov[counter.excluded[candidates]] = -np.inf  # never retrieved
        pick = int(np.argmax(cov))  # first maximum: the tie order of self.order
        if not cov[pick] > threshold:  # strict: "exceeds" (docs/cdeg.md)
            return None
        return Retrieved(self.edges[int(candidates[pick])], float(cov[pick]))


#: An option letter of K: ``"B"``, ``"(B)"``, ``"B."``, ``"B) text"``, ``"B. text"``.
_OPTION = re.compile(r"^\(?([A-Z])(?:\)?[.:]?$|[.)]\s+\S)")


@dataclass(frozen=True)
class DiagnosisMatch:
    """A proposed diagnosis matched to a diagnosis node D_cur.

    Attributes:
        node_id: the diagnosis node id.
        label: its label.
        method: ``"exact"`` (normalized label or alias) or ``"semantic"``.
        score: 1.0 for exact, else the similarity (>= the threshold).
    """

    node_id: str
    label: str
    method: str
    score: float


class DiagnosisMatcher:
    """Match a proposed diagnosis to a node of V_D: the exact normalized label or alias,
    else the most similar label when its similarity is ``>= threshold`` (CDEG: 0.65).

    Labels are encoded once (:class:`~clinenv.embeddings.similarity.KeyIndex`, as for
    evidence nodes).

    Args:
        graph: the CDEG graph.
        similarity: scores the proposed text against node labels.
        threshold: minimum similarity of a semantic match.
    """

    def __init__(self, graph: CDEGraph, similarity: Similarity, *,
                 threshold: float = DIAGNOSIS_THRESHOLD) -> None:
        self.similarity = similarity
        self.threshold = float(threshold)
        self.nodes = tuple(graph.diagnoses)
        self.labels = [n.label for n in self.nodes]
        self.exact: dict[str, int] = {}
        for k, node in enumerate(self.nodes):
            for name in (node.label, *node.aliases):
                self.exact.setdefault(normalize_concept(name), k)
        self.index = KeyIndex(similarity, self.labels)

    def match(self, proposed: str,
              candidates: Sequence[str] | None = None) -> DiagnosisMatch | None:
        """D_cur for the proposed diagnosis text, or ``None``.

        Args:
            proposed: the diagnosis as the doctor wrote it (marker already removed).
            candidates: K, when the case has candidate labels: a bare option letter
                (``"B"``, ``"(B)"``, ``"B. text"``) is read as that candidate.
        """
        text = proposed.strip()
        option = _OPTION.match(text)
        if candidates and option:
            k = ord(option.group(1).upper()) - ord("A")
            if 0 <= k < len(candidates):
                text = str(candidates[k])
        key = normalize_concept(text)
        if not key or not self.nodes:
            return None
        if key in self.exact:
            node = self.nodes[self.exact[key]]
            return DiagnosisMatch(node.node_id, node.label, "exact", 1.0)
        scores = self.index.scores([key])[0]  # NaN as -inf: never the arg-max
        best = int(np.argmax(scores))
        if scores[best] < self.threshold:
            return None
        node = self.nodes[best]
        return DiagnosisMatch(node.node_id, node.label, "semantic", float(scores[best]))
