"""The verdict of a terminal answer: the deterministic score, then the judge's ruling.

One definition for the EGIP decision step, the native last turn and replays
(:mod:`clinenv.runs.replaying`), so a replay scores exactly as the environment does.
"""

from __future__ import annotations

from typing import Any, Final

from clinenv.scoring import Score

__all__ = ["JUDGE_TO_VERDICT", "NOT_JUDGED", "contradicts_exact", "judge_label",
           "terminal_outcome"]

#: Judge verdict labels and the environment verdict each maps to (``unparsed`` is
#: unscored).
JUDGE_TO_VERDICT: Final = {"correct": "correct", "wrong": "wrong", "unparsed": "unscored"}


class _NotJudged:
    """Type of :data:`NOT_JUDGED`."""

    def __repr__(self) -> str:
        return "NOT_JUDGED"


#: ``judgement`` of an answer the judge was not asked about (no judge, a non-answer or
#: an abstention under EGIP, an unfinished native episode, a judge that failed).
NOT_JUDGED: Final = _NotJudged()


def judge_label(judgement: Any) -> str:
    """The judge's verdict label: ``judgement.verdict`` (or ``judgement`` itself) as a
    string when it is a key of :data:`JUDGE_TO_VERDICT`, else ``"unparsed"``."""
    label = str(getattr(judgement, "verdict", judgement))
    return label if label in JUDGE_TO_VERDICT else "unparsed"


def contradicts_exact(score: Score, label: str | None) -> bool:
    """Whether the judge's ``label`` contradicts an exact match of the scorer: the judge
    said ``"wrong"`` while :func:`~clinenv.scoring.score_answer` found the answer equal
    to the target after formatting normalization (method ``"exact"``) or chose the
    correct candidate by its letter or exact text (method ``"option"``, similarity 100).
    ``"unparsed"`` and ``None`` (not asked) contradict nothing."""
    exact = score.correct and (score.method == "exact" or (
        score.method == "option" and score.similarity >= 100.0))
    return exact and label == "wrong"


def terminal_outcome(score: Score, judgement: Any = NOT_JUDGED, *, strict: bool = False,
                     with_judge: bool = False) -> tuple[str, dict[str, Any]]:
    """The verdict of one terminal answer and the judge keys of its ``info``.

    Args:
        score: the deterministic scorer's score of the answer
            (:func:`clinenv.scoring.score_answer`).
        judgement: the judge's ruling (an object with ``.verdict``, or the label), or
            :data:`NOT_JUDGED` when the judge was not asked.
        strict: only ``"correct"`` counts; everything else is ``"wrong"`` (module
            docstring).
        with_judge: the environment has a judge (a ruling implies it); the keys are
            then present even when the judge was not asked.

    Returns:
        ``(verdict, keys)``: ``verdict`` in ``"correct"`` / ``"wrong"`` / ``"unscored"``;
        ``keys`` is ``{}`` without a judge, else ``{"scorer": "llm-judge" | "deterministic",
        "judge_verdict": label or None, "judge_disagrees": bool}`` (``judge_verdict``
        ``None``: the judge was not asked; ``judge_disagrees``:
        :func:`contradicts_exact`, the judge's verdict standing).
    """
    judged = judgement is not NOT_JUDGED
    label = judge_label(judgement) if judged else None
    verdict: str = JUDGE_TO_VERDICT[label] if label is not None else score.verdict
    if strict and verdict != "correct":
        verdict = "wrong"
    if not (judged or with_judge):
        return verdict, {}
    return verdict, {"scorer": "llm-judge" if judged else "deterministic",
                     "judge_verdict": label,
                     "judge_disagrees": contradicts_exact(score, label)}
