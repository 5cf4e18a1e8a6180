"""Experience memory of the retrieval baselines: trajectories from run logs, their text,
and top-k retrieval by a :class:`~clinenv.embeddings.base.Similarity`.

- :func:`trajectory_text` — τ_pre, the action–observation history before the final
  diagnostic action (CDEG Eq. 2, 4), as text: one line per observation
  (``Patient, asked "<question>": <reply>`` / ``Measurement <exam>: <result>``), the
  same for a run-log line's ``evidence.observations`` and for the observations an episode
  has acquired so far (``info["new_observations"]``);
- :func:`load_trajectories` — the episodes of run logs (JSON Lines of ``clinenv run``)
  as :class:`Trajectory` items;
- :class:`TextRetriever` — the k keys most similar to a query; keys are encoded once
  when the similarity can (``encode`` / ``similarity_to_matrix``), so a query costs one
  matrix product. Keys of the episode's own case are excluded: retrieval baselines must
  not be handed the current case's answer when the experience and evaluation sets
  overlap (the paper keeps them disjoint, "Baselines").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clinenv.embeddings.base import Similarity
from clinenv.runlog import RunLogError, read_run_log
from clinenv.wrappers.reask import BeforeAnswerWrapper

#: Characters of one observation's content kept in a trajectory text.
CONTENT_CHARS = 400


def observation_line(obs: Mapping[str, Any]) -> str:
    """One observation as a line of :func:`trajectory_text`."""
    content = " ".join(str(obs.get("content") or obs.get("availability") or "").split())
    content = content[:CONTENT_CHARS]
    if obs.get("source") == "Patient":
        return f"Patient, asked \"{obs.get('context', '')}\": {content}"
    return f"Measurement {obs.get('context', '')}: {content}"


def trajectory_text(observations: Sequence[Mapping[str, Any]]) -> str:
    """τ_pre as text: one :func:`observation_line` per observation, in order."""
    return "\n".join(observation_line(o) for o in observations)


@dataclass(frozen=True)
class Trajectory:
    """One logged episode.

    Attributes:
        dataset, case_id, repetition: where it comes from.
        text: :func:`trajectory_text` of its observations.
        observations: the observation dicts.
        answer: the final answer given; ``correct``: its verdict was correct.
    """

    dataset: str
    case_id: str
    repetition: int
    text: str
    observations: tuple[Mapping[str, Any], ...]
    answer: str
    correct: bool


def load_trajectories(paths: Sequence[str | Path]) -> list[Trajectory]:
    """The standing episodes of run logs (error lines and unfinished episodes skipped).

    Raises:
        FileNotFoundError: a path does not exist.
        clinenv.runlog.RunLogError: a corrupt line (file and line named), or a line
            without ``evidence.observations``.
    """
    out: list[Trajectory] = []
    for path in paths:
        if not Path(path).is_file():
            raise FileNotFoundError(f"{path}: no such run log")
        log = read_run_log(path)
        for number, line in zip(log.line_numbers, log.lines, strict=True):
            if "error" in line or not line.get("terminated", True):
                continue
            observations = (line.get("evidence") or {}).get("observations")
            if not isinstance(observations, list):
                raise RunLogError("no evidence.observations (not a clinenv run log?)",
                                  path=path, line=number)
            out.append(Trajectory(str(line.get("dataset", "")), str(line.get("case_id")),
                                  int(line.get("repetition", 0)),
                                  trajectory_text(observations), tuple(observations),
                                  str(line.get("answer") or ""), line.get("correct") is True))
    return out


class TextRetriever:
    """Top-k retrieval of key texts by similarity to a query (module docstring).

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
        self._to_matrix = getattr(similarity, "similarity_to_matrix", None)
        encode = getattr(similarity, "encode", None)
        self._vectors = None
        if callable(self._to_matrix) and callable(encode) and self.keys:
            self._vectors = np.asarray(encode(self.keys), dtype=np.float32)

    def top(self, query: str, k: int, *, case: tuple[str, str] | None = None,
            ) -> list[tuple[int, float]]:
        """The ``k`` best keys as ``[(key index, score), ...]``, best first (ties: the
        earlier key); keys owned only by ``case`` are skipped."""
        if not self.keys or k <= 0:
            return []
        if self._vectors is not None:
            scores = np.asarray(self._to_matrix([query], self._vectors), dtype=np.float64)[0]
        else:
            scores = np.asarray(self.similarity.similarity([query], self.keys),
                                dtype=np.float64)[0]
        scores = scores.copy()
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
