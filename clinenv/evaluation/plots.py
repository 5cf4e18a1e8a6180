"""PNG figures of the reports (matplotlib, the optional ``plot`` extra).

Drawn on the Agg canvas, at most :data:`MAX_WIDTH_PX` wide; without matplotlib,
:class:`PlotDependencyError`.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clinenv.errors import ClinenvError, install_hint
from clinenv.evaluation.comparison import Comparison, accuracy_ci
from clinenv.evaluation.reports import AccuracyCell, Table
from clinenv.evaluation.stats import PairedCI

__all__ = ["MAX_WIDTH_PX", "PlotDependencyError", "comparison_figure", "plot_accuracy",
           "plot_comparison", "plot_correction_regression", "require_matplotlib"]

INSTALL_HINT = install_hint("plot")
_CORRECTION_COLOR = "#2a9d8f"
_REGRESSION_COLOR = "#e76f51"
_DELTA_COLOR = "#264653"
#: Resolution of every figure (dots per inch).
DPI = 120
#: Widest figure drawn, in pixels.
MAX_WIDTH_PX = 1600
_MAX_WIDTH_IN = (MAX_WIDTH_PX - 40) / DPI  # a margin for rounding in savefig


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

    fig = Figure(figsize=(min(width, _MAX_WIDTH_IN), height), dpi=DPI,
                 layout="constrained")
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


def _wrap(text: str, width: int) -> str:
    """``text`` on lines of at most ``width`` characters, broken at word boundaries
    (:mod:`textwrap`: after a space or a hyphen); a word is never cut, so a word longer
    than ``width`` gets a line of its own (``endocrinology``, never ``endocrinolog`` /
    ``y``)."""
    lines = textwrap.wrap(text, width=max(6, width), break_long_words=False,
                          break_on_hyphens=True)
    return "\n".join(lines) or text


def _longest_word(texts: Sequence[str]) -> int:
    """Characters of the longest piece :func:`_wrap` cannot break (0 for none)."""
    return max((len(piece) for text in texts for word in text.split()
                for piece in re.split(r"(?<=-)", word)), default=0)


def _balanced(items: Sequence[Any], n_rows: int) -> list[list[Any]]:
    """``items`` in order on ``n_rows`` rows whose lengths differ by at most one (12 on
    2 rows: 6 + 6, 14 on 4 rows: 4 + 4 + 3 + 3)."""
    size, extra = divmod(len(items), n_rows)
    rows, start = [], 0
    for row in range(n_rows):
        stop = start + size + (1 if row < extra else 0)
        rows.append(list(items[start:stop]))
        start = stop
    return rows


#: Inches per character of a 9 pt tick label (wrapping and group widths).
_CHAR_IN = 1 / 13


def _cells(source: Table | Sequence[AccuracyCell]) -> list[AccuracyCell]:
    cells = list(source.data if isinstance(source, Table) else source)
    if not cells or not all(isinstance(c, AccuracyCell) for c in cells):
        raise ValueError("plot_accuracy needs an accuracy table or AccuracyCell objects")
    return cells


def plot_accuracy(source: Table | Sequence[AccuracyCell], path: str | Path, *,
                  n_resamples: int = 10_000, confidence: float = 0.95,
                  seed: int | None = 0) -> list[tuple[AccuracyCell, PairedCI]]:
    """Grouped bars: accuracy (%) per dataset (or stratum) and method, with CI bars.

    The bar is the accuracy that :func:`~clinenv.evaluation.comparison.accuracy_ci`
    bootstraps and the error bar its percentile interval (drawn when it has spread). Groups
    that do not fit :data:`MAX_WIDTH_PX` continue on further panels, rows balanced; labels
    wrap at word boundaries.

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
    bar_in = max(0.3, min(0.55, 1.8 / len(labels)))  # narrower bars for many methods
    legend_in = 2.4
    room = _MAX_WIDTH_IN - 1.0 - legend_in  # inches for the groups of one row
    # a group is wide enough for its bars and for the longest word of its tick label
    longest = _longest_word([t for col in columns for t in col if t is not None])
    per_column = min(room, max(bar_in * len(labels) + 0.4, _CHAR_IN * longest + 0.2))
    fit = max(1, int(room // per_column))
    n_panels = math.ceil(len(columns) / fit)
    rows = _balanced(columns, n_panels)  # e.g. 12 groups: 6 + 6, not 10 + 2
    span = max(len(row) for row in rows)  # groups per panel (some may hold one fewer)
    panel_in = 3.9 if n_panels == 1 else 3.2
    fig = _figure(max(6.0, 1.0 + legend_in + per_column * span), 0.7 + panel_in * n_panels)
    axes = fig.subplots(n_panels, 1, squeeze=False, sharey=True)[:, 0]
    colors = [f"C{i % 10}" for i in range(len(labels))]
    width = 0.8 / len(labels)
    tick_chars = int(per_column / _CHAR_IN)
    handles: dict[str, Any] = {}  # method label -> its first non-empty bars (legend)
    no_bar = 0
    for shown, ax in zip(rows, axes, strict=True):
        for j, label in enumerate(labels):
            xs, ys, err_x, err_y, lows, highs = [], [], [], [], [], []
            for i, col in enumerate(shown):
                found = [(c, ci) for c, ci in intervals
                         if c.label == label and c.column == col]
                if not found:
                    continue
                cell, ci = found[0]
                x = i - 0.4 + width * (j + 0.5)
                value = ci.difference  # the bootstrapped statistic: the CI is centred on it
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
                # the value over n, the bar's cases (gid "n=<cases>")
                note = ax.annotate(f"{value:.1f}\nn={cell.n_cases}",
                                   (x, ci.high if spread else value), xytext=(0, 3),
                                   textcoords="offset points", ha="center", va="bottom",
                                   fontsize=8 if len(labels) < 6 else 7, linespacing=1.0)
                note.set_gid(f"n={cell.n_cases}")
            bars = ax.bar(xs, ys, width * 0.92, color=colors[j], label=label)
            if xs:
                handles.setdefault(label, bars)
            if err_x:
                ax.errorbar(err_x, err_y, yerr=[lows, highs], fmt="none",
                            ecolor="#222222", elinewidth=1.2, capsize=4)
        names = [_wrap(d, tick_chars) if st is None
                 else f"{_wrap(d, tick_chars)}\n{_wrap(st, tick_chars)}" for d, st in shown]
        ax.set_xticks(range(len(shown)), names, fontsize=9)
        ax.set_xlim(-0.6, span - 0.4)
        ax.set_ylim(0, 122)  # room for the value and n over a 100 % bar
        ax.set_yticks(range(0, 101, 20))
        ax.set_ylabel("Accuracy (%)")
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    axes[-1].set_xlabel("Dataset" if all(st is None for _, st in columns)
                        else "Dataset / stratum")
    axes[0].set_title(f"Accuracy with {100 * confidence:g}% case-bootstrap CI"
                      + (f" ({len(columns)} groups in {n_panels} rows)" if n_panels > 1
                         else ""), fontsize=11)
    shown_labels = [label for label in labels if label in handles]
    fig.legend([handles[label] for label in shown_labels],
               [_wrap(label, 36) for label in shown_labels], title="Method", fontsize=8,
               title_fontsize=9, loc="outside right upper", frameon=False)
    _footnote(fig, "Bars: accuracy, the mean over cases of each case's mean correctness "
              "(missing scheduled episodes count as not correct); n: the bar's cases. "
              "Error bars: percentile interval "
              f"of {n_resamples:,} case-cluster bootstrap resamples (repetitions resampled "
              "with their case)." + (" No error bar: a single case, or every case with the "
                                     "same mean correctness." if no_bar else ""))
    _save(fig, path)
    return intervals


def _comparisons(source: Table | Sequence[Comparison], what: str) -> list[Comparison]:
    comps = list(source.data if isinstance(source, Table) else source)
    if not comps or not all(isinstance(c, Comparison) for c in comps):
        raise ValueError(f"{what} needs a comparison table or Comparison objects")
    return comps


def _row_name(c: Comparison, chars: int = 32) -> str:
    """``method vs base`` (wrapped) over ``(dataset[, stratum], n cases)``."""
    where = c.dataset if c.stratum is None else f"{c.dataset}, {c.stratum}"
    cases = f"{c.n_cases} case" + ("" if c.n_cases == 1 else "s")
    return "\n".join([_wrap(c.method, chars), _wrap(f"vs {c.base}", chars),
                      _wrap(f"({where}, {cases})", chars)])


def _draw_correction_regression(ax: Any, comps: Sequence[Comparison]) -> None:
    """Paired horizontal bars at rows ``0..n-1``: correction above, regression below,
    each labelled ``rate% (count/denominator)`` or ``n/a``."""
    height = 0.38
    series = (("Correction = N_fix / N_V−", _CORRECTION_COLOR, -1, "correction",
               lambda c: (c.cr.correction, c.cr.n_fix, c.cr.n_baseline_wrong)),
              ("Regression = N_reg / N_V+", _REGRESSION_COLOR, 1, "regression",
               lambda c: (c.cr.regression, c.cr.n_reg, c.cr.n_baseline_right)))
    for name, color, side, gid, get in series:
        ys = [i + side * height / 2 for i in range(len(comps))]
        values = [get(c) for c in comps]
        widths = [0.0 if math.isnan(v) else v for v, _, _ in values]
        for bar in ax.barh(ys, widths, height * 0.95, color=color, label=name):
            bar.set_gid(gid)
        for y, (v, num, den) in zip(ys, values, strict=True):
            text = "n/a" if math.isnan(v) else f"{v:.1f}% ({num}/{den})"
            ax.annotate(text, (0.0 if math.isnan(v) else v, y), xytext=(3, 0),
                        textcoords="offset points", ha="left", va="center", fontsize=7)
    ax.set_xlim(0, 125)
    ax.set_xticks(range(0, 101, 20))
    ax.set_xlabel("% of baseline cases")
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)


def plot_correction_regression(source: Table | Sequence[Comparison], path: str | Path
                               ) -> Path:
    """Horizontal paired bars, one row per comparison: correction (N_fix / N_V−) and
    regression (N_reg / N_V+); the figure grows with the number of comparisons.

    Each bar is labelled with its count and denominator; an undefined rate (no baseline
    case wrong, or none right) is drawn as "n/a". :func:`plot_comparison` draws the same
    bars beside the paired differences.

    Args:
        source: :func:`~clinenv.evaluation.comparison.comparison_table` or its comparisons.
        path: the PNG file to write (folders created).

    Returns:
        ``path``.

    Raises:
        PlotDependencyError: matplotlib is missing.
        ValueError: ``source`` holds no comparisons.
    """
    comps = _comparisons(source, "plot_correction_regression")
    n = len(comps)
    fig = _figure(8.0, max(3.2, 1.6 + 0.62 * n))
    ax = fig.add_subplot()
    _draw_correction_regression(ax, comps)
    ax.set_yticks(range(n), [_row_name(c) for c in comps], fontsize=7 if n > 8 else 8)
    ax.set_ylim(n - 0.5, -0.6)  # first comparison at the top
    ax.set_title("Correction and regression against the baseline", fontsize=11, pad=22)
    ax.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2,
              frameon=False)
    _footnote(fig, "One row per comparison. Per-case majority verdicts (more than half of "
              "the repetitions correct); bar labels: rate (count / denominator) "
              "(CDEG Eq. 8).")
    return _save(fig, path)


def _delta_text(c: Comparison) -> str:
    """``+8.33 [-25.00, 41.67]`` over ``Holm p 1.0000``: the table's Δ, CI and Holm p,
    rounded as the table prints them."""
    ci = "no CI" if math.isnan(c.ci.low) else f"[{c.ci.low:.2f}, {c.ci.high:.2f}]"
    return f"{c.ci.difference:+.2f} {ci}\nHolm p {c.p_holm:.4f}"


def comparison_figure(source: Table | Sequence[Comparison]) -> Any:
    """The figure of :func:`plot_comparison`, drawn but not saved.

    Axes (found by ``ax.get_label()``): ``"delta"`` — the forest plot: per row ``i`` (the
    table's row order, first at the top) a marker at Δ (the ``Line2D`` with gid
    ``"delta"``, x = Δ, y = i) and a line from the CI's low to its high bound (the
    ``LineCollection`` with gid ``"ci"``, one segment per row with an interval; none for
    a single paired case), a dashed line at 0; ``"delta stats"`` — its twin, whose right
    tick labels print Δ, CI and Holm p as the table does; ``"correction/regression"`` —
    the bars of :func:`plot_correction_regression` (gids ``"correction"``,
    ``"regression"``).

    Width: at most :data:`MAX_WIDTH_PX` pixels; height: grows with the rows.

    Raises:
        PlotDependencyError: matplotlib is missing.
        ValueError: ``source`` holds no comparisons.
    """
    comps = _comparisons(source, "plot_comparison")
    n = len(comps)
    fig = _figure(12.0, max(3.6, 1.9 + 0.55 * n))
    ax, cr_ax = fig.subplots(1, 2, sharey=True, width_ratios=[1.2, 1.0])
    ax.set_label("delta")
    cr_ax.set_label("correction/regression")
    rows = list(range(n))
    deltas = [c.ci.difference for c in comps]
    spans = [(i, c.ci.low, c.ci.high) for i, c in enumerate(comps)
             if not math.isnan(c.ci.low)]
    ax.axvline(0.0, color="#888888", linestyle="--", linewidth=1)
    lines = ax.hlines([i for i, _, _ in spans], [lo for _, lo, _ in spans],
                      [hi for _, _, hi in spans], color=_DELTA_COLOR, linewidth=2)
    lines.set_gid("ci")
    (points,) = ax.plot(deltas, rows, "o", color=_DELTA_COLOR, markersize=6)
    points.set_gid("delta")
    values = [*deltas, *(lo for _, lo, _ in spans), *(hi for _, _, hi in spans), 0.0]
    low, high = min(values), max(values)
    pad = max(5.0, 0.08 * (high - low))
    ax.set_xlim(max(-105.0, low - pad), min(105.0, high + pad))
    level = f"{100 * comps[0].ci.confidence:g}%"
    ax.set_xlabel(f"Δ = method − baseline (pp), paired {level} CI")
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    font = 7 if n > 8 else 8
    ax.set_yticks(rows, [_row_name(c) for c in comps], fontsize=font)
    ax.set_ylim(n - 0.5, -0.6)  # first comparison at the top
    ax.set_title(f"Paired difference Δ with {level} CI and Holm p", fontsize=11, pad=22)
    stats = ax.twinx()
    stats.set_label("delta stats")
    stats.set_ylim(ax.get_ylim())
    stats.set_yticks(rows, [_delta_text(c) for c in comps], fontsize=font)
    stats.tick_params(axis="y", length=0)
    _draw_correction_regression(cr_ax, comps)
    cr_ax.tick_params(axis="y", labelleft=False)
    cr_ax.set_title("Correction and regression", fontsize=11, pad=22)
    cr_ax.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2,
                 frameon=False)
    first = comps[0]
    _footnote(fig, f"One row per comparison, as in the table. Left: Δ (points) with its "
              f"paired {level} case-cluster percentile bootstrap interval "
              f"({first.ci.n_resamples:,} resamples) and the Holm-adjusted sign-flip p "
              f"({first.n_flips:,} flips; exploratory)"
              + ("; no CI: a single paired case" if len(spans) < n else "")
              + ". Right: correction N_fix / N_V− and regression N_reg / N_V+ on per-case "
              "majority verdicts (more than half of the repetitions correct; CDEG Eq. 8).")
    return fig


def plot_comparison(source: Table | Sequence[Comparison], path: str | Path) -> Path:
    """Write :func:`comparison_figure` as a PNG: per comparison, the paired Δ with its CI
    and Holm p (a forest plot) beside correction and regression.

    Args:
        source: :func:`~clinenv.evaluation.comparison.comparison_table` (with or without
            ``by``) or its comparisons.
        path: the PNG file to write (folders created).

    Returns:
        ``path``.

    Raises:
        PlotDependencyError: matplotlib is missing.
        ValueError: ``source`` holds no comparisons.
    """
    return _save(comparison_figure(source), path)
