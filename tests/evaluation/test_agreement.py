"""Cohen's kappa between reviewers: hand-computed values, sklearn / statsmodels cross-checks
(skipped when they are not installed), and the agreement table of a reviewer-label file."""

from __future__ import annotations

import math

import numpy as np
import pytest

from clinenv.evaluation import agreement_table, cohen_kappa, read_reviewer_labels

# Hand: agreements at items 0, 2, 3, 5, 6, 8 -> p_o = 6/10. Marginals: first S4 U3 C1 I1
# A1, second S4 U2 C2 I1 A1 -> p_e = (16 + 6 + 2 + 1 + 1) / 100 = 0.26;
# kappa = (0.6 - 0.26) / 0.74 = 17/37.
FIRST = list("SSSUUCIASU")
SECOND = list("SUSUCCISSA")


def test_hand_computed_kappa():
    got = cohen_kappa(FIRST, SECOND, categories="SUCIA")
    assert got.n_items == 10 and got.n_agree == 6
    assert got.agreement == pytest.approx(60.0)
    assert got.expected == pytest.approx(0.26)
    assert got.kappa == pytest.approx(17 / 37)
    # first reviewer's S (items 0, 1, 2, 8) -> second's S, U, S, S
    assert got.table[0].tolist() == [3, 1, 0, 0, 0]
    assert got.table.sum() == 10 and int(np.trace(got.table)) == 6


def test_unused_categories_change_nothing():
    assert (cohen_kappa(FIRST, SECOND).kappa
            == pytest.approx(cohen_kappa(FIRST, SECOND, categories="SUCIAXYZ").kappa))


def test_extremes():
    assert cohen_kappa("SUCS", "SUCS").kappa == pytest.approx(1.0)
    # systematic disagreement with balanced marginals: p_o = 0, p_e = 1/2
    assert cohen_kappa("SUSU", "USUS").kappa == pytest.approx(-1.0)
    # both gave one rating to everything: p_e = 1, undefined
    same = cohen_kappa("SSS", "SSS")
    assert same.agreement == 100.0 and math.isnan(same.kappa)


def test_errors():
    with pytest.raises(ValueError, match="differ in length: 2 and 3"):
        cohen_kappa("SS", "SSS")
    with pytest.raises(ValueError, match="no co-rated items"):
        cohen_kappa([], [])
    with pytest.raises(ValueError, match=r"second reviewer's rating 'X' at item 1"):
        cohen_kappa("SS", "SX", categories="SUCIA")


def test_matches_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(11)
    for size in (5, 40, 300):
        a = rng.choice(list("SUCIA"), size=size, p=[0.5, 0.2, 0.1, 0.1, 0.1])
        b = np.where(rng.random(size) < 0.4, a, rng.choice(list("SUCIA"), size=size))
        assert cohen_kappa(list(a), list(b)).kappa == pytest.approx(
            metrics.cohen_kappa_score(a, b))


def test_matches_statsmodels():
    inter_rater = pytest.importorskip("statsmodels.stats.inter_rater")
    got = cohen_kappa(FIRST, SECOND, categories="SUCIA")
    assert got.kappa == pytest.approx(inter_rater.cohens_kappa(got.table).kappa)


def test_agreement_table_counts_outputs_of_incomplete_pairs(tmp_path):
    # a1 native (rep 1) is co-rated but its egip partner is rated by r1 only
    path = tmp_path / "labels.csv"
    path.write_text("dataset,case_id,method,repetition,reviewer,rating\n"
                    "d,a1,native,0,r1,S\nd,a1,native,0,r2,S\n"
                    "d,a1,egip,0,r1,S\nd,a1,egip,0,r2,U\n"
                    "d,a2,native,0,r1,C\nd,a2,native,0,r2,C\n"
                    "d,a2,egip,0,r1,A\nd,a2,egip,0,r2,S\n"
                    "d,a1,native,1,r1,I\nd,a1,native,1,r2,I\n"
                    "d,a1,egip,1,r1,S\n", encoding="utf-8")
    table = agreement_table(read_reviewer_labels(path))
    # 5 co-rated outputs, agree on 3 (S/S, C/C, I/I); marginals r1 S2 C1 A1 I1,
    # r2 S2 U1 C1 I1 -> p_e = (4 + 1 + 1) / 25 = 6/25; kappa = (3/5 - 6/25) / (19/25)
    (result,) = table.data
    assert result.n_items == 5 and result.n_agree == 3
    assert result.kappa == pytest.approx((15 - 6) / 19)
    assert table.rows[0][:4] == ("r1", "r2", "5", "60.00")


def test_agreement_needs_two_reviewers(tmp_path):
    path = tmp_path / "one.csv"
    path.write_text("dataset,case_id,method,repetition,reviewer,rating\nd,a,m,0,r1,S\n",
                    encoding="utf-8")
    with pytest.raises(ValueError, match="needs two reviewers"):
        agreement_table(read_reviewer_labels(path))
