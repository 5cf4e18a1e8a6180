"""Correct-and-jointly-supported yield (EGIP Eq. 6, Table 4) from a reviewer-label file:
the file format and its errors, complete and incomplete pairs, every panel's counts
worked out by hand, the stratified intervals, and ``clinenv compare --reviewer-labels``.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from clinenv.evaluation import (
    ReviewerLabelError,
    correct_supported_yield,
    load_runs,
    pair_runs,
    read_reviewer_labels,
    review_pairs,
    review_table,
    yield_rows,
)
from clinenv.testing.cli_calls import main_cli
from clinenv.testing.eval_logs import write_fixture_logs

HEADER = "dataset,case_id,method,repetition,reviewer,rating\n"

# One reviewed repetition per case. Automated correctness from clinenv/testing/eval_logs.py:
#   NATIVE_ALPHA a1 CCC a2 WWU a3 CWC a4 WWW    EGIP_ALPHA a1 CCC a2 CCW a3 WWW a4 CWU
#   NATIVE_BETA  b1 CCC b2 CCC b3 WWW b4 WWW    EGIP_BETA  b1 CCC b2 CCC b3 CCC b4 WWW
# (case, rep, native r1 r2, egip r1 r2):
REVIEW = [("alpha", "a1", 0, "SS", "SS"),  # native C, egip C
          ("alpha", "a2", 1, "US", "SS"),  # native W, egip C
          ("alpha", "a3", 2, "SU", "SS"),  # native C, egip W
          ("alpha", "a4", 0, "AA", "SU"),  # native W, egip C
          ("beta", "b1", 1, "SS", "SC"),  # native C, egip C
          ("beta", "b2", 2, "SI", "SS"),  # native C, egip C
          ("beta", "b3", 0, "SS", "SS"),  # native W, egip C
          ("beta", "b4", 1, "CU", "SS")]  # native W, egip W
# Hand counts over the 8 complete pairs (native / egip):
#   A both S & correct: 2 (a1, b1) / 4 (a1, a2, b2, b3)
#   A r1 S & correct:   4 (a1, a3, b1, b2) / 6 (a1, a2, a4, b1, b2, b3)
#   A r2 S & correct:   2 (a1, b1) / 4 (a1, a2, b2, b3)
#   A any S & correct:  4 / 6
#   B (both correct, no A: a1, b1, b2): both S 2/3 / 2/3; r1 3/3 / 3/3; r2 2/3 / 2/3;
#     any 3/3 / 3/3
#   C both S: 3 (a1, b1, b3) / 6 (a1, a2, a3, b2, b3, b4); alpha 1/4 / 3/4; beta 2/4 / 3/4
EXPECTED = [("A", "all", None, 8, 2, 4), ("A", "r1", None, 8, 4, 6),
            ("A", "r2", None, 8, 2, 4), ("A", "any", None, 8, 4, 6),
            ("B", "all", None, 3, 2, 2), ("B", "r1", None, 3, 3, 3),
            ("B", "r2", None, 3, 2, 2), ("B", "any", None, 3, 3, 3),
            ("C", "all", None, 8, 3, 6), ("C", "all", "alpha", 4, 1, 3),
            ("C", "all", "beta", 4, 2, 3)]


def label_text(extra: str = "") -> str:
    rows = []
    for dataset, case, rep, native, egip in REVIEW:
        for method, pair in (("native", native), ("egip", egip)):
            for reviewer, rating in zip(("r1", "r2"), pair, strict=True):
                rows.append(f"{dataset},{case},{method},{rep},{reviewer},{rating}\n")
    return HEADER + "".join(rows) + extra


@pytest.fixture
def setup(tmp_path):
    logs = write_fixture_logs(tmp_path / "logs")
    runs = load_runs([logs["native_alpha"], logs["native_beta"], logs["egip_alpha"],
                      logs["egip_beta"]])
    # an incomplete pair: a1 repetition 1, egip rated by r1 only
    path = tmp_path / "labels.csv"
    path.write_text(label_text("alpha,a1,native,1,r1,S\nalpha,a1,native,1,r2,S\n"
                               "alpha,a1,egip,1,r1,s\n"), encoding="utf-8")
    return logs, runs, path


def test_complete_pairs_and_eq6(setup):
    _, runs, path = setup
    sample = review_pairs(pair_runs(runs, base_label="native"), read_reviewer_labels(path))
    assert len(sample.pairs) == 8 and sample.n_cases == 8
    assert sample.incomplete == (("alpha", "a1", 1, "native", "egip"),)
    assert sample.reviewers == ("r1", "r2")
    assert correct_supported_yield(sample) == pytest.approx((25.0, 50.0))  # Eq. 6
    assert correct_supported_yield(sample, require_correct=False) == pytest.approx(
        (37.5, 75.0))
    a3 = next(p for p in sample.pairs if p.case_id == "a3")
    assert (a3.base_correct, a3.method_correct) == (True, False)


def test_table4_rows_by_hand(setup):
    _, runs, path = setup
    sample = review_pairs(pair_runs(runs, base_label="native"), read_reviewer_labels(path))
    rows = yield_rows(sample, n_resamples=2000, seed=0)
    assert [(r.panel, r.rule, r.dataset, r.n_pairs, r.n_base, r.n_method)
            for r in rows] == EXPECTED
    for r in rows:
        assert r.ci.difference == pytest.approx(100 * (r.n_method - r.n_base) / r.n_pairs)
    # Panel C, alpha: per-case differences a1 0, a2 +1, a3 +1, a4 0; four draws give a
    # mean of 0 with probability 1/16 > 2.5 %, and 1 likewise: the interval is [0, 100]
    alpha = rows[9]
    assert (alpha.ci.low, alpha.ci.high) == (0.0, 100.0)


def test_table_text_and_csv(setup):
    _, runs, path = setup
    sample = review_pairs(pair_runs(runs, base_label="native"), read_reviewer_labels(path))
    table = review_table(sample, n_resamples=500)
    first = table.rows[0]
    assert first[1:5] == ("Both reviewers S", "2/8 (25.00)", "4/8 (50.00)", "+25.00")
    assert table.rows[-1][1] == "beta (Both reviewers S)"
    assert any("1 incompletely rated pair(s) left out" in n for n in table.notes)
    records = list(csv.DictReader(table.to_csv().splitlines()))
    assert [r["panel"] for r in records] == [e[0] for e in EXPECTED]
    assert float(records[8]["method_yield"]) == pytest.approx(75.0)


def write(tmp_path: Path, text: str, name: str = "bad.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("text", "line", "field", "message"), [
    ("dataset,case_id,method,repetition,rating\n", 1, "reviewer", "no column 'reviewer'"),
    (HEADER + "d,c,m,0,r1,X\n", 2, "rating", "rating must be one of S, U, C, I, A"),
    (HEADER + "d,c,m,-1,r1,S\n", 2, "repetition", "integer >= 0"),
    (HEADER + "d,c,m,one,r1,S\n", 2, "repetition", "integer >= 0"),
    (HEADER + "\nd,,m,0,r1,S\n", 3, "case_id", "empty"),
    (HEADER + "d,c,m,0,r1\n", 2, None, "5 cells but the header has 6 columns"),
    (HEADER + "d,c,m,0,r1,S\nd,c,m,0,r1,U\n", 3, "reviewer", "first on line 2"),
    (HEADER.strip() + ",rating\n", 1, "rating", "appears 2 times"),
])
def test_label_file_errors_name_file_line_and_field(tmp_path, text, line, field, message):
    path = write(tmp_path, text)
    with pytest.raises(ReviewerLabelError, match=message) as err:
        read_reviewer_labels(path)
    assert (err.value.path, err.value.line, err.value.field) == (str(path), line, field)
    assert str(err.value).startswith(f"{path}, line {line}")


def test_label_file_whole_file_errors(tmp_path):
    for text, message in (("", "empty file"), (HEADER, "no ratings")):
        with pytest.raises(ReviewerLabelError, match=message):
            read_reviewer_labels(write(tmp_path, text))
    with pytest.raises(ReviewerLabelError, match="no such reviewer-label file"):
        read_reviewer_labels(tmp_path / "absent.csv")
    (tmp_path / "latin1.csv").write_bytes(HEADER.encode() + b"d,caf\xe9,m,0,r,S\n")
    with pytest.raises(ReviewerLabelError, match="not UTF-8"):
        read_reviewer_labels(tmp_path / "latin1.csv")


def test_bom_any_column_order_extra_columns_and_lower_case(tmp_path):
    path = tmp_path / "excel.csv"
    path.write_bytes("\ufeffRating,Reviewer,notes,dataset,case_id,method,repetition\n"
                     "s,r1,\"long, quoted\",d,c1,m,2\n".encode())
    labels = read_reviewer_labels(path)
    assert labels.ratings == {("d", "c1", "m", 2): {"r1": "S"}}


def test_outputs_the_runs_do_not_hold(setup, tmp_path):
    _, runs, _ = setup
    pairs = pair_runs(runs, base_label="native")
    bad_case = write(tmp_path, label_text("alpha,a9,egip,0,r1,S\n"))
    with pytest.raises(ReviewerLabelError, match="has no case 'a9'") as err:
        review_pairs(pairs, read_reviewer_labels(bad_case))
    assert (err.value.line, err.value.field) == (34, "case_id")
    bad_rep = write(tmp_path, label_text("alpha,a1,egip,3,r1,S\n"))
    with pytest.raises(ReviewerLabelError, match="repetitions 0..2, not 3") as err:
        review_pairs(pairs, read_reviewer_labels(bad_rep))
    assert err.value.field == "repetition"
    nothing = write(tmp_path, HEADER + "alpha,a1,Native,0,r1,S\n")
    with pytest.raises(ReviewerLabelError, match="no rated output belongs to the compared "
                                                 "runs") as err:
        review_pairs(pairs, read_reviewer_labels(nothing))
    assert err.value.field == "method"
    # rows of another method are ignored and reported
    other = write(tmp_path, label_text("alpha,a1,vote,0,r1,S\n"))
    sample = review_pairs(pairs, read_reviewer_labels(other))
    assert dict(sample.outside) == {("alpha", "vote"): 1}
    assert any("'vote' on 'alpha' (1)" in n for n in review_table(sample,
                                                                   n_resamples=50).notes)


def test_a_run_in_two_pairs_is_refused(setup):
    _, runs, path = setup
    alpha = [r for r in runs if r.dataset == "alpha"]
    native, egip = sorted(alpha, key=lambda r: r.label != "native")
    with pytest.raises(ValueError, match="more than one compared pair"):
        review_pairs([(native, egip), (native, egip)], read_reviewer_labels(path))


def test_cli_compare_reviewer_labels(setup, tmp_path):
    logs, _, path = setup
    out = tmp_path / "r"
    proc = main_cli(tmp_path, "compare", str(logs["native_alpha"]), str(logs["native_beta"]),
                    str(logs["egip_alpha"]), str(logs["egip_beta"]), "--reviewer-labels",
                    str(path), "--review-resamples", "500", "--resamples", "200",
                    "--flips", "100", "--out-dir", str(out))
    assert "EGIP Table 4, Eq. 6" in proc.stdout and "Cohen's kappa" in proc.stdout
    with (out / "review.csv").open(encoding="utf-8") as fh:
        first = next(csv.DictReader(fh))
    assert (first["n_baseline"], first["n_method"], first["n_pairs"]) == ("2", "4", "8")
    with (out / "agreement.csv").open(encoding="utf-8") as fh:
        agreement = next(csv.DictReader(fh))
    assert agreement["n_items"] == "17"  # 16 in complete pairs + a1 native repetition 1


def test_cli_label_file_error_exits_2(setup, tmp_path):
    logs, _, _ = setup
    bad = write(tmp_path, HEADER + "alpha,a1,native,0,r1,maybe\n")
    proc = main_cli(tmp_path, "compare", str(logs["native_alpha"]), str(logs["egip_alpha"]),
                    "--reviewer-labels", str(bad), "--resamples", "50", "--flips", "50",
                    "--out-dir", str(tmp_path / "r"), code=2)
    assert f"{bad}, line 2, field 'rating'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_one_reviewer_gives_panel_a_b_c_without_agreement(setup, tmp_path):
    logs, runs, _ = setup
    # r1's ratings only (REVIEW's first letter): every pair is complete with one reviewer.
    # A, S & correct: native a1, a3, b1, b2 / egip a1, a2, a4, b1, b2, b3 (as "r1" above);
    # B: a1, b1, b2 all S on both sides; C, any S: native a1, a3 | b1, b2, b3, egip all 8
    text = HEADER + "".join(f"{d},{c},{m},{rep},r1,{pair[0]}\n"
                            for d, c, rep, native, egip in REVIEW
                            for m, pair in (("native", native), ("egip", egip)))
    path = write(tmp_path, text, "one.csv")
    sample = review_pairs(pair_runs(runs, base_label="native"), read_reviewer_labels(path))
    rows = yield_rows(sample, n_resamples=200)
    assert [(r.panel, r.rule, r.dataset, r.n_pairs, r.n_base, r.n_method)
            for r in rows] == [("A", "all", None, 8, 4, 6), ("B", "all", None, 3, 3, 3),
                               ("C", "all", None, 8, 5, 8), ("C", "all", "alpha", 4, 2, 4),
                               ("C", "all", "beta", 4, 3, 4)]
    assert review_table(sample, n_resamples=50).rows[0][1] == "Reviewer S"
    out = tmp_path / "r1"
    main_cli(tmp_path, "compare", str(logs["native_alpha"]), str(logs["native_beta"]),
             str(logs["egip_alpha"]), str(logs["egip_beta"]), "--reviewer-labels",
             str(path), "--review-resamples", "100", "--resamples", "50", "--flips", "50",
             "--out-dir", str(out))
    assert (out / "review.csv").is_file() and not (out / "agreement.csv").exists()
