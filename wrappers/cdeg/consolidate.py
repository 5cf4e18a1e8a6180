"""Graph consolidation: validated evidence -> G = (V_D, V_E, V_A, E_AE, E_ED, E_D)
(CDEG "Graph Consolidation", Eq. 6).

Edges exist only with validated promoting evidence; ids are deterministic (docs/cdeg.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from clinenv.embeddings.base import Similarity
from clinenv.embeddings.similarity import finite_scores
from clinenv.wrappers.cdeg.atoms import normalize_concept
from clinenv.wrappers.cdeg.candidates import MAX_EXAMPLES, MergedAtom
from clinenv.wrappers.cdeg.graph import (
    ActionEvidenceEdge,
    ActionNode,
    CDEGraph,
    DiagnosisNode,
    EvidenceDiagnosisEdge,
    EvidenceNode,
    RevisionEdge,
)
from clinenv.wrappers.cdeg.pairing import TrajectoryPair
from clinenv.wrappers.cdeg.thresholds import DIAGNOSIS_THRESHOLD

__all__ = ["DIAGNOSIS_THRESHOLD", "MAX_ALIASES", "DiagnosisIndex", "ValidatedPair",
           "consolidate", "normalize_diagnosis"]
#: Aliases kept per diagnosis node.
MAX_ALIASES = 5


def normalize_diagnosis(text: str) -> str:
    """Markdown marks (``*``, ``_``, ``#``, backticks) removed, then
    :func:`~clinenv.wrappers.cdeg.atoms.normalize_concept` (lower case, single spaces,
    no trailing punctuation): ``"**Acute Pancreatitis.**"`` -> ``"acute pancreatitis"``."""
    return normalize_concept(re.sub(r"[*_#`]", " ", str(text)))


class DiagnosisIndex:
    """Diagnoses merged into groups (the future V_D) by normalized text and similarity.

    :meth:`assign` compares a new normalized diagnosis with every group label (exact
    match first, then ``similarity``); it joins the most similar group when the score
    is >= ``threshold``, else starts a group labelled by it.

    Args:
        similarity: scores diagnosis texts.
        threshold: merge threshold.
    """

    def __init__(self, similarity: Similarity, threshold: float = DIAGNOSIS_THRESHOLD) -> None:
        self.similarity = similarity
        self.threshold = float(threshold)
        self.labels: list[str] = []
        self.aliases: list[list[str]] = []
        self._by_text: dict[str, int] = {}

    def assign(self, answer: str) -> int:
        """The group index of ``answer`` (creating a group if needed).

        Raises:
            ValueError: ``answer`` is empty after normalization.
        """
        label = normalize_diagnosis(answer)
        if not label:
            raise ValueError("cannot index an empty diagnosis")
        group = self._by_text.get(label)
        if group is None and self.labels:
            scores = np.asarray(self.similarity.similarity([label], self.labels))[0]
            if not np.issubdtype(scores.dtype, np.floating):
                scores = scores.astype(np.float64)
            scores = finite_scores(scores).astype(scores.dtype)  # NaN never wins
            best = int(np.argmax(scores))  # the first of equal best scores
            if scores[best] >= scores.dtype.type(self.threshold):  # in the scores' precision
                group = best
        if group is None:
            group = len(self.labels)
            self.labels.append(label)
            self.aliases.append([])
        self._by_text[label] = group
        alias = str(answer).strip()
        if alias not in self.aliases[group] and len(self.aliases[group]) < MAX_ALIASES:
            self.aliases[group].append(alias)
        return group


@dataclass(frozen=True)
class ValidatedPair:
    """One pair after validation, ready for consolidation.

    Attributes:
        pair: the trajectory pair (τ-, τ+*).
        source, target: :class:`DiagnosisIndex` groups of D_s and D_t (different).
        e_s, e_t: evidence sets (atom key -> merged atom).
        missing, ignored, blocking: validated atom keys (or every candidate when
            validation is off).
    """

    pair: TrajectoryPair
    source: int
    target: int
    e_s: Mapping[str, MergedAtom]
    e_t: Mapping[str, MergedAtom]
    missing: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()
    blocking: tuple[str, ...] = ()

    @property
    def promoting(self) -> bool:
        """Validated evidence toward D_t exists (missing or ignored)."""
        return bool(self.missing or self.ignored)


def consolidate(items: Sequence[ValidatedPair], diagnoses: DiagnosisIndex, *,
                metadata: Mapping[str, Any] | None = None) -> CDEGraph:
    """Build the graph (docs/cdeg.md) from validated pairs."""
    groups: dict[tuple[int, int], list[ValidatedPair]] = {}
    for item in items:
        groups.setdefault((item.source, item.target), []).append(item)
    d_ids: dict[int, str] = {}
    e_ids: dict[str, str] = {}
    e_atoms: dict[str, MergedAtom] = {}
    examples: dict[str, list[str]] = {}
    a_ids: dict[tuple[str, str], str] = {}
    ae: dict[tuple[str, str], set[str]] = {}
    ed: dict[tuple[str, str, str], int] = {}
    revisions: list[RevisionEdge] = []

    def node(key: str, item: ValidatedPair) -> str:
        merged = [m for m in (item.e_t.get(key), item.e_s.get(key)) if m is not None]
        if key not in e_ids:
            e_ids[key] = f"E{len(e_ids) + 1}"
            e_atoms[key] = merged[0]
            examples[key] = []
        for m in merged:
            for text in m.examples:
                if text not in examples[key] and len(examples[key]) < MAX_EXAMPLES:
                    examples[key].append(text)
        for tau, evidence in ((item.pair.failed, item.e_s), (item.pair.success, item.e_t)):
            for action in evidence[key].actions if key in evidence else ():
                a_id = a_ids.setdefault(action, f"A{len(a_ids) + 1}")
                ae.setdefault((a_id, e_ids[key]), set()).add(tau.source)
        return e_ids[key]

    def diag(group: int) -> str:
        return d_ids.setdefault(group, f"D{len(d_ids) + 1}")

    for (source, target), members in groups.items():
        promoting = [m for m in members if m.promoting]
        if not promoting:
            continue
        s_id, t_id = diag(source), diag(target)
        roles: dict[str, dict[str, None]] = {r: {} for r in ("missing", "ignored",
                                                              "blocking", "context")}
        for item in members:
            for role, keys, d_id in (("missing", item.missing, t_id),
                                     ("ignored", item.ignored, t_id),
                                     ("blocking", item.blocking, s_id)):
                for key in keys:
                    e_id = node(key, item)
                    roles[role][e_id] = None
                    ed[(e_id, d_id, role)] = ed.get((e_id, d_id, role), 0) + 1
            for key in item.e_s:
                if key in item.e_t:
                    roles["context"][node(key, item)] = None
        revisions.append(RevisionEdge(
            edge_id=f"R{len(revisions) + 1}", source=s_id, target=t_id,
            missing=tuple(roles["missing"]), ignored=tuple(roles["ignored"]),
            blocking=tuple(roles["blocking"]), context=tuple(roles["context"]),
            support=len(promoting),
            cases=tuple(dict.fromkeys(m.pair.failed.case_id
                                      for m in [*promoting, *members]))))
    return CDEGraph(
        diagnoses=tuple(DiagnosisNode(node_id=d, label=diagnoses.labels[g],
                                      aliases=tuple(diagnoses.aliases[g]))
                        for g, d in d_ids.items()),
        evidence=tuple(EvidenceNode(node_id=e, atom=e_atoms[k].atom,
                                    examples=tuple(examples[k])) for k, e in e_ids.items()),
        actions=tuple(ActionNode(node_id=a, kind=kind, name=name)
                      for (kind, name), a in a_ids.items()),
        action_evidence=tuple(ActionEvidenceEdge(action=a, evidence=e, count=len(srcs))
                              for (a, e), srcs in ae.items()),
        evidence_diagnosis=tuple(EvidenceDiagnosisEdge(evidence=e, diagnosis=d, role=r,
                                                       count=n)
                                 for (e, d, r), n in ed.items()),
        revisions=tuple(revisions), metadata=dict(metadata or {}))
