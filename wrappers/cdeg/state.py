"""The evolving patient evidence state S_t of CDEG's evidence-state intervention.

CDEG paper, "Evidence-State Intervention": hybrid matching of observations to evidence
nodes, exact key or semantic >= 0.72 among compatible nodes (docs/cdeg.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from clinenv.embeddings.base import Similarity
from clinenv.embeddings.similarity import KeyIndex
from clinenv.wrappers.cdeg.atoms import EvidenceAtom, normalize_concept
from clinenv.wrappers.cdeg.graph import CDEGraph
from clinenv.wrappers.cdeg.thresholds import EVIDENCE_THRESHOLD

__all__ = ["EVIDENCE_THRESHOLD", "EvidenceMatch", "EvidenceState", "NodeMatcher"]


@dataclass(frozen=True)
class EvidenceMatch:
    """One observation's atom mapped to an evidence node.

    Attributes:
        evidence_id: the evidence node id (``"E3"``).
        obs_id: the observation id of e_T (``"O4"``).
        atom: the atom's readable text (:meth:`EvidenceAtom.text`).
        method: ``"exact"`` or ``"semantic"``.
        score: 1.0 for exact, else the similarity (>= the threshold).
        source: ``"Patient"`` or ``"Measurement"``.
        context: the question asked or the exam name.
    """

    evidence_id: str
    obs_id: str
    atom: str
    method: str
    score: float
    source: str
    context: str

    def to_log(self) -> dict[str, Any]:
        """JSON-ready ``{"id", "obs_id", "atom", "method", "score"}``."""
        return {"id": self.evidence_id, "obs_id": self.obs_id, "atom": self.atom,
                "method": self.method, "score": round(float(self.score), 4)}


class NodeMatcher:
    """Hybrid matching of atoms to the evidence nodes of one graph (built once).

    Args:
        graph: the CDEG graph.
        similarity: scores atom texts against node texts.
        threshold: minimum similarity of a semantic match (CDEG: 0.72).
        match_polarity: semantic matches only among nodes of the atom's polarity.
        match_attributes: semantic matches only among nodes of compatible direction and
            temporal status (docs/cdeg.md).

    Raises:
        ValueError: ``threshold`` is not a finite number.
    """

    def __init__(self, graph: CDEGraph, similarity: Similarity, *,
                 threshold: float = EVIDENCE_THRESHOLD, match_polarity: bool = True,
                 match_attributes: bool = True) -> None:
        if not np.isfinite(threshold):
            raise ValueError(f"threshold must be a finite number, got {threshold!r}")
        self.graph = graph
        self.similarity = similarity
        self.threshold = float(threshold)
        self.match_polarity = match_polarity
        self.match_attributes = match_attributes
        self.node_ids = tuple(n.node_id for n in graph.evidence)
        self.node_texts = tuple(n.atom.text() for n in graph.evidence)
        atoms = [n.atom for n in graph.evidence]
        self._absent = np.array([a.polarity == "absent" for a in atoms], dtype=bool)
        self._direction = np.array([a.direction or "" for a in atoms], dtype=object)
        self._temporal = np.array([a.temporal for a in atoms], dtype=object)
        self.index = KeyIndex(similarity, self.node_texts)

    def compatible(self, atom: EvidenceAtom) -> np.ndarray:
        """``bool`` ``(n_nodes,)``: the nodes a semantic match of ``atom`` may reach."""
        ok = np.ones(len(self.node_ids), dtype=bool)
        if self.match_polarity:
            ok &= self._absent == (atom.polarity == "absent")
        if self.match_attributes:
            if atom.direction is not None:
                ok &= (self._direction == "") | (self._direction == atom.direction)
            if atom.temporal != "unknown":
                ok &= (self._temporal == "unknown") | (self._temporal == atom.temporal)
        return ok

    def match(self, atoms: Sequence[EvidenceAtom]) -> list[tuple[int, str, str, float]]:
        """Map ``atoms`` to evidence nodes.

        Returns:
            ``[(atom_index, evidence_id, method, score), ...]`` for the atoms that
            matched, in atom order (``method`` ``"exact"`` with score 1.0, or
            ``"semantic"`` with the similarity).
        """
        by_key = self.graph.evidence_by_key
        found: list[tuple[int, str, str, float]] = []
        pending: list[tuple[int, EvidenceAtom]] = []
        for i, atom in enumerate(atoms):
            node = by_key.get(atom.key())
            if node is not None:
                found.append((i, node, "exact", 1.0))
            else:
                pending.append((i, atom))
        if pending and self.node_ids:
            scores = self.index.scores([a.text() for _, a in pending])
            for row, (i, atom) in enumerate(pending):
                scores[row, ~self.compatible(atom)] = -np.inf
                best = int(np.argmax(scores[row]))
                if scores[row, best] >= self.threshold:
                    found.append((i, self.node_ids[best], "semantic",
                                  float(scores[row, best])))
        return sorted(found)


class EvidenceState:
    """S_t and what the selective intervention needs; reset per episode.

    Args:
        matcher: the :class:`NodeMatcher` of the wrapper's graph.
        extractor: observation -> atoms (``extract(observation) -> list[EvidenceAtom]``).

    Attributes:
        ids: S_t, the matched evidence node ids (a set).
        first_seen: evidence id -> the :class:`EvidenceMatch` that first added it.
        menu: the latest ``info["menu"]`` (``[{"id", "name"}, ...]``).
        asked: normalized patient questions asked so far.
        phase: the latest ``info["phase"]``.
        turn: the latest ``info["turn"]``.
    """

    def __init__(self, matcher: NodeMatcher, extractor: Any) -> None:
        self.matcher = matcher
        self.extractor = extractor
        self.reset()

    def reset(self) -> None:
        """Empty S_t (a new episode)."""
        self.ids: set[str] = set()
        self.first_seen: dict[str, EvidenceMatch] = {}
        self.menu: list[dict[str, Any]] = []
        self.asked: set[str] = set()
        self.phase = "acquire"
        self.turn = 0
        self._seen_obs: set[Any] = set()

    def update(self, info: Mapping[str, Any]) -> list[EvidenceMatch]:
        """Take one step's ``info``: menu, phase, turn and ``new_observations``.

        An observation already taken (same ``obs_id``) is skipped, so calling this twice
        with the same info changes nothing; an observation without an ``obs_id`` is
        recognized by its source, turn, context and content instead (so it never hides
        the observations after it).

        Returns:
            The matches of this step whose evidence node is new to S_t, in order.
        """
        self.phase = str(info.get("phase", self.phase))
        self.turn = int(info.get("turn", self.turn) or 0)
        menu = info.get("menu")
        self.menu = [dict(m) for m in menu] if isinstance(menu, Sequence) else []
        added: list[EvidenceMatch] = []
        for obs in info.get("new_observations") or ():
            if not isinstance(obs, Mapping):
                continue
            obs_id = str(obs.get("obs_id") or "")
            seen_key: Any = obs_id or ("", obs.get("source"), obs.get("turn"),
                                       obs.get("context"), obs.get("content"))
            if seen_key in self._seen_obs:
                continue
            self._seen_obs.add(seen_key)
            if obs.get("source") == "Patient" and obs.get("context"):
                self.asked.add(normalize_concept(str(obs["context"])))
            atoms = list(self.extractor.extract(obs))
            for index, node, method, score in self.matcher.match(atoms):
                if node in self.ids:
                    continue
                match = EvidenceMatch(node, obs_id, atoms[index].text(), method, score,
                                      str(obs.get("source", "")), str(obs.get("context", "")))
                self.ids.add(node)
                self.first_seen[node] = match
                added.append(match)
        return added
