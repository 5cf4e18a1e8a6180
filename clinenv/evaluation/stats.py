"""Paired uncertainty for method comparisons: bootstrap intervals, sign-flip tests, Holm.

Inputs are ``(n_cases, n_repetitions)`` correctness matrices of 1/0/NaN; results in
percentage points. Sources (EGIP A.3, E; CDEG Eq. 8) and conventions: docs/evaluation.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "CorrectionRegression",
    "PairedCI",
    "bootstrap_case_means",
    "case_means",
    "correction_regression",
    "holm",
    "paired_bootstrap_ci",
    "sign_flip_test",
    "stratified_bootstrap_ci",
]

#: Elements of one chunk of resampled indices or signs (bounds memory: ~32 MB of int64).
_CHUNK_ELEMENTS = 1 << 22

#: Absolute tolerance on case-averaged differences (proportions) when comparing a
#: resampled statistic with the observed one, and when deciding that all d_i are equal.
_TOL = 1e-12

#: Seeds accepted by :func:`numpy.random.default_rng`.
Seed = int | np.random.SeedSequence | np.random.Generator | None


# ----------------------------------------------------------------------------- input
def as_correctness(x: Any, name: str = "x") -> np.ndarray:
    """``x`` checked and returned as a float ``(n_cases, n_repetitions)`` matrix.

    Args:
        x: array-like of 0/1/NaN (or booleans); 1-D means one repetition.
        name: how error messages call the argument.

    Raises:
        ValueError: empty, more than 2-D, or a value outside {0, 1, NaN}.
    """
    arr = np.asarray(x)
    if arr.dtype == object:
        try:
            arr = arr.astype(float)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name}: values must be 0, 1 or NaN ({exc})") from None
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
            or arr.dtype == bool):
        raise ValueError(f"{name}: values must be 0, 1 or NaN, got dtype {arr.dtype}")
    arr = np.array(arr, dtype=float)  # a copy: callers never see their input changed
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{name}: expected shape (n_cases, n_repetitions), got {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name}: empty correctness matrix, shape {arr.shape}")
    bad = ~(np.isnan(arr) | (arr == 0.0) | (arr == 1.0))
    if bad.any():
        i, r = np.argwhere(bad)[0]
        raise ValueError(f"{name}: values must be 0, 1 or NaN; found {arr[i, r]!r} at "
                         f"case {i}, repetition {r} ({int(bad.sum())} such value(s))")
    return arr


def _check_pair(a: Any, b: Any, names: tuple[str, str] = ("a", "b")
                ) -> tuple[np.ndarray, np.ndarray]:
    a2, b2 = as_correctness(a, names[0]), as_correctness(b, names[1])
    if a2.shape[0] != b2.shape[0]:
        raise ValueError(f"{names[0]} and {names[1]} must have the same number of cases "
                         f"(rows): {names[0]} has shape {a2.shape}, {names[1]} has shape "
                         f"{b2.shape}")
    for name, arr in zip(names, (a2, b2), strict=True):
        empty = np.flatnonzero(np.isnan(arr).all(axis=1))
        if empty.size:
            shown = ", ".join(str(i) for i in empty[:10])
            more = f" and {empty.size - 10} more" if empty.size > 10 else ""
            raise ValueError(f"{name}: case row(s) {shown}{more} have no present "
                             f"repetition, so they cannot be paired (mismatched case sets?)")
    return a2, b2


def _counts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per case: (number correct, number of present repetitions), both exact floats."""
    present = ~np.isnan(x)
    return np.where(present, x, 0.0).sum(axis=1), present.sum(axis=1).astype(float)


def _differences(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """d_i = c_b/n_b - c_a/n_a as one correctly rounded division of exact integers, so
    equal rational differences (1/3 = 2/6) are equal floats."""
    ca, na = _counts(a)
    cb, nb = _counts(b)
    return (cb * na - ca * nb) / (na * nb)


def _rng(seed: Seed) -> np.random.Generator:
    return np.random.default_rng(seed)


def _check_resamples(n_resamples: int) -> int:
    if isinstance(n_resamples, bool) or int(n_resamples) != n_resamples or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    return int(n_resamples)


# ---------------------------------------------------------------------- case means
def case_means(x: Any) -> np.ndarray:
    """Per-case mean correctness over the repetitions that are present.

    Args:
        x: correctness matrix ``(n_cases, n_repetitions)`` of 0/1/NaN (1-D: one
            repetition).

    Returns:
        float array ``(n_cases,)`` of proportions in [0, 1]. A case whose repetitions
        are all NaN gets NaN (no warning); the paired functions refuse such cases with a
        :class:`ValueError` naming the row.

    Raises:
        ValueError: invalid input: a value other than 0, 1 or NaN (booleans are
            accepted), an empty array, or more than two dimensions.
    """
    correct, present = _counts(as_correctness(x))
    out = np.full(correct.shape, np.nan)
    np.divide(correct, present, out=out, where=present > 0)
    return out


def paired_differences(a: Any, b: Any) -> np.ndarray:
    """Per-case paired differences ``d_i = mean(b_i) - mean(a_i)`` as proportions.

    Args:
        a: baseline correctness matrix ``(n_cases, R_a)``.
        b: method correctness matrix ``(n_cases, R_b)``; rows are the same cases as ``a``.

    Returns:
        float array ``(n_cases,)`` with values in [-1, 1].

    Raises:
        ValueError: invalid input, different numbers of cases (both shapes named), or a
            case with no present repetition in either matrix (row index named).
    """
    return _differences(*_check_pair(a, b))


# ------------------------------------------------------------------------ bootstrap
@dataclass(frozen=True)
class PairedCI:
    """A paired difference ``b - a`` with its case-cluster bootstrap interval.

    Attributes:
        difference: mean over cases of ``d_i = mean(b_i) - mean(a_i)``, in percentage
            points.
        low, high: the percentile interval bounds, in percentage points.
        n_cases: number of paired cases.
        n_resamples: bootstrap resamples drawn.
        confidence: nominal coverage (e.g. 0.95).
        degenerate: True when the interval carries no sampling information: all ``d_i``
            are equal (then ``low == high == difference``) or there is a single case
            (then ``low`` and ``high`` are NaN).
        method: ``"case-cluster percentile bootstrap"``.
    """

    difference: float
    low: float
    high: float
    n_cases: int
    n_resamples: int
    confidence: float
    degenerate: bool = False
    method: str = "case-cluster percentile bootstrap"


def _bootstrap_means(d: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Means of ``d`` over ``n_resamples`` case resamples (with replacement)."""
    return bootstrap_case_means(d, n_resamples, rng)


def paired_bootstrap_ci(a: Any, b: Any, n_resamples: int = 10_000, confidence: float = 0.95,
                        seed: Seed = None) -> PairedCI:
    """Paired difference ``b - a`` in percentage points with a case-cluster bootstrap CI.

    Cases are resampled with all their repetitions and both methods (EGIP appendix A.3);
    percentile interval, pointwise. With one repetition this equals
    ``scipy.stats.bootstrap(..., paired=True, method="percentile")``.

    Args:
        a: baseline correctness matrix ``(n_cases, R_a)`` of 0/1/NaN.
        b: method correctness matrix ``(n_cases, R_b)``; rows are the same cases.
        n_resamples: number of bootstrap resamples (positive).
        confidence: nominal coverage, in (0, 1).
        seed: anything :func:`numpy.random.default_rng` accepts.

    Returns:
        A :class:`PairedCI`; all ``d_i`` equal gives ``[difference, difference]``, a single
        case NaN bounds, both with ``degenerate=True``.

    Raises:
        ValueError: invalid input, different numbers of cases, a case with no present
            repetition, ``n_resamples < 1``, ``confidence`` not in (0, 1).
    """
    n_resamples = _check_resamples(n_resamples)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
    d = _differences(*_check_pair(a, b))
    n = d.size
    diff = 100.0 * float(d.mean())
    common = dict(difference=diff, n_cases=n, n_resamples=n_resamples,
                  confidence=float(confidence))
    if n < 2:
        return PairedCI(low=math.nan, high=math.nan, degenerate=True, **common)
    if float(d.max() - d.min()) <= _TOL:
        return PairedCI(low=diff, high=diff, degenerate=True, **common)
    means = _bootstrap_means(d, n_resamples, _rng(seed))
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return PairedCI(low=100.0 * float(low), high=100.0 * float(high), **common)


def bootstrap_case_means(values: np.ndarray, n_resamples: int,
                         rng: np.random.Generator) -> np.ndarray:
    """Means over case resamples of one or more per-case statistics, with the same
    resampled case indices for every statistic.

    Args:
        values: ``(n_cases,)`` or ``(n_cases, k)`` per-case statistics.
        n_resamples: resamples to draw.
        rng: the generator; for a 1-D ``values`` the draws are those of
            :func:`paired_bootstrap_ci` with the same generator.

    Returns:
        ``(n_resamples,)`` or ``(n_resamples, k)`` resample means.
    """
    values = np.asarray(values, dtype=float)
    n = values.shape[0]
    rows = max(1, _CHUNK_ELEMENTS // n)
    out = np.empty((n_resamples, *values.shape[1:]))
    for start in range(0, n_resamples, rows):
        stop = min(n_resamples, start + rows)
        idx = rng.integers(0, n, size=(stop - start, n))
        out[start:stop] = values[idx].sum(axis=1)
    return out / n


def stratified_bootstrap_ci(numerators: Any, denominators: Any, strata: Any, *,
                            n_resamples: int = 20_000, confidence: float = 0.95,
                            seed: Seed = None) -> PairedCI:
    """A pooled ratio ``100 * sum(x_i) / sum(n_i)`` with a dataset-stratified cluster
    bootstrap percentile interval (EGIP §4.5 and appendix E).

    Args:
        numerators: ``(n_cases,)`` per-case sums ``x_i`` (finite).
        denominators: ``(n_cases,)`` per-case record counts ``n_i`` (positive).
        strata: ``(n_cases,)`` stratum labels (e.g. dataset names); resampling is within each.
        n_resamples: bootstrap resamples (positive; the paper uses 20,000).
        confidence: nominal coverage, in (0, 1).
        seed: anything :func:`numpy.random.default_rng` accepts.

    Returns:
        A :class:`PairedCI`; ``degenerate`` when no resample can differ (one case per
        stratum, or equal ratios and counts within each stratum).

    Raises:
        ValueError: lengths differ, no case, a non-finite ``x_i``, an ``n_i`` not positive,
            ``n_resamples < 1`` or ``confidence`` not in (0, 1).
    """
    n_resamples = _check_resamples(n_resamples)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
    x = np.asarray(numerators, dtype=float).ravel()
    n = np.asarray(denominators, dtype=float).ravel()
    labels = list(np.asarray(strata, dtype=object).ravel())
    if not (x.size == n.size == len(labels)):
        raise ValueError(f"numerators, denominators and strata must have the same length, "
                         f"got {x.size}, {n.size} and {len(labels)}")
    if x.size == 0:
        raise ValueError("no cases to resample")
    if not np.isfinite(x).all():
        i = int(np.flatnonzero(~np.isfinite(x))[0])
        raise ValueError(f"numerators must be finite; case {i} has {x[i]!r}")
    if not (np.isfinite(n).all() and (n > 0).all()):
        i = int(np.flatnonzero(~(np.isfinite(n) & (n > 0)))[0])
        raise ValueError(f"denominators must be positive; case {i} has {n[i]!r}")
    value = 100.0 * float(x.sum() / n.sum())
    method = "dataset-stratified source-case percentile bootstrap"
    common = dict(difference=value, n_cases=int(x.size), n_resamples=n_resamples,
                  confidence=float(confidence), method=method)
    groups: dict[Any, list[int]] = {}
    for i, label in enumerate(labels):
        groups.setdefault(label, []).append(i)
    if all(len(rows) == 1 or (np.ptp(n[rows]) == 0 and np.ptp(x[rows] / n[rows]) <= _TOL)
           for rows in groups.values()):
        return PairedCI(low=value, high=value, degenerate=True, **common)
    rng = _rng(seed)
    sum_x = np.zeros(n_resamples)
    sum_n = np.zeros(n_resamples)
    for rows in groups.values():  # strata in order of first appearance
        both = np.column_stack([x[rows], n[rows]])
        means = bootstrap_case_means(both, n_resamples, rng)
        sum_x += means[:, 0] * len(rows)
        sum_n += means[:, 1] * len(rows)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(sum_x / sum_n, [alpha, 1.0 - alpha])
    return PairedCI(low=100.0 * float(low), high=100.0 * float(high), **common)


# ------------------------------------------------------------------------ sign flip
#: ``exact="auto"`` enumerates every sign pattern when ``n_cases`` is at most this...
_EXACT_AUTO_MAX_CASES = 14
#: ...and ``exact=True`` refuses more cases than this (2^25 patterns, tens of seconds).
_EXACT_MAX_CASES = 26


def _sign_flip_exact(d: np.ndarray, observed: float) -> float:
    """Exact two-sided p: the share of all ``2^n`` sign patterns with ``|T*| >= |T|``.

    ``|T*|`` is the same for ``s`` and ``-s``, so only the ``2^(n-1)`` patterns with
    ``s_0 = +1`` are enumerated (in chunks); the observed pattern (all ``+1``) is one of
    them, so the result is at least ``2 / 2^n``.
    """
    n = d.size
    total = float(d.sum())
    n_half = 1 << (n - 1)
    shifts = np.arange(n - 1, dtype=np.int64)
    rows = max(1, _CHUNK_ELEMENTS // n)
    hits = 0
    for start in range(0, n_half, rows):
        k = np.arange(start, min(n_half, start + rows), dtype=np.int64)
        bits = np.empty((k.size, n))
        bits[:, 0] = 1.0
        bits[:, 1:] = (k[:, None] >> shifts) & 1
        stats = np.abs(2.0 * (bits @ d) - total) / n
        hits += int(np.count_nonzero(stats >= observed - _TOL))
    return hits / n_half


def sign_flip_test(a: Any, b: Any, n_resamples: int = 20_000, seed: Seed = None,
                   exact: bool | str = "auto") -> float:
    """Two-sided sign-flip randomization p value for the mean paired difference.

    A pattern ``s_i = ±1`` counts when ``|mean(s * d)| >= |mean(d)| - 1e-12``. Exact:
    p = count / 2^n_cases over all patterns. Monte Carlo: p = (1 + count) /
    (n_resamples + 1) (EGIP appendix A.3). ``exact="auto"`` enumerates when ``n_cases <=
    14`` or ``2**n_cases <= n_resamples``.

    Args:
        a: baseline correctness matrix ``(n_cases, R_a)`` of 0/1/NaN.
        b: method correctness matrix ``(n_cases, R_b)``; rows are the same cases.
        n_resamples: random sign patterns on the Monte-Carlo path (positive).
        seed: anything :func:`numpy.random.default_rng` accepts (unused when exact).
        exact: ``"auto"``, ``True`` (at most 26 cases) or ``False``.

    Returns:
        The p value in ``(0, 1]``; ``1.0`` when every ``d_i`` is zero or with one case.

    Raises:
        ValueError: invalid input, different numbers of cases, a case with no present
            repetition, ``n_resamples < 1``, a bad ``exact``, or ``exact=True`` over 26 cases.
    """
    n_resamples = _check_resamples(n_resamples)
    if not (exact is True or exact is False or exact == "auto"):
        raise ValueError(f"exact must be 'auto', True or False, got {exact!r}")
    d = _differences(*_check_pair(a, b))
    n = d.size
    if exact is True and n > _EXACT_MAX_CASES:
        raise ValueError(f"exact=True enumerates 2^n_cases sign patterns; n_cases = {n} is "
                         f"more than {_EXACT_MAX_CASES} (use exact=False or 'auto')")
    if not np.any(np.abs(d) > _TOL):
        return 1.0
    observed = abs(float(d.mean()))
    if exact is True or (exact == "auto" and (n <= _EXACT_AUTO_MAX_CASES
                                             or 2 ** n <= n_resamples)):
        return _sign_flip_exact(d, observed)
    total = float(d.sum())
    rng = _rng(seed)
    n_bytes = (n + 7) // 8
    rows = max(1, _CHUNK_ELEMENTS // (8 * n_bytes))
    hits = 0
    for start in range(0, n_resamples, rows):
        m = min(n_resamples, start + rows) - start
        bits = np.unpackbits(rng.integers(0, 256, size=(m, n_bytes), dtype=np.uint8),
                             axis=1, count=n)
        # s = 2*bit - 1, so sum(s*d) = 2 * (bits @ d) - sum(d)
        stats = np.abs(2.0 * (bits.astype(np.float64) @ d) - total) / n
        hits += int(np.count_nonzero(stats >= observed - _TOL))
    return (1.0 + hits) / (n_resamples + 1.0)


# ----------------------------------------------------------------------------- Holm
def holm(p_values: Any) -> np.ndarray:
    """Holm step-down adjusted p values, in the input order.

    With the ``m`` p values sorted ascending, ``p_(1) <= ... <= p_(m)``, the adjusted value
    of the j-th smallest is ``max_{k <= j} min(1, (m - k + 1) * p_(k))``: monotone in the
    raw p values and capped at 1. Tied p values get the same adjusted value. (Holm 1979;
    EGIP appendix A.3 adjusts across the 28 comparisons of Table 8.)

    Args:
        p_values: 1-D array-like of p values in [0, 1]. Empty → empty result.

    Returns:
        float array of the same length, in the input order.

    Raises:
        ValueError: not 1-D, NaN, or a value outside [0, 1].
    """
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1:
        raise ValueError(f"p_values must be 1-D, got shape {p.shape}")
    if np.isnan(p).any():
        raise ValueError(f"p_values contain NaN at index {int(np.flatnonzero(np.isnan(p))[0])}")
    if ((p < 0.0) | (p > 1.0)).any():
        i = int(np.flatnonzero((p < 0.0) | (p > 1.0))[0])
        raise ValueError(f"p values must be in [0, 1], got {p[i]!r} at index {i}")
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return out


# ---------------------------------------------------------------- correction/regression
@dataclass(frozen=True)
class CorrectionRegression:
    """How a method changes a baseline's per-case verdicts (CDEG Eq. 8).

    Attributes:
        n_fix: cases the baseline gets wrong and the method right.
        n_reg: cases the baseline gets right and the method wrong.
        n_baseline_wrong: N_V−, cases the baseline gets wrong.
        n_baseline_right: N_V+, cases the baseline gets right.
        correction: ``100 * n_fix / n_baseline_wrong`` in percent (NaN when N_V− = 0).
        regression: ``100 * n_reg / n_baseline_right`` in percent (NaN when N_V+ = 0).
        n_cases: number of paired cases.
    """

    n_fix: int
    n_reg: int
    n_baseline_wrong: int
    n_baseline_right: int
    correction: float
    regression: float
    n_cases: int


def majority_correct(x: Any) -> np.ndarray:
    """Per-case majority correctness: strictly more than half of the present repetitions
    correct. Ties (e.g. 1 of 2) count as incorrect; a case with no present repetition is
    incorrect here (the paired functions refuse it instead).

    Returns:
        bool array ``(n_cases,)``.
    """
    correct, present = _counts(as_correctness(x))
    return 2.0 * correct > present


def correction_regression(baseline: Any, method: Any) -> CorrectionRegression:
    """Correction and regression of ``method`` against ``baseline`` (CDEG Eq. 8), in percent.

    A case's verdict is its majority over present repetitions (a tie is incorrect);
    correction = 100 * N_fix / N_V−, regression = 100 * N_reg / N_V+.

    Args:
        baseline: correctness matrix ``(n_cases, R_base)`` of 0/1/NaN.
        method: correctness matrix ``(n_cases, R_method)``; rows are the same cases.

    Returns:
        A :class:`CorrectionRegression`; a rate is NaN when its denominator is 0.

    Raises:
        ValueError: invalid input, different numbers of cases, or a case with no present
            repetition.
    """
    base, meth = _check_pair(baseline, method, ("baseline", "method"))
    base_ok, meth_ok = majority_correct(base), majority_correct(meth)
    n_wrong = int((~base_ok).sum())
    n_right = int(base_ok.sum())
    n_fix = int((~base_ok & meth_ok).sum())
    n_reg = int((base_ok & ~meth_ok).sum())
    return CorrectionRegression(
        n_fix=n_fix, n_reg=n_reg, n_baseline_wrong=n_wrong, n_baseline_right=n_right,
        correction=100.0 * n_fix / n_wrong if n_wrong else math.nan,
        regression=100.0 * n_reg / n_right if n_right else math.nan,
        n_cases=int(base_ok.size),
    )
