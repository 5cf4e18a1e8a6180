"""Flat Experience baseline (CDEG paper, "Baselines": experience "distilled from
historical trajectories as unstructured text").

Snippets from successful episodes or graph edges, shown once before the final answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clinenv.embeddings.base import Similarity
from clinenv.wrappers.baselines.experience import (
    MemoryWrapper,
    TextRetriever,
    Trajectory,
    load_trajectories,
    observation_line,
)
from clinenv.wrappers.cdeg.graph import CDEGraph
from clinenv.wrappers.reask import next_step

#: Findings of a trajectory's start named in its snippet.
FIRST_FINDINGS = 2
#: The experience prompt; ``{snippets}``: bullet lines, ``{next}``: what to do next.
EXPERIENCE_PROMPT = (
    "Diagnostic experience from earlier consultations that may be relevant:\n{snippets}\n\n"
    "Weigh it against this patient's findings. Then {next}.")


@dataclass(frozen=True)
class Snippet:
    """One experience sentence and the ``(dataset, case_id)`` pairs it comes from."""

    text: str
    owners: tuple[tuple[str, str], ...]


def snippets_from_trajectories(trajectories: Sequence[Trajectory]) -> list[Snippet]:
    """One snippet per successful trajectory: ``"In a case with <first findings>,
    acquiring <exams> led to the diagnosis <answer>."``"""
    out = []
    for t in trajectories:
        if t.outcome != "success" or not t.observations:
            continue
        first = "; ".join(observation_line(o) for o in t.observations[:FIRST_FINDINGS])
        exams = list(dict.fromkeys(str(o.get("context")) for o in t.observations
                                   if o.get("source") == "Measurement"))
        acquired = ("acquiring " + ", ".join(exams)) if exams else "history taking"
        out.append(Snippet(f"In a case with {first}, {acquired} led to the diagnosis "
                           f"{t.answer}.", ((t.dataset, t.case_id),)))
    return out


def snippets_from_graph(graph: CDEGraph) -> list[Snippet]:
    """One snippet per revision edge: ``"When <D_s> was diagnosed, <missing> (acquired
    by <actions>) and <ignored> led to revising it to <D_t>; <blocking> favoured
    keeping it."``; owners are the edge's cases (dataset unknown: ``""``)."""
    diag = graph.diagnosis_by_id
    text = {e.node_id: e.atom.text() for e in graph.evidence}
    out = []
    for edge in graph.revisions:
        parts = []
        if edge.missing:
            actions = list(dict.fromkeys(
                graph.action_by_id[a].name for e in edge.missing
                for a in graph.actions_for_evidence.get(e, ())))
            how = f" (acquired by {', '.join(actions)})" if actions else ""
            parts.append(f"the missing evidence {', '.join(text[e] for e in edge.missing)}"
                         f"{how}")
        if edge.ignored:
            parts.append(f"the overlooked evidence {', '.join(text[e] for e in edge.ignored)}")
        sentence = (f"When {diag[edge.source].label} was diagnosed, "
                    f"{' and '.join(parts) or 'other evidence'} led to revising it to "
                    f"{diag[edge.target].label}")
        if edge.blocking:
            sentence += f"; {', '.join(text[e] for e in edge.blocking)} favoured keeping it"
        out.append(Snippet(sentence + ".", tuple(("", c) for c in edge.cases)))
    return out


class FlatExperienceDoctor(MemoryWrapper):
    """Flat Experience around any doctor policy (docs/api/wrappers.md).

    Args:
        doctor: the inner doctor policy.
        snippets: the memory.
        similarity: the retrieval similarity.
        k: snippets per retrieval (default 3).
        max_reasks: re-asks per episode (default 1).
    """

    suffix = "+flat-experience"
    kind = "flat-experience"

    def __init__(self, doctor: Any, snippets: Sequence[Snippet], *, similarity: Similarity,
                 k: int = 3, max_reasks: int = 1) -> None:
        self.snippets = list(snippets)
        retriever = TextRetriever([s.text for s in self.snippets],
                                  [s.owners for s in self.snippets], similarity)
        super().__init__(doctor, retriever, k=k, max_reasks=max_reasks)

    @classmethod
    def from_run_logs(cls, doctor: Any, paths: Sequence[str | Path], **kwargs: Any,
                      ) -> FlatExperienceDoctor:
        """Snippets from the successful episodes of run logs."""
        return cls(doctor, snippets_from_trajectories(load_trajectories(paths)), **kwargs)

    @classmethod
    def from_graph(cls, doctor: Any, graph: CDEGraph, **kwargs: Any) -> FlatExperienceDoctor:
        """Snippets from a CDEG graph's revision edges."""
        return cls(doctor, snippets_from_graph(graph), **kwargs)

    def before_answer(self, observation: Mapping[str, Any], info: Mapping[str, Any],
                      proposed: str) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
        """The experience prompt, or ``None`` when the memory has nothing to give."""
        found = self.retrieve()
        if not found:
            return None
        phase = str(info.get("phase", "acquire"))
        bullets = "\n".join(f"- {self.snippets[i].text}" for i, _ in found)
        text = EXPERIENCE_PROMPT.format(snippets=bullets, next=next_step(phase))
        retrieved = [{"snippet": i, "score": round(score, 4)} for i, score in found]
        return text, {"snippets": len(found)}, {"retrieved": retrieved}
