"""Paired comparisons of runs: EGIP Tables 5/8 (appendix G) and CDEG Table 2.

:func:`pair_runs`, :func:`compare` / :func:`comparison_table` (Δ in percentage points,
CI, Holm p, U, correction/regression) and :func:`accuracy_ci`.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from clinenv.evaluation.metrics import (
    stratify,
)
from clinenv.evaluation.reports import missing_notes, scoring_notes
from clinenv.evaluation.runs import Alignment, Run, RunsError, align, check_scoring_versions
from clinenv.evaluation.stats import (
    CorrectionRegression,
    PairedCI,
    case_means,
    correction_regression,
    holm,
    paired_bootstrap_ci,
    sign_flip_test,
)
from clinenv.evaluation.table import DASH, Table, _pct

__all__ = ["Comparison", "accuracy_ci", "compare", "comparison_table", "pair_runs"]


def accuracy_ci(x: Any, *, n_resamples: int = 10_000, confidence: float = 0.95,
                seed: Any = None) -> PairedCI:
    """A run's own accuracy (%) with a case-cluster bootstrap percentile interval.

    Implemented as :func:`~clinenv.evaluation.stats.paired_bootstrap_ci` of the run
    against an all-zero baseline, so cases are resampled with all their repetitions and
    the statistic is the mean over cases of each case's mean correctness (the pooled
    accuracy when no repetition is missing).

    Args:
        x: correctness matrix ``(n_cases, n_repetitions)`` of 0/1/NaN.
        n_resamples: bootstrap resamples.
        confidence: nominal coverage.
        seed: anything :func:`numpy.random.default_rng` accepts.

    Returns:
        A :class:`~clinenv.evaluation.stats.PairedCI` whose ``difference`` is the
        accuracy; degenerate (no sampling spread) for a single case or when every case
        has the same mean correctness.
    """
    x = np.asarray(x, dtype=float)
    zeros = np.zeros((x.shape[0], 1))
    return paired_bootstrap_ci(zeros, x, n_resamples=n_resamples, confidence=confidence,
                               seed=seed)


@dataclass(frozen=True)
class Comparison:
    """A method against a baseline on one dataset (one row of :func:`comparison_table`).

    Attributes:
        dataset: dataset name.
        base: baseline label.
        method: method label.
        n_cases: paired cases.
        n_dropped: cases dropped by ``intersect`` (0 otherwise).
        base_accuracy: baseline accuracy (%) on the paired cases, mean over cases.
        method_accuracy: method accuracy (%), likewise; the difference is ``ci.difference``.
        ci: Δ = method − baseline (pp) with its paired bootstrap interval.
        p_value: two-sided sign-flip p value (unadjusted).
        p_holm: ``p_value`` Holm-adjusted over every comparison of the call.
        u_base: unscored baseline outputs (U) on the paired cases, all repetitions.
        u_method: unscored method outputs, likewise.
        unparsed_base: baseline outputs whose judge reply could not be read (not in U).
        unparsed_method: the same for the method.
        cr: correction and regression on per-case majority verdicts (CDEG Eq. 8).
        n_flips: sign-flip randomizations.
        alignment: the paired runs and matrices (of the stratum's cases with ``by``).
        stratum: the stratum label with ``by`` (``None``: all paired cases).
    """

    dataset: str
    base: str
    method: str
    n_cases: int
    n_dropped: int
    base_accuracy: float
    method_accuracy: float
    ci: PairedCI
    p_value: float
    p_holm: float
    u_base: int
    u_method: int
    cr: CorrectionRegression
    n_flips: int
    alignment: Alignment = field(repr=False, compare=False)
    stratum: str | None = None
    unparsed_base: int = 0
    unparsed_method: int = 0


def pair_runs(runs: Sequence[Run], base_label: str | None = None, *,
              pairs: Sequence[tuple[str, str]] | None = None) -> list[tuple[Run, Run]]:
    """``(baseline, method)`` run pairs, by one baseline label or by explicit pairs.

    With ``base_label``, runs with that label are the baselines (one per dataset) and
    each other run is compared with the baseline of its dataset, in the order given.
    With ``pairs`` = ``[(method_label, base_label), ...]`` each method is compared with
    its own baseline on every dataset where both have a run (EGIP Table 8: each Direct
    variant against its own framework's Native), in the order of ``pairs``.

    Raises:
        RunsError: no other run than the baselines, a run whose dataset has no baseline
            run (named); with ``pairs``, an unknown label, a method paired with itself,
            or a pair with no dataset in common.
    """
    if pairs is not None:
        return _explicit_pairs(runs, pairs)
    if base_label is None:
        raise ValueError("give base_label or pairs")
    bases = {r.dataset: r for r in runs if r.label == base_label}
    methods = [r for r in runs if r.label != base_label]
    if not methods:
        raise RunsError(f"nothing to compare: every run is labelled {base_label!r}; give "
                        "the baseline log first, then the method logs (LABEL=path to "
                        "name them)", path=runs[0].paths[0] if runs else "<arguments>")
    pairs = []
    for run in methods:
        if run.dataset not in bases:
            have = ", ".join(sorted(bases)) or "none"
            raise RunsError(f"no baseline run {base_label!r} on dataset {run.dataset!r} to "
                            f"compare {run.label!r} with (baseline datasets: {have})",
                            path=run.paths[0])
        pairs.append((bases[run.dataset], run))
    return pairs


def _explicit_pairs(runs: Sequence[Run], pairs: Sequence[tuple[str, str]]
                    ) -> list[tuple[Run, Run]]:
    where = runs[0].paths[0] if runs else "<arguments>"
    labels = list(dict.fromkeys(r.label for r in runs))
    if not pairs:
        raise RunsError("no pairs given", path=where)
    out: list[tuple[Run, Run]] = []
    for method, base in pairs:
        for name in (method, base):
            if name not in labels:
                raise RunsError(f"--pair {method}={base}: no run is labelled {name!r} "
                                f"(labels: {', '.join(labels)})", path=where)
        if method == base:
            raise RunsError(f"--pair {method}={base}: a method cannot be its own baseline",
                            path=where)
        found = [(b, m) for m in runs if m.label == method
                 for b in runs if b.label == base and b.dataset == m.dataset]
        if not found:
            raise RunsError(f"--pair {method}={base}: no dataset has runs of both",
                            path=where)
        for pair in found:
            if pair not in out:
                out.append(pair)
    return out


def _sub_alignments(al: Alignment, by: str) -> list[tuple[str, Alignment]]:
    """``(stratum, alignment restricted to its cases)`` for every stratum of ``by``;
    a case's strata are read from the lines of both runs."""
    strata: dict[str, set[str]] = {}
    for run in (al.base, al.method):
        for label, records in stratify(run.records, by).items():
            strata.setdefault(label, set()).update(r["case_id"] for r in records)
    out = []
    for label in sorted(strata):
        rows = [i for i, c in enumerate(al.case_ids) if c in strata[label]]
        if rows:
            out.append((label, replace(al, case_ids=tuple(al.case_ids[i] for i in rows),
                                       a=al.a[rows], b=al.b[rows])))
    return out


def _seed_for(seed: int | None, *names: str) -> np.random.SeedSequence:
    """A seed for one comparison from the call's seed and the comparison's names, so a
    comparison's CI and p value do not depend on what else is in the call."""
    if seed is None:
        return np.random.SeedSequence()
    digest = hashlib.blake2b("\0".join(names).encode("utf-8"), digest_size=16).digest()
    words = [int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4)]
    return np.random.SeedSequence([int(seed), *words])


def compare(pairs: Sequence[Alignment | tuple[Run, Run]], *, n_resamples: int = 10_000,
            n_flips: int = 20_000, seed: int | None = 0, confidence: float = 0.95,
            intersect: bool = False, by: str | None = None,
            mixed_scoring: bool = False) -> list[Comparison]:
    """Paired statistics of every pair; sign-flip p values Holm-adjusted over all pairs.

    Args:
        pairs: :class:`~clinenv.evaluation.runs.Alignment` objects or ``(base, method)`` runs.
        n_resamples: bootstrap resamples per comparison.
        n_flips: sign-flip randomizations per comparison.
        seed: base seed; each comparison's streams derive from it and its dataset and
            labels (``None``: not reproducible).
        confidence: CI coverage.
        intersect: for run pairs, keep the common cases instead of refusing.
        by: a ``case_strata`` key: one comparison per stratum (EGIP Table 7).
        mixed_scoring: pair runs scored under different scoring versions.

    Raises:
        CaseMismatchError, RunsError: from :func:`~clinenv.evaluation.runs.align`
            (``MixedScoringError`` included), or no paired case has the stratum ``by``.
        ValueError: no pairs, or invalid resample counts / confidence.
    """
    if not pairs:
        raise ValueError("no comparisons")
    aligned = [p if isinstance(p, Alignment)
               else align(*p, intersect=intersect, mixed_scoring=mixed_scoring)
               for p in pairs]
    if not mixed_scoring:
        for al in aligned:
            check_scoring_versions([al.base, al.method], what="pair")
    if by is not None and not by.strip():
        raise ValueError("by must be a non-empty case_strata key")
    units: list[tuple[str | None, Alignment]] = []
    for al in aligned:
        units += [(None, al)] if by is None else _sub_alignments(al, by)
    if not units:
        raise RunsError(f"no paired case has stratum {by!r}",
                        path=aligned[0].method.paths[0])
    rows = []
    for stratum, al in units:
        names = (al.base.dataset, al.base.label, al.method.label)
        if stratum is not None:
            names += (by or "", stratum)
        boot_seed, flip_seed = _seed_for(seed, *names).spawn(2)
        ci = paired_bootstrap_ci(al.a, al.b, n_resamples=n_resamples, confidence=confidence,
                                 seed=boot_seed)
        p = sign_flip_test(al.a, al.b, n_resamples=n_flips, seed=flip_seed)
        rows.append((stratum, al, ci, p))
    adjusted = holm([p for *_, p in rows])
    return [Comparison(
        dataset=al.base.dataset, base=al.base.label, method=al.method.label,
        n_cases=len(al.case_ids), n_dropped=al.n_dropped,
        base_accuracy=100.0 * float(np.mean(case_means(al.a))),
        method_accuracy=100.0 * float(np.mean(case_means(al.b))),
        ci=ci, p_value=p, p_holm=float(p_adj),
        u_base=al.base.n_unscored(al.case_ids), u_method=al.method.n_unscored(al.case_ids),
        cr=correction_regression(al.a, al.b), n_flips=n_flips, alignment=al,
        stratum=stratum, unparsed_base=al.base.n_unparsed(al.case_ids),
        unparsed_method=al.method.n_unparsed(al.case_ids),
    ) for (stratum, al, ci, p), p_adj in zip(rows, adjusted, strict=True)]


#: CSV columns of :func:`comparison_table`.
COMPARISON_CSV = ("dataset", "method", "baseline", "n_cases", "n_dropped", "baseline_accuracy",
                  "method_accuracy", "difference_pp", "ci_low", "ci_high", "confidence",
                  "n_resamples", "ci_degenerate", "p_value", "p_holm", "n_flips",
                  "u_baseline", "u_method", "n_fix", "n_baseline_wrong", "correction",
                  "n_reg", "n_baseline_right", "regression", "unparsed_baseline",
                  "unparsed_method")


def _rate(value: float, num: int, den: int) -> str:
    return f"{_pct(value)} ({num}/{den})"


def comparison_table(pairs: Sequence[Alignment | tuple[Run, Run]], n_resamples: int = 10_000,
                     seed: int | None = 0, *, n_flips: int = 20_000,
                     confidence: float = 0.95, intersect: bool = False,
                     by: str | None = None, mixed_scoring: bool = False) -> Table:
    """Paired comparisons in the layout of EGIP Tables 5/8 with CDEG Table 2's rates.

    Columns: dataset, method, baseline, paired cases, both accuracies (%), Δ (pp), the
    paired CI, Holm p, U of each method, correction and regression (% with counts).
    With ``by``, one row per stratum and pair (EGIP Table 7), with a stratum column
    after the dataset. See :func:`compare` for the arguments.

    Returns:
        A :class:`Table` (CSV columns :data:`COMPARISON_CSV`, plus ``stratum`` after
        ``dataset`` with ``by``) whose ``data`` are the :class:`Comparison` objects.
    """
    comps = compare(pairs, n_resamples=n_resamples, n_flips=n_flips, seed=seed,
                    confidence=confidence, intersect=intersect, by=by,
                    mixed_scoring=mixed_scoring)
    level = f"{100 * confidence:g}%"
    header = ("Dataset", "Method", "Baseline", "Cases", "Baseline (%)", "Method (%)",
              "Δ (pp)", f"Paired {level} CI", "Holm p", "U base", "U method",
              "Correction (%)", "Regression (%)")
    csv_header = COMPARISON_CSV
    if by is not None:
        header = (header[0], by, *header[1:])
        csv_header = (csv_header[0], "stratum", *csv_header[1:])
    rows, csv_rows = [], []
    for c in comps:
        ci = (DASH if math.isnan(c.ci.low)
              else f"[{c.ci.low:.2f}, {c.ci.high:.2f}]")
        lead = (c.dataset,) if by is None else (c.dataset, str(c.stratum))
        rows.append((*lead, c.method, c.base, str(c.n_cases), _pct(c.base_accuracy),
                     _pct(c.method_accuracy), f"{c.ci.difference:+.2f}", ci,
                     f"{c.p_holm:.4f}", str(c.u_base), str(c.u_method),
                     _rate(c.cr.correction, c.cr.n_fix, c.cr.n_baseline_wrong),
                     _rate(c.cr.regression, c.cr.n_reg, c.cr.n_baseline_right)))
        csv_rows.append((*lead, c.method, c.base, c.n_cases, c.n_dropped,
                         c.base_accuracy, c.method_accuracy, c.ci.difference, c.ci.low,
                         c.ci.high, c.ci.confidence, c.ci.n_resamples, c.ci.degenerate,
                         c.p_value, c.p_holm, c.n_flips, c.u_base, c.u_method, c.cr.n_fix,
                         c.cr.n_baseline_wrong, c.cr.correction, c.cr.n_reg,
                         c.cr.n_baseline_right, c.cr.regression, c.unparsed_base,
                         c.unparsed_method))
    notes = [
        f"Baseline (%), Method (%): mean over the paired cases of each case's mean "
        f"correctness over its repetitions; Δ = Method − Baseline in percentage points "
        f"(the mean of the per-case differences). CI: "
        f"pointwise {level} case-cluster percentile bootstrap ({n_resamples:,} resamples; "
        f"repetitions and both methods of a case resampled together; seed {seed}).",
        f"Holm p: two-sided sign-flip randomization test of the case-averaged paired "
        f"differences ({n_flips:,} flips), Holm-adjusted over the {len(comps)} "
        f"comparison(s) of this table; exploratory.",
        "Scheduled episodes missing from a log count as not correct (EGIP 4.1).",
        "U: outputs without an identifiable answer (no answer, a template placeholder, an "
        "abstention) across repetitions, one definition for every protocol: a native "
        "episode that ends without a diagnosis is AgentClinic's 'wrong' but counts in U; "
        "judge replies that could not be read are not in U (CSV unparsed_*). "
        "Correction = N_fix / N_V−, Regression = "
        "N_reg / N_V+ on per-case majority verdicts (more than half of the repetitions "
        "correct), as % (count / denominator) (CDEG Eq. 8).",
    ]
    whole = [c for c in comps if c.stratum is None] or comps
    notes += missing_notes([r for c in whole for r in (c.alignment.base, c.alignment.method)],
                           [c.alignment.case_ids for c in whole for _ in (0, 1)]
                           if by is None else None)
    notes += scoring_notes([r for c in whole for r in (c.alignment.base,
                                                        c.alignment.method)])
    if by is not None:
        notes.append(f"Rows per {by!r} stratum: a case with several labels counts in each; "
                     "Holm runs over every row.")
    for c in comps:
        where = c.dataset if c.stratum is None else f"{c.dataset} / {c.stratum}"
        if c.ci.degenerate:
            notes.append(f"{where}, {c.method}: degenerate CI ("
                         + ("a single case" if c.n_cases < 2
                            else "every paired difference is equal") + ").")
        al = c.alignment
        if al.n_dropped:
            parts = []
            if al.only_base:
                parts.append(f"{len(al.only_base)} only in {c.base!r}")
            if al.only_method:
                parts.append(f"{len(al.only_method)} only in {c.method!r}")
            notes.append(f"{c.dataset}, {c.method} vs {c.base}: {al.n_dropped} case(s) "
                         f"dropped to intersect the case sets ({', '.join(parts)}).")
    if any(math.isnan(c.cr.correction) or math.isnan(c.cr.regression) for c in comps):
        notes.append(f"{DASH} (0/0): the rate is undefined (no such baseline case).")
    title = (f"Paired comparisons against the baseline ({level} CI, Holm-adjusted "
             "sign-flip p)")
    if by is not None:
        title = title.replace("baseline (", f"baseline by stratum {by!r} (")
    return Table(title=title, header=header, rows=tuple(rows), notes=tuple(dict.fromkeys(notes)),
                 csv_header=csv_header, csv_rows=tuple(csv_rows), data=tuple(comps))
