"""Plain-ASCII text of a run's summary, as ``clinenv run`` and ``clinenv replay`` print it
at the end (:func:`format_summary`, :func:`format_llm_totals`, :func:`print_run_end`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from clinenv.cli.errors import EXIT_RUN_ERRORS


def _fmt_pct(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.2f} %"


def _fmt_num(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.2f}"


def format_summary(summary: dict[str, Any], *, title: str) -> str:
    """Plain-ASCII text of a :func:`clinenv.evaluation.summary.summarize` result.

    Lines: ``title``, then scheduled episodes, accuracy (%, with the correct / wrong /
    unscored-or-missing counts, and unparsed judge replies when there are any), coverage
    (%), mean turns, mean exams and, with two or
    more repetitions, accuracy mean +/- sample SD over repetitions (EGIP Table 1) with
    each repetition's accuracy. NaN or ``None`` values print as ``n/a``.
    """
    lines = [
        title,
        f"  scheduled   {summary['n_scheduled']}",
        f"  accuracy    {_fmt_pct(summary['accuracy'])}  ({summary['n_correct']} correct, "
        f"{summary['n_wrong']} wrong, {summary['n_unscored']} unscored or missing"
        + (f", {summary['n_unparsed']} judge replies unparsed"
           if summary.get("n_unparsed") else "") + ")",
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
    """One summary line of :func:`clinenv.evaluation.summary.llm_totals`: model calls, prompt and
    completion tokens (``n/a`` when a backend reports none), mean latency (s) and, when
    calls were retried, the requests and the prompt tokens the servers were sent."""
    def tokens(key: str) -> str:
        return "n/a" if totals[key] is None else str(totals[key])

    retried = ""
    if totals.get("n_requests", totals["n_calls"]) > totals["n_calls"]:
        retried = (f"; {totals['n_requests']} requests (retries and top-ups), prompt tokens sent "
                   f"{tokens('prompt_tokens_sent')}")
    return (f"  llm calls   {totals['n_calls']} (prompt tokens {tokens('prompt_tokens')}, "
            f"completion tokens {tokens('completion_tokens')}, mean latency "
            f"{_fmt_num(totals['mean_latency_s'])} s{retried})")


def abstention_note(lines: list[dict[str, Any]]) -> str | None:
    """The summary line that explains the scripted doctor's abstentions (its answer
    :data:`clinenv.agents.scripted_doctor.NO_ANSWER_GUESS`, scored unscored), or
    ``None`` when the lines hold none."""
    from clinenv.agents.scripted_doctor import NO_ANSWER_GUESS

    n = sum(1 for ln in lines if ln.get("answer") == NO_ANSWER_GUESS
            and str((ln.get("doctor") or {}).get("name", "")).startswith("scripted"))
    if not n:
        return None
    return (f"  abstained   {n} (the scripted doctor names a diagnosis only when a record "
            "does; counted as unscored)")


def print_run_end(summary: dict[str, Any], lines: list[dict[str, Any]], out: Path, *,
                  what: str, rerun: str) -> int:
    """Print what follows a run's summary on stdout: the scripted doctor's abstentions
    (:func:`abstention_note`), the error count (``what``, e.g.
    ``"episode(s)"``, stopped by a backend error; ``--resume`` ``rerun``), the model-call
    totals of ``lines`` (:func:`format_llm_totals`, when any) and the log path ``out``.

    Returns:
        0, or :data:`~clinenv.cli.errors.EXIT_RUN_ERRORS` when ``summary["n_errors"]``.
    """
    from clinenv.evaluation.summary import llm_totals

    note = abstention_note(lines)
    if note is not None:
        print(note)
    if summary["n_errors"]:
        print(f"  errors      {summary['n_errors']} {what} stopped by a backend error "
              f"(counted as unscored; see 'error' in the log); --resume {rerun}")
    totals = llm_totals(lines)
    if totals is not None:
        print(format_llm_totals(totals))
    print(f"  log         {out}")
    return EXIT_RUN_ERRORS if summary["n_errors"] else 0
