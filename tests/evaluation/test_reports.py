"""Run-log grouping, pairing, report tables and figures (clinenv.evaluation.runs/reports/plots).

Fixtures (clinenv/testing/eval_logs.py), C correct / W wrong / U unscored, repetitions 0 1 2:

    alpha  native: a1 CCC  a2 WWU  a3 CWC  a4 WWW     egip: a1 CCC  a2 CCW  a3 WWW  a4 CWU
    beta   native: b1 CCC  b2 CCC  b3 WWW  b4 WWW     egip: b1 CCC  b2 CCC  b3 CCC  b4 WWW

Every expected number below is worked out by hand in the comments.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import sys

import numpy as np
import pytest

from clinenv.evaluation import (
    Alignment,
    CaseMismatchError,
    LogSpec,
    PlotDependencyError,
    RunsError,
    Table,
    accuracy_cells,
    accuracy_ci,
    accuracy_table,
    align,
    compare,
    comparison_table,
    holm,
    load_runs,
    pair_runs,
    parse_run_spec,
    plot_accuracy,
    plot_correction_regression,
)
from clinenv.runlog import RunLogError
from clinenv.testing.eval_logs import (
    EGIP_ALPHA,
    NATIVE_ALPHA,
    NATIVE_BETA,
    log_lines,
    write_fixture_logs,
    write_log,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def logs(tmp_path):
    return write_fixture_logs(tmp_path / "logs")


@pytest.fixture
def runs(logs):
    return load_runs([logs["native_alpha"], logs["native_beta"], logs["egip_alpha"],
                      logs["egip_beta"]])


def by_key(runs):
    return {(r.label, r.dataset): r for r in runs}


# ------------------------------------------------------------------------- runs
def test_runs_are_grouped_by_label_and_dataset(runs):
    assert [(r.label, r.dataset) for r in runs] == [
        ("native", "alpha"), ("native", "beta"), ("egip", "alpha"), ("egip", "beta")]
    native = by_key(runs)[("native", "alpha")]
    assert native.case_ids == ("a1", "a2", "a3", "a4")  # case_index order
    assert native.n_repetitions == 3
    assert native.n_unscored() == 1 and native.n_missing() == 0
    np.testing.assert_array_equal(native.matrix(), [[1, 1, 1], [0, 0, 0], [1, 0, 1],
                                                    [0, 0, 0]])


def test_label_from_the_command_line_overrides_doctor_name(logs):
    runs = load_runs([f"Native (AC)={logs['native_alpha']}", logs["egip_alpha"]])
    assert [r.label for r in runs] == ["Native (AC)", "egip"]


def test_parse_run_spec(tmp_path):
    assert parse_run_spec("x.jsonl") == LogSpec(tmp_path.__class__("x.jsonl"))
    spec = parse_run_spec("EGIP Direct=runs/a=b.jsonl")
    assert (spec.label, str(spec.path)) == ("EGIP Direct", "runs/a=b.jsonl")
    weird = tmp_path / "k=v.jsonl"  # an existing file whose name has "=" is a path
    weird.write_text("")
    assert parse_run_spec(str(weird)) == LogSpec(weird)
    for bad in ("=x.jsonl", "label="):
        with pytest.raises(RunsError, match="LABEL=PATH"):
            parse_run_spec(bad)


def test_mixed_runs_in_one_file_are_refused_with_file_and_line(tmp_path):
    path = write_log(tmp_path / "mixed.jsonl", log_lines("alpha", "native", NATIVE_ALPHA),
                     log_lines("alpha", "egip", EGIP_ALPHA))
    with pytest.raises(RunsError, match='mixed runs in one file: doctor.name is "egip" '
                                        'here but "native" on line 1') as info:
        load_runs([path])
    # 12 native lines, so line 13 is the first egip line
    assert info.value.path == str(path) and info.value.line == 13
    assert "on line 1" in str(info.value)


def test_mixed_dataset_in_one_file_is_refused(tmp_path):
    path = write_log(tmp_path / "mixed.jsonl", log_lines("alpha", "native", NATIVE_ALPHA),
                     log_lines("beta", "native", NATIVE_BETA))
    with pytest.raises(RunsError, match="mixed runs in one file: env_id is"):
        load_runs([path])


def test_duplicate_episode_is_refused_naming_both_lines(tmp_path):
    lines = log_lines("alpha", "native", NATIVE_ALPHA)
    path = write_log(tmp_path / "dup.jsonl", lines + [lines[5]])
    with pytest.raises(RunsError, match=r"duplicate episode \(case_id 'a2', repetition 1\)"
                       r".*first at .*dup.jsonl, line 6") as info:
        load_runs([path])
    assert info.value.line == 13


def test_same_key_across_files_of_one_run_is_refused(tmp_path):
    lines = log_lines("alpha", "native", NATIVE_ALPHA)
    first = write_log(tmp_path / "part1.jsonl", lines[:8])
    second = write_log(tmp_path / "part2.jsonl", lines[7:])  # line 8 in both
    with pytest.raises(RunsError, match="duplicate episode .* first at .*part1.jsonl, line 8"
                       ) as info:
        load_runs([first, second])
    # two files: the message says how to read them as two runs
    assert "give each log its own label with LABEL=path, e.g. " in str(info.value)
    assert f"native-1={first}" in str(info.value) and f"native-2={second}" in str(info.value)
    # disjoint parts of one run are one run
    second = write_log(tmp_path / "part2.jsonl", lines[8:])
    (run,) = load_runs([first, second])
    assert len(run.records) == 12 and run.paths == (str(first), str(second))


def _error_line(line):
    """``line`` as an episode stopped by a backend error (verdict unscored)."""
    return {**line, "verdict": "unscored", "correct": False, "answer": None,
            "error": {"type": "BackendError", "message": "HTTP 503", "backend": "openai",
                      "detail": "http_503"}}


def test_a_retry_supersedes_an_error_line_in_one_file_and_across_files(tmp_path):
    """clinenv.runlog's supersession rule: a later line replaces an earlier error line.

    NATIVE_ALPHA a2 is W W U, a3 C W C, a4 W W W. In part 1 an error line precedes
    a2 rep 0 (W); a3 rep 1 (W) failed twice and a4 rep 2 (W) once, and their retries
    are in part 2. The run is then exactly NATIVE_ALPHA: accuracy cells as in
    test_runs_are_grouped_by_label_and_dataset, one unscored episode (a2 rep 2), 12
    records, 4 superseded error lines.
    """
    lines = log_lines("alpha", "native", NATIVE_ALPHA)  # index = 4 * rep + case
    a2r0, a3r1, a4r2 = lines[1], lines[6], lines[11]
    part1 = write_log(tmp_path / "part1.jsonl",
                      [_error_line(a2r0), *lines[:6], _error_line(a3r1), *lines[7:11],
                       _error_line(a3r1), _error_line(a4r2)])
    part2 = write_log(tmp_path / "part2.jsonl", [a3r1, a4r2])
    (run,) = load_runs([part1, part2])
    assert len(run.records) == 12 and run.n_superseded == 4
    assert run.n_unscored() == 1 and run.n_missing() == 0
    assert not any("error" in r for r in run.records)
    np.testing.assert_array_equal(run.matrix(), [[1, 1, 1], [0, 0, 0], [1, 0, 1],
                                                 [0, 0, 0]])
    # the standing lines and where they are: a2 rep 0 from part 1 line 3 (its retry);
    # a3 rep 1 and a4 rep 2 from part 2
    where = {(r["case_id"], r["repetition"]): src
             for r, src in zip(run.records, run.sources, strict=True)}
    assert where[("a2", 0)] == (str(part1), 3)
    assert (where[("a3", 1)], where[("a4", 2)]) == ((str(part2), 1), (str(part2), 2))


def test_an_error_line_after_a_finished_episode_is_a_duplicate(tmp_path):
    lines = log_lines("alpha", "native", NATIVE_ALPHA)
    path = write_log(tmp_path / "late.jsonl", [*lines, _error_line(lines[5])])
    with pytest.raises(RunsError, match=r"duplicate episode \(case_id 'a2', repetition 1\)"
                       r".*first at .*late.jsonl, line 6 \(only an error line"):
        load_runs([path])


def test_two_runs_with_one_label_are_refused(tmp_path, logs):
    other = write_log(tmp_path / "other.jsonl",
                      log_lines("alpha", "native", NATIVE_ALPHA, exploration=0.3))
    with pytest.raises(RunsError, match="two different runs are labelled 'native' on "
                                        "dataset 'alpha': doctor.config.exploration is 0.3 "
                                        "here but 0.0 in .*LABEL=path"):
        load_runs([logs["native_alpha"], other])
    assert len(load_runs([logs["native_alpha"], f"explore={other}"])) == 2


def test_bad_inputs_name_the_file(tmp_path, logs):
    with pytest.raises(RunsError, match="no such run-log file"):
        load_runs([tmp_path / "absent.jsonl"])
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(RunsError, match="no episodes"):
        load_runs([tmp_path / "empty.jsonl"])
    with pytest.raises(RunsError, match="given twice"):
        load_runs([logs["native_alpha"], logs["native_alpha"]])
    lines = log_lines("alpha", "native", NATIVE_ALPHA)
    lines[2]["verdict"] = "maybe"
    with pytest.raises(RunsError, match="verdict must be one of") as info:
        load_runs([write_log(tmp_path / "bad.jsonl", lines)])
    assert info.value.line == 3
    (tmp_path / "junk.jsonl").write_text('{"x": 1}\n')
    with pytest.raises(RunLogError, match="schema"):
        load_runs([tmp_path / "junk.jsonl"])


# ----------------------------------------------------------------------- align
def test_align_pairs_the_same_cases_in_the_same_order(runs):
    runs = by_key(runs)
    al = align(runs[("native", "alpha")], runs[("egip", "alpha")])
    assert isinstance(al, Alignment) and al.case_ids == ("a1", "a2", "a3", "a4")
    assert al.n_dropped == 0
    np.testing.assert_array_equal(al.b, [[1, 1, 1], [1, 1, 0], [0, 0, 0], [1, 0, 0]])


def test_align_refuses_different_case_sets_listing_the_missing_ids(tmp_path, logs):
    partial = {k: v for k, v in EGIP_ALPHA.items() if k != "a4"}
    partial["a9"] = "CCC"
    path = write_log(tmp_path / "partial.jsonl", log_lines("alpha", "egip", partial))
    base, method = load_runs([logs["native_alpha"], path])
    with pytest.raises(CaseMismatchError, match=r"1 case\(s\) missing from 'egip': a4; "
                                                r"1 case\(s\) missing from baseline "
                                                r"'native': a9 .*--intersect") as info:
        align(base, method)
    assert info.value.only_base == ["a4"] and info.value.only_method == ["a9"]
    al = align(base, method, intersect=True)
    assert al.case_ids == ("a1", "a2", "a3") and al.n_dropped == 2
    assert (al.only_base, al.only_method) == (("a4",), ("a9",))


def test_align_refuses_different_datasets_and_disjoint_cases(tmp_path, runs, logs):
    runs = by_key(runs)
    with pytest.raises(RunsError, match="different datasets"):
        align(runs[("native", "alpha")], runs[("egip", "beta")])
    other = write_log(tmp_path / "other.jsonl", log_lines("alpha", "egip", {"z1": "CCC"}))
    (method,) = load_runs([other])
    with pytest.raises(CaseMismatchError, match="no case in common"):
        align(runs[("native", "alpha")], method, intersect=True)


# ------------------------------------------------------------------ accuracy table
ACCURACY_MD = """\
**Accuracy (%) by method and dataset: mean ± sample SD over repetitions; then answer coverage (%)**

| Method | alpha | beta | alpha coverage | beta coverage |
|:---|---:|---:|---:|---:|
| native | 41.67 ± 14.43 | 50.00 ± 0.00 | 91.67 | 100.00 |
| egip | 50.00 ± 25.00 | 75.00 ± 0.00 | 91.67 | 100.00 |

- Accuracy: percent of scheduled outputs scored correct; wrong, unscored and non-answers \
stay in the denominator (EGIP 4.1). Mean ± sample SD (ddof=1) of the per-repetition \
accuracies. Coverage: percent of scheduled outputs with an identifiable answer; the others \
(U) are outputs with no answer, a template placeholder or an abstention, whatever the \
protocol's verdict (a native episode without a diagnosis is AgentClinic's 'wrong' but \
unscored here), and missing episodes.
- Cases × repetitions: alpha 4 × 3; beta 4 × 3.
"""
# native/alpha per repetition: rep0 a1 C a2 W a3 C a4 W -> 2/4 = 50; rep1 C W W W -> 25;
#   rep2 C U C W -> 50. Mean 125/3 = 41.67; SD: deviations 8.33, -16.67, 8.33, squares
#   69.44 + 277.78 + 69.44 = 416.67, / 2 = 208.33, sqrt = 14.43. Coverage 11/12 = 91.67.
# egip/alpha: rep0 C C W C -> 75; rep1 C C W W -> 50; rep2 C W W U -> 25. Mean 50;
#   SD sqrt((625 + 0 + 625) / 2) = 25. Coverage 11/12 (a4 rep2 unscored).
# native/beta: 2/4 every repetition -> 50 ± 0; egip/beta: 3/4 -> 75 ± 0; coverage 100.

ACCURACY_CSV = """\
method,dataset,stratum,n_cases,n_repetitions,n_episodes,n_correct,n_unscored,n_missing,\
accuracy_mean,accuracy_sd,accuracy_pooled,per_repetition,coverage,mean_turns,mean_exams,similarity,\
n_unparsed
native,alpha,,4,3,12,5,1,0,41.666667,14.433757,41.666667,50.0;25.0;50.0,91.666667,19.0,2.0,,0
native,beta,,4,3,12,6,0,0,50.0,0.0,50.0,50.0;50.0;50.0,100.0,19.0,2.0,,0
egip,alpha,,4,3,12,6,1,0,50.0,25.0,50.0,75.0;50.0;25.0,91.666667,12.0,5.0,,0
egip,beta,,4,3,12,9,0,0,75.0,0.0,75.0,75.0;75.0;75.0,100.0,12.0,5.0,,0
"""
# n_correct: native/alpha 3 + 0 + 2 + 0 = 5 (pooled 5/12 = 41.67); egip/alpha 3+2+0+1 = 6;
# native/beta 6; egip/beta 9. sqrt(208.333...) = 14.433757. Turns/exams as written.


def test_accuracy_table_markdown_and_csv_are_pinned(runs):
    table = accuracy_table(runs)
    assert isinstance(table, Table)
    assert table.to_markdown() == ACCURACY_MD
    assert table.to_csv() == ACCURACY_CSV
    rows = list(csv.DictReader(io.StringIO(table.to_csv())))
    assert math.isclose(float(rows[0]["accuracy_sd"]), math.sqrt(625 / 3), rel_tol=1e-6)


def test_accuracy_table_text_is_ascii_and_aligned(runs):
    text = accuracy_table(runs).to_text()
    assert text.isascii()
    lines = text.splitlines()
    assert lines[1].split() == ["Method", "alpha", "beta", "alpha", "coverage", "beta",
                                "coverage"]
    assert lines[3].split()[:4] == ["native", "41.67", "+/-", "14.43"]
    assert "Cases x repetitions: alpha 4 x 3; beta 4 x 3." in text


BY_QUESTION_TYPE_MD_ROWS = """\
| Dataset | question_type | Cases | native | egip |
|:---|:---|---:|---:|---:|
| alpha | diagnosis | 3 | 33.33 ± 0.00 | 66.67 ± 33.33 |
| alpha | etiology | 1 | 66.67 ± 57.74 | 0.00 ± 0.00 |
| alpha | other | 1 | 0.00 ± 0.00 | 33.33 ± 57.74 |
"""
# diagnosis = a1, a2, a4 (a4 also in "other"). native: rep0 C W W, rep1 C W W, rep2 C U W
#   -> 1/3 each -> 33.33 ± 0. egip: a1 CCC a2 CCW a4 CWU -> 3/3, 2/3, 1/3 -> mean 66.67,
#   SD sqrt((33.33^2 + 0 + 33.33^2) / 2) = 33.33.
# etiology = a3: native CWC -> 100, 0, 100 -> 66.67, SD sqrt((1111.1+4444.4+1111.1)/2)
#   = 57.74; egip WWW -> 0 ± 0.  other = a4: native WWW -> 0; egip CWU -> 33.33 ± 57.74.


def test_accuracy_table_by_stratum(runs):
    table = accuracy_table(runs, by="question_type")
    md = table.to_markdown()
    assert BY_QUESTION_TYPE_MD_ROWS in md
    assert "beta" not in md  # beta has no question_type strata
    rows = list(csv.DictReader(io.StringIO(table.to_csv())))
    other = next(r for r in rows if r["method"] == "egip" and r["stratum"] == "other")
    assert other["per_repetition"] == "100.0;0.0;0.0" and other["coverage"] == "66.666667"
    with pytest.raises(RunsError, match="no case has stratum 'specialty'; strata in these "
                                        "logs: question_type"):
        accuracy_table(runs, by="specialty")


def test_accuracy_table_missing_cells_repetitions_and_single_repetition(tmp_path, logs):
    # native on alpha only, egip on beta only; egip lacks b4 rep 2; "one" has 1 repetition
    holes = write_log(tmp_path / "holes.jsonl", log_lines(
        "beta", "egip", {"b1": "CCC", "b2": "CCC", "b3": "CCC", "b4": "WW-"}))
    single = write_log(tmp_path / "single.jsonl",
                       log_lines("beta", "one", {"b1": "C", "b2": "W", "b3": "U", "b4": "W"}))
    table = accuracy_table(load_runs([logs["native_alpha"], holes, single]))
    rows = {row[0]: row for row in table.rows}
    assert rows["native"] == ("native", "41.67 ± 14.43", "–", "91.67", "–")
    # egip/beta: b4 rep 2 is scheduled (4 x 3 in the lines) but missing: not correct
    #   (EGIP 4.1) -> rep0 3/4, rep1 3/4, rep2 3/4 = 75, 75, 75 -> 75.00 ± 0.00; coverage:
    #   11 answered of 12 scheduled = 91.67
    assert rows["egip"] == ("egip", "–", "75.00 ± 0.00", "–", "91.67")
    # one/beta: 1/4 correct, one repetition -> no SD; coverage 3/4
    assert rows["one"] == ("one", "–", "25.00 ± –", "–", "75.00")
    notes = "\n".join(table.notes)
    assert "1 scheduled episodes missing from egip (counted as not correct)" in notes
    assert "a single repetition has no SD" in notes
    assert "no run of that method there" in notes
    assert "beta egip 4 × 3, one 4 × 1" in notes


# ---------------------------------------------------------------- comparison table
COMPARISON_HEADER = (
    "| Dataset | Method | Baseline | Cases | Baseline (%) | Method (%) | Δ (pp) | "
    "Paired 95% CI | Holm p | U base | U method | Correction (%) | Regression (%) |\n"
    "|:---|:---|:---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
# alpha: case means native 1, 0, 2/3, 0 and egip 1, 2/3, 0, 1/3, so d = 0, 2/3, -2/3, 1/3
#   and Δ = 100 * (1/3) / 4 = +8.33 (= 50.00 - 41.67). Every sign pattern gives
#   |sum(s*d)| >= 1/3 = |sum(d)|, so the sign-flip p is exactly 1. Majority verdicts:
#   native right on a1, a3 (N_V+ = 2), wrong on a2, a4 (N_V- = 2); egip right on a1, a2.
#   N_fix = 1 (a2), N_reg = 1 (a3): correction 1/2, regression 1/2. U: a2 rep2 / a4 rep2.
# beta: d = 0, 0, 1, 0 -> Δ = +25.00; |T*| = |T| for every sign pattern -> p = 1.
#   Bootstrap mean = k/4 with k ~ Binomial(4, 1/4): P(k = 0) = 0.316 > 2.5%, P(k <= 2) =
#   0.949 < 97.5% <= P(k <= 3) -> CI [0, 75]. N_fix = 1 (b3) of N_V- = 2; N_reg 0 of 2.
COMPARISON_ROWS = (
    "| alpha | egip | native | 4 | 41.67 | 50.00 | +8.33 | {alpha_ci} | 1.0000 | 1 | 1 | "
    "50.00 (1/2) | 50.00 (1/2) |\n"
    "| beta | egip | native | 4 | 50.00 | 75.00 | +25.00 | [0.00, 75.00] | 1.0000 | 0 | 0 | "
    "50.00 (1/2) | 0.00 (0/2) |\n")


def exact_bootstrap_quantiles(d, q):
    """Quantiles of the exact bootstrap distribution of mean(d) (all n^n resamples)."""
    means = sorted(sum(c) / len(d) for c in itertools.product(d, repeat=len(d)))
    return [100 * np.quantile(means, x) for x in q]


def test_comparison_table_markdown_and_csv(runs):
    table = comparison_table(pair_runs(runs, "native"), n_resamples=10_000, seed=0)
    alpha = table.data[0]
    md = table.to_markdown()
    assert md.startswith("**Paired comparisons against the baseline (95% CI, "
                         "Holm-adjusted sign-flip p)**\n\n" + COMPARISON_HEADER)
    alpha_ci = f"[{alpha.ci.low:.2f}, {alpha.ci.high:.2f}]"
    assert COMPARISON_HEADER + COMPARISON_ROWS.format(alpha_ci=alpha_ci) in md
    assert "Holm-adjusted over the 2 comparison(s)" in md
    # the alpha interval agrees with the exact bootstrap distribution of mean(d)
    low, high = exact_bootstrap_quantiles([0, 2 / 3, -2 / 3, 1 / 3], [0.025, 0.975])
    assert abs(alpha.ci.low - low) <= 100 / 12 + 1e-9
    assert abs(alpha.ci.high - high) <= 100 / 12 + 1e-9
    assert alpha.ci.low <= alpha.ci.difference <= alpha.ci.high
    rows = list(csv.DictReader(io.StringIO(table.to_csv())))
    assert [(r["dataset"], r["method"], r["baseline"], r["n_cases"], r["difference_pp"],
             r["p_value"], r["p_holm"], r["u_baseline"], r["u_method"], r["n_fix"],
             r["n_baseline_wrong"], r["correction"], r["n_reg"], r["n_baseline_right"],
             r["regression"]) for r in rows] == [
        ("alpha", "egip", "native", "4", "8.333333", "1.0", "1.0", "1", "1", "1", "2",
         "50.0", "1", "2", "50.0"),
        ("beta", "egip", "native", "4", "25.0", "1.0", "1.0", "0", "0", "1", "2", "50.0",
         "0", "2", "0.0"),
    ]
    assert (rows[1]["ci_low"], rows[1]["ci_high"]) == ("0.0", "75.0")


def test_comparison_is_reproducible_and_independent_of_the_other_rows(runs):
    pairs = pair_runs(runs, "native")
    both = comparison_table(pairs, n_resamples=2_000, seed=7)
    again = comparison_table(pairs, n_resamples=2_000, seed=7)
    alone = comparison_table(pairs[:1], n_resamples=2_000, seed=7)
    assert both.csv_rows == again.csv_rows
    assert both.data[0].ci == alone.data[0].ci


def test_holm_adjusts_over_every_comparison_of_the_call(tmp_path):
    # 10 cases, baseline always wrong and method always right on two datasets: every
    # d_i = 1, so |T*| >= |T| only for the all-plus / all-minus sign patterns:
    # p ~ 2 / 2^10 = 0.00195 (Monte Carlo, plus the observed statistic).
    paths = []
    for ds in ("x", "y"):
        cases = {f"{ds}{i}": "WWW" for i in range(10)}
        paths.append(write_log(tmp_path / f"base_{ds}.jsonl", log_lines(ds, "base", cases)))
        paths.append(write_log(tmp_path / f"m_{ds}.jsonl", log_lines(
            ds, "m", dict.fromkeys(cases, "CCC"))))
    table = comparison_table(pair_runs(load_runs(paths), "base"), n_resamples=1_000,
                             n_flips=20_000, seed=1)
    raw = [c.p_value for c in table.data]
    assert all(abs(p - 2 / 1024) < 0.0015 for p in raw)
    np.testing.assert_allclose([c.p_holm for c in table.data], holm(raw))
    # Holm with m = 2: the smaller p is doubled, the larger is max(itself, that)
    assert min(c.p_holm for c in table.data) == pytest.approx(2 * min(raw))
    assert max(c.p_holm for c in table.data) == pytest.approx(max(max(raw), 2 * min(raw)))
    # every paired difference is +100: degenerate CI [100, 100], noted
    assert all((c.ci.low, c.ci.high, c.ci.degenerate) == (100.0, 100.0, True)
               for c in table.data)
    assert "degenerate CI (every paired difference is equal)" in "\n".join(table.notes)
    # correction: all 10 baseline-wrong cases fixed; regression undefined (N_V+ = 0)
    assert table.rows[0][-2:] == ("100.00 (10/10)", "– (0/0)")
    assert any("undefined" in n for n in table.notes)


def test_comparison_table_intersect_reports_dropped_cases(tmp_path, logs):
    partial = write_log(tmp_path / "partial.jsonl", log_lines(
        "alpha", "egip", {k: v for k, v in EGIP_ALPHA.items() if k != "a4"}))
    runs = load_runs([logs["native_alpha"], partial])
    with pytest.raises(CaseMismatchError, match="missing from 'egip': a4"):
        comparison_table(pair_runs(runs, "native"))
    table = comparison_table(pair_runs(runs, "native"), intersect=True, n_resamples=500)
    (comp,) = table.data
    # a1..a3: d = 0, 2/3, -2/3 -> Δ 0; native majority right on a1, a3; U only a2 rep2
    assert (comp.n_cases, comp.n_dropped, comp.u_base, comp.u_method) == (3, 1, 1, 0)
    assert comp.ci.difference == pytest.approx(0.0)
    assert "alpha, egip vs native: 1 case(s) dropped to intersect the case sets " \
           "(1 only in 'native')." in table.notes


def test_pair_runs_errors(runs, logs):
    with pytest.raises(RunsError, match="nothing to compare"):
        pair_runs([r for r in runs if r.label == "native"], "native")
    only_alpha_base = [r for r in runs if (r.label, r.dataset) != ("native", "beta")]
    with pytest.raises(RunsError, match="no baseline run 'native' on dataset 'beta'"):
        pair_runs(only_alpha_base, "native")


def test_accuracy_ci_is_a_case_bootstrap_of_the_run(runs):
    x = by_key(runs)[("native", "beta")].matrix()  # case means 1, 1, 0, 0
    ci = accuracy_ci(x, n_resamples=5_000, seed=0)
    assert ci.difference == pytest.approx(50.0)
    # mean of 4 draws from {1, 1, 0, 0}: k/4 with k ~ Binomial(4, 1/2); P(k = 0) =
    # 0.0625 > 2.5% -> low 0; P(k <= 3) = 0.9375 < 97.5% -> high 100
    assert (ci.low, ci.high) == (0.0, 100.0)


# ------------------------------------------------------------------------- plots
def check_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) > 1024, path


def test_plots_write_valid_pngs(tmp_path, runs):
    pytest.importorskip("matplotlib")
    cells = plot_accuracy(accuracy_table(runs), tmp_path / "fig" / "accuracy.png",
                          n_resamples=1_000)
    check_png(tmp_path / "fig" / "accuracy.png")
    assert len(cells) == 4 and all(ci.n_resamples == 1_000 for _, ci in cells)
    table = comparison_table(pair_runs(runs, "native"), n_resamples=500)
    assert plot_correction_regression(table, tmp_path / "cr.png") == tmp_path / "cr.png"
    check_png(tmp_path / "cr.png")
    plot_accuracy(accuracy_table(runs, by="question_type"), tmp_path / "strata.png",
                  n_resamples=200)
    check_png(tmp_path / "strata.png")
    with pytest.raises(ValueError, match="accuracy table"):
        plot_accuracy(table, tmp_path / "wrong.png")


def test_plots_without_matplotlib_say_how_to_install_it(tmp_path, runs, monkeypatch):
    table = accuracy_table(runs)
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with pytest.raises(PlotDependencyError,
            match=r"pip install -e '\.\[plot\]' in a clinenv clone"):
        plot_accuracy(table, tmp_path / "a.png")
    assert not (tmp_path / "a.png").exists()



# ------------------------------------------------------- incomplete logs (schedule)
def test_old_log_without_schedule_fields_infers_it_and_says_so(tmp_path):
    # b4 has no rep 2 and the lines do not record the schedule: inferred 4 cases x 3
    old = write_log(tmp_path / "old.jsonl", log_lines(
        "beta", "egip", {"b1": "CCC", "b2": "CCC", "b3": "CCC", "b4": "WW-"},
        schedule=False))
    (run,) = load_runs([old])
    assert run.schedule_inferred and (run.n_cases_scheduled, run.n_repetitions) == (4, 3)
    table = accuracy_table([run])
    assert table.rows[0][1] == "75.00 ± 0.00"
    notes = "\n".join(table.notes)
    assert "1 scheduled episodes missing from egip (counted as not correct)" in notes
    assert "inferred as the cases seen × (largest repetition + 1) = 4 × 3" in notes


def test_log_cut_mid_repetition_counts_missing_episodes_as_not_correct(tmp_path):
    # 5 cases x 3 repetitions scheduled; the log is cut after 7 lines (rep 0 complete,
    # rep 1 has c1, c2). Baseline complete.
    method_grid = {"c1": "CCC", "c2": "CWC", "c3": "WCC", "c4": "CCW", "c5": "UCC"}
    base_grid = {"c1": "CWW", "c2": "WWW", "c3": "CWW", "c4": "CCC", "c5": "WWW"}
    cut = log_lines("gamma", "egip", method_grid)[:7]
    assert all(ln["n_cases_scheduled"] == 5 and ln["n_repetitions"] == 3 for ln in cut)
    method = write_log(tmp_path / "egip.jsonl", cut)
    base = write_log(tmp_path / "native.jsonl", log_lines("gamma", "native", base_grid))
    runs = load_runs([base, method])
    m = runs[1]
    assert not m.schedule_inferred and m.n_missing() == 8
    # matrix by hand: rep0 C C W C U -> 1 1 0 1 0; rep1 C W (then missing) -> 1 0 0 0 0;
    #   rep2 all missing -> 0
    expected = np.array([[1, 1, 0], [1, 0, 0], [0, 0, 0], [1, 0, 0], [0, 0, 0]], float)
    np.testing.assert_array_equal(m.matrix(), expected)
    cells = {c.label: c for c in accuracy_cells(runs)}
    # per repetition 3/5, 1/5, 0/5 -> 60, 20, 0 -> mean 26.67, SD 30.55; pooled 4/15
    assert cells["egip"].mean == pytest.approx(80 / 3)
    assert cells["egip"].sd == pytest.approx(np.std([60, 20, 0], ddof=1))
    assert cells["egip"].accuracy == pytest.approx(100 * 4 / 15)
    assert cells["egip"].coverage == pytest.approx(100 * 6 / 15)  # 6 answered lines
    table = accuracy_table(runs)
    assert "8 scheduled episodes missing from egip (counted as not correct)" in "\n".join(
        table.notes)
    # comparison: baseline case means 1/3, 0, 1/3, 1, 0 -> 33.33; method 2/3, 1/3, 0,
    #   1/3, 0 -> 26.67; Delta = -6.67 and Method - Baseline == Delta
    comp = comparison_table(pair_runs(runs, "native"), n_resamples=2000, n_flips=2000)
    (c,) = comp.data
    assert c.base_accuracy == pytest.approx(100 / 3)
    assert c.method_accuracy == pytest.approx(80 / 3)
    assert c.method_accuracy - c.base_accuracy == pytest.approx(c.ci.difference)
    row = comp.rows[0]
    assert row[4:7] == ("33.33", "26.67", "-6.67")
    assert "8 scheduled episodes missing from egip (counted as not correct)" in "\n".join(
        comp.notes)


def test_case_with_no_line_is_a_placeholder_paired_by_index(tmp_path):
    # cut inside repetition 0: only c1, c2 have lines; c3 is scheduled but never seen
    grid = {"c1": "CC", "c2": "CC", "c3": "CC"}
    method = write_log(tmp_path / "egip.jsonl", log_lines("gamma", "egip", grid)[:2])
    base = write_log(tmp_path / "native.jsonl", log_lines("gamma", "native", grid))
    runs = load_runs([base, method])
    assert runs[1].case_ids == ("c1", "c2", "<case 2>") and runs[1].n_missing() == 4
    al = align(runs[0], runs[1])
    assert al.case_ids == ("c1", "c2", "c3")
    np.testing.assert_array_equal(al.b, [[1, 0], [1, 0], [0, 0]])


def test_explicit_pairs_and_holm_over_all_comparisons(tmp_path):
    grid_a = {"x1": "CC", "x2": "WW", "x3": "CW"}
    grid_b = {"x1": "CC", "x2": "CC", "x3": "CC"}
    paths = [write_log(tmp_path / f"{name}.jsonl", log_lines("d", name, grid, run_seed=i))
             for i, (name, grid) in enumerate([("native1", grid_a), ("direct1", grid_b),
                                               ("native2", grid_b), ("direct2", grid_a)])]
    runs = load_runs(paths)
    pairs = pair_runs(runs, pairs=[("direct1", "native1"), ("direct2", "native2")])
    assert [(b.label, m.label) for b, m in pairs] == [("native1", "direct1"),
                                                      ("native2", "direct2")]
    comps = compare(pairs, n_resamples=500, n_flips=500)
    assert [c.ci.difference for c in comps] == pytest.approx([50.0, -50.0])
    np.testing.assert_allclose([c.p_holm for c in comps], holm([c.p_value for c in comps]))
    with pytest.raises(RunsError, match="no run is labelled 'nope'"):
        pair_runs(runs, pairs=[("nope", "native1")])
    with pytest.raises(RunsError, match="its own baseline"):
        pair_runs(runs, pairs=[("native1", "native1")])


def test_comparison_by_stratum_is_one_row_per_stratum_and_pair(runs):
    alpha = [r for r in runs if r.dataset == "alpha"]
    table = comparison_table(pair_runs(alpha, "native"), n_resamples=500, n_flips=500,
                             by="question_type")
    strata = [(c.stratum, c.n_cases) for c in table.data]
    # diagnosis: a1, a2, a4; etiology: a3; other: a4
    assert strata == [("diagnosis", 3), ("etiology", 1), ("other", 1)]
    assert table.header[:3] == ("Dataset", "question_type", "Method")
    assert table.csv_header[:2] == ("dataset", "stratum")
    # diagnosis: d = 0, 2/3, 1/3 -> +33.33; etiology: d = -2/3 -> -66.67; other: +33.33
    assert [c.ci.difference for c in table.data] == pytest.approx([100 / 3, -200 / 3,
                                                                   100 / 3])
    np.testing.assert_allclose([c.p_holm for c in table.data],
                               holm([c.p_value for c in table.data]))
    with pytest.raises(RunsError, match="no paired case has stratum"):
        comparison_table(pair_runs(alpha, "native"), by="specialty")


def test_label_makes_doctor_name_optional_and_folders_are_refused(tmp_path):
    lines = log_lines("beta", "x", {"b1": "C"})
    for line in lines:
        del line["doctor"]
    path = write_log(tmp_path / "anon.jsonl", lines)
    with pytest.raises(RunsError, match="missing doctor.name"):
        load_runs([path])
    (run,) = load_runs([f"mine={path}"])
    assert run.label == "mine"
    with pytest.raises(RunsError, match="is a folder"):
        load_runs([tmp_path])


class _OneHotEncoder:
    """Equal texts -> the same unit vector, different texts -> orthogonal vectors."""

    def __init__(self):
        self.index: dict[str, int] = {}

    def encode(self, texts):
        for t in texts:
            self.index.setdefault(t, len(self.index))
        out = np.zeros((len(texts), 64))
        for row, t in enumerate(texts):
            out[row, self.index[t]] = 1.0
        return out


def test_similarity_column_with_an_encoder(tmp_path):
    # 2 cases x 2 repetitions: a1 "CW", a2 "UC". A correct answer repeats the target
    # (cosine 1), a wrong one differs (0), the unscored one is missing (0):
    # similarity = 100 * 2 / 4 = 50.
    lines = log_lines("alpha", "native", {"a1": "CW", "a2": "UC"})
    for line in lines:
        line["target"] = f"target {line['case_id']}"
        if line["verdict"] == "correct":
            line["answer"] = line["target"]
    runs = load_runs([write_log(tmp_path / "sim.jsonl", lines)])
    table = accuracy_table(runs, encoder=_OneHotEncoder(), similarity_name="sim")
    assert table.header[-1] == "alpha sim"
    assert table.rows[0][-1] == "50.00"
    assert table.data[0].similarity == pytest.approx(50.0)
    no_targets = load_runs([write_log(tmp_path / "old.jsonl",
                                      log_lines("alpha", "native", {"a1": "CW"}))])
    assert accuracy_table(no_targets, encoder=_OneHotEncoder()).rows[0][-1] == "–"
