"""The dataset-stratified source-case bootstrap (EGIP §4.5, appendix E): the pooled
ratio, resampling within strata (pinned by discrete resample distributions worked out by
hand or enumerated), and a scipy cross-check with one stratum."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from clinenv.evaluation import paired_bootstrap_ci, stratified_bootstrap_ci


def test_pooled_ratio_of_sums():
    got = stratified_bootstrap_ci([1, 0, 2, -1], [1, 1, 2, 3], ["a", "a", "b", "b"],
                                  n_resamples=100, seed=0)
    assert got.difference == pytest.approx(100 * 2 / 7)  # (1 + 0 + 2 - 1) / (1+1+2+3)
    assert got.n_cases == 4 and got.n_resamples == 100
    assert got.method == "dataset-stratified source-case percentile bootstrap"


def test_resampling_keeps_each_stratum_size():
    # Stratum A: three cases with x = n = 1 (sum_x 3, sum_n 3 in every resample).
    # Stratum B: two cases with x = 0 and n = 1 or 2; two draws give sum_n 2, 3 or 4
    # with probabilities 1/4, 1/2, 1/4. The ratio is 3/5, 3/6 or 3/7 -- never the 0 or
    # 100 an unstratified resample could give -- so the 2.5 % and 97.5 % quantiles are
    # the atoms 3/7 and 3/5.
    got = stratified_bootstrap_ci([1, 1, 1, 0, 0], [1, 1, 1, 1, 2],
                                  ["A", "A", "A", "B", "B"], n_resamples=20_000, seed=1)
    assert got.difference == pytest.approx(50.0)
    assert (got.low, got.high) == pytest.approx((100 * 3 / 7, 100 * 3 / 5))
    assert not got.degenerate


def test_quantiles_match_the_enumerated_resample_distribution():
    # Panel-C-like: per-case differences in two datasets, one pair per case. Every
    # stratified resample (4^4 x 4^4 equally likely index tuples) enumerated.
    alpha, beta = [0, 1, 1, 0], [-1, 1, 0, 1]
    values = []
    for ia in itertools.product(alpha, repeat=4):
        sa = sum(ia)
        values += [(sa + sum(ib)) / 8 for ib in itertools.product(beta, repeat=4)]
    values = np.sort(np.array(values))
    cdf = np.arange(1, values.size + 1) / values.size
    exact_low = values[np.searchsorted(cdf, 0.025)]
    exact_high = values[np.searchsorted(cdf, 0.975)]
    # both quantile levels lie inside an atom, at least 0.002 (over 5 Monte-Carlo SDs of
    # a 20,000-resample CDF there) from its ends, so the Monte-Carlo quantile is that atom
    for v, level in ((exact_low, 0.025), (exact_high, 0.975)):
        inside = cdf[values == v]
        assert inside.min() - 1 / values.size < level - 0.002 and inside.max() > level + 0.002
    got = stratified_bootstrap_ci(alpha + beta, [1] * 8, ["alpha"] * 4 + ["beta"] * 4,
                                  n_resamples=20_000, seed=5)
    assert got.difference == pytest.approx(100 * 3 / 8)
    assert (got.low, got.high) == pytest.approx((100 * exact_low, 100 * exact_high))


def test_one_stratum_unit_counts_is_the_case_bootstrap():
    # the same draws as the case-cluster bootstrap of EGIP appendix A.3 with one
    # repetition: d in {0, 1} against an all-zero baseline
    d = np.array([1, 0, 0, 1, 1, 0, 1, 1, 0, 1], dtype=float)
    ours = stratified_bootstrap_ci(d, np.ones(10), ["x"] * 10, n_resamples=5000, seed=9)
    plain = paired_bootstrap_ci(np.zeros(10), d, n_resamples=5000, seed=9)
    assert (ours.low, ours.high) == pytest.approx((plain.low, plain.high))


def test_one_stratum_matches_scipy_percentile_bootstrap():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(2)
    d = rng.choice([-1.0, 0.0, 1.0], size=200, p=[0.2, 0.4, 0.4])
    ours = stratified_bootstrap_ci(d, np.ones(d.size), ["x"] * d.size, n_resamples=20_000,
                                   seed=3)
    ref = stats.bootstrap((d,), np.mean, n_resamples=20_000, method="percentile",
                          random_state=np.random.default_rng(4)).confidence_interval
    # different random draws of the same procedure: Monte-Carlo agreement only
    assert ours.low == pytest.approx(100 * ref.low, abs=0.6)
    assert ours.high == pytest.approx(100 * ref.high, abs=0.6)


def test_same_seed_same_interval_and_degenerate_cases():
    args = ([1, 0, 1, 1, 0], [1, 2, 1, 1, 1], list("aabbb"))
    first = stratified_bootstrap_ci(*args, n_resamples=500, seed=4)
    assert first == stratified_bootstrap_ci(*args, n_resamples=500, seed=4)
    one_each = stratified_bootstrap_ci([1, 0], [1, 2], ["a", "b"], seed=0)
    assert one_each.degenerate and one_each.low == one_each.high == pytest.approx(100 / 3)
    equal = stratified_bootstrap_ci([2, 2, 0, 0], [2, 2, 1, 1], list("aabb"), seed=0)
    assert equal.degenerate and (equal.low, equal.high) == (equal.difference,) * 2


@pytest.mark.parametrize(("args", "message"), [
    (([1, 2], [1], ["a", "a"]), "same length"),
    (([], [], []), "no cases"),
    (([1, np.nan], [1, 1], ["a", "a"]), "numerators must be finite; case 1"),
    (([1, 1], [1, 0], ["a", "a"]), "denominators must be positive; case 1"),
])
def test_errors(args, message):
    with pytest.raises(ValueError, match=message):
        stratified_bootstrap_ci(*args)
    with pytest.raises(ValueError, match="n_resamples"):
        stratified_bootstrap_ci([1], [1], ["a"], n_resamples=0)
