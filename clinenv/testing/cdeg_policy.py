"""A hand-built CDEG graph, stub extractor and similarity, and a list-replying inner
doctor: the pieces that pin each decision of the CDEG policy wrapper in its tests.

:func:`wrapped` wraps a :class:`ListDoctor` in
:class:`~clinenv.wrappers.cdeg.policy.CDEGDoctor` over :func:`make_graph`, at the coverage
threshold :data:`LOW`. The graph's nodes and edges: docs/testing.md, "Hand-built
fixtures".
"""

from __future__ import annotations

import numpy as np

from clinenv.wrappers.cdeg.atoms import EvidenceAtom
from clinenv.wrappers.cdeg.graph import (
    ActionEvidenceEdge,
    ActionNode,
    CDEGraph,
    DiagnosisNode,
    EvidenceNode,
    RevisionEdge,
)
from clinenv.wrappers.cdeg.policy import CDEGConfig, CDEGDoctor

ATOMS = {
    "fever": EvidenceAtom(concept="fever"),
    "cough": EvidenceAtom(concept="productive cough"),
    "consolidation": EvidenceAtom(concept="consolidation", anatomy="right lower lobe"),
    "crackles": EvidenceAtom(concept="coarse crackles"),
    "clear": EvidenceAtom(concept="clear lung fields"),
    "pleuritic": EvidenceAtom(concept="pleuritic chest pain"),
}


def make_graph() -> CDEGraph:
    ev = [EvidenceNode(node_id=f"E{i}", atom=ATOMS[k]) for i, k in enumerate(
        ["fever", "cough", "consolidation", "crackles", "clear", "pleuritic"], start=1)]
    return CDEGraph(
        diagnoses=(DiagnosisNode(node_id="D1", label="acute bronchitis",
                                 aliases=("Bronchitis, acute",)),
                   DiagnosisNode(node_id="D2", label="lobar pneumonia"),
                   DiagnosisNode(node_id="D3", label="asthma")),
        evidence=tuple(ev),
        actions=(ActionNode(node_id="A1", kind="exam", name="Chest X-Ray (Imaging)"),
                 ActionNode(node_id="A2", kind="exam", name="Respiratory Examination"),
                 ActionNode(node_id="A3", kind="question",
                            name="Does it hurt when you breathe in?")),
        action_evidence=(ActionEvidenceEdge(action="A1", evidence="E3", count=3),
                         ActionEvidenceEdge(action="A2", evidence="E4"),
                         ActionEvidenceEdge(action="A3", evidence="E6")),
        revisions=(RevisionEdge(edge_id="R1", source="D1", target="D2", missing=("E3",),
                                ignored=("E1", "E2", "E4"), blocking=("E5",), support=2),
                   RevisionEdge(edge_id="R2", source="D3", target="D2", missing=("E6",),
                                context=("E1",))))


class StubExtractor:
    """Observation content -> atoms, by the keys of ATOMS (comma-separated)."""

    name = "stub"

    def __init__(self, extra=None):
        self.atoms = dict(ATOMS, **(extra or {}))

    def extract(self, observation):
        content = observation.get("content") or ""
        return [self.atoms[k.strip()] for k in content.split(",") if k.strip() in self.atoms]


class StubSimilarity:
    """Fixed scores: ``table[(query, key)]``, else 0."""

    name = "stub"

    def __init__(self, table=None):
        self.table = dict(table or {})
        self.calls = 0

    def similarity(self, queries, keys):
        self.calls += 1
        return np.array([[self.table.get((q, k), 0.0) for k in keys] for q in queries])


class ListDoctor:
    """Replies from a list; records every (text, info) it was asked with."""

    name = "list"

    def __init__(self, *replies):
        self.replies = list(replies)
        self.seen = []

    def reset(self, *, seed=None):
        self.seen = []

    def act(self, observation, info):
        self.seen.append((observation["text"], dict(info)))
        return self.replies.pop(0)


MENU = [{"id": "PE2", "name": "Respiratory Examination"},
        {"id": "T4", "name": "Chest X-Ray (Imaging)"}]


def step_info(turn, *contents, phase="acquire", menu=MENU, start=1, source="Measurement"):
    obs = [{"obs_id": f"O{start + i}", "source": source, "turn": turn, "context": "exam",
            "content": c, "availability": "recorded", "exam_id": None}
           for i, c in enumerate(contents)]
    return {"phase": phase, "turn": turn, "menu": list(menu) if phase == "acquire" else [],
            "candidates": None, "new_observations": obs}


#: The decision tests retrieve R1 at coverage 3/5; the paper's threshold is strict
#: ("exceeds 0.6"), so they lower it to 0.5 (the strict-threshold test pins 0.6).
LOW = 0.5


def wrapped(*replies, table=None, config=None, extra=None):
    inner = ListDoctor(*replies)
    config = config or CDEGConfig(coverage_threshold=LOW)
    doctor = CDEGDoctor(inner, make_graph(), similarity=StubSimilarity(table),
                        extractor=StubExtractor(extra), config=config)
    doctor.reset(seed=0)
    return doctor, inner


def finals(doctor):
    return [e for e in doctor.episode_log() if e["kind"] != "global"]
