"""The evolving patient evidence state S_t of CDEG's evidence-state intervention.

CDEG paper, "Evidence-State Intervention": "CDEG maintains an evolving patient evidence
state S_t, which contains graph evidence nodes corresponding to the observations
acquired up to interaction turn t. Newly obtained observations [...] are mapped to
graph evidence nodes through hybrid matching, which combines exact and semantic
similarity matching" (threshold 0.72, "Implementation Details").

Per step, :meth:`EvidenceState.update` reads ``info["new_observations"]`` (observation
dicts ``{"obs_id", "source", "turn", "context", "content", "availability", "exam_id"}``),
maps each observation to evidence atoms with an
:class:`~clinenv.wrappers.cdeg.extractors.AtomExtractor`, and each atom to at most one
evidence node of V_E:

1. exact: the atom's :meth:`~clinenv.wrappers.cdeg.atoms.EvidenceAtom.key` is a key of
   ``graph.evidence_by_key``;
2. otherwise semantic: the node whose text (:meth:`EvidenceAtom.text`) is most similar to
   the atom's text, when that similarity is ``>= threshold``. Only nodes of the same
   polarity are candidates (``match_polarity``, default on): "no chest pain" and "chest
   pain" are close for any encoder but are opposite evidence.

The node texts are encoded once per :class:`NodeMatcher` (built once per wrapper): a
similarity with ``encode`` and ``similarity_to_matrix`` (an
:class:`~clinenv.embeddings.similarity.EncoderSimilarity`) keeps a unit-vector matrix,
so one observation costs one cached encoder lookup and one matrix product; any other
:class:`~clinenv.embeddings.base.Similarity` (the lexical fallback, a test stub) is
called with the node texts.

The state also keeps what the selective intervention needs: which observation first
gave each evidence node, the current menu ``info["menu"]``, the questions already asked
and the phase.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from clinenv.embeddings.base import Similarity
from clinenv.wrappers.cdeg.atoms import EvidenceAtom, normalize_concept
from clinenv.wrappers.cdeg.graph import CDEGraph

#: CDEG "Implementation Details": evidence matching threshold (SapBERT cosine).
EVIDENCE_THRESHOLD = 0.72


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

    Raises:
        ValueError: ``threshold`` is not a finite number.
    """

    def __init__(self, graph: CDEGraph, similarity: Similarity, *,
                 threshold: float = EVIDENCE_THRESHOLD, match_polarity: bool = True) -> None:
        if not np.isfinite(threshold):
            raise ValueError(f"threshold must be a finite number, got {threshold!r}")
        self.graph = graph
        self.similarity = similarity
        self.threshold = float(threshold)
        self.match_polarity = match_polarity
        self.node_ids = tuple(n.node_id for n in graph.evidence)
        self.node_texts = tuple(n.atom.text() for n in graph.evidence)
        self._absent = np.array([n.atom.polarity == "absent" for n in graph.evidence],
                                dtype=bool)
        self._to_matrix = getattr(similarity, "similarity_to_matrix", None)
        encode = getattr(similarity, "encode", None)
        self._vectors = None
        if callable(self._to_matrix) and callable(encode) and self.node_texts:
            self._vectors = np.asarray(encode(list(self.node_texts)), dtype=np.float32)

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
            texts = [a.text() for _, a in pending]
            if self._vectors is not None:
                scores = np.asarray(self._to_matrix(texts, self._vectors))
            else:
                scores = np.asarray(self.similarity.similarity(texts, list(self.node_texts)))
            scores = scores.astype(np.float64, copy=True)
            for row, (i, atom) in enumerate(pending):
                if self.match_polarity:
                    scores[row, self._absent != (atom.polarity == "absent")] = -np.inf
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
        self._seen_obs: set[str] = set()

    def update(self, info: Mapping[str, Any]) -> list[EvidenceMatch]:
        """Take one step's ``info``: menu, phase, turn and ``new_observations``.

        An observation already taken (same ``obs_id``) is skipped, so calling this twice
        with the same info changes nothing.

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
            obs_id = str(obs.get("obs_id", ""))
            if obs_id in self._seen_obs:
                continue
            self._seen_obs.add(obs_id)
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
