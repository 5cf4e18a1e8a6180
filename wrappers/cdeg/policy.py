"""The CDEG policy wrapper: evidence-state intervention around any doctor policy.

CDEG paper, "Evidence-State Intervention": update S_t, retrieve an edge, re-ask the doctor
with guidance when the intervention says so (docs/cdeg.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from clinenv.embeddings.base import Similarity
from clinenv.wrappers.cdeg.graph import CDEGraph
from clinenv.wrappers.cdeg.heldout import OverlapWarner, construction_cases, own_case_edges
from clinenv.wrappers.cdeg.intervention import Mode, select_intervention
from clinenv.wrappers.cdeg.retrieval import (
    CoverageBasis,
    DiagnosisMatcher,
    EdgeIndex,
    Retrieved,
)
from clinenv.wrappers.cdeg.state import EvidenceState, NodeMatcher
from clinenv.wrappers.cdeg.thresholds import (
    COVERAGE_THRESHOLD,
    DIAGNOSIS_THRESHOLD,
    EVIDENCE_THRESHOLD,
)
from clinenv.wrappers.reask import ReaskWrapper, Review, final_answer


class CDEGConfig(BaseModel):
    """Settings of :class:`CDEGDoctor` (defaults: CDEG "Implementation Details").

    Attributes:
        evidence_threshold: similarity for a semantic evidence match (0.72).
        diagnosis_threshold: similarity for a semantic diagnosis match (0.65).
        coverage_threshold: a retrieved edge's coverage must exceed it (0.6, strict).
        max_deferrals: re-asks per episode (>= 0); after them the answer stands.
        mode: ``"both"``, or the Table 3 ablations ``"acquisition_only"`` /
            ``"reappraisal_only"``.
        coverage_basis: ``"edge"`` (Eq. 7 literally: missing, ignored and blocking
            evidence) or ``"edge+context"`` (also the edge's ``context``, so an edge whose
            evidence is all missing can be retrieved before it is acquired).
        match_polarity: semantic matches only between atoms of the same polarity.
        match_attributes: semantic matches only between atoms of compatible direction and
            temporal status.
        global_guidance: assess the global edge when localized retrieval finds none
            (acquisition only, not when the proposal matches D_t; a deviation, off by
            default; docs/cdeg.md).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    evidence_threshold: float = Field(default=EVIDENCE_THRESHOLD, ge=-1.0, le=1.0)
    diagnosis_threshold: float = Field(default=DIAGNOSIS_THRESHOLD, ge=-1.0, le=1.0)
    coverage_threshold: float = Field(default=COVERAGE_THRESHOLD, ge=0.0, lt=1.0)
    max_deferrals: int = Field(default=2, ge=0, le=100)
    mode: Mode = "both"
    coverage_basis: CoverageBasis = "edge"
    match_polarity: bool = True
    match_attributes: bool = True
    global_guidance: bool = False


class CDEGDoctor(ReaskWrapper):
    """Wrap a doctor policy with CDEG's evidence-state intervention (docs/cdeg.md).

    Args:
        doctor: any doctor policy.
        graph: the CDEG graph.
        similarity: the similarity of hybrid matching (SapBERT in the paper).
        extractor: observation -> atoms (default ``DeterministicExtractor``); use the one
            the graph was built with.
        config: :class:`CDEGConfig`.
        overlap: the run's shared ``OverlapWarner`` (default: one of its own).

    Attributes:
        state: the :class:`~clinenv.wrappers.cdeg.state.EvidenceState` (S_t).
        last_global: the latest global retrieval (:class:`Retrieved` or ``None``).
        case: ``(dataset, case_id)`` of the episode (``None`` before its first step).
        excluded: ids of the edges mined from the episode's case (never retrieved).

    Raises:
        ValueError: the graph's ``metadata["construction_cases"]`` is malformed.
    """

    suffix = "+cdeg"
    kind = "cdeg"

    def __init__(self, doctor: Any, graph: CDEGraph, *, similarity: Similarity,
                 extractor: Any = None, config: CDEGConfig | None = None,
                 overlap: OverlapWarner | None = None) -> None:
        super().__init__(doctor)
        if extractor is None:
            from clinenv.wrappers.cdeg.extractors import DeterministicExtractor

            extractor = DeterministicExtractor()
        self.graph = graph
        self.similarity = similarity
        self.extractor = extractor
        self.cdeg = config or CDEGConfig()
        self.index = EdgeIndex(graph, self.cdeg.coverage_basis)
        self.diagnoses = DiagnosisMatcher(graph, similarity,
                                          threshold=self.cdeg.diagnosis_threshold)
        self.state = EvidenceState(
            NodeMatcher(graph, similarity, threshold=self.cdeg.evidence_threshold,
                        match_polarity=self.cdeg.match_polarity,
                        match_attributes=self.cdeg.match_attributes), extractor)
        self._graph_sha256: str | None = None
        self.construction = construction_cases(graph)
        self.overlap = overlap if overlap is not None else OverlapWarner(graph)
        self.on_reset()

    def on_reset(self) -> None:
        """Empty S_t, the coverage counts and the deferral count."""
        self.state.reset()
        self.counter = self.index.counter()
        self.last_global: Retrieved | None = None
        self._deferrals = 0
        self.case: tuple[str, str] | None = None
        self.excluded: tuple[str, ...] = ()

    def wrapper_config(self) -> dict[str, Any]:
        """``{"cdeg": CDEGConfig, "similarity", "extractor", "graph": {"counts",
        "sha256"}}`` (the sha256 of the graph's canonical JSON)."""
        if self._graph_sha256 is None:
            self._graph_sha256 = hashlib.sha256(
                self.graph.model_dump_json().encode("utf-8")).hexdigest()
        return {"cdeg": self.cdeg.model_dump(mode="json"),
                "similarity": str(getattr(self.similarity, "name", "?")),
                "extractor": str(getattr(self.extractor, "name",
                                         type(self.extractor).__name__)),
                "graph": {"counts": self.graph.counts(), "sha256": self._graph_sha256}}

    # ------------------------------------------------------------------- steps
    def observe(self, observation: Mapping[str, Any], info: Mapping[str, Any]) -> None:
        """Update S_t and run global retrieval (logged when S_t or its result changes);
        at the episode's first step, exclude the edges mined from its case."""
        added = self.state.update(info)
        for match in added:
            self.counter.add(match.evidence_id)
        if self.case is None and info.get("case_id") is not None:
            self._start_case(str(info.get("dataset") or ""), str(info["case_id"]))
        best = self.index.global_best(self.counter, self.cdeg.coverage_threshold)
        before = self.last_global
        changed = (best is None) != (before is None) or (
            best is not None and before is not None
            and (best.edge.edge_id, best.coverage) != (before.edge.edge_id, before.coverage))
        self.last_global = best
        if added or changed:
            self.log({"turn": self.state.turn, "phase": self.state.phase, "kind": "global",
                      "edge": best.edge.edge_id if best else None,
                      "edge_cases": list(best.edge.cases) if best else None,
                      "coverage": round(best.coverage, 4) if best else None,
                      "new_evidence": [m.to_log() for m in added]})

    def _start_case(self, dataset: str, case_id: str) -> None:
        self.case = (dataset, case_id)
        own = own_case_edges(self.index.edges, dataset, case_id, self.construction)
        if own:
            self.counter.exclude(own)
            self.excluded = tuple(self.index.edges[k].edge_id for k in own)
            self.log({"turn": self.state.turn, "phase": self.state.phase,
                      "kind": "own_case_edges", "case_id": case_id,
                      "edges": list(self.excluded)})
        self.overlap.check(dataset, case_id)

    def review(self, observation: Mapping[str, Any], info: Mapping[str, Any],
               action: str) -> Review:
        """Assess a final answer and defer it when an intervention triggers."""
        phase = str(info.get("phase", "acquire"))
        while True:
            proposed = final_answer(action, phase)
            if proposed is None:
                return action
            entry, intervention = self._assess(proposed, info, phase)
            if intervention is None or not intervention.triggers:
                self.log(entry)
                return action
            if self._deferrals >= self.cdeg.max_deferrals:
                self.log(entry | {"kind": "deferral_limit", "intended": entry["kind"]})
                return action
            self._deferrals += 1
            self.log(entry | {"deferrals": self._deferrals})
            new_action = yield self.reask(observation, info, intervention.prompt(phase),
                                          intervention.guidance())
            if phase != "acquire":
                return new_action if final_answer(new_action, phase) else action
            action = new_action

    def _assess(self, proposed: str, info: Mapping[str, Any],
                phase: str) -> tuple[dict[str, Any], Any]:
        entry: dict[str, Any] = {
            "turn": self.state.turn, "phase": phase, "kind": "none", "retrieval": "local",
            "edge": None, "edge_cases": None, "coverage": None, "proposed": proposed,
            "matched": None, "evidence": [], "action": None, "deferrals": self._deferrals}
        node = self.diagnoses.match(proposed, info.get("candidates"))
        found = None
        reason = "no_diagnosis_node"
        if node is not None:
            entry["matched"] = {"id": node.node_id, "label": node.label,
                                "method": node.method, "score": round(node.score, 4)}
            found = self.index.local_best(self.counter, node.node_id,
                                          self.cdeg.coverage_threshold)
            reason = "no_edge"
        mode = self.cdeg.mode
        if found is None and self.cdeg.global_guidance and self.last_global is not None:
            # opt-in global guidance (CDEGConfig.global_guidance): acquisition only, and
            # never when the proposal already is the edge's D_t
            if node is not None and node.node_id == self.last_global.edge.target:
                return entry | {"reason": "proposes_global_target"}, None
            found, mode = self.last_global, "acquisition_only"
            entry["retrieval"] = "global"
            if self.cdeg.mode == "reappraisal_only":
                return entry | {"reason": reason}, None
        if found is None:
            return entry | {"reason": reason}, None
        intervention = select_intervention(found.edge, self.state, self.graph, mode=mode)
        entry.update(kind=intervention.kind, edge=found.edge.edge_id,
                     edge_cases=list(found.edge.cases), coverage=round(found.coverage, 4),
                     evidence=list(intervention.evidence_ids), action=intervention.action)
        return entry, intervention
