"""PNG figures of the reports (matplotlib, the optional ``plot`` extra).

- :func:`plot_accuracy` — accuracy per dataset (or stratum) and method, with error bars
  from a case-cluster bootstrap of each run's own accuracy
  (:func:`clinenv.evaluation.comparison.accuracy_ci`: the paired bootstrap of the run
  against an all-zero baseline);
- :func:`plot_correction_regression` — correction and regression (CDEG Eq. 8) of each
  comparison, with their counts.

Figures are drawn on the Agg canvas directly (``matplotlib.figure.Figure`` +
``FigureCanvasAgg``): pyplot's global state and the user's backend are left alone, and
no display is needed. matplotlib is imported only when a figure is drawn; without it
:class:`PlotDependencyError` says how to install it.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clinenv.errors import ClinenvError
from clinenv.evaluation.comparison import Comparison, accuracy_ci
from clinenv.evaluation.reports import AccuracyCell, Table
from clinenv.evaluation.stats import PairedCI

__all__ = ["PlotDependencyError", "plot_accuracy", "plot_correction_regression",
           "require_matplotlib"]

INSTALL_HINT = "pip install 'clinenv[plot]'"
_CORRECTION_COLOR = "#2a9d8f"
_REGRESSION_COLOR = "#e76f51"


class PlotDependencyError(ClinenvError, ImportError):
    """matplotlib is not installed; the message says how to install it."""


def require_matplotlib() -> Any:
    """Import and return :mod:`matplotlib`, or raise :class:`PlotDependencyError`."""
    try:
        import matplotlib
    except ImportError:
        raise PlotDependencyError(f"plots need matplotlib, which is not installed: "
                                  f"{INSTALL_HINT}") from None
    return matplotlib


def _figure(width: float, height: float) -> Any:
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=120, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path


def _footnote(fig: Any, text: str) -> None:
    """A small grey caption under the axes (kept clear of them by the layout)."""
    text = textwrap.fill(text, width=int(15 * fig.get_figwidth()))
    fig.supxlabel(text, fontsize=7, color="#555555", x=0.01, ha="left")


def _cells(source: Table | Sequence[AccuracyCell]) -> list[AccuracyCell]:
    cells = list(source.data if isinstance(source, Table) else source)
    if not cells or not all(isinstance(c, AccuracyCell) for c in cells):
        raise ValueError("plot_accuracy needs an accuracy table or AccuracyCell objects")
    return cells


def plot_accuracy(source: Table | Sequence[AccuracyCell], path: str | Path, *,
                  n_resamples: int = 10_000, confidence: float = 0.95,
                  seed: int | None = 0) -> list[tuple[AccuracyCell, PairedCI]]:
    """Grouped bars: accuracy (%) per dataset (or stratum) and method, with CI bars.

    The bar and its error bar are one statistic: the bar is the accuracy that
    :func:`~clinenv.evaluation.comparison.accuracy_ci` bootstraps (mean over cases of each
    case's mean correctness over the scheduled repetitions; equal to the table's mean
    over repetitions, since missing episodes are 0, not left out), and the error bar is
    the percentile interval of that case-cluster bootstrap, drawn only when it has
    spread.

    Args:
        source: :func:`~clinenv.evaluation.reports.accuracy_table` or its cells.
        path: the PNG file to write (folders created).
        n_resamples: bootstrap resamples per run.
        confidence: interval coverage.
        seed: bootstrap seed (each run gets its own stream derived from it).

    Returns:
        ``(cell, interval)`` for every bar.

    Raises:
        PlotDependencyError: matplotlib is missing.
        ValueError: ``source`` holds no accuracy cells.
    """
    cells = _cells(source)
    columns = list(dict.fromkeys(c.column for c in cells))
    labels = list(dict.fromkeys(c.label for c in cells))
    import numpy as np

    seeds = np.random.SeedSequence(seed).spawn(len(cells)) if seed is not None else (
        [None] * len(cells))
    intervals = [(c, accuracy_ci(c.matrix, n_resamples=n_resamples, confidence=confidence,
                                 seed=s)) for c, s in zip(cells, seeds, strict=True)]
    fig = _figure(max(6.0, 1.2 + 0.55 * len(cells) + 0.4 * len(columns)), 4.8)
    ax = fig.add_subplot()
    colors = [f"C{i % 10}" for i in range(len(labels))]
    width = 0.8 / len(labels)
    no_bar = 0
    for j, label in enumerate(labels):
        xs, ys, err_x, err_y, lows, highs = [], [], [], [], [], []
        for i, col in enumerate(columns):
            found = [(c, ci) for c, ci in intervals if c.label == label and c.column == col]
            if not found:
                continue
            cell, ci = found[0]
            x = i - 0.4 + width * (j + 0.5)
            value = ci.difference  # the bootstrapped statistic, so the CI is centred on it
            xs.append(x)
            ys.append(value)
            spread = not (ci.degenerate or math.isnan(ci.low))
            if spread:
                err_x.append(x)
                err_y.append(value)
                lows.append(max(0.0, value - ci.low))
                highs.append(max(0.0, ci.high - value))
            else:
                no_bar += 1
            ax.annotate(f"{value:.1f}", (x, ci.high if spread else value),
                        xytext=(0, 3), textcoords="offset points", ha="center",
                        va="bottom", fontsize=8)
        ax.bar(xs, ys, width * 0.92, color=colors[j], label=label)
        if err_x:
            ax.errorbar(err_x, err_y, yerr=[lows, highs], fmt="none", ecolor="#222222",
                        elinewidth=1.2, capsize=4)
    names = [d if s is None else f"{d}\n{s}" for d, s in columns]
    ax.set_xticks(range(len(columns)), names, fontsize=9)
    ax.set_xlim(-0.6, len(columns) - 0.4)
    ax.set_ylim(0, 108)
    ax.set_ylabel("Accuracy (%)")
    ax.set_xlabel("Dataset" if all(s is None for _, s in columns) else "Dataset / stratum")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    ax.set_title(f"Accuracy with {100 * confidence:g}% case-bootstrap CI", fontsize=11)
    ax.legend(title="Method", fontsize=8, title_fontsize=9, loc="upper left",
              bbox_to_anchor=(1.01, 1.0), frameon=False)
    _footnote(fig, "Bars: accuracy, the mean over cases of each case's mean correctness "
              "(missing scheduled episodes count as not correct). Error bars: percentile interval "
              f"of {n_resamples:,} case-cluster bootstrap resamples (repetitions resampled "
              "with their case)." + (" No error bar: a single case, or every case with the "
                                     "same mean correctness." if no_bar else ""))
    _save(fig, path)
    return intervals


def _comparisons(source: Table | Sequence[Comparison]) -> list[Comparison]:
    comps = list(source.data if isinstance(source, Table) else source)
    if not comps or not all(isinstance(c, Comparison) for c in comps):
        raise ValueError("plot_correction_regression needs a comparison table or "
                         "Comparison objects")
    return comps


def plot_correction_regression(source: Table | Sequence[Comparison], path: str | Path
                               ) -> Path:
    """Horizontal paired bars, one row per comparison: correction (N_fix / N_V−) and
    regression (N_reg / N_V+); the figure grows with the number of comparisons.

    Each bar is labelled with its count and denominator; an undefined rate (no baseline
    case wrong, or none right) is drawn as "n/a".

    Args:
        source: :func:`~clinenv.evaluation.comparison.comparison_table` or its comparisons.
        path: the PNG file to write (folders created).

    Returns:
        ``path``.

    Raises:
        PlotDependencyError: matplotlib is missing.
        ValueError: ``source`` holds no comparisons.
    """
    comps = _comparisons(source)
    n = len(comps)
    fig = _figure(8.0, max(3.2, 1.6 + 0.62 * n))
    ax = fig.add_subplot()
    height = 0.38
    series = (("Correction = N_fix / N_V−", _CORRECTION_COLOR, -1,
               lambda c: (c.cr.correction, c.cr.n_fix, c.cr.n_baseline_wrong)),
              ("Regression = N_reg / N_V+", _REGRESSION_COLOR, 1,
               lambda c: (c.cr.regression, c.cr.n_reg, c.cr.n_baseline_right)))
    for name, color, side, get in series:
        ys = [i + side * height / 2 for i in range(n)]
        values = [get(c) for c in comps]
        widths = [0.0 if math.isnan(v) else v for v, _, _ in values]
        ax.barh(ys, widths, height * 0.95, color=color, label=name)
        for y, (v, num, den) in zip(ys, values, strict=True):
            text = "n/a" if math.isnan(v) else f"{v:.1f}% ({num}/{den})"
            ax.annotate(text, (0.0 if math.isnan(v) else v, y), xytext=(3, 0),
                        textcoords="offset points", ha="left", va="center", fontsize=7)

    def name(c: Comparison) -> str:
        where = c.dataset if c.stratum is None else f"{c.dataset}, {c.stratum}"
        return f"{c.method} vs {c.base}\n({where}, {c.n_cases} cases)"

    ax.set_yticks(range(n), [name(c) for c in comps], fontsize=7 if n > 8 else 8)
    ax.set_ylim(n - 0.5, -0.6)  # first comparison at the top
    ax.set_xlim(0, 125)
    ax.set_xticks(range(0, 101, 20))
    ax.set_xlabel("% of baseline cases")
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    ax.set_title("Correction and regression against the baseline", fontsize=11, pad=22)
    ax.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2,
              frameon=False)
    _footnote(fig, "One row per comparison. Per-case majority verdicts (more than half of "
              "the repetitions correct); bar labels: rate (count / denominator) "
              "(CDEG Eq. 8).")
    return _save(fig, path)
