"""The report's tables and figures: what ``clinenv eval`` and ``clinenv compare`` print
and plot, for the same runs.

:func:`report_pairs`, :func:`table_data` and :func:`figures` (base64 PNG data URIs).
"""

from __future__ import annotations

import base64
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clinenv.evaluation.runs import Run
from clinenv.evaluation.table import Table

__all__ = ["figures", "report_pairs", "table_data"]


def report_pairs(runs: Sequence[Run], pairs: Sequence[tuple[str, str]] | None = None
                 ) -> tuple[list[tuple[Run, Run]], list[str]]:
    """``(baseline, method)`` run pairs and notes on runs left unpaired.

    Args:
        runs: the report's runs, in the order given.
        pairs: ``(method label, base label)`` pairs (``--pair METHOD=BASE``); ``None``:
            the first run's label is the baseline of every dataset where it has a run.

    Returns:
        The pairs (:func:`clinenv.evaluation.comparison.pair_runs` with ``pairs``), and
        notes naming each run that has no baseline on its dataset (default pairing only).

    Raises:
        RunsError: as :func:`~clinenv.evaluation.comparison.pair_runs` for explicit pairs.
    """
    from clinenv.evaluation.comparison import pair_runs

    if pairs:
        return pair_runs(runs, pairs=pairs), []
    if not runs:
        return [], []
    base_label = runs[0].label
    bases = {r.dataset: r for r in runs if r.label == base_label}
    found, notes = [], []
    for run in runs:
        if run.label == base_label:
            continue
        if run.dataset in bases:
            found.append((bases[run.dataset], run))
        else:
            notes.append(f"{run.label!r} on {run.dataset!r} is not compared: the baseline "
                         f"{base_label!r} has no run on {run.dataset!r}")
    return found, notes


def table_data(table: Table, extra_notes: Sequence[str] = ()) -> dict[str, Any]:
    """``{"title", "header", "rows", "notes", "numeric"}`` of ``table`` (display cells as
    strings; ``numeric`` says which columns are right-aligned)."""
    return {"title": table.title, "header": list(table.header),
            "rows": [list(row) for row in table.rows],
            "notes": [*table.notes, *extra_notes], "numeric": table.numeric()}


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def figures(accuracy: Table, comparison: Table | None, *, n_resamples: int = 10_000,
            seed: int | None = 0) -> list[dict[str, str]]:
    """The report's figures, each ``{"id", "title", "src"}`` (``src`` a PNG data URI).

    Args:
        accuracy: :func:`~clinenv.evaluation.reports.accuracy_table` of the runs.
        comparison: :func:`~clinenv.evaluation.comparison.comparison_table` of the pairs,
            or ``None`` when there is nothing to compare.
        n_resamples: case-bootstrap resamples of the accuracy error bars.
        seed: their seed.

    Raises:
        PlotDependencyError: matplotlib is not installed.
    """
    from clinenv.evaluation.plots import plot_accuracy, plot_comparison, require_matplotlib

    require_matplotlib()
    out = []
    with tempfile.TemporaryDirectory(prefix="clinenv-report-") as folder:
        path = Path(folder) / "accuracy.png"
        plot_accuracy(accuracy, path, n_resamples=n_resamples, seed=seed)
        out.append({"id": "fig-accuracy", "src": _data_uri(path),
                    "title": "Accuracy with case-bootstrap CIs"})
        if comparison is not None and comparison.data:
            path = Path(folder) / "comparison.png"
            plot_comparison(comparison, path)
            out.append({"id": "fig-comparison", "src": _data_uri(path),
                        "title": "Paired Δ with CI and Holm p (forest plot), correction "
                                 "and regression"})
    return out

