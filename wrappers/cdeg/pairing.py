"""Pairing failed with successful trajectories of the same case (CDEG Eq. 4).

Each failure takes the success whose τ_pre is most similar, kept when the cosine
exceeds the threshold (0.7 in the paper).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from clinenv.embeddings.base import Similarity
from clinenv.embeddings.similarity import finite_scores
from clinenv.wrappers.cdeg.thresholds import PAIR_THRESHOLD
from clinenv.wrappers.cdeg.trajectories import Trajectory

__all__ = ["PAIR_THRESHOLD", "PairingResult", "TrajectoryPair", "pair_trajectories",
           "score_summary"]


@dataclass(frozen=True)
class TrajectoryPair:
    """A retained pair (τ-, τ+*): D_s = ``failed.answer``, D_t = ``success.answer``.

    Attributes:
        failed: τ-, the failed trajectory (source of E_s).
        success: τ+*, its most similar successful trajectory (source of E_t).
        similarity: the score of Eq. 4 (> the threshold).
    """

    failed: Trajectory
    success: Trajectory
    similarity: float


@dataclass(frozen=True)
class PairingResult:
    """Outcome of :func:`pair_trajectories`.

    Attributes:
        pairs: the retained pairs, in order of the failed trajectories.
        n_failed: failed trajectories seen.
        n_no_success: failed trajectories whose case has no successful trajectory.
        n_below_threshold: failed trajectories whose best score is <= the threshold.
        best_scores: the Eq. 4 maximum of every failed trajectory that has a success in
            its case (kept or not), in order; ``-inf`` for a NaN score.
    """

    pairs: tuple[TrajectoryPair, ...]
    n_failed: int
    n_no_success: int
    n_below_threshold: int
    best_scores: tuple[float, ...] = ()


def score_summary(scores: Iterable[float]) -> dict[str, float | None]:
    """``{"min", "median", "max"}`` of the finite ``scores`` (rounded to 4 places;
    ``None`` each when there are none): how far apart the pairing scores lie, for the
    build report."""
    values = np.array([x for x in scores if np.isfinite(x)], dtype=np.float64)
    if values.size == 0:
        return {"min": None, "median": None, "max": None}
    return {"min": round(float(values.min()), 4), "median": round(float(np.median(values)), 4),
            "max": round(float(values.max()), 4)}


def pair_trajectories(trajectories: Iterable[Trajectory], similarity: Similarity, *,
                      threshold: float = PAIR_THRESHOLD) -> PairingResult:
    """CDEG Eq. 4 over every case.

    Args:
        trajectories: any mix; only ``"success"`` and ``"failure"`` take part.
        similarity: scores τ_pre texts; one call per case.
        threshold: keep a pair when its score is strictly greater, compared in the
            scores' own precision (float32 3/5 is not above 0.6).

    Returns:
        A :class:`PairingResult`; ties go to the earliest success, a NaN never wins.

    Raises:
        ValueError: the similarity returned scores of another shape.
    """
    by_case: dict[tuple[str, str], dict[str, list[Trajectory]]] = defaultdict(
        lambda: {"success": [], "failure": []})
    for t in trajectories:
        if t.outcome in ("success", "failure"):
            by_case[t.case_key][t.outcome].append(t)
    pairs: list[TrajectoryPair] = []
    n_failed = n_no_success = n_below = 0
    best_scores: list[float] = []
    for group in by_case.values():
        failed, successes = group["failure"], group["success"]
        n_failed += len(failed)
        if not failed:
            continue
        if not successes:
            n_no_success += len(failed)
            continue
        scores = np.asarray(similarity.similarity([t.history for t in failed],
                                                  [t.history for t in successes]))
        if scores.shape != (len(failed), len(successes)):
            raise ValueError(f"{getattr(similarity, 'name', similarity)!r} returned scores "
                             f"of shape {scores.shape}, expected "
                             f"{(len(failed), len(successes))}")
        if not np.issubdtype(scores.dtype, np.floating):
            scores = scores.astype(np.float64)
        limit = scores.dtype.type(threshold)  # compare in the scores' own precision
        scores = finite_scores(scores).astype(scores.dtype)
        for i, tau in enumerate(failed):
            best = int(np.argmax(scores[i]))
            best_scores.append(float(scores[i, best]))
            if scores[i, best] > limit:
                pairs.append(TrajectoryPair(tau, successes[best], float(scores[i, best])))
            else:
                n_below += 1
    return PairingResult(tuple(pairs), n_failed, n_no_success, n_below, tuple(best_scores))
