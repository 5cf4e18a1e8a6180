"""Trajectory RAG baseline (CDEG paper, "Baselines": "similar successful historical
diagnostic trajectories as in-context examples").

The ``k`` most similar, shown once at the first final answer (docs/api/wrappers.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from clinenv.embeddings.base import Similarity
from clinenv.wrappers.baselines.experience import (
    MemoryWrapper,
    TextRetriever,
    Trajectory,
    load_trajectories,
)
from clinenv.wrappers.reask import next_step

#: Characters of one example trajectory's text in the prompt.
EXAMPLE_CHARS = 1500
#: The examples prompt; ``{examples}``: the example blocks, ``{next}``: what to do next.
EXAMPLES_PROMPT = (
    "Solved cases from earlier consultations whose interaction resembles this one, for "
    "reference:\n\n{examples}\n\nUse them only as examples; base your decision on this "
    "patient's findings. Then {next}.")


class TrajectoryRAGDoctor(MemoryWrapper):
    """Trajectory RAG around any doctor policy (docs/api/wrappers.md).

    Args:
        doctor: the inner doctor policy.
        trajectories: the memory; only the successful ones are kept.
        similarity: the retrieval similarity.
        k: examples per retrieval (default 3).
        max_reasks: re-asks per episode (default 1).
    """

    suffix = "+trajectory-rag"
    kind = "trajectory-rag"

    def __init__(self, doctor: Any, trajectories: Sequence[Trajectory], *,
                 similarity: Similarity, k: int = 3, max_reasks: int = 1) -> None:
        self.trajectories = [t for t in trajectories
                             if t.outcome == "success" and t.observations]
        retriever = TextRetriever([t.history for t in self.trajectories],
                                  [[(t.dataset, t.case_id)] for t in self.trajectories],
                                  similarity)
        super().__init__(doctor, retriever, k=k, max_reasks=max_reasks)

    @classmethod
    def from_run_logs(cls, doctor: Any, paths: Sequence[str | Path], **kwargs: Any,
                      ) -> TrajectoryRAGDoctor:
        """Build the memory from run logs (:func:`load_trajectories`; same errors)."""
        return cls(doctor, load_trajectories(paths), **kwargs)

    def before_answer(self, observation: Mapping[str, Any], info: Mapping[str, Any],
                      proposed: str) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
        """The examples prompt, or ``None`` when the memory has nothing to give."""
        found = self.retrieve()
        if not found:
            return None
        blocks = []
        for n, (i, _) in enumerate(found, start=1):
            t = self.trajectories[i]
            blocks.append(f"## Example {n}\n{t.history[:EXAMPLE_CHARS]}\n"
                          f"Final diagnosis: {t.answer}")
        phase = str(info.get("phase", "acquire"))
        text = EXAMPLES_PROMPT.format(examples="\n\n".join(blocks),
                                      next=next_step(phase))
        retrieved = [{"case_id": self.trajectories[i].case_id,
                      "repetition": self.trajectories[i].repetition,
                      "score": round(score, 4)} for i, score in found]
        return text, {"examples": len(found)}, {"retrieved": retrieved}
