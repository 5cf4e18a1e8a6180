"""CDEG's selective intervention for a retrieved revision edge (D_s, D_t).

CDEG paper, "Selective Intervention": blocked, acquire, reappraise or no action; the
prompts never name D_t (docs/cdeg.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from clinenv.wrappers.cdeg.atoms import normalize_concept, strip_group
from clinenv.wrappers.cdeg.graph import CDEGraph, RevisionEdge
from clinenv.wrappers.cdeg.state import EvidenceState
from clinenv.wrappers.reask import next_step

Mode = Literal["both", "acquisition_only", "reappraisal_only"]
MODES = ("both", "acquisition_only", "reappraisal_only")

#: Guidance that asks for acquisition; ``{evidence}``: the findings, ``{action}``: what to do.
ACQUIRE_PROMPT = (
    "Evidence check before a final diagnosis: in similar earlier cases the diagnosis "
    "changed once this was assessed, and it has not been assessed yet: {evidence}. "
    "Obtain it before deciding: {action}.")
#: Guidance that asks for reappraisal; ``{evidence}``: observed findings, ``{next}``: the
#: action expected afterwards.
REAPPRAISE_PROMPT = (
    "Evidence check before a final diagnosis: in similar earlier cases these findings, "
    "already obtained here, were overlooked: {evidence}. Reconsider how each of them "
    "bears on your diagnosis, then {next}.")


@dataclass(frozen=True)
class Intervention:
    """The outcome of :func:`select_intervention`.

    Attributes:
        kind: ``"acquire"``, ``"reappraise"``, ``"blocked"`` or ``"no_action"``.
        edge_id: the revision edge.
        evidence_ids: the evidence named (acquire: unobserved evidence the action yields;
            reappraise: promoting evidence in S_t; blocked: blocking evidence in S_t;
            no_action: unobserved promoting evidence).
        evidence_texts: what the prompt says of each (acquire: concept and site only;
            reappraise: the observed finding and its observation id).
        action: for ``"acquire"``: ``{"kind": "exam", "id", "name"}`` (a menu entry) or
            ``{"kind": "question", "question"}``; else ``None``.
    """

    kind: str
    edge_id: str
    evidence_ids: tuple[str, ...] = ()
    evidence_texts: tuple[str, ...] = ()
    action: dict[str, str] | None = field(default=None)

    @property
    def triggers(self) -> bool:
        """Whether the doctor is prompted (``acquire`` or ``reappraise``)."""
        return self.kind in ("acquire", "reappraise")

    def prompt(self, phase: str = "acquire") -> str:
        """The guidance text for the doctor (``""`` when nothing is prompted)."""
        evidence = "; ".join(self.evidence_texts)
        if self.kind == "acquire" and self.action is not None:
            if self.action["kind"] == "exam":
                what = (f"request the examination \"{self.action['name']}\" "
                        f"(REQUEST TEST: {self.action['id']})")
            else:
                what = f"ask the patient \"{self.action['question']}\""
            return ACQUIRE_PROMPT.format(evidence=evidence, action=what)
        if self.kind == "reappraise":
            return REAPPRAISE_PROMPT.format(evidence=evidence,
                                            next=next_step(phase))
        return ""

    def guidance(self) -> dict[str, Any]:
        """``info["guidance"]`` for the re-asked doctor: ``{"kind", "edge", "evidence"
        (texts), "action": {"id", "name"} or None, "question": str or None}``."""
        action = question = None
        if self.action is not None and self.action["kind"] == "exam":
            action = {"id": self.action["id"], "name": self.action["name"]}
        elif self.action is not None:
            question = self.action["question"]
        return {"kind": self.kind, "edge": self.edge_id,
                "evidence": list(self.evidence_texts), "action": action,
                "question": question}


def select_intervention(edge: RevisionEdge, state: EvidenceState, graph: CDEGraph, *,
                        mode: Mode = "both") -> Intervention:
    """The selective intervention for ``edge`` given S_t (docs/cdeg.md).

    Args:
        edge: the retrieved revision edge (D_s, D_t).
        state: the evidence state (S_t, menu, questions asked, phase).
        graph: the graph of ``edge`` (E_AE and node texts).
        mode: ``"both"``, ``"acquisition_only"`` or ``"reappraisal_only"``.

    Raises:
        ValueError: an unknown ``mode``.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    observed = state.ids
    blocking = tuple(e for e in edge.blocking if e in observed)
    if blocking:
        return Intervention("blocked", edge.edge_id, blocking,
                            tuple(_observed_text(state, e) for e in blocking))
    promoting = edge.promoting_ids()
    unobserved = tuple(e for e in promoting if e not in observed)
    if mode != "reappraisal_only" and state.phase == "acquire":
        found = _acquisition(unobserved, state, graph)
        if found is not None:
            action, ids = found
            return Intervention("acquire", edge.edge_id, ids,
                                tuple(_concept_text(graph, e) for e in ids), action)
    present = tuple(e for e in promoting if e in observed)
    if mode != "acquisition_only" and present:
        return Intervention("reappraise", edge.edge_id, present,
                            tuple(_observed_text(state, e) for e in present))
    return Intervention("no_action", edge.edge_id, unobserved,
                        tuple(_concept_text(graph, e) for e in unobserved))


def _acquisition(unobserved: Sequence[str], state: EvidenceState, graph: CDEGraph,
                 ) -> tuple[dict[str, str], tuple[str, ...]] | None:
    """The first available action (evidence in edge order, actions most frequent first)
    and the unobserved evidence it yields."""
    menu: dict[str, dict[str, Any]] = {}
    for entry in state.menu:
        name = str(entry.get("name", ""))
        for key in (normalize_concept(name), normalize_concept(strip_group(name))):
            menu.setdefault(key, entry)
    for evidence_id in unobserved:
        for action_id in graph.actions_for_evidence.get(evidence_id, ()):
            node = graph.action_by_id[action_id]
            if node.kind == "exam":
                entry = menu.get(normalize_concept(node.name)) or menu.get(
                    normalize_concept(strip_group(node.name)))
                if entry is None:
                    continue
                action = {"kind": "exam", "id": str(entry["id"]), "name": str(entry["name"])}
            elif normalize_concept(node.name) not in state.asked:
                action = {"kind": "question", "question": node.name}
            else:
                continue
            ids = tuple(e for e in unobserved
                        if action_id in graph.actions_for_evidence.get(e, ()))
            return action, ids
    return None


def _concept_text(graph: CDEGraph, evidence_id: str) -> str:
    atom = graph.evidence_by_id[evidence_id].atom
    return f"{atom.concept} ({atom.anatomy})" if atom.anatomy else atom.concept


def _observed_text(state: EvidenceState, evidence_id: str) -> str:
    seen = state.first_seen.get(evidence_id)
    if seen is None:
        return state.matcher.graph.evidence_by_id[evidence_id].atom.text()
    where = (f"Patient, asked \"{seen.context}\"" if seen.source == "Patient"
             else f"{seen.source} {seen.context}")
    return f"{seen.atom} [{seen.obs_id}, {where}]"
