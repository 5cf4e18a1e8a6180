"""Tests of clinenv.evaluation.stats and clinenv.evaluation.metrics.

Hand-computed values on a 4 cases x 3 repetitions fixture, agreement with scipy within
Monte-Carlo error, exact sign-flip enumeration, Holm against a reference loop, and the
edge cases of the issue (all correct, all wrong, one case, unscored outputs, missing
repetitions, mismatched case sets, empty input, invalid values, seeds).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from clinenv.evaluation import (
    HashingEncoder,
    PairedCI,
    accuracy,
    case_means,
    correction_regression,
    correctness_matrix,
    coverage,
    embedding_similarity,
    holm,
    mean_sd,
    mean_turns_exams,
    paired_bootstrap_ci,
    paired_differences,
    per_repetition_accuracy,
    sign_flip_test,
    stratify,
)
from clinenv.evaluation import stats as stats_module
from clinenv.evaluation.metrics import VERDICTS

NAN = np.nan

# The fixture: rows are cases 0..3, columns repetitions 0..2.
#
#   baseline A            method B
#   case 0: 1 0 1  (2/3)  1 1 1  (1)
#   case 1: 0 0 0  (0)    1 0 1  (2/3)
#   case 2: 1 1 1  (1)    1 0 0  (1/3)
#   case 3: 0 1 1  (2/3)  1 1 0  (2/3)
A = np.array([[1, 0, 1], [0, 0, 0], [1, 1, 1], [0, 1, 1]], dtype=float)
B = np.array([[1, 1, 1], [1, 0, 1], [1, 0, 0], [1, 1, 0]], dtype=float)


# ------------------------------------------------------------------ hand-computed values
def test_accuracy_per_repetition_and_mean_sd_by_hand():
    # A per repetition: rep0 1,0,1,0 -> 2/4 = 50 %; rep1 0,0,1,1 -> 50 %; rep2 1,0,1,1 -> 75 %
    assert per_repetition_accuracy(A) == pytest.approx([50.0, 50.0, 75.0])
    # mean = 175/3 = 58.333...; deviations -25/3, -25/3, +50/3;
    # SD = sqrt((625/9 + 625/9 + 2500/9) / 2) = sqrt(3750/18) = sqrt(208.33) = 14.4338
    mean, sd = mean_sd(per_repetition_accuracy(A))
    assert mean == pytest.approx(175 / 3)
    assert sd == pytest.approx(math.sqrt(3750 / 18))
    assert sd == pytest.approx(14.4338, abs=1e-4)
    # B per repetition: rep0 1,1,1,1 -> 100 %; rep1 1,0,0,1 -> 50 %; rep2 1,1,0,0 -> 50 %
    assert per_repetition_accuracy(B) == pytest.approx([100.0, 50.0, 50.0])
    # mean = 200/3 = 66.667; deviations +100/3, -50/3, -50/3;
    # SD = sqrt((10000/9 + 2500/9 + 2500/9) / 2) = sqrt(833.33) = 28.8675
    mean, sd = mean_sd(per_repetition_accuracy(B))
    assert mean == pytest.approx(200 / 3)
    assert sd == pytest.approx(28.8675, abs=1e-4)
    # pooled accuracy: A 7/12 = 58.333 %, B 8/12 = 66.667 %
    assert accuracy(A) == pytest.approx(700 / 12)
    assert accuracy(B) == pytest.approx(800 / 12)


def test_case_means_and_paired_differences_by_hand():
    assert case_means(A) == pytest.approx([2 / 3, 0.0, 1.0, 2 / 3])
    assert case_means(B) == pytest.approx([1.0, 2 / 3, 1 / 3, 2 / 3])
    # d = B - A per case: 1/3, 2/3, -2/3, 0
    assert paired_differences(A, B) == pytest.approx([1 / 3, 2 / 3, -2 / 3, 0.0])


def test_paired_bootstrap_point_estimate_by_hand():
    # mean d = (1/3 + 2/3 - 2/3 + 0) / 4 = 1/12 -> 8.333 pp = 66.667 - 58.333
    ci = paired_bootstrap_ci(A, B, seed=0)
    assert ci.difference == pytest.approx(100 / 12)
    assert ci.n_cases == 4 and ci.n_resamples == 10_000 and ci.confidence == 0.95
    assert not ci.degenerate
    assert ci.method == "case-cluster percentile bootstrap"
    # resample means are averages of 4 values of d: between -2/3 and +2/3
    assert -100 * 2 / 3 <= ci.low < ci.difference < ci.high <= 100 * 2 / 3


def test_paired_bootstrap_matches_exact_enumeration_on_fixture():
    # 4^4 = 256 equally likely resamples: exact bootstrap distribution of the mean of d
    d = np.array([1 / 3, 2 / 3, -2 / 3, 0.0])
    exact = np.array([d[list(idx)].mean() for idx in itertools.product(range(4), repeat=4)])
    ci = paired_bootstrap_ci(A, B, n_resamples=200_000, seed=3)
    # the distribution is discrete (steps of 1/12): compare the CDF at the bounds
    for bound, target in ((ci.low, 0.025), (ci.high, 0.975)):
        below = np.mean(exact < bound / 100 - 1e-9)
        at_or_below = np.mean(exact <= bound / 100 + 1e-9)
        assert below <= target + 0.01 and at_or_below >= target - 0.01


def test_sign_flip_by_hand():
    # d = 1/3, 2/3, -2/3, 0, |sum d| = 1/3. Every sign pattern of (1/3, 2/3, 2/3) has
    # |sum| in {5/3, 1, 1/3}, all >= 1/3, so every resample counts and p = 1 exactly.
    assert sign_flip_test(A, B, seed=0) == 1.0


def test_correction_regression_by_hand():
    # majority (> half of 3): A correct on cases 0, 2, 3 (N_V+ = 3), wrong on 1 (N_V- = 1)
    # B correct on cases 0, 1, 3, wrong on 2
    # fix: case 1 (A wrong, B right) -> 1; regression: case 2 (A right, B wrong) -> 1
    cr = correction_regression(A, B)
    assert (cr.n_fix, cr.n_reg, cr.n_baseline_wrong, cr.n_baseline_right) == (1, 1, 1, 3)
    assert cr.correction == pytest.approx(100.0)  # 100 * 1/1
    assert cr.regression == pytest.approx(100 / 3)  # 100 * 1/3 = 33.333
    assert cr.n_cases == 4
    # reversed roles: B as baseline -> N_V- = 1 (case 2), N_V+ = 3; fix case 2? A right -> 1
    rev = correction_regression(B, A)
    assert (rev.n_fix, rev.n_reg, rev.n_baseline_wrong, rev.n_baseline_right) == (1, 1, 1, 3)


def test_holm_by_hand():
    # sorted: 0.005 (x4 = 0.02), 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04 -> 0.06
    # by monotonicity); back in input order:
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # EGIP Table 8: 28 tests, smallest attainable sign-flip p with 20,000 resamples
    p = np.full(28, 1 / 20_001)
    assert holm(p) == pytest.approx(np.full(28, 28 / 20_001))
    assert round(28 / 20_001, 4) == 0.0014
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([]).shape == (0,)


# ------------------------------------------------------------------------ vs scipy
def _mean_diff(a, b, axis=-1):
    return np.mean(b - a, axis=axis)


def test_bootstrap_agrees_with_scipy_for_one_repetition():
    rng = np.random.default_rng(20240601)
    n = 60
    a = (rng.random(n) < 0.5).astype(float)
    b = (rng.random(n) < 0.65).astype(float)
    ours = paired_bootstrap_ci(a, b, n_resamples=10_000, seed=1)
    ref = sps.bootstrap((a, b), _mean_diff, paired=True, vectorized=True,
                        method="percentile", n_resamples=10_000, confidence_level=0.95,
                        rng=np.random.default_rng(2))
    assert ours.difference == pytest.approx(100 * (b.mean() - a.mean()))
    # Monte-Carlo error of a 2.5 % quantile here is ~0.3 pp; steps of d are 1/60 = 1.7 pp
    assert ours.low == pytest.approx(100 * ref.confidence_interval.low, abs=1.7)
    assert ours.high == pytest.approx(100 * ref.confidence_interval.high, abs=1.7)


def test_bootstrap_with_repetitions_is_scipy_bootstrap_of_case_differences():
    # case-cluster bootstrap of a (n, R) pair = ordinary bootstrap of the per-case d_i
    rng = np.random.default_rng(7)
    n, r = 80, 3
    a = (rng.random((n, r)) < 0.45).astype(float)
    b = (rng.random((n, r)) < 0.6).astype(float)
    a[5, 1] = NAN  # a missing repetition: case 5 of A is averaged over 2 repetitions
    d = paired_differences(a, b)
    ours = paired_bootstrap_ci(a, b, seed=11)
    ref = sps.bootstrap((d,), np.mean, vectorized=True, method="percentile",
                        n_resamples=10_000, rng=np.random.default_rng(12))
    assert ours.difference == pytest.approx(100 * d.mean())
    assert ours.low == pytest.approx(100 * ref.confidence_interval.low, abs=1.0)
    assert ours.high == pytest.approx(100 * ref.confidence_interval.high, abs=1.0)


def test_bootstrap_coverage_of_interval_width_matches_normal_theory():
    # width of the 95 % percentile interval ~ 2 * 1.96 * sd(d) / sqrt(n)
    rng = np.random.default_rng(5)
    n = 288
    a = (rng.random((n, 3)) < 0.5).astype(float)
    b = (rng.random((n, 3)) < 0.6).astype(float)
    d = paired_differences(a, b)
    ci = paired_bootstrap_ci(a, b, seed=0)
    expected = 2 * 1.959964 * 100 * d.std(ddof=0) / math.sqrt(n)
    assert ci.high - ci.low == pytest.approx(expected, rel=0.05)


def _scipy_sign_flip(d, n_resamples, seed):
    res = sps.permutation_test((d,), np.mean, permutation_type="samples", vectorized=True,
                               n_resamples=n_resamples, alternative="two-sided",
                               rng=np.random.default_rng(seed))
    return float(res.pvalue)


@pytest.mark.parametrize("shift", [0.0, 0.05, 0.08, 0.15])
def test_sign_flip_agrees_with_scipy_permutation_test(shift):
    rng = np.random.default_rng(99)
    n = 40
    a = (rng.random((n, 3)) < 0.5).astype(float)
    b = (rng.random((n, 3)) < 0.5 + shift).astype(float)
    d = paired_differences(a, b)
    ours = sign_flip_test(a, b, n_resamples=20_000, seed=3)
    ref = _scipy_sign_flip(d, 20_000, 4)
    # the sign-flip null is symmetric, so scipy's 2 * min(one-sided p) estimates the same
    # p as our |T*| >= |T|. Monte-Carlo SEs: ours sqrt(p(1-p)/N); scipy's doubled
    # one-sided estimate 2 sqrt(q(1-q)/N) with q = p/2 (0.007 at p = 1, where scipy's
    # min of two noisy halves also sits below 1)
    q = min(0.5, ref / 2)
    se = math.sqrt(ours * (1 - ours) / 20_000 + 4 * q * (1 - q) / 20_000)
    assert ours == pytest.approx(ref, abs=4 * se + 2 / 20_001)


def _exact_sign_flip(d):
    """Exact two-sided p: share of all 2^n sign patterns with |mean(s*d)| >= |mean(d)|."""
    n = d.size
    signs = np.array(list(itertools.product((-1.0, 1.0), repeat=n)))
    t = np.abs(signs @ d) / n
    return float(np.mean(t >= abs(d.mean()) - 1e-12))


@pytest.mark.parametrize("n", [5, 8, 12])
def test_sign_flip_converges_to_exact_enumeration(n):
    rng = np.random.default_rng(n)
    a = (rng.random((n, 3)) < 0.4).astype(float)
    b = (rng.random((n, 3)) < 0.7).astype(float)
    d = paired_differences(a, b)
    exact = _exact_sign_flip(d)
    # scipy's exact test (n_resamples >= 2^n enumerates every pattern) agrees with ours
    assert _scipy_sign_flip(d, np.inf, 0) == pytest.approx(min(1.0, exact), abs=1e-12)
    # the default (exact="auto", n <= 14) enumerates: the exact value, whatever the seed
    assert sign_flip_test(a, b, seed=1) == pytest.approx(exact, abs=1e-15)
    assert sign_flip_test(a, b, seed=2, exact=True) == pytest.approx(exact, abs=1e-15)
    for n_resamples in (20_000, 200_000):
        p = sign_flip_test(a, b, n_resamples=n_resamples, seed=1, exact=False)
        se = math.sqrt(exact * (1 - exact) / n_resamples)
        assert abs(p - exact) <= 4.5 * se + 1 / (n_resamples + 1)


def _holm_reference(p):
    """Holm (1979) from the definition, with loops."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def test_holm_agrees_with_reference_on_random_vectors():
    rng = np.random.default_rng(0)
    for trial in range(200):
        m = int(rng.integers(1, 40))
        p = rng.random(m) ** 3
        if trial % 4 == 0:  # ties, zeros and ones
            p = np.round(p, 1)
        adj = holm(p)
        assert adj == pytest.approx(_holm_reference(list(p)), abs=1e-15)
        assert np.all(adj >= p) and np.all(adj <= 1.0)
        order = np.argsort(p, kind="stable")
        assert np.all(np.diff(adj[order]) >= 0)


def test_holm_agrees_with_statsmodels():
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    rng = np.random.default_rng(1)
    for trial in range(100):
        m = int(rng.integers(1, 40))
        p = rng.random(m) ** 3
        if trial % 4 == 0:  # ties, zeros and ones
            p = np.round(p, 1)
        _, ref, _, _ = multitest.multipletests(p, method="holm")
        assert holm(p) == pytest.approx(ref, abs=1e-15)


# ---------------------------------------------------- pinned formulas (mutation tests)
def _sign_flip_hits(d, n_resamples, seed):
    """#{|T*| >= |T|} over the same random sign patterns as sign_flip_test's Monte-Carlo
    path (one chunk: packed bytes from default_rng(seed), unpacked to n bits)."""
    n = d.size
    g = np.random.default_rng(seed)
    bits = np.unpackbits(g.integers(0, 256, size=(n_resamples, (n + 7) // 8),
                                    dtype=np.uint8), axis=1, count=n)
    t = np.abs((2.0 * bits - 1.0) @ d) / n
    return int(np.count_nonzero(t >= abs(d.mean()) - 1e-12))


def test_sign_flip_monte_carlo_p_formula_is_one_plus_count_over_n_plus_one():
    rng = np.random.default_rng(31)
    n = 30
    a = (rng.random((n, 3)) < 0.45).astype(float)
    b = (rng.random((n, 3)) < 0.6).astype(float)
    d = paired_differences(a, b)
    for n_resamples, seed in ((1_000, 5), (999, 6), (20_000, 7)):
        hits = _sign_flip_hits(d, n_resamples, seed)
        assert 0 < hits < n_resamples
        want = (1 + hits) / (n_resamples + 1)
        assert sign_flip_test(a, b, n_resamples=n_resamples, seed=seed) == want
        assert want != max(hits, 1) / n_resamples


def test_sign_flip_monte_carlo_p_with_no_hit_is_one_over_n_plus_one():
    # 20 equal positive differences: |T*| >= |T| only when all signs agree
    # (probability 2 / 2^20 per pattern); 100 patterns almost surely miss both
    a, b = np.zeros(20), np.ones(20)
    assert _sign_flip_hits(paired_differences(a, b), 100, 0) == 0
    p = sign_flip_test(a, b, n_resamples=100, seed=0, exact=False)
    assert p == 1 / 101
    assert sign_flip_test(a, b, n_resamples=100, seed=0) == 1 / 101  # n = 20: "auto" samples


def test_sign_flip_every_pattern_ties_gives_one():
    # 15 differences of size 1 with sum 1: every |sum(s*d)| is odd, so >= 1 = |sum d|
    a = np.r_[np.zeros(8), np.ones(7)]
    b = np.r_[np.ones(8), np.zeros(7)]
    assert paired_differences(a, b).sum() == 1.0
    assert sign_flip_test(a, b, n_resamples=500, seed=3, exact=False) == 1.0
    assert sign_flip_test(a, b, exact=True) == 1.0


@pytest.mark.parametrize("n", [4, 8, 10, 12])
def test_sign_flip_known_small_p_for_same_sign_differences(n):
    # all d_i = +1: only the observed pattern and its mirror reach |T|: exact p = 2 / 2^n
    a, b = np.zeros((n, 2)), np.ones((n, 2))
    exact = 2 / 2**n
    assert sign_flip_test(a, b) == exact  # "auto" enumerates n <= 14
    assert sign_flip_test(b, a) == exact  # two-sided
    n_resamples = 200_000
    p = sign_flip_test(a, b, n_resamples=n_resamples, seed=n, exact=False)
    se = math.sqrt(exact * (1 - exact) / n_resamples)
    assert abs(p - exact) <= 4.5 * se + 1 / (n_resamples + 1)
    # mixed sizes: 1/3, 2/3 and 1 of the same sign, still only the two extreme patterns
    a2 = np.zeros((n, 3))
    b2 = np.zeros((n, 3))
    for i in range(n):
        b2[i, : 1 + i % 3] = 1.0
    assert sign_flip_test(a2, b2) == pytest.approx(2 / 2**n, abs=1e-15)


def test_sign_flip_exact_option_switches_and_keeps_large_n_default():
    rng = np.random.default_rng(4)
    # n = 15: 2^15 > 20,000, so the default samples, identically to exact=False
    a = (rng.random((15, 3)) < 0.4).astype(float)
    b = (rng.random((15, 3)) < 0.7).astype(float)
    d = paired_differences(a, b)
    p_default = sign_flip_test(a, b, seed=9)
    assert p_default == sign_flip_test(a, b, seed=9, exact=False)
    hits = _sign_flip_hits(d, 20_000, 9)
    assert p_default == (1 + hits) / 20_001
    # ...and enumerates once n_resamples >= 2^15, or with exact=True
    exact = _exact_sign_flip(d)
    assert sign_flip_test(a, b, n_resamples=2**15, seed=9) == pytest.approx(exact, abs=1e-15)
    assert sign_flip_test(a, b, exact=True) == pytest.approx(exact, abs=1e-15)
    assert abs(p_default - exact) <= 4.5 * math.sqrt(exact * (1 - exact) / 20_000) + 1e-4
    # n = 14: enumerated by default, independent of the seed and of n_resamples
    a14, b14 = a[:14], b[:14]
    e14 = _exact_sign_flip(paired_differences(a14, b14))
    for seed, n_resamples in ((0, 20_000), (1, 10), (None, 1)):
        assert sign_flip_test(a14, b14, n_resamples=n_resamples, seed=seed) == \
            pytest.approx(e14, abs=1e-15)
    # the exact p is a multiple of 2 / 2^n
    assert (e14 * 2**13) == pytest.approx(round(e14 * 2**13), abs=1e-9)
    # all-zero differences: 1.0 on both paths
    z = np.zeros((5, 2))
    assert sign_flip_test(z, z, exact=True) == 1.0 and sign_flip_test(z, z, exact=False) == 1.0


def test_bootstrap_percentile_is_linear_interpolation(monkeypatch):
    # d = (0, 0, 1): the 3^3 = 27 equally likely resample means are k/3 with counts
    # 8, 12, 6, 1 for k = 0..3. Sorted, positions 0..26; the 97.5 % quantile sits at
    # 0.975 * 26 = 25.35, between 2/3 (position 25) and 1 (position 26):
    #   linear  -> 2/3 + 0.35 * 1/3 = 0.78333 (78.333 pp)
    #   nearest -> 2/3 (66.667 pp); lower -> 2/3; higher -> 1.
    # The 2.5 % quantile sits at 0.65, between two zeros -> 0.
    a, b = np.zeros(3), np.array([0.0, 0.0, 1.0])
    exact = np.array([np.mean(idx) for idx in itertools.product([0.0, 0.0, 1.0], repeat=3)])
    assert sorted(np.round(exact * 3).astype(int).tolist()) == [0] * 8 + [1] * 12 + [2] * 6 + [3]
    monkeypatch.setattr(stats_module, "_bootstrap_means",
                        lambda d, n_resamples, rng: exact.copy())
    ci = paired_bootstrap_ci(a, b, n_resamples=27, confidence=0.95, seed=0)
    assert ci.low == pytest.approx(0.0, abs=1e-12)
    assert ci.high == pytest.approx(100 * (2 / 3 + 0.35 / 3), abs=1e-9)
    assert ci.high == pytest.approx(100 * np.quantile(exact, 0.975, method="linear"))
    assert abs(ci.high - 100 * np.quantile(exact, 0.975, method="nearest")) > 10
    # 50 % interval: positions 6.5 (0 and 0 -> 0) and 19.5 (1/3 and 2/3 -> 1/2)
    ci50 = paired_bootstrap_ci(a, b, n_resamples=27, confidence=0.5, seed=0)
    assert (ci50.low, ci50.high) == (pytest.approx(0.0, abs=1e-12), pytest.approx(50.0))


def test_bootstrap_quantile_on_the_drawn_resamples_is_linear():
    # without patching: recompute the resample means from the same rng stream
    rng = np.random.default_rng(17)
    n, n_resamples = 9, 10
    a = (rng.random((n, 2)) < 0.4).astype(float)
    b = (rng.random((n, 2)) < 0.7).astype(float)
    d = paired_differences(a, b)
    means = d[np.random.default_rng(3).integers(0, n, size=(n_resamples, n))].mean(axis=1)
    want = np.quantile(means, [0.025, 0.975], method="linear")
    nearest = np.quantile(means, [0.025, 0.975], method="nearest")
    assert np.all(np.abs(want - nearest) > 1e-6)  # the two methods differ here
    ci = paired_bootstrap_ci(a, b, n_resamples=n_resamples, seed=3)
    assert (ci.low, ci.high) == (pytest.approx(100 * want[0], abs=1e-12),
                                 pytest.approx(100 * want[1], abs=1e-12))


def test_bootstrap_is_paired_for_strongly_correlated_methods():
    # b = a with 10 % of the cases flipped: the per-case differences are mostly 0, so the
    # paired interval is far narrower than an unpaired one (two independent resamples)
    rng = np.random.default_rng(123)
    n = 200
    a = (rng.random(n) < 0.6).astype(float)
    b = a.copy()
    flip = rng.choice(n, size=n // 10, replace=False)
    b[flip] = 1.0 - a[flip]
    d = b - a
    assert np.count_nonzero(d) == 20
    ours = paired_bootstrap_ci(a, b, n_resamples=10_000, seed=21)
    paired = sps.bootstrap((d,), np.mean, vectorized=True, method="percentile",
                           n_resamples=10_000, rng=np.random.default_rng(22))
    unpaired = sps.bootstrap((a, b), _mean_diff, paired=False, vectorized=True,
                             method="percentile", n_resamples=10_000,
                             rng=np.random.default_rng(23))
    p_lo, p_hi = 100 * paired.confidence_interval.low, 100 * paired.confidence_interval.high
    u_lo, u_hi = (100 * unpaired.confidence_interval.low,
                  100 * unpaired.confidence_interval.high)
    # steps of d-bar are 0.5 pp; Monte-Carlo error of the bounds ~0.2 pp
    assert ours.low == pytest.approx(p_lo, abs=1.0)
    assert ours.high == pytest.approx(p_hi, abs=1.0)
    width, paired_width, unpaired_width = ours.high - ours.low, p_hi - p_lo, u_hi - u_lo
    assert unpaired_width > 1.8 * paired_width  # the references really do differ
    assert width == pytest.approx(paired_width, abs=1.5)
    assert abs(width - unpaired_width) > 5.0
    assert isinstance(ours, PairedCI)


# ------------------------------------------------------------------------ edge cases
def test_all_correct_both_methods():
    ones = np.ones((5, 3))
    ci = paired_bootstrap_ci(ones, ones, seed=0)
    assert (ci.difference, ci.low, ci.high, ci.degenerate) == (0.0, 0.0, 0.0, True)
    assert sign_flip_test(ones, ones, seed=0) == 1.0
    cr = correction_regression(ones, ones)
    assert cr.n_baseline_wrong == 0 and math.isnan(cr.correction)
    assert cr.n_reg == 0 and cr.regression == 0.0
    assert accuracy(ones) == 100.0


def test_all_wrong_both_methods():
    zeros = np.zeros((5, 3))
    ci = paired_bootstrap_ci(zeros, zeros, seed=0)
    assert (ci.difference, ci.low, ci.high, ci.degenerate) == (0.0, 0.0, 0.0, True)
    assert sign_flip_test(zeros, zeros) == 1.0
    cr = correction_regression(zeros, zeros)
    assert cr.n_baseline_right == 0 and math.isnan(cr.regression)
    assert cr.n_fix == 0 and cr.correction == 0.0
    assert accuracy(zeros) == 0.0


def test_constant_nonzero_difference_is_degenerate():
    a, b = np.zeros((6, 3)), np.ones((6, 3))
    ci = paired_bootstrap_ci(a, b, seed=0)
    assert (ci.difference, ci.low, ci.high, ci.degenerate) == (100.0, 100.0, 100.0, True)
    # |T*| >= |T| = 1 only when all six signs agree: exact p = 2/64
    assert sign_flip_test(a, b, seed=0) == 2 / 64  # exact="auto" enumerates n = 6
    p = sign_flip_test(a, b, n_resamples=50_000, seed=0, exact=False)
    assert p == pytest.approx(2 / 64, abs=0.004)
    # constant d built from different repetition patterns (1/3 = 2/3 - 1/3) is exact
    a2 = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0]], dtype=float)
    b2 = np.array([[1, 0, 0], [1, 1, 0], [1, 1, 1]], dtype=float)
    assert paired_bootstrap_ci(a2, b2).degenerate


def test_single_case():
    ci = paired_bootstrap_ci([[0, 1, 1]], [[1, 1, 1]], seed=0)
    assert ci.difference == pytest.approx(100 / 3)
    assert ci.degenerate and math.isnan(ci.low) and math.isnan(ci.high)
    assert ci.n_cases == 1
    assert sign_flip_test([[0, 1, 1]], [[1, 1, 1]], seed=0) == 1.0
    cr = correction_regression([[0, 0, 1]], [[1, 1, 1]])
    assert (cr.n_fix, cr.n_baseline_wrong, cr.correction) == (1, 1, 100.0)


def test_unscored_outputs_count_as_zero_from_records():
    records = [
        {"case_id": "c1", "repetition": 0, "verdict": "correct"},
        {"case_id": "c1", "repetition": 1, "verdict": "unscored", "answer": None},
        {"case_id": "c2", "repetition": 0, "verdict": "wrong"},
        {"case_id": "c2", "repetition": 1},  # unfinished: no verdict -> 0
    ]
    x, ids = correctness_matrix(records)
    assert ids == ["c1", "c2"]
    np.testing.assert_array_equal(x, [[1, 0], [0, 0]])
    assert accuracy(x) == 25.0  # 1 correct of 4 scheduled
    assert coverage(records) == 50.0  # correct + wrong; unscored and unfinished are not


def test_missing_repetitions():
    a = np.array([[1, 0, NAN], [0, 0, 0], [1, NAN, NAN]])
    b = np.array([[1, 1, 1], [1, 0, 0], [0, 0, 1]])
    # case means A: 1/2, 0, 1; B: 1, 1/3, 1/3 -> d = 1/2, 1/3, -2/3 -> mean 1/18
    assert case_means(a) == pytest.approx([0.5, 0.0, 1.0])
    ci = paired_bootstrap_ci(a, b, seed=0)
    assert ci.difference == pytest.approx(100 / 18)
    # NaN cells are not scheduled: A has 6 present cells, 2 correct
    assert accuracy(a) == pytest.approx(200 / 6)
    assert per_repetition_accuracy(a) == pytest.approx([200 / 3, 0.0, 0.0])
    # majority: case 0 of A is 1 of 2 -> tie -> incorrect; case 2 is 1 of 1 -> correct
    cr = correction_regression(a, b)
    # A majority: F, F, T; B: T, F, F -> fix case 0; regression case 2
    assert (cr.n_fix, cr.n_reg, cr.n_baseline_wrong, cr.n_baseline_right) == (1, 1, 2, 1)
    # a repetition missing in every case
    assert math.isnan(per_repetition_accuracy([[1, NAN], [0, NAN]])[1])
    assert math.isnan(accuracy([[NAN, NAN]]))


def test_case_without_any_repetition_cannot_be_paired():
    a = np.array([[1, 0], [NAN, NAN], [0, 1]])
    b = np.ones((3, 2))
    assert math.isnan(case_means(a)[1])
    for fn in (paired_bootstrap_ci, sign_flip_test, correction_regression):
        with pytest.raises(ValueError, match=r"row\(s\) 1 "):
            fn(a, b)
        with pytest.raises(ValueError, match=r"row\(s\) 1 "):
            fn(b, a)


def test_mismatched_shapes_name_both():
    for fn in (paired_bootstrap_ci, sign_flip_test, correction_regression, paired_differences):
        with pytest.raises(ValueError, match=r"\(4, 3\).*\(5, 3\)"):
            fn(np.zeros((4, 3)), np.zeros((5, 3)))
    # different numbers of repetitions are fine
    ci = paired_bootstrap_ci(np.zeros((4, 3)), np.ones((4, 1)))
    assert ci.difference == 100.0


@pytest.mark.parametrize("bad", [np.zeros((0, 3)), [], np.zeros((3, 0)), np.zeros((2, 2, 2))])
def test_empty_or_wrong_rank_input(bad):
    with pytest.raises(ValueError):
        paired_bootstrap_ci(bad, bad)
    with pytest.raises(ValueError):
        accuracy(bad)


@pytest.mark.parametrize("value", [2.0, 0.5, -1.0, np.inf])
def test_values_outside_zero_one_nan(value):
    x = np.zeros((3, 2))
    x[1, 1] = value
    for fn in (paired_bootstrap_ci, sign_flip_test, correction_regression):
        with pytest.raises(ValueError, match="case 1, repetition 1"):
            fn(x, np.zeros((3, 2)))
    with pytest.raises(ValueError, match="0, 1 or NaN"):
        case_means(x)
    with pytest.raises(ValueError, match="0, 1 or NaN"):
        accuracy([["yes", "no"]])


def test_one_dimensional_input_is_one_repetition():
    a, b = [1, 0, 0, 1], [1, 1, 0, 1]
    assert paired_bootstrap_ci(a, b, seed=0).difference == pytest.approx(25.0)
    assert case_means([True, False]) == pytest.approx([1.0, 0.0])


def test_invalid_parameters():
    with pytest.raises(ValueError):
        paired_bootstrap_ci(A, B, n_resamples=0)
    with pytest.raises(ValueError):
        paired_bootstrap_ci(A, B, confidence=1.0)
    with pytest.raises(ValueError):
        sign_flip_test(A, B, n_resamples=2.5)
    for bad in ("yes", None, 1, "exact"):
        with pytest.raises(ValueError, match="exact must be"):
            sign_flip_test(A, B, exact=bad)
    with pytest.raises(ValueError, match="n_cases = 27"):
        sign_flip_test(np.zeros(27), np.ones(27), exact=True)
    with pytest.raises(ValueError, match="NaN"):
        holm([0.1, NAN])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([0.1, 1.2])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([-0.1])
    with pytest.raises(ValueError, match="1-D"):
        holm([[0.1, 0.2]])


def test_seed_reproducibility():
    rng = np.random.default_rng(1)
    a = (rng.random((50, 3)) < 0.5).astype(float)
    b = (rng.random((50, 3)) < 0.6).astype(float)
    assert paired_bootstrap_ci(a, b, seed=42) == paired_bootstrap_ci(a, b, seed=42)
    assert sign_flip_test(a, b, seed=42) == sign_flip_test(a, b, seed=42)
    assert paired_bootstrap_ci(a, b, seed=1) != paired_bootstrap_ci(a, b, seed=2)
    assert sign_flip_test(a, b, seed=1) != sign_flip_test(a, b, seed=2)
    # a Generator is accepted and consumed
    g = np.random.default_rng(42)
    assert paired_bootstrap_ci(a, b, seed=g) == paired_bootstrap_ci(a, b, seed=42)
    # inputs are not modified
    a_copy = a.copy()
    paired_bootstrap_ci(a, b, seed=0)
    np.testing.assert_array_equal(a, a_copy)


def test_chunked_resampling_matches_unchunked(monkeypatch):
    from clinenv.evaluation import stats

    rng = np.random.default_rng(8)
    a = (rng.random((30, 2)) < 0.5).astype(float)
    b = (rng.random((30, 2)) < 0.6).astype(float)
    d = paired_differences(a, b)
    p_default = sign_flip_test(a, b, n_resamples=20_000, seed=0)
    # small chunks: the resample means must equal a direct computation on the same draws
    monkeypatch.setattr(stats, "_CHUNK_ELEMENTS", 30 * 7)
    got = stats._bootstrap_means(d, 100, np.random.default_rng(0))
    g = np.random.default_rng(0)
    want = np.concatenate([d[g.integers(0, 30, size=(k, 30))].mean(axis=1)
                           for k in [7] * 14 + [2]])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-15)
    # sign flips in chunks of 7 patterns: the same p up to Monte-Carlo error
    p_small = sign_flip_test(a, b, n_resamples=20_000, seed=0)
    assert p_small == pytest.approx(p_default, abs=6 * math.sqrt(0.25 / 20_000))


# --------------------------------------------------------------------------- metrics
def test_correctness_matrix_orders_fills_and_rejects_duplicates():
    records = [
        {"case_id": "b", "repetition": 0, "verdict": "correct"},
        {"case_id": "a", "repetition": 0, "verdict": "wrong"},
        {"case_id": "a", "repetition": 2, "verdict": "correct"},
    ]
    x, ids = correctness_matrix(records)
    assert ids == ["b", "a"]
    np.testing.assert_array_equal(x, [[1, NAN, NAN], [0, NAN, 1]])
    x, ids = correctness_matrix(records, case_ids=["a", "z"], n_repetitions=4)
    assert ids == ["a", "z"] and x.shape == (2, 4)
    np.testing.assert_array_equal(x[0], [0, NAN, 1, NAN])
    assert np.isnan(x[1]).all()
    with pytest.raises(ValueError, match=r"case 'a', repetition 2"):
        correctness_matrix(records + [{"case_id": "a", "repetition": 2, "verdict": "wrong"}])
    with pytest.raises(ValueError, match="verdict"):
        correctness_matrix([{"case_id": "a", "verdict": "right"}])
    with pytest.raises(ValueError, match="repetition"):
        correctness_matrix([{"case_id": "a", "repetition": -1}])
    with pytest.raises(ValueError, match="no cases"):
        correctness_matrix([])


def test_coverage_from_answers_and_records():
    assert coverage(["MI", "", None, "  ", "flu"]) == 40.0
    assert coverage([{"verdict": "wrong"}, {"verdict": "unscored", "answer": "x"},
                     {"answer": "gout"}, {}]) == 50.0
    assert math.isnan(coverage([]))


def test_coverage_abstained_records_are_not_covered():
    records = [
        {"verdict": "correct", "answer": "MI"},
        {"verdict": "wrong", "answer": "I cannot say", "abstained": True},
        {"answer": "gout", "abstained": True},  # no verdict: abstained wins over answer
        {"verdict": "unscored", "abstained": True},
        {"verdict": "wrong", "answer": "flu", "abstained": False},
        {"verdict": "wrong", "answer": "flu", "abstained": None},
        {"verdict": "wrong", "answer": "flu", "abstained": "yes"},  # only True counts
    ]
    assert coverage(records) == pytest.approx(100 * 4 / 7)
    assert coverage(records[1:4]) == 0.0


def test_verdicts_come_from_the_scorer():
    from typing import get_args

    from clinenv.evaluation import metrics
    from clinenv.scoring import Verdict

    assert VERDICTS == ("correct", "wrong", "unscored")
    assert VERDICTS == tuple(get_args(Verdict))
    assert "VERDICTS" in metrics.__all__


def test_mean_sd():
    mean, sd = mean_sd([50.0])
    assert mean == 50.0 and math.isnan(sd)
    assert mean_sd([1.0, 2.0, 3.0]) == (2.0, 1.0)
    assert mean_sd([1.0, NAN, 3.0])[0] == 2.0
    with pytest.raises(ValueError):
        mean_sd([])


class _FixedEncoder:
    def __init__(self, table):
        self.table = table

    def encode(self, texts):
        return np.array([self.table[t] for t in texts], dtype=float)


def test_embedding_similarity():
    enc = _FixedEncoder({"p": [3.0, 4.0], "r": [4.0, 3.0], "q": [-3.0, -4.0],
                         "z": [0.0, 0.0]})
    sims = embedding_similarity(["p", "q", None, "", "z"], ["r", "p", "r", "r", "r"], enc)
    # (3*4 + 4*3) / 25 = 0.96; opposite vectors -1; no answer 0; zero vector 0
    assert sims == pytest.approx([0.96, -1.0, 0.0, 0.0, 0.0])
    h = HashingEncoder(dim=64)
    s = embedding_similarity(["Acute myocardial infarction", "gout", None],
                             ["acute MYOCARDIAL infarction", "pneumonia", "gout"], h)
    assert s[0] == pytest.approx(1.0) and abs(s[1]) < 1.0 and s[2] == 0.0
    assert h.encode(["a b", "a b"]).shape == (2, 64)
    np.testing.assert_array_equal(h.encode(["x y"]), HashingEncoder(64).encode(["y x"]))
    with pytest.raises(ValueError, match="reference 0"):
        embedding_similarity(["a"], [""], h)
    with pytest.raises(ValueError, match="2 answers"):
        embedding_similarity(["a", "b"], ["a"], h)


def test_mean_turns_exams_and_stratify():
    records = [
        {"case_id": "1", "turns": 4, "n_exams_requested": 2,
         "case_strata": {"question_type": ["diagnosis", "treatment"]}},
        {"case_id": "2", "turns": 6, "n_exams_requested": 0,
         "case_strata": {"question_type": "diagnosis", "specialty": "cardiology"}},
        {"case_id": "3", "turns": 8},
    ]
    assert mean_turns_exams(records) == {"mean_turns": 6.0, "mean_exams": 1.0,
                                         "n_records": 3}
    groups = stratify(records, "question_type")
    assert list(groups) == ["diagnosis", "treatment"]
    assert [r["case_id"] for r in groups["diagnosis"]] == ["1", "2"]
    assert [r["case_id"] for r in groups["treatment"]] == ["1"]
    assert list(stratify(records, "specialty")) == ["cardiology"]
    assert stratify(records, "absent") == {}
