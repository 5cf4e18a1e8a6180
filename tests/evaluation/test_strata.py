"""Strata derived from the lines for ``--by`` (clinenv.evaluation.strata): the episode
stratum ``exam_noise``, by hand on a 3-case x 2-repetition log."""

from __future__ import annotations

import math

import pytest

from clinenv.evaluation.reports import accuracy_cells
from clinenv.evaluation.runs import RunsError, load_runs
from clinenv.evaluation.strata import EXAM_NOISE, exam_noise_stratum, with_derived_strata
from clinenv.testing.cli_calls import main_cli, one_error_line, read_csv
from clinenv.testing.eval_logs import log_lines, write_log

NOISED = {"turn": 2, "exam_id": "T1", "recorded_value": "result not available",
          "result_availability": "unavailable", "source": "measurement", "noise": True}
CLEAN = {"turn": 2, "exam_id": "T1", "recorded_value": "7.1", "source": "measurement"}
SPEC = {"id": "EGIP-alpha-v0", "kwargs": {"exam_noise": {"unavailable": 0.5}}}
#: (case, repetition) whose episode had a result noised; a3's second episode is missing.
NOISED_EPISODES = {("a1", 0), ("a2", 0), ("a2", 1)}


def noisy_log(tmp_path, *, spec=SPEC):
    lines = log_lines("alpha", "scripted", {"a1": "CW", "a2": "WC", "a3": "C-"})
    for line in lines:
        noised = (line["case_id"], line["repetition"]) in NOISED_EPISODES
        line.update(env_spec=spec, events=[NOISED if noised else CLEAN])
    return write_log(tmp_path / "noisy.jsonl", lines)


def test_exam_noise_accuracy_counts_only_the_strata_episodes(tmp_path):
    runs = with_derived_strata(load_runs([noisy_log(tmp_path)]), EXAM_NOISE)
    cells = {c.stratum: c for c in accuracy_cells(runs, by=EXAM_NOISE)}
    assert set(cells) == {"noised", "clean"}
    noised, clean = cells["noised"], cells["clean"]
    # noised: a1 r0 C, a2 r0 W, a2 r1 C -> 2 of 3; rep 0: 1 of 2, rep 1: 1 of 1
    assert (noised.n_cases, noised.n_episodes, noised.n_correct, noised.n_missing) == \
        (2, 3, 2, 0)
    assert noised.accuracy == pytest.approx(200 / 3)
    assert noised.per_repetition == pytest.approx((50.0, 100.0))
    assert noised.mean == pytest.approx(75.0) and noised.sd == pytest.approx(
        math.sqrt(2 * 25.0 ** 2))
    # clean: a1 r1 W, a3 r0 C; a3's missing second episode is in no stratum
    assert (clean.n_cases, clean.n_episodes, clean.n_correct, clean.n_missing) == \
        (2, 2, 1, 0)
    assert clean.accuracy == pytest.approx(50.0)
    assert clean.per_repetition == pytest.approx((100.0, 0.0))
    assert clean.coverage == pytest.approx(100.0)
    # the whole run still counts the missing episode: 3 correct of 6 scheduled
    (whole,) = accuracy_cells(runs)
    assert (whole.n_correct, whole.n_missing, whole.accuracy) == (3, 1, 50.0)


def test_stratum_of_one_line():
    assert exam_noise_stratum({"events": [CLEAN, NOISED]}) == "noised"
    assert exam_noise_stratum({"events": [CLEAN]}) == "clean"
    assert exam_noise_stratum({}) == "clean"


def test_logs_without_exam_noise_are_refused(tmp_path):
    runs = load_runs([noisy_log(tmp_path, spec={"id": "EGIP-alpha-v0", "kwargs": {}})])
    with pytest.raises(RunsError, match=r"no line of .* ran with exam noise \(clinenv run "
                                        r"--exam-noise\)"):
        with_derived_strata(runs, EXAM_NOISE)


def test_other_by_values_leave_the_runs_as_they_are(tmp_path):
    runs = load_runs([noisy_log(tmp_path)])
    assert with_derived_strata(runs, None) == runs
    assert with_derived_strata(runs, "question_type") == runs


def test_cli_eval_by_exam_noise_and_compare_refuses_it(tmp_path):
    log = noisy_log(tmp_path)
    main_cli(tmp_path, "eval", str(log), "--by", EXAM_NOISE, "--out-dir", "reports")
    rows = read_csv(tmp_path / "reports" / "accuracy_by_exam_noise.csv")
    assert {(r["stratum"], r["n_episodes"], r["n_correct"], r["n_missing"]) for r in rows} \
        == {("noised", "3", "2", "0"), ("clean", "2", "1", "0")}
    err = main_cli(tmp_path, "compare", f"a={log}", f"b={log}", "--by", EXAM_NOISE,
                   code=2)
    assert "use clinenv eval --by exam_noise" in one_error_line(err)
