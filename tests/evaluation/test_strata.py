"""Strata derived from the lines for ``--by`` (clinenv.evaluation.strata): the episode
stratum ``exam_noise``, by hand on a 3-case x 2-repetition log."""

from __future__ import annotations

import importlib.util
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
    assert noised.per_repetition == pytest.approx((50.0, 100.0))  # the CSV's column
    # the table's number is the pooled one too (repetitions hold unequal shares): no SD
    assert noised.mean == pytest.approx(200 / 3) and math.isnan(noised.sd)
    # clean: a1 r1 W, a3 r0 C; a3's missing second episode is in no stratum
    assert (clean.n_cases, clean.n_episodes, clean.n_correct, clean.n_missing) == \
        (2, 2, 1, 0)
    assert clean.accuracy == clean.mean == pytest.approx(50.0)
    assert clean.per_repetition == pytest.approx((100.0, 0.0))
    assert clean.coverage == pytest.approx(100.0)
    # the whole run still counts the missing episode: 3 correct of 6 scheduled
    (whole,) = accuracy_cells(runs)
    assert (whole.n_correct, whole.n_missing, whole.accuracy) == (3, 1, 50.0)


def test_stratum_of_one_line():
    noisy = {"env_spec": SPEC}
    assert exam_noise_stratum({**noisy, "events": [CLEAN, NOISED]}) == "noised"
    assert exam_noise_stratum({**noisy, "events": [CLEAN]}) == "clean"
    assert exam_noise_stratum(noisy) == "clean"
    # a result still delayed when the episode ended: only the interface note is logged
    pending = {"turn": 3, "source": "interface", "kind": "result_delayed",
               "text": "The result of T1 is not back yet."}
    assert exam_noise_stratum({**noisy, "events": [CLEAN, pending]}) == "noised"
    # a line of a run without exam noise is in no stratum
    assert exam_noise_stratum({"env_spec": {"kwargs": {}}, "events": [NOISED]}) is None
    assert exam_noise_stratum({"events": [CLEAN]}) is None


def test_logs_without_exam_noise_are_refused(tmp_path):
    runs = load_runs([noisy_log(tmp_path, spec={"id": "EGIP-alpha-v0", "kwargs": {}})])
    with pytest.raises(RunsError, match=r"no line of .* ran with exam noise \(clinenv run "
                                        r"--exam-noise\)"):
        with_derived_strata(runs, EXAM_NOISE)


def test_other_by_values_leave_the_runs_as_they_are(tmp_path):
    runs = load_runs([noisy_log(tmp_path)])
    assert with_derived_strata(runs, None) == runs
    assert with_derived_strata(runs, "question_type") == runs


def test_a_run_without_noise_is_in_no_stratum(tmp_path):
    """Logs of a noised run and of a plain one: the plain run's episodes are neither
    'noised' nor 'clean' (its cells are absent), the noised run's are as alone."""
    plain = log_lines("alpha", "plain-doctor", {"a1": "CC", "a2": "CC", "a3": "CC"})
    for line in plain:
        line.update(env_spec={"id": "EGIP-alpha-v0", "kwargs": {}}, events=[CLEAN])
    path = write_log(tmp_path / "plain.jsonl", plain)
    runs = with_derived_strata(load_runs([noisy_log(tmp_path), path]), EXAM_NOISE)
    cells = accuracy_cells(runs, by=EXAM_NOISE)
    assert {(c.label, c.stratum, c.n_episodes) for c in cells} == {
        ("scripted", "noised", 3), ("scripted", "clean", 2)}


def test_cli_eval_by_exam_noise_and_compare_refuses_it(tmp_path):
    log = noisy_log(tmp_path)
    main_cli(tmp_path, "eval", str(log), "--by", EXAM_NOISE, "--out-dir", "reports")
    rows = read_csv(tmp_path / "reports" / "accuracy_by_exam_noise.csv")
    assert {(r["stratum"], r["n_episodes"], r["n_correct"], r["n_missing"]) for r in rows} \
        == {("noised", "3", "2", "0"), ("clean", "2", "1", "0")}
    md = (tmp_path / "reports" / "accuracy_by_exam_noise.md").read_text(encoding="utf-8")
    assert "| alpha | noised | 2 | 66.67 ± –" in md and "| alpha | clean | 2 | 50.00 ± –" in md
    assert "is a stratum of episodes" in md
    assert "missing from" not in md  # a3's missing episode is in no stratum
    if importlib.util.find_spec("matplotlib") is not None:
        proc = main_cli(tmp_path, "eval", str(log), "--by", EXAM_NOISE, "--plot",
                        "--out-dir", "figures")
        assert "no figure per stratum" in proc.stderr
        assert (tmp_path / "figures" / "accuracy.png").is_file()
        assert not (tmp_path / "figures" / "accuracy_by_exam_noise.png").exists()
    err = main_cli(tmp_path, "compare", f"a={log}", f"b={log}", "--by", EXAM_NOISE,
                   code=2)
    assert "use clinenv eval --by exam_noise" in one_error_line(err)
