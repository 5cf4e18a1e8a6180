"""Plain-ASCII text of a run's summary, as ``clinenv run`` prints it at the end."""

from __future__ import annotations

import math
from typing import Any


def _fmt_pct(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.2f} %"


def _fmt_num(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.2f}"


def format_summary(summary: dict[str, Any], *, title: str) -> str:
    """Plain-ASCII text of a :func:`clinenv.rollouts.summarize` result.

    Lines: ``title``, then scheduled episodes, accuracy (%, with the correct / wrong /
    unscored-or-missing counts), coverage (%), mean turns, mean exams and, with two or
    more repetitions, accuracy mean +/- sample SD over repetitions (EGIP Table 1) with
    each repetition's accuracy. NaN or ``None`` values print as ``n/a``.
    """
    lines = [
        title,
        f"  scheduled   {summary['n_scheduled']}",
        f"  accuracy    {_fmt_pct(summary['accuracy'])}  ({summary['n_correct']} correct, "
        f"{summary['n_wrong']} wrong, {summary['n_unscored']} unscored or missing)",
        f"  coverage    {_fmt_pct(summary['coverage'])}",
        f"  mean turns  {_fmt_num(summary['mean_turns'])}",
        f"  mean exams  {_fmt_num(summary['mean_exams'])}",
    ]
    reps = summary["repetitions"]
    if len(reps) >= 2:
        per = ", ".join(f"{v['accuracy']:.2f}" for v in reps.values())
        lines.append(f"  accuracy over {len(reps)} repetitions: "
                     f"{_fmt_num(summary['accuracy_mean'])} +/- "
                     f"{_fmt_num(summary['accuracy_sd'])} % "
                     f"(mean +/- sample SD; per repetition: {per})")
    return "\n".join(lines)


def format_llm_totals(totals: dict[str, Any]) -> str:
    """One summary line of :func:`clinenv.rollouts.llm_totals`: model calls, prompt and
    completion tokens (``n/a`` when a backend reports none) and mean latency (s)."""
    def tokens(key: str) -> str:
        return "n/a" if totals[key] is None else str(totals[key])

    return (f"  llm calls   {totals['n_calls']} (prompt tokens {tokens('prompt_tokens')}, "
            f"completion tokens {tokens('completion_tokens')}, mean latency "
            f"{_fmt_num(totals['mean_latency_s'])} s)")
