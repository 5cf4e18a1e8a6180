"""Summaries of a run: accuracy, coverage, turns and exams; model calls and tokens.

:func:`summarize` (EGIP section 4.1, the same definitions as ``clinenv eval``),
:func:`standing_records` (each episode once) and :func:`llm_totals`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from clinenv.evaluation.metrics import (
    accuracy,
    coverage,
    is_unparsed,
    is_unscored,
    mean_sd,
    mean_turns_exams,
    per_repetition_accuracy,
)
from clinenv.runlog import EpisodeLines, episode_key, is_error_line

__all__ = ["llm_totals", "standing_records", "summarize"]


def summarize(
    records: Iterable[Mapping[str, Any]],
    *,
    plan: Sequence[tuple[int, int, int]] | None = None,
) -> dict[str, Any]:
    """Run metrics (EGIP section 4.1), with the definitions of ``clinenv eval``.

    Accuracy and coverage are shares of *scheduled* outputs (unscored outputs and scheduled
    episodes without a record stay in the denominator), so ``coverage == 100 * (1 -
    n_unscored / n_scheduled)``. Run-log lines follow the supersession rule of
    :mod:`clinenv.runlog` (each episode counts once, with its latest verdict).

    Args:
        records: run-log lines or episode records; a missing ``repetition`` is 0, a missing
            ``verdict`` unscored.
        plan: the schedule; without it the denominators come from the records.

    Returns:
        ``{"n_scheduled", "n_records", "n_correct", "n_wrong", "n_unscored", "n_unparsed",
        "n_errors", "accuracy", "coverage", "mean_turns", "mean_exams", "repetitions",
        "accuracy_mean", "accuracy_sd"}``. ``n_unscored`` includes scheduled outputs
        without a record; ``n_errors`` (backend errors) are also unscored. Percentages are
        0..100 (``nan`` when nothing is scheduled); ``repetitions`` maps each index to
        ``{"n_scheduled", "n_correct", "accuracy", "coverage"}``; ``accuracy_sd`` is
        ``None`` with fewer than 2 repetitions.

    Raises:
        ValueError: two lines of one episode where the earlier is not an error line.
    """
    records = standing_records(records)
    verdicts = [r.get("verdict", "unscored") for r in records]
    reps = [int(r.get("repetition", 0)) for r in records]
    scheduled: dict[int, int] = {}
    for rep in (r for _, r, _ in plan) if plan is not None else reps:
        scheduled[rep] = scheduled.get(rep, 0) + 1
    n_scheduled = sum(scheduled.values())
    columns = sorted(scheduled)
    # One column per repetition, one cell per scheduled output: 1 correct, 0 wrong,
    # unscored or missing (a scheduled episode without a record), NaN for no slot (a
    # repetition with fewer scheduled outputs than the longest) -- the correctness
    # matrix of clinenv.evaluation.metrics, so this summary and ``clinenv eval`` share
    # their definitions.
    per_rep_correct = {r: [v == "correct" for v, rr in zip(verdicts, reps, strict=True)
                           if rr == r] for r in columns}
    n_rows = max([scheduled[r] for r in columns], default=0)
    matrix = np.full((n_rows, len(columns)), np.nan)
    for j, r in enumerate(columns):
        matrix[:scheduled[r], j] = 0.0
        hits = per_rep_correct[r][:scheduled[r]]
        matrix[:len(hits), j] = np.asarray(hits, dtype=float)
    # coverage items: every record, plus an answerless slot per missing scheduled output
    items: list[Mapping[str, Any] | None] = list(records)
    items += [None] * max(0, n_scheduled - len(records))
    repetitions: dict[int, dict[str, Any]] = {}
    per_rep = per_repetition_accuracy(matrix) if matrix.size else np.array([])
    for j, r in enumerate(columns):
        mine: list[Mapping[str, Any] | None] = [
            rec for rec, rr in zip(records, reps, strict=True) if rr == r]
        mine += [None] * max(0, scheduled[r] - len(mine))
        repetitions[r] = {
            "n_scheduled": scheduled[r],
            "n_correct": int(np.nansum(matrix[:, j])),
            "accuracy": float(per_rep[j]),
            "coverage": coverage(mine),
        }
    n_correct = verdicts.count("correct")
    others = [r for r, v in zip(records, verdicts, strict=True) if v != "correct"]
    n_no_answer = sum(map(is_unscored, others))
    n_unparsed = sum(map(is_unparsed, others))
    mean, sd = mean_sd(per_rep) if per_rep.size else (math.nan, math.nan)
    interaction = mean_turns_exams(records)
    return {
        "n_scheduled": n_scheduled,
        "n_records": len(records),
        "n_correct": n_correct,
        "n_wrong": len(others) - n_no_answer - n_unparsed,
        "n_unscored": n_no_answer + max(0, n_scheduled - len(records)),
        "n_unparsed": n_unparsed,
        "n_errors": sum(map(is_error_line, records)),
        "accuracy": accuracy(matrix) if matrix.size else math.nan,
        "coverage": coverage(items),
        "mean_turns": float(interaction["mean_turns"]),
        "mean_exams": float(interaction["mean_exams"]),
        "repetitions": repetitions,
        "accuracy_mean": mean,
        "accuracy_sd": None if math.isnan(sd) else sd,
    }


def standing_records(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``records`` without the error lines that a later line of the same episode
    supersedes (:class:`~clinenv.runlog.EpisodeLines`); order kept, each standing line
    at its own position. Records without ``case_id`` or ``repetition`` are all kept.

    Raises:
        ValueError: a repeated episode whose earlier line is not an error line.
    """
    records = list(records)
    index = EpisodeLines()
    keyed = ["case_id" in r and "repetition" in r for r in records]
    for position, (record, has_key) in enumerate(zip(records, keyed, strict=True)):
        earlier = index.add(record, position) if has_key else None
        if earlier is not None:
            raise ValueError(f"records {earlier} and {position} are both episode "
                             f"{episode_key(record)} and the first is not an error line "
                             "(one record per episode, or a retry after an error line)")
    return [r for r, has_key in zip(records, keyed, strict=True)
            if not has_key or index.lines[episode_key(r)] is r]


def llm_totals(lines: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Model calls of a run from its lines' ``llm`` fields; ``None`` when no line has one.

    Returns:
        ``{"n_calls", "n_requests", "prompt_tokens", "prompt_tokens_sent",
        "completion_tokens", "mean_latency_s"}``: totals over the lines (tokens ``None``
        when never reported; ``n_requests`` and ``prompt_tokens_sent`` count retried
        attempts too, and fall back to ``n_calls`` and ``prompt_tokens`` for lines
        written without them) and the mean wall seconds per call (``nan`` without calls).
    """
    fields = [line["llm"] for line in lines if isinstance(line.get("llm"), Mapping)]
    if not fields:
        return None
    n_calls = sum(int(f.get("n_calls") or 0) for f in fields)

    def total(key: str) -> int | None:
        known = [int(f[key]) for f in fields if f.get(key) is not None]
        return sum(known) if known else None

    latency = sum(float(f.get("latency_s") or 0.0) for f in fields)
    sent = [int(f["prompt_tokens_sent"] if f.get("prompt_tokens_sent") is not None
                else f["prompt_tokens"]) for f in fields
            if f.get("prompt_tokens_sent") is not None or f.get("prompt_tokens") is not None]
    return {"n_calls": n_calls,
            "n_requests": sum(int(f.get("n_requests") or f.get("n_calls") or 0)
                              for f in fields),
            "prompt_tokens_sent": sum(sent) if sent else None,
            "prompt_tokens": total("prompt_tokens"),
            "completion_tokens": total("completion_tokens"),
            "mean_latency_s": latency / n_calls if n_calls else math.nan}
