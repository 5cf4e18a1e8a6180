"""Experience memory of the retrieval baselines: trajectories from run logs, their text,
and top-k retrieval by a :class:`~clinenv.embeddings.base.Similarity`.

Loaded as CDEG loads them; :class:`TextRetriever` skips the episode's own case.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clinenv.embeddings.base import Similarity
from clinenv.embeddings.similarity import KeyIndex
from clinenv.wrappers.cdeg.trajectories import (
    Trajectory,
    observation_line,
    trajectory_text,
)
from clinenv.wrappers.cdeg.trajectories import load_trajectories as _load
from clinenv.wrappers.reask import BeforeAnswerWrapper

__all__ = ["MemoryWrapper", "TextRetriever", "Trajectory", "load_trajectories",
           "observation_line", "trajectory_text"]


def load_trajectories(paths: Sequence[str | Path], *,
                      allow_privileged: bool = False) -> list[Trajectory]:
    """The trajectories of run logs (:func:`clinenv.wrappers.cdeg.trajectories.
    load_trajectories`), as a list; successes have ``outcome == "success"``. Logs of a
    privileged doctor (the teacher, which saw Y) are refused unless
    ``allow_privileged`` (``clinenv run --allow-privileged``).

    Raises:
        FileNotFoundError: a path does not exist.
        clinenv.runlog.PrivilegedLogError: a privileged line without
            ``allow_privileged`` (file and line named).
        clinenv.runlog.RunLogError: a corrupt line or field (file and line named).
    """
    return list(_load(paths, allow_privileged=allow_privileged).trajectories)


class TextRetriever:
    """Top-k retrieval of key texts by similarity to a query (docs/api/wrappers.md).

    Args:
        keys: the key texts.
        owners: per key, the ``(dataset, case_id)`` pairs it was built from (a key is
            excluded for an episode when all its owners are that episode's case; an
            empty dataset matches any dataset, e.g. a graph edge's case ids).
        similarity: the similarity (the same encoder for every retrieval baseline).
    """

    def __init__(self, keys: Sequence[str], owners: Sequence[Sequence[tuple[str, str]]],
                 similarity: Similarity) -> None:
        if len(keys) != len(owners):
            raise ValueError("keys and owners must have the same length")
        self.keys = list(keys)
        self.owners = [frozenset(o) for o in owners]
        self.similarity = similarity
        self.index = KeyIndex(similarity, self.keys)

    def top(self, query: str, k: int, *, case: tuple[str, str] | None = None,
            ) -> list[tuple[int, float]]:
        """The ``k`` best keys as ``[(key index, score), ...]``, best first (ties: the
        earlier key); keys owned only by ``case`` are skipped."""
        if not self.keys or k <= 0:
            return []
        scores = self.index.scores([query])[0]  # NaN as -inf: never retrieved
        if case is not None:
            for i, owners in enumerate(self.owners):
                if owners and all(c == case[1] and d in ("", case[0]) for d, c in owners):
                    scores[i] = -np.inf
        order = np.argsort(-scores, kind="stable")
        return [(int(i), float(scores[i])) for i in order[:k] if np.isfinite(scores[i])]


class MemoryWrapper(BeforeAnswerWrapper):
    """A :class:`BeforeAnswerWrapper` that keeps the episode's observations (for the
    query τ_pre) and its case, and retrieves from a :class:`TextRetriever`.

    Args:
        doctor: the inner doctor policy.
        retriever: the memory.
        k: the retrieval budget (items per retrieval, >= 1; default 3, the same for
            every retrieval baseline, as in the paper's "same retrieval budget").
        max_reasks: re-asks per episode (default 1).
    """

    def __init__(self, doctor: Any, retriever: TextRetriever, *, k: int = 3,
                 max_reasks: int = 1) -> None:
        super().__init__(doctor, max_reasks=max_reasks)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be an integer >= 1, got {k!r}")
        self.retriever = retriever
        self.k = k
        self._observations: list[Mapping[str, Any]] = []
        self._case: tuple[str, str] | None = None

    def on_reset(self) -> None:
        """Forget the episode's observations."""
        super().on_reset()
        self._observations = []
        self._case = None

    def observe(self, observation: Mapping[str, Any], info: Mapping[str, Any]) -> None:
        """Keep the turn, the case and the new observations."""
        super().observe(observation, info)
        if "case_id" in info:
            self._case = (str(info.get("dataset", "")), str(info["case_id"]))
        self._observations.extend(o for o in info.get("new_observations") or ()
                                  if isinstance(o, Mapping))

    def retrieve(self) -> list[tuple[int, float]]:
        """The top-k memory items for τ_pre so far (the episode's own case excluded)."""
        return self.retriever.top(trajectory_text(self._observations), self.k,
                                  case=self._case)

    def wrapper_config(self) -> dict[str, Any]:
        """``{"k", "max_reasks", "similarity", "memory_size"}``."""
        return {"k": self.k, "max_reasks": self.max_reasks,
                "similarity": str(getattr(self.retriever.similarity, "name", "?")),
                "memory_size": len(self.retriever.keys)}
