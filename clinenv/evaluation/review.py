"""Reviewer support of paired outputs: correct-and-jointly-supported yield (EGIP Eq. 6).

EGIP Table 4's panels A-C over complete pairs, with dataset-stratified source-case
bootstrap intervals (appendix E); definitions in docs/analyses.md.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from clinenv.evaluation.agreement import Agreement, cohen_kappa
from clinenv.evaluation.comparison import _seed_for
from clinenv.evaluation.reviewer_labels import (
    RATINGS,
    ReviewerLabelError,
    ReviewerLabels,
)
from clinenv.evaluation.runs import Alignment, Run, align
from clinenv.evaluation.stats import PairedCI, stratified_bootstrap_ci
from clinenv.evaluation.table import DASH, Table, _pct

__all__ = ["ReviewPair", "ReviewSample", "YieldRow", "agreement_table",
           "correct_supported_yield", "review_pairs", "review_table", "supported",
           "yield_rows"]

#: The rule "every reviewer rated S" (EGIP's joint support; CSY with correctness).
ALL = "all"
#: The rule "at least one reviewer rated S".
ANY = "any"


@dataclass(frozen=True)
class ReviewPair:
    """One complete pair: the baseline's and the method's output for one case and
    repetition, both rated by every reviewer.

    Attributes:
        dataset, case_id, repetition: the output's place in the run logs.
        base, method: the two runs' method labels.
        base_correct, method_correct: automated correctness (c_j^m).
        base_ratings, method_ratings: ``{reviewer: rating}`` of each output.
    """

    dataset: str
    case_id: str
    repetition: int
    base: str
    method: str
    base_correct: bool
    method_correct: bool
    base_ratings: Mapping[str, str]
    method_ratings: Mapping[str, str]


@dataclass(frozen=True)
class ReviewSample:
    """The complete pairs of a reviewer-label file over the compared runs.

    Attributes:
        pairs: the complete pairs, in run-pair, case and repetition order.
        reviewers: every reviewer of the file, in file order.
        incomplete: ``(dataset, case_id, repetition, base, method)`` of pairs with at
            least one rating but not every reviewer on both outputs (left out).
        outside: label-file outputs of runs not in the comparisons (ignored), as
            ``(dataset, method)`` with their number of outputs.
        run_pairs: ``(base label, method label, dataset)`` of each compared pair.
    """

    pairs: tuple[ReviewPair, ...]
    reviewers: tuple[str, ...]
    incomplete: tuple[tuple[str, str, int, str, str], ...]
    outside: Mapping[tuple[str, str], int]
    run_pairs: tuple[tuple[str, str, str], ...]

    @property
    def n_cases(self) -> int:
        """Source cases ``(dataset, case_id)`` of the complete pairs."""
        return len({(p.dataset, p.case_id) for p in self.pairs})


def review_pairs(pairs: Sequence[Alignment | tuple[Run, Run]],
                 labels: ReviewerLabels, *, intersect: bool = False,
                 mixed_scoring: bool = False) -> ReviewSample:
    """The complete and incomplete rated pairs of ``labels`` over compared runs.

    Args:
        pairs: :class:`~clinenv.evaluation.runs.Alignment` objects or ``(base, method)``
            runs (as for :func:`clinenv.evaluation.comparison.compare`).
        labels: a reviewer-label file.
        intersect: passed to :func:`~clinenv.evaluation.runs.align`.
        mixed_scoring: passed to :func:`~clinenv.evaluation.runs.align`.

    Raises:
        ReviewerLabelError: (naming the label file, line and field) a rated output of a
            compared run that the run does not hold (unknown ``case_id``, a
            ``repetition`` beyond the run's), or no rated output belongs to the
            compared runs (the message lists the labels and datasets of both).
        ValueError: a method label on one dataset in more than one compared pair (its
            rated outputs would count twice in the pooled yields, or be ambiguous).
    """
    aligned = [p if isinstance(p, Alignment)
               else align(*p, intersect=intersect, mixed_scoring=mixed_scoring)
               for p in pairs]
    seen: dict[tuple[str, str], int] = {}
    for al in aligned:
        for run in (al.base, al.method):
            key = (run.label, run.dataset)
            seen[key] = seen.get(key, 0) + 1
            if seen[key] > 1:
                raise ValueError(f"method label {run.label!r} on {run.dataset!r} is in more "
                                 "than one compared pair (the same run twice, or two runs "
                                 "with one label); the label file names outputs by label, "
                                 "and the review pools complete pairs, so give each label "
                                 "one pair (--pair METHOD=BASE; name logs LABEL=path)")
    runs = {(al.base.label, al.base.dataset): (al, "base") for al in aligned}
    runs.update({(al.method.label, al.method.dataset): (al, "method") for al in aligned})
    outside: dict[tuple[str, str], int] = {}
    for key in labels.ratings:
        dataset, case_id, method, rep = key
        found = runs.get((method, dataset))
        if found is None:
            outside[(dataset, method)] = outside.get((dataset, method), 0) + 1
            continue
        al, side = found
        run = al.base if side == "base" else al.method
        if case_id not in al.case_ids:
            raise ReviewerLabelError(f"run {run.describe()} has no case {case_id!r} among "
                                     "the compared cases", path=labels.path,
                                     line=labels.line_of(key), field="case_id")
        if rep >= run.n_repetitions:
            raise ReviewerLabelError(f"run {run.describe()} has repetitions 0.."
                                     f"{run.n_repetitions - 1}, not {rep}",
                                     path=labels.path, line=labels.line_of(key),
                                     field="repetition")
    if len(outside) == len({(d, m) for d, _, m, _ in labels.ratings}):
        have = ", ".join(f"{m!r} on {d!r}" for d, m in outside)
        want = ", ".join(f"{label!r} on {d!r}" for label, d in runs)
        raise ReviewerLabelError(f"no rated output belongs to the compared runs: the file "
                                 f"rates {have}; the runs are {want} (the method column "
                                 "holds compare's labels; name logs LABEL=path to match)",
                                 path=labels.path, field="method")
    complete: list[ReviewPair] = []
    incomplete: list[tuple[str, str, int, str, str]] = []
    everyone = set(labels.reviewers)
    for al in aligned:
        base, method = al.base, al.method
        for row, case_id in enumerate(al.case_ids):
            for rep in range(max(base.n_repetitions, method.n_repetitions)):
                rb = labels.ratings.get((base.dataset, case_id, base.label, rep), {})
                rm = labels.ratings.get((method.dataset, case_id, method.label, rep), {})
                if not rb and not rm:
                    continue
                if set(rb) != everyone or set(rm) != everyone:
                    incomplete.append((base.dataset, case_id, rep, base.label, method.label))
                    continue
                complete.append(ReviewPair(
                    dataset=base.dataset, case_id=case_id, repetition=rep, base=base.label,
                    method=method.label, base_correct=bool(al.a[row, rep] == 1.0),
                    method_correct=bool(al.b[row, rep] == 1.0), base_ratings=dict(rb),
                    method_ratings=dict(rm)))
    return ReviewSample(pairs=tuple(complete), reviewers=labels.reviewers,
                        incomplete=tuple(incomplete), outside=outside,
                        run_pairs=tuple((al.base.label, al.method.label, al.base.dataset)
                                        for al in aligned))


def supported(ratings: Mapping[str, str], rule: str, reviewers: Sequence[str]) -> bool:
    """Whether an output's ratings meet a support rule.

    Args:
        ratings: ``{reviewer: rating}`` of one output.
        rule: ``"all"`` (every reviewer in ``reviewers`` rated S), ``"any"`` (at least
            one did), or a reviewer's name (that reviewer rated S).
        reviewers: the reviewers of the sample.

    Raises:
        ValueError: an unknown rule (the reviewers are listed).
    """
    if rule == ALL:
        return all(ratings.get(r) == "S" for r in reviewers)
    if rule == ANY:
        return any(ratings.get(r) == "S" for r in reviewers)
    if rule in reviewers:
        return ratings.get(rule) == "S"
    raise ValueError(f"unknown support rule {rule!r}: use 'all', 'any' or a reviewer "
                     f"({', '.join(reviewers)})")


def _outcomes(sample: ReviewSample, pairs: Sequence[ReviewPair], rule: str,
              require_correct: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per pair: (baseline y_j, method y_j) as 0/1 arrays."""
    def y(correct: bool, ratings: Mapping[str, str]) -> float:
        ok = supported(ratings, rule, sample.reviewers)
        return float(ok and (correct or not require_correct))

    base = np.array([y(p.base_correct, p.base_ratings) for p in pairs])
    method = np.array([y(p.method_correct, p.method_ratings) for p in pairs])
    return base, method


def correct_supported_yield(sample: ReviewSample, *, rule: str = ALL,
                            require_correct: bool = True) -> tuple[float, float]:
    """``(CSY_baseline, CSY_method)`` in percent over the complete pairs (Eq. 6).

    Args:
        sample: :func:`review_pairs`.
        rule: support rule (:func:`supported`); ``"all"`` is Eq. 6.
        require_correct: multiply by c_j^m (Eq. 6); ``False`` gives Panel C's joint
            support irrespective of correctness.

    Raises:
        ValueError: no complete pair, or an unknown rule.
    """
    if not sample.pairs:
        raise ValueError("no complete pair: every reviewer must rate both outputs of a pair")
    base, method = _outcomes(sample, sample.pairs, rule, require_correct)
    return 100.0 * float(base.mean()), 100.0 * float(method.mean())


@dataclass(frozen=True)
class YieldRow:
    """One row of EGIP Table 4.

    Attributes:
        panel: ``"A"``, ``"B"`` or ``"C"``.
        rule: the support rule (:func:`supported`).
        dataset: the dataset of a per-dataset row (``None``: all reviewed pairs).
        n_pairs: N, the pairs of the row.
        n_base, n_method: qualifying outputs of each side.
        base_yield, method_yield: ``100 * n / N`` (percent).
        ci: Δ (pp) with its dataset-stratified source-case bootstrap interval.
        require_correct: whether c_j^m multiplies the support (Panels A and B).
    """

    panel: str
    rule: str
    dataset: str | None
    n_pairs: int
    n_base: int
    n_method: int
    base_yield: float
    method_yield: float
    ci: PairedCI
    require_correct: bool


def _row(sample: ReviewSample, panel: str, rule: str, dataset: str | None,
         pairs: Sequence[ReviewPair], require_correct: bool, n_resamples: int,
         confidence: float, seed: int | None) -> YieldRow:
    base, method = _outcomes(sample, pairs, rule, require_correct)
    cases: dict[tuple[str, str], list[int]] = {}
    for j, p in enumerate(pairs):
        cases.setdefault((p.dataset, p.case_id), []).append(j)
    diff = method - base
    x = [float(diff[rows].sum()) for rows in cases.values()]
    n = [len(rows) for rows in cases.values()]
    strata = [d for d, _ in cases]
    ci = stratified_bootstrap_ci(x, n, strata, n_resamples=n_resamples,
                                 confidence=confidence,
                                 seed=_seed_for(seed, "review", panel, rule, dataset or ""))
    return YieldRow(panel=panel, rule=rule, dataset=dataset, n_pairs=len(pairs),
                    n_base=int(base.sum()), n_method=int(method.sum()),
                    base_yield=100.0 * float(base.mean()),
                    method_yield=100.0 * float(method.mean()), ci=ci,
                    require_correct=require_correct)


def yield_rows(sample: ReviewSample, *, n_resamples: int = 20_000,
               confidence: float = 0.95, seed: int | None = 0) -> list[YieldRow]:
    """The rows of EGIP Table 4 (docs/analyses.md, "Correct-and-jointly-supported
    yield"): Panel A and B under the rules
    ``all``, each reviewer, ``any``; Panel C (``all``, correctness ignored) over all
    pairs and per dataset. Panel B is left out when its subset is empty.

    Args:
        sample: :func:`review_pairs`.
        n_resamples: bootstrap resamples per row (the paper: 20,000).
        confidence: interval coverage.
        seed: base seed; each row's stream derives from it and the row's panel, rule
            and dataset (``None``: not reproducible).

    Raises:
        ValueError: no complete pair.
    """
    if not sample.pairs:
        raise ValueError("no complete pair in the reviewer labels: every reviewer must "
                         f"rate both outputs of a pair ({len(sample.incomplete)} "
                         "incomplete pair(s))")
    rules = [ALL, *sample.reviewers, ANY] if len(sample.reviewers) > 1 else [ALL]
    shared = [p for p in sample.pairs if p.base_correct and p.method_correct
              and "A" not in p.base_ratings.values() and "A" not in p.method_ratings.values()]
    out: list[YieldRow] = []

    def add(panel: str, rule: str, dataset: str | None, pairs: Sequence[ReviewPair],
            require_correct: bool) -> None:
        out.append(_row(sample, panel, rule, dataset, pairs, require_correct, n_resamples,
                        confidence, seed))

    for rule in rules:
        add("A", rule, None, sample.pairs, True)
    if shared:
        for rule in rules:
            add("B", rule, None, shared, True)
    add("C", ALL, None, sample.pairs, False)
    datasets = list(dict.fromkeys(p.dataset for p in sample.pairs))
    if len(datasets) > 1:
        for dataset in datasets:
            add("C", ALL, dataset, [p for p in sample.pairs if p.dataset == dataset], False)
    return out


#: CSV columns of :func:`review_table`.
REVIEW_CSV = ("panel", "rule", "dataset", "require_correct", "n_pairs", "n_baseline",
              "baseline_yield", "n_method", "method_yield", "difference_pp", "ci_low",
              "ci_high", "confidence", "n_resamples", "n_cases", "ci_degenerate")

_PANELS = {"A": "A. Correct-and-supported yield",
           "B": "B. Support within the shared correct-answer subset",
           "C": "C. Joint-support yield irrespective of correctness"}


def _rule_text(rule: str, reviewers: Sequence[str]) -> str:
    if rule == ALL:
        return "Both reviewers S" if len(reviewers) == 2 else (
            "Reviewer S" if len(reviewers) == 1 else "All reviewers S")
    if rule == ANY:
        return "At least one reviewer S"
    return f"{rule} S"


def review_table(sample: ReviewSample, *, n_resamples: int = 20_000,
                 confidence: float = 0.95, seed: int | None = 0) -> Table:
    """EGIP Table 4 from :func:`yield_rows`: panel, support rule or dataset, each side's
    n/N (%), Δ (pp) and the paired interval; ``data`` are the :class:`YieldRow` objects.
    """
    rows = yield_rows(sample, n_resamples=n_resamples, confidence=confidence, seed=seed)
    level = f"{100 * confidence:g}%"
    header = ("Panel", "Support rule / dataset", "Baseline n/N (%)", "Method n/N (%)",
              "Δ (pp)", f"Paired {level} CI")
    display, csv_rows = [], []
    for r in rows:
        what = (_rule_text(r.rule, sample.reviewers) if r.dataset is None
                else f"{r.dataset} ({_rule_text(r.rule, sample.reviewers)})")
        ci = DASH if r.ci.degenerate and r.ci.n_cases < 2 else (
            f"[{r.ci.low:.2f}, {r.ci.high:.2f}]")
        display.append((_PANELS[r.panel], what,
                        f"{r.n_base}/{r.n_pairs} ({_pct(r.base_yield)})",
                        f"{r.n_method}/{r.n_pairs} ({_pct(r.method_yield)})",
                        f"{r.ci.difference:+.2f}", ci))
        csv_rows.append((r.panel, r.rule, r.dataset or "", r.require_correct, r.n_pairs,
                         r.n_base, r.base_yield, r.n_method, r.method_yield,
                         r.ci.difference, r.ci.low, r.ci.high, r.ci.confidence,
                         r.ci.n_resamples, r.ci.n_cases, r.ci.degenerate))
    compared = "; ".join(f"{m} vs {b} on {d}" for b, m, d in sample.run_pairs)
    notes = [
        f"Complete pairs: {len(sample.pairs)} from {sample.n_cases} source case(s), every "
        f"reviewer ({', '.join(sample.reviewers)}) rating both outputs; "
        f"{len(sample.incomplete)} incompletely rated pair(s) left out. Pairs: {compared}.",
        "Panel A: scored correct and supported (both reviewers S is EGIP Eq. 6, CSY); "
        "unscored outputs count as not correct. Panel B: pairs with both outputs scored "
        "correct and no reviewer rating A (no final answer). Panel C: every reviewer S, "
        "correctness ignored. n/N: qualifying outputs / pairs of the row.",
        f"Δ = Method − Baseline (pp). CI: pointwise {level} dataset-stratified source-case "
        f"percentile bootstrap ({n_resamples:,} resamples; a case brings all its pairs; "
        f"seed {seed}); unadjusted.",
    ]
    if sample.outside:
        shown = ", ".join(f"{m!r} on {d!r} ({n})" for (d, m), n in sample.outside.items())
        notes.append(f"Rated outputs of runs not compared here were ignored: {shown}.")
    return Table(title="Reviewer support of paired outputs (EGIP Table 4, Eq. 6)",
                 header=header, rows=tuple(display), notes=tuple(notes),
                 csv_header=REVIEW_CSV, csv_rows=tuple(csv_rows), data=tuple(rows))


#: CSV columns of :func:`agreement_table`.
AGREEMENT_CSV = ("reviewer_1", "reviewer_2", "n_items", "n_agree", "agreement",
                 "expected", "kappa")


def agreement_table(labels: ReviewerLabels,
                    kappa: Callable[..., Agreement] = cohen_kappa) -> Table:
    """Percent agreement and Cohen's κ of every two reviewers over the outputs both
    rated (all outputs of the file, complete pairs or not; EGIP §4.5, appendix E).

    Raises:
        ValueError: fewer than two reviewers, or two reviewers with no co-rated output.
    """
    if len(labels.reviewers) < 2:
        raise ValueError(f"{labels.path}: agreement needs two reviewers; the file has "
                         f"{len(labels.reviewers)} ({', '.join(labels.reviewers)})")
    rows, csv_rows, data = [], [], []
    for one, two in itertools.combinations(labels.reviewers, 2):
        both = [r for r in labels.ratings.values() if one in r and two in r]
        if not both:
            raise ValueError(f"{labels.path}: reviewers {one!r} and {two!r} rated no "
                             "output in common")
        result = kappa([r[one] for r in both], [r[two] for r in both], categories=RATINGS)
        data.append(result)
        rows.append((one, two, str(result.n_items), _pct(result.agreement),
                     DASH if np.isnan(result.kappa) else f"{result.kappa:.3f}"))
        csv_rows.append((one, two, result.n_items, result.n_agree, result.agreement,
                         result.expected, result.kappa))
    notes = ["Agreement: co-rated outputs with the same rating (S, U, C, I, A), %. "
             "κ: unweighted Cohen's kappa over the five ratings, (p_o − p_e) / (1 − p_e); "
             f"{DASH} when undefined (p_e = 1). Every output both reviewers rated counts, "
             "also those of incomplete pairs."]
    return Table(title="Agreement between reviewers (Cohen's kappa)",
                 header=("Reviewer 1", "Reviewer 2", "Co-rated", "Agreement (%)", "κ"),
                 rows=tuple(rows), notes=tuple(notes), csv_header=AGREEMENT_CSV,
                 csv_rows=tuple(csv_rows), data=tuple(data))
