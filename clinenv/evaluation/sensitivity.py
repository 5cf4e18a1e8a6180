"""Shared-answer scoring sensitivity: effect bounds and the conservative envelope
(EGIP appendix B, Tables 5 and 6).

Also Δ with the baseline's unscored outputs counted correct (B.1); see docs/analyses.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clinenv.evaluation.comparison import Comparison, _seed_for, compare
from clinenv.evaluation.metrics import answer_status, is_unscored
from clinenv.evaluation.runs import Alignment, Run
from clinenv.evaluation.stats import bootstrap_case_means, paired_differences
from clinenv.evaluation.table import Table
from clinenv.scoring import normalize_answer

__all__ = ["LabelPool", "Sensitivity", "answer_key", "effect_bounds", "label_pool",
           "sensitivity", "sensitivity_table", "unscored_correct_difference"]

#: ``(dataset, case_id, normalized answer)``.
AnswerKey = tuple[str, str, str]


def answer_key(record: Mapping[str, Any] | None, dataset: str) -> AnswerKey | None:
    """The shared-answer key of a run-log line, or ``None`` when it holds no identifiable
    answer (or its answer normalizes to nothing)."""
    if record is None or answer_status(record) != "answer":
        return None
    answer = record.get("answer")
    if not isinstance(answer, str):
        return None
    normalized = normalize_answer(answer)
    return (dataset, str(record["case_id"]), normalized) if normalized else None


def _label(record: Mapping[str, Any]) -> int | None:
    verdict = record.get("verdict")
    return 1 if verdict == "correct" else 0 if verdict == "wrong" else None


@dataclass(frozen=True)
class LabelPool:
    """Automated labels per shared-answer key, over every output of some runs.

    Attributes:
        labels: ``{key: set of labels seen}`` (subsets of ``{0, 1}``; empty: absent).
    """

    labels: Mapping[AnswerKey, frozenset[int]]

    def resolved(self, key: AnswerKey) -> int | None:
        """The key's consistent label, or ``None`` when absent or conflicting."""
        seen = self.labels.get(key, frozenset())
        return next(iter(seen)) if len(seen) == 1 else None

    @property
    def n_absent(self) -> int:
        """Keys with no automated label."""
        return sum(not v for v in self.labels.values())

    @property
    def n_conflicting(self) -> int:
        """Keys labelled both correct and wrong."""
        return sum(len(v) > 1 for v in self.labels.values())


def label_pool(runs: Iterable[Run]) -> LabelPool:
    """The label pool of every output of ``runs`` (docs/analyses.md, "Shared-answer
    scoring sensitivity", step 2)."""
    found: dict[AnswerKey, set[int]] = {}
    for run in runs:
        for record in run.records:
            key = answer_key(record, run.dataset)
            if key is None:
                continue
            label = _label(record)
            found.setdefault(key, set()).update(() if label is None else (label,))
    return LabelPool({k: frozenset(v) for k, v in found.items()})


def _case_parts(al: Alignment, pool: LabelPool) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Per case ``(l_i, u_i)`` as proportions, the unresolved keys met and the outputs
    carrying them."""
    records = {}
    for side, run in (("a", al.base), ("b", al.method)):
        for record in run.records:
            records[(side, record["case_id"], int(record["repetition"]))] = record
    n_a, n_b = al.a.shape[1], al.b.shape[1]
    low = np.empty(len(al.case_ids))
    high = np.empty(len(al.case_ids))
    keys_met: set[AnswerKey] = set()
    n_outputs = 0
    for i, case_id in enumerate(al.case_ids):
        known = 0.0
        weights: dict[AnswerKey, float] = {}
        for side, n_reps, sign in (("a", n_a, -1.0), ("b", n_b, 1.0)):
            for rep in range(n_reps):
                key = answer_key(records.get((side, case_id, rep)), al.base.dataset)
                if key is None:
                    continue
                label = pool.resolved(key)
                if label is None:
                    weights[key] = weights.get(key, 0.0) + sign / n_reps
                    keys_met.add(key)
                    n_outputs += 1
                else:
                    known += sign * label / n_reps
        w = np.fromiter(weights.values(), dtype=float, count=len(weights))
        low[i] = known + float(np.minimum(w, 0.0).sum())
        high[i] = known + float(np.maximum(w, 0.0).sum())
    return low, high, len(keys_met), n_outputs


def unscored_correct_difference(al: Alignment) -> tuple[float, int]:
    """Δ (pp) with every unscored baseline output counted correct, and how many there
    are (docs/analyses.md, "Shared-answer scoring sensitivity (EGIP appendix B)", step 5).

    Args:
        al: one aligned pair; ``al.a`` rows are ``al.case_ids``, columns repetitions.

    Returns:
        ``(difference, n_unscored)``: mean over cases of ``mean_r b − mean_r a'`` in
        percentage points, ``a'`` being ``al.a`` with each unscored baseline line's cell
        set to 1, and the number of such lines on the paired cases (EGIP's U).
    """
    rows = {case_id: i for i, case_id in enumerate(al.case_ids)}
    a = np.array(al.a, dtype=float)
    n_unscored = 0
    for record in al.base.records:
        row = rows.get(record["case_id"])
        if row is None or not is_unscored(record):
            continue
        a[row, int(record["repetition"])] = 1.0
        n_unscored += 1
    return 100.0 * float(paired_differences(a, al.b).mean()), n_unscored


@dataclass(frozen=True)
class Sensitivity:
    """The shared-answer sensitivity of one comparison (one row of EGIP Table 5/6).

    Attributes:
        comparison: the automated comparison (Δ, paired CI, p values).
        bound_low, bound_high: effect bounds [L, U] (pp).
        envelope_low, envelope_high: the conservative envelope (pp); NaN with one case.
        n_unresolved_keys: unresolved keys among the paired outputs.
        n_unresolved_outputs: outputs that carry such a key.
        n_resamples: bootstrap resamples of the envelope.
        confidence: nominal level of its quantiles.
        unscored_correct_difference: Δ (pp) with every unscored baseline output counted
            correct (step 5; EGIP appendix B.1's extreme assumption).
        n_unscored_base: those outputs, U of the baseline on the paired cases.
        case_bounds: per case ``(l_i, u_i)`` as proportions, ``(n_cases, 2)``.
    """

    comparison: Comparison
    bound_low: float
    bound_high: float
    envelope_low: float
    envelope_high: float
    n_unresolved_keys: int
    n_unresolved_outputs: int
    n_resamples: int
    confidence: float
    unscored_correct_difference: float
    n_unscored_base: int
    case_bounds: np.ndarray = field(repr=False, compare=False)


def effect_bounds(al: Alignment, pool: LabelPool) -> tuple[float, float]:
    """The effect bounds [L, U] in percentage points of one aligned pair (step 3)."""
    low, high, _, _ = _case_parts(al, pool)
    return 100.0 * float(low.mean()), 100.0 * float(high.mean())


def _envelope(bounds: np.ndarray, n_resamples: int, confidence: float,
              seed: np.random.SeedSequence) -> tuple[float, float]:
    if bounds.shape[0] < 2:
        return math.nan, math.nan
    means = bootstrap_case_means(bounds, n_resamples, np.random.default_rng(seed))
    alpha = (1.0 - confidence) / 2.0
    return (100.0 * float(np.quantile(means[:, 0], alpha)),
            100.0 * float(np.quantile(means[:, 1], 1.0 - alpha)))


def sensitivity(pairs: Sequence[Alignment | tuple[Run, Run]], *,
                pool: LabelPool | None = None, n_resamples: int = 10_000,
                n_flips: int = 20_000, confidence: float = 0.95, seed: int | None = 0,
                intersect: bool = False, mixed_scoring: bool = False,
                by: str | None = None) -> list[Sensitivity]:
    """Effect bounds and conservative envelopes of every compared pair (docs/analyses.md,
    "Shared-answer scoring sensitivity", steps 3 and 4).

    Args:
        pairs: as for :func:`clinenv.evaluation.comparison.compare`.
        pool: the label pool (default: :func:`label_pool` of every run in ``pairs``).
        n_resamples: case-cluster bootstrap resamples of the CI and of the envelope.
        n_flips, confidence, intersect, mixed_scoring: as for ``compare``.
        by: a ``case_strata`` key: one row per stratum and pair, the bounds and envelope
            over the stratum's cases (EGIP Table 7's envelopes per NEJM_Ext stratum).
        seed: base seed; the envelope of a pair uses the resampled case indices of its
            paired CI, so with no unresolved key and no label changed by harmonization
            the bounds equal Δ and the envelope equals the paired CI.

    Raises:
        As :func:`~clinenv.evaluation.comparison.compare`.
    """
    comps = compare(pairs, n_resamples=n_resamples, n_flips=n_flips, seed=seed,
                    confidence=confidence, intersect=intersect, mixed_scoring=mixed_scoring,
                    by=by)
    if pool is None:
        seen: dict[int, Run] = {}
        for c in comps:
            for run in (c.alignment.base, c.alignment.method):
                seen.setdefault(id(run), run)
        pool = label_pool(seen.values())
    out = []
    for c in comps:
        al = c.alignment
        low, high, n_keys, n_outputs = _case_parts(al, pool)
        names: tuple[str, ...] = (al.base.dataset, al.base.label, al.method.label)
        if c.stratum is not None:
            names += (by or "", c.stratum)
        boot_seed, _ = _seed_for(seed, *names).spawn(2)
        env_low, env_high = _envelope(np.column_stack([low, high]), n_resamples,
                                      confidence, boot_seed)
        if_correct, n_unscored = unscored_correct_difference(al)
        out.append(Sensitivity(
            comparison=c, bound_low=100.0 * float(low.mean()),
            bound_high=100.0 * float(high.mean()), envelope_low=env_low,
            envelope_high=env_high, n_unresolved_keys=n_keys,
            n_unresolved_outputs=n_outputs, n_resamples=n_resamples,
            confidence=float(confidence), unscored_correct_difference=if_correct,
            n_unscored_base=n_unscored, case_bounds=np.column_stack([low, high])))
    return out


#: CSV columns of :func:`sensitivity_table`.
SENSITIVITY_CSV = ("dataset", "method", "baseline", "n_cases", "difference_pp", "ci_low",
                   "ci_high", "bound_low", "bound_high", "envelope_low", "envelope_high",
                   "n_unresolved_keys", "n_unresolved_outputs", "u_baseline",
                   "difference_if_unscored_correct_pp", "confidence", "n_resamples")


def _interval(low: float, high: float) -> str:
    if math.isnan(low):
        return "–"
    low, high = round(low, 2) + 0.0, round(high, 2) + 0.0  # + 0.0: no "-0.00"
    return f"[{low:.2f}, {high:.2f}]"


def sensitivity_table(pairs: Sequence[Alignment | tuple[Run, Run]], *,
                      pool: LabelPool | None = None, n_resamples: int = 10_000,
                      n_flips: int = 20_000, confidence: float = 0.95,
                      seed: int | None = 0, intersect: bool = False,
                      mixed_scoring: bool = False, by: str | None = None) -> Table:
    """EGIP Tables 5/6: Δ, paired CI, effect bounds and conservative envelope per pair
    (arguments as :func:`sensitivity`; with ``by`` a stratum column follows the dataset,
    as in EGIP Table 7); ``data`` are the :class:`Sensitivity` objects."""
    rows = sensitivity(pairs, pool=pool, n_resamples=n_resamples, n_flips=n_flips,
                       confidence=confidence, seed=seed, intersect=intersect,
                       mixed_scoring=mixed_scoring, by=by)
    level = f"{100 * confidence:g}%"
    header = ("Dataset", "Method", "Baseline", "Cases", "Δ (pp)", f"Paired {level} CI",
              "Effect bounds", "Conservative envelope", "Unresolved keys",
              "Unresolved outputs", "Baseline U", "Δ if unscored correct (pp)")
    csv_header = SENSITIVITY_CSV
    if by is not None:
        header = (header[0], by, *header[1:])
        csv_header = (csv_header[0], "stratum", *csv_header[1:])
    display, csv_rows = [], []
    for s in rows:
        c = s.comparison
        lead = (c.dataset,) if by is None else (c.dataset, str(c.stratum))
        display.append((*lead, c.method, c.base, str(c.n_cases),
                        f"{c.ci.difference:+.2f}", _interval(c.ci.low, c.ci.high),
                        _interval(s.bound_low, s.bound_high),
                        _interval(s.envelope_low, s.envelope_high),
                        str(s.n_unresolved_keys), str(s.n_unresolved_outputs),
                        str(s.n_unscored_base), f"{s.unscored_correct_difference:+.2f}"))
        csv_rows.append((*lead, c.method, c.base, c.n_cases, c.ci.difference,
                         c.ci.low, c.ci.high, s.bound_low, s.bound_high, s.envelope_low,
                         s.envelope_high, s.n_unresolved_keys, s.n_unresolved_outputs,
                         s.n_unscored_base, s.unscored_correct_difference,
                         s.confidence, s.n_resamples))
    notes = [
        "Δ and the paired CI use the automated scores (as in compare). Effect bounds: the "
        "minimum and maximum of Δ over the unknown labels of unresolved dataset–case–"
        "normalized-answer keys (absent or conflicting automated labels across every "
        "run given; all occurrences of a key share one label; resolved keys lend their "
        "label to every occurrence). Not confidence intervals (EGIP appendix B).",
        f"Conservative envelope: the {level} percentile quantiles of the lower and upper "
        f"bounds over the same {n_resamples:,} case-cluster bootstrap resamples as the "
        f"paired CI (seed {seed}); sampling plus unresolved-label uncertainty, not "
        "systematic scorer error.",
        "Harmonizing labels across identical answers can move the bounds off the "
        "automated Δ.",
        "Baseline U: baseline outputs with no identifiable answer on the paired cases. "
        "Δ if unscored correct: Δ with every one of them counted correct, the extreme "
        "assumption of EGIP appendix B.1 (method outputs keep their automated scores).",
    ]
    title = "Shared-answer scoring sensitivity (EGIP appendix B, Tables 5/6)"
    if by is not None:
        title = f"Shared-answer scoring sensitivity by stratum {by!r} (EGIP Tables 5-7)"
        notes.append(f"Rows per {by!r} stratum: a case with several labels counts in each.")
    return Table(title=title, header=header, rows=tuple(display), notes=tuple(notes),
                 csv_header=csv_header, csv_rows=tuple(csv_rows), data=tuple(rows))
