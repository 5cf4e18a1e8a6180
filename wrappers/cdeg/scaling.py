"""CDEG's diagnostic-experience scaling (CDEG "Ablation Studies", Figure 3): graphs
built from growing shares of the construction cases, each evaluated on the same
held-out cases.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from clinenv.runlog import read_run_log
from clinenv.runlog_lock import RunLogLock

__all__ = ["ScalePoint", "check_fractions", "log_cases", "nested_subsets", "plot_scaling",
           "scale_point", "scaling_table", "subset_size", "write_subset_log"]

CaseKey = tuple[str, str]


def check_fractions(fractions: Iterable[float]) -> tuple[float, ...]:
    """The fractions sorted ascending.

    Raises:
        ValueError: none given, one outside (0, 1], or one given twice.
    """
    values = sorted(float(f) for f in fractions)
    if not values:
        raise ValueError("give at least one fraction")
    for f in values:
        if not 0.0 < f <= 1.0 or math.isnan(f):
            raise ValueError(f"a fraction must lie in (0, 1], got {f:g}")
    if len(set(values)) != len(values):
        raise ValueError("a fraction is given twice")
    return tuple(values)


def subset_size(fraction: float, n: int) -> int:
    """``max(1, floor(fraction × n + 0.5))``, for ``n >= 1``, in exact arithmetic on the
    fraction as written (``0.7 × 45 = 31.5`` gives 32; in binary floating point it is
    31.499... and would give 31)."""
    exact = Fraction(repr(float(fraction)))
    return max(1, math.floor(exact * n + Fraction(1, 2)))


def _order_key(seed: int, case: CaseKey) -> str:
    return hashlib.sha256(f"clinenv.scale/{seed}/{case[0]}/{case[1]}".encode()).hexdigest()


def nested_subsets(cases: Sequence[CaseKey], fractions: Iterable[float], seed: int = 0
                   ) -> dict[float, tuple[CaseKey, ...]]:
    """The first ``max(1, round(f * n))`` cases of one seeded SHA-256 order, per fraction f.

    Args:
        cases: distinct ``(dataset, case_id)`` pairs.
        fractions: values in (0, 1].
        seed: an integer >= 0.

    Returns:
        ``{fraction: subset}``, fractions ascending, each subset in the order of
        ``cases``.

    Raises:
        ValueError: no case, a case twice, a bad fraction or seed.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"the seed must be an integer >= 0, got {seed!r}")
    if not cases:
        raise ValueError("no construction case")
    if len(set(cases)) != len(cases):
        raise ValueError("a construction case is listed twice")
    order = sorted(cases, key=lambda c: _order_key(seed, c))
    position = {c: i for i, c in enumerate(cases)}
    out = {}
    for f in check_fractions(fractions):
        chosen = order[:subset_size(f, len(cases))]
        out[f] = tuple(sorted(chosen, key=position.__getitem__))
    return out


def log_cases(logs: Sequence[str | Path]) -> list[CaseKey]:
    """The ``(dataset, case_id)`` of every episode line of the logs, first appearance
    order.

    Raises:
        FileNotFoundError: a log is missing.
        clinenv.runlog.RunLogError: a line is not run-log JSON.
    """
    seen: dict[CaseKey, None] = {}
    for path in logs:
        if not Path(path).is_file():
            raise FileNotFoundError(f"{path}: no such run log")
        for line in read_run_log(path).lines:
            seen.setdefault((str(line.get("dataset") or ""), str(line.get("case_id"))), None)
    return list(seen)


def write_subset_log(logs: Sequence[str | Path], keep: Iterable[CaseKey],
                     out: str | Path) -> int:
    """Write the lines of ``logs`` whose ``(dataset, case_id)`` is in ``keep`` to
    ``out`` (one run log, lines unchanged, file order); return the number of lines.

    Raises:
        ValueError: ``out`` is one of ``logs`` (any spelling of the same file).
        clinenv.runlog_lock.RunLogLocked: a run is writing ``out``.
    """
    if any(os.path.realpath(out) == os.path.realpath(path) for path in logs):
        raise ValueError(f"{out}: the subset log would overwrite one of its input logs")
    wanted = set(keep)
    lines = [line for path in logs for line in read_run_log(path).lines
             if (str(line.get("dataset") or ""), str(line.get("case_id"))) in wanted]
    with RunLogLock(out), Path(out).open("w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
    return len(lines)


@dataclass(frozen=True)
class ScalePoint:
    """One graph of the scaling study, evaluated against the vanilla run.

    Attributes:
        fraction: share of the construction cases, in (0, 1].
        n_construction: construction cases the graph was built from.
        n_revisions: revision edges (D_s, D_t) of the graph.
        n_cases: paired evaluation cases.
        accuracy: the CDEG-wrapped run's accuracy (%), mean over cases of each case's
            mean correctness.
        base_accuracy: the vanilla run's accuracy (%) on the same cases.
        delta: ``accuracy - base_accuracy`` (percentage points).
        ci_low, ci_high: its paired case-cluster bootstrap interval.
        correction, regression: CDEG Eq. 8 (%; NaN when the denominator is 0).
        n_fix, n_baseline_wrong, n_reg, n_baseline_right: their counts.
        similarity: mean answer–reference cosine of the wrapped run (0 for a non-answer;
            ``None`` without an encoder).
        base_similarity: the same for the vanilla run.
    """

    fraction: float
    n_construction: int
    n_revisions: int
    n_cases: int
    accuracy: float
    base_accuracy: float
    delta: float
    ci_low: float
    ci_high: float
    correction: float
    regression: float
    n_fix: int
    n_baseline_wrong: int
    n_reg: int
    n_baseline_right: int
    similarity: float | None = None
    base_similarity: float | None = None


def _similarity(records: Sequence[Mapping[str, Any]], encoder: Any) -> float | None:
    from clinenv.evaluation.metrics import embedding_similarity, is_unscored

    if encoder is None or not records:
        return None
    predicted = [None if is_unscored(r) else r.get("scored_answer", r.get("answer"))
                 for r in records]
    return float(np.mean(embedding_similarity(predicted, [r["target"] for r in records],
                                              encoder)))


def scale_point(fraction: float, graph: Any, vanilla: str | Path, wrapped: str | Path, *,
                encoder: Any = None, n_resamples: int = 2000, seed: int = 0) -> ScalePoint:
    """Compare the wrapped run with the vanilla run on their common cases.

    Args:
        fraction: the construction share of ``graph``.
        graph: the :class:`~clinenv.wrappers.cdeg.graph.CDEGraph` (its
            ``construction_cases`` metadata gives ``n_construction``).
        vanilla, wrapped: run logs of the same evaluation cases and repetitions.
        encoder: for the similarity (``None``: not computed).
        n_resamples: bootstrap resamples of the interval.
        seed: bootstrap seed.

    Raises:
        clinenv.evaluation.runs.RunsError: a log cannot be read or the runs do not pair.
    """
    from clinenv.evaluation.comparison import compare
    from clinenv.evaluation.runs import load_runs

    (base,) = load_runs([f"vanilla={vanilla}"])
    (method,) = load_runs([f"cdeg={wrapped}"])
    (c,) = compare([(base, method)], n_resamples=n_resamples, n_flips=1000, seed=seed)
    construction = graph.metadata.get("construction_cases") or {}
    keep = set(c.alignment.case_ids)
    return ScalePoint(
        fraction=fraction, n_construction=sum(len(v) for v in construction.values()),
        n_revisions=len(graph.revisions), n_cases=c.n_cases, accuracy=c.method_accuracy,
        base_accuracy=c.base_accuracy, delta=c.ci.difference, ci_low=c.ci.low,
        ci_high=c.ci.high, correction=c.cr.correction, regression=c.cr.regression,
        n_fix=c.cr.n_fix, n_baseline_wrong=c.cr.n_baseline_wrong, n_reg=c.cr.n_reg,
        n_baseline_right=c.cr.n_baseline_right,
        similarity=_similarity([r for r in method.records if r["case_id"] in keep], encoder),
        base_similarity=_similarity([r for r in base.records if r["case_id"] in keep],
                                    encoder))


def _pct(value: float | None, digits: int = 2) -> str:
    from clinenv.evaluation.table import DASH

    return DASH if value is None or math.isnan(value) else f"{value:.{digits}f}"


#: CSV columns of :func:`scaling_table`.
SCALING_CSV = ("fraction", "n_construction", "n_revisions", "n_cases", "accuracy",
               "base_accuracy", "delta_pp", "ci_low", "ci_high", "correction", "n_fix",
               "n_baseline_wrong", "regression", "n_reg", "n_baseline_right", "similarity",
               "base_similarity")


def scaling_table(points: Sequence[ScalePoint], *, similarity_name: str = "similarity"
                  ) -> Any:
    """The scaling study as a :class:`~clinenv.evaluation.table.Table`: a vanilla row,
    then one row per fraction."""
    from clinenv.evaluation.table import DASH, Table

    if not points:
        raise ValueError("no scaling point")
    first = points[0]
    header = ("graph", "construction cases", "revisions", "eval cases", "Acc. (%)",
              "Δ pp [95% CI]", "Sim.", "Corr. (%)", "Reg. (%)")
    rows = [("vanilla", DASH, DASH, str(first.n_cases), _pct(first.base_accuracy), DASH,
             _pct(first.base_similarity, 4), DASH, DASH)]
    for p in points:
        rows.append((f"{100 * p.fraction:g} %", str(p.n_construction), str(p.n_revisions),
                     str(p.n_cases), _pct(p.accuracy),
                     f"{p.delta:+.2f} [{p.ci_low:.2f}, {p.ci_high:.2f}]",
                     _pct(p.similarity, 4),
                     f"{_pct(p.correction)} ({p.n_fix}/{p.n_baseline_wrong})",
                     f"{_pct(p.regression)} ({p.n_reg}/{p.n_baseline_right})"))
    csv_rows = [(p.fraction, p.n_construction, p.n_revisions, p.n_cases, p.accuracy,
                 p.base_accuracy, p.delta, p.ci_low, p.ci_high, p.correction, p.n_fix,
                 p.n_baseline_wrong, p.regression, p.n_reg, p.n_baseline_right,
                 p.similarity, p.base_similarity) for p in points]
    notes = ("Graphs from nested seeded subsets of the construction cases, each evaluated "
             "on the same held-out cases (CDEG Figure 3).",
             "Corr. = N_fix / N_V-, Reg. = N_reg / N_V+ against the vanilla run, on "
             "per-case majority verdicts (CDEG Eq. 8); Δ with a paired case-cluster "
             "bootstrap interval.",
             f"Sim.: mean answer-reference cosine ({similarity_name}); a non-answer "
             "counts 0.")
    return Table(title="CDEG experience scaling", header=header, rows=tuple(rows),
                 notes=notes, csv_header=SCALING_CSV, csv_rows=tuple(csv_rows),
                 data=tuple(points))


def plot_scaling(points: Sequence[ScalePoint], path: str | Path) -> Path:
    """Figure 3's three panels (accuracy, similarity, correction against the fraction)
    as a PNG; the vanilla level is a dashed line.

    Raises:
        clinenv.evaluation.plots.PlotDependencyError: matplotlib is not installed.
    """
    from clinenv.evaluation.plots import _figure, _save

    fig = _figure(10.0, 3.2)
    axes = fig.subplots(1, 3)
    xs = [f"{100 * p.fraction:g}%" for p in points]
    panels = (("Accuracy (%)", [p.accuracy for p in points], points[0].base_accuracy),
              ("Similarity", [math.nan if p.similarity is None else p.similarity
                              for p in points], points[0].base_similarity),
              ("Correction (%)", [p.correction for p in points], None))
    for ax, (name, ys, base) in zip(axes, panels, strict=True):
        ax.plot(xs, ys, marker="o", color="#1f77b4")
        for x, y in zip(xs, ys, strict=True):
            if not math.isnan(y):
                ax.annotate(f"{y:.2f}" if name != "Similarity" else f"{y:.4f}", (x, y),
                            textcoords="offset points", xytext=(0, 6), ha="center",
                            fontsize=8)
        if base is not None and not math.isnan(base):
            ax.axhline(base, linestyle="--", color="#888888", linewidth=1, label="vanilla")
            ax.legend(fontsize=7, loc="lower right")
        ax.margins(y=0.18)  # room for the value labels
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("construction cases used", fontsize=8)
    return _save(fig, path)
