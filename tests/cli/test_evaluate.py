"""``clinenv eval`` and ``clinenv compare`` as real subprocesses (``python -m clinenv``);
the input and argument errors through :func:`clinenv.cli.main` in this process
(:func:`main_cli`, the same checks on exit code and stderr)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clinenv.testing.cli_calls import main_cli, one_error_line, read_csv, run_cli
from clinenv.testing.eval_logs import (
    EGIP_ALPHA,
    NATIVE_ALPHA,
    log_lines,
    write_fixture_logs,
    write_log,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def check_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) > 1024, path


# --------------------------------------------------------------- hand-made logs
@pytest.fixture
def logs(tmp_path):
    return write_fixture_logs(tmp_path / "logs")


def test_eval_prints_and_writes_the_accuracy_table(tmp_path, logs):
    proc = run_cli(tmp_path, "eval", str(logs["native_alpha"]), str(logs["native_beta"]),
                   f"EGIP Direct={logs['egip_alpha']}", f"EGIP Direct={logs['egip_beta']}",
                   "--out-dir", "out")
    # values worked out in tests/evaluation/test_reports.py
    rows = [line.split() for line in proc.stdout.splitlines()]
    assert ["native", "41.67", "+/-", "14.43", "50.00", "+/-", "0.00", "91.67",
            "100.00"] in rows
    assert ["EGIP", "Direct", "50.00", "+/-", "25.00", "75.00", "+/-", "0.00", "91.67",
            "100.00"] in rows
    assert "wrote out/accuracy.md, out/accuracy.csv" in proc.stdout
    md = (tmp_path / "out" / "accuracy.md").read_text(encoding="utf-8")
    assert "| EGIP Direct | 50.00 ± 25.00 | 75.00 ± 0.00 | 91.67 | 100.00 |" in md
    rows = read_csv(tmp_path / "out" / "accuracy.csv")
    assert [(r["method"], r["dataset"], r["accuracy_mean"]) for r in rows] == [
        ("native", "alpha", "41.666667"), ("native", "beta", "50.0"),
        ("EGIP Direct", "alpha", "50.0"), ("EGIP Direct", "beta", "75.0")]
    assert not (tmp_path / "out" / "accuracy.png").exists()


def test_eval_by_stratum_writes_a_second_table(tmp_path, logs):
    proc = run_cli(tmp_path, "eval", str(logs["native_alpha"]), str(logs["egip_alpha"]),
                   "--by", "question_type", "--out-dir", "out")
    assert ["alpha", "etiology", "1", "66.67", "+/-", "57.74", "0.00", "+/-", "0.00"] in [
        line.split() for line in proc.stdout.splitlines()]
    md = (tmp_path / "out" / "accuracy_by_question_type.md").read_text(encoding="utf-8")
    assert "| alpha | diagnosis | 3 | 33.33 ± 0.00 | 66.67 ± 33.33 |" in md
    assert (tmp_path / "out" / "accuracy.md").is_file()
    err = main_cli(tmp_path, "eval", str(logs["native_alpha"]), "--by", "specialty", code=2)
    assert "no case has stratum 'specialty'" in one_error_line(err)


def test_compare_prints_and_writes_the_comparison_table(tmp_path, logs):
    args = ("compare", str(logs["native_alpha"]), str(logs["native_beta"]),
            str(logs["egip_alpha"]), str(logs["egip_beta"]), "--resamples", "3000",
            "--flips", "3000", "--seed", "5", "--out-dir", "out")
    proc = run_cli(tmp_path, *args)
    assert "Holm-adjusted over the 2 comparison(s)" in proc.stdout
    assert "(3,000 resamples;" in proc.stdout and "seed 5" in proc.stdout
    rows = read_csv(tmp_path / "out" / "comparison.csv")
    assert [(r["dataset"], r["method"], r["baseline"], r["difference_pp"], r["p_holm"],
             r["correction"], r["regression"], r["n_resamples"], r["n_flips"])
            for r in rows] == [
        ("alpha", "egip", "native", "8.333333", "1.0", "50.0", "50.0", "3000", "3000"),
        ("beta", "egip", "native", "25.0", "1.0", "50.0", "0.0", "3000", "3000")]
    md = (tmp_path / "out" / "comparison.md").read_text(encoding="utf-8")
    assert "| beta | egip | native | 4 | 50.00 | 75.00 | +25.00 | [0.00, 75.00] | 1.0000 " \
           "| 0 | 0 | 50.00 (1/2) | 0.00 (0/2) |" in md
    again = run_cli(tmp_path, *args)  # same seed, same output; the tables are replaced
    assert again.stdout == proc.stdout + "replaced 2 earlier files in out\n"


def test_compare_refuses_different_case_sets_unless_intersect(tmp_path, logs):
    partial = write_log(tmp_path / "partial.jsonl", log_lines(
        "alpha", "egip", {k: v for k, v in EGIP_ALPHA.items() if k != "a4"}))
    err = main_cli(tmp_path, "compare", str(logs["native_alpha"]), str(partial), code=2)
    line = one_error_line(err)
    assert "different case sets on 'alpha'" in line and "missing from 'egip': a4" in line
    assert "--intersect" in line
    assert not (tmp_path / "reports").exists()
    proc = run_cli(tmp_path, "compare", str(logs["native_alpha"]), str(partial),
                   "--intersect", "--resamples", "500", "--flips", "500")
    assert "1 case(s) dropped to intersect the case sets (1 only in 'native')" in proc.stdout
    (row,) = read_csv(tmp_path / "reports" / "comparison.csv")
    assert (row["n_cases"], row["n_dropped"]) == ("3", "1")


def test_errors_are_one_line_exit_2(tmp_path, logs):
    mixed = write_log(tmp_path / "mixed.jsonl", log_lines("alpha", "native", NATIVE_ALPHA),
                      log_lines("alpha", "egip", EGIP_ALPHA))
    line = one_error_line(main_cli(tmp_path, "eval", str(mixed), code=2))
    assert f"{mixed}, line 13: mixed runs in one file" in line
    line = one_error_line(main_cli(tmp_path, "eval", "absent.jsonl", code=2))
    assert "absent.jsonl: no such run-log file" in line
    line = one_error_line(main_cli(tmp_path, "compare", str(logs["native_alpha"]), code=2))
    assert "needs a baseline log and at least one method log" in line
    line = one_error_line(main_cli(tmp_path, "compare", str(logs["native_alpha"]),
                                   str(logs["egip_beta"]), code=2))
    assert "no baseline run 'native' on dataset 'beta'" in line
    line = one_error_line(main_cli(tmp_path, "compare", str(logs["native_alpha"]),
                                   str(logs["native_alpha"]), code=2))
    assert "given twice" in line
    usage = main_cli(tmp_path, "compare", str(logs["native_alpha"]), "x", "--resamples",
                     "0", code=2)
    assert "must be >= 1" in usage.stderr


def test_plot_without_matplotlib_is_a_clear_error(tmp_path, logs):
    fake = tmp_path / "fake"
    (fake / "matplotlib").mkdir(parents=True)
    (fake / "matplotlib" / "__init__.py").write_text("raise ImportError('no matplotlib')\n")
    path = os.pathsep.join([str(fake), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = run_cli(tmp_path, "eval", str(logs["native_alpha"]), "--plot", code=2,
                   env_extra={"PYTHONPATH": path})
    assert "pip install -e '.[plot]' in a clinenv clone" in one_error_line(proc)
    # the tables come first: printed and written, only the figure is missing
    assert "native" in proc.stdout
    assert (tmp_path / "reports" / "accuracy.csv").is_file()
    assert not (tmp_path / "reports" / "accuracy.png").exists()


# ------------------------------------------------------------ logs from clinenv run
@pytest.fixture(scope="module")
def demo_logs(tmp_path_factory):
    """The scripted doctor on the demo set, 3 repetitions, from ``clinenv run``; and the
    exploring scripted doctor (exploration 0.3) written with clinenv.runs.run."""
    import gymnasium as gym

    from clinenv.agents.scripted_doctor import ScriptedDoctor
    from clinenv.runs import RunSpec, run

    folder = tmp_path_factory.mktemp("demo")
    run_cli(folder, "run", "--env", "EGIP-Demo-v0", "--repetitions", "3", "--out",
            "base.jsonl", "--quiet")
    env = gym.make("EGIP-Demo-v0")
    try:
        run(lambda: env, lambda: ScriptedDoctor(exploration=0.3),
            RunSpec(out=folder / "explore.jsonl", seed=0, repetitions=3, env_id="EGIP-Demo-v0"))
    finally:
        env.close()
    return folder


def lines_of(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x]


def rep_accuracies(lines: list[dict]) -> list[float]:
    reps = sorted({x["repetition"] for x in lines})
    return [100 * sum(x["verdict"] == "correct" for x in lines if x["repetition"] == r)
            / sum(x["repetition"] == r for x in lines) for r in reps]


def test_eval_and_compare_on_logs_from_clinenv_run(demo_logs):
    import statistics

    base, explore = lines_of(demo_logs / "base.jsonl"), lines_of(demo_logs / "explore.jsonl")
    assert len(base) == len(explore) == 17 * 3
    proc = run_cli(demo_logs, "eval", "base.jsonl", "explore.jsonl", "--out-dir", "out",
                   "--plot", "--resamples", "2000")
    for lines in (base, explore):
        accs = rep_accuracies(lines)
        cell = f"{statistics.mean(accs):.2f} +/- {statistics.stdev(accs):.2f}"
        name = lines[0]["doctor"]["name"]
        assert any(row.split()[0] == name and cell in row for row in proc.stdout.splitlines())
    check_png(demo_logs / "out" / "accuracy.png")
    assert "out/accuracy.png" in proc.stdout

    proc = run_cli(demo_logs, "compare", "base.jsonl", "explore.jsonl", "--out-dir", "out",
                   "--plot", "--resamples", "2000", "--flips", "2000")
    (row,) = read_csv(demo_logs / "out" / "comparison.csv")
    assert (row["dataset"], row["method"], row["baseline"], row["n_cases"]) == (
        "demo", "scripted-explore0.3", "scripted", "17")
    # Δ recomputed from the lines (complete data: difference of pooled accuracies)
    delta = 100 * (sum(x["verdict"] == "correct" for x in explore)
                   - sum(x["verdict"] == "correct" for x in base)) / 51
    assert float(row["difference_pp"]) == pytest.approx(delta, abs=1e-6)
    assert float(row["ci_low"]) <= float(row["difference_pp"]) <= float(row["ci_high"])
    assert 0 < float(row["p_value"]) <= float(row["p_holm"]) <= 1
    check_png(demo_logs / "out" / "comparison.png")
    assert "wrote out/comparison.md, out/comparison.csv, out/comparison.png" in proc.stdout


def test_truncated_log_counts_missing_episodes_as_not_correct(demo_logs):
    # head -n 30 of a 17 x 3 log: repetition 0 complete, repetition 1 has cases 0..12
    lines = lines_of(demo_logs / "explore.jsonl")
    assert all(x["n_cases_scheduled"] == 17 and x["n_repetitions"] == 3 for x in lines)
    cut = demo_logs / "cut.jsonl"
    cut.write_text("".join(json.dumps(x) + "\n" for x in lines[:30]), encoding="utf-8")
    hits = [[x["verdict"] == "correct" for x in lines[:30] if x["repetition"] == r]
            for r in range(3)]
    per_rep = [100 * sum(h) / 17 for h in hits]  # scheduled denominators: 17 each
    import statistics

    proc = run_cli(demo_logs, "eval", "cut.jsonl", "--out-dir", "cut_out")
    (row,) = read_csv(demo_logs / "cut_out" / "accuracy.csv")
    assert float(row["accuracy_mean"]) == pytest.approx(statistics.mean(per_rep))
    assert float(row["accuracy_sd"]) == pytest.approx(statistics.stdev(per_rep))
    assert float(row["accuracy_pooled"]) == pytest.approx(100 * sum(map(sum, hits)) / 51)
    assert (row["n_missing"], row["n_cases"], row["n_repetitions"]) == ("21", "17", "3")
    name = lines[0]["doctor"]["name"]
    assert f"21 scheduled episodes missing from {name} (counted as not correct)" in proc.stdout

    # paired against the complete baseline: Method - Baseline == Delta, same note
    proc = run_cli(demo_logs, "compare", "base.jsonl", "cut.jsonl", "--out-dir", "cut_out",
                   "--resamples", "500", "--flips", "500")
    (row,) = read_csv(demo_logs / "cut_out" / "comparison.csv")
    base = lines_of(demo_logs / "base.jsonl")
    base_acc = 100 * sum(x["verdict"] == "correct" for x in base) / 51
    assert float(row["baseline_accuracy"]) == pytest.approx(base_acc)
    assert float(row["method_accuracy"]) == pytest.approx(100 * sum(map(sum, hits)) / 51)
    assert float(row["method_accuracy"]) - float(row["baseline_accuracy"]) == pytest.approx(
        float(row["difference_pp"]))
    assert f"21 scheduled episodes missing from {name} (counted as not correct)" in proc.stdout


def test_compare_with_explicit_pairs_and_by_stratum(tmp_path, logs):
    # two frameworks on alpha: native/egip and a second pair with the grids swapped
    other_native = write_log(tmp_path / "n2.jsonl", log_lines("alpha", "native2", EGIP_ALPHA,
                                                               run_seed=7))
    other_egip = write_log(tmp_path / "e2.jsonl", log_lines("alpha", "egip2", NATIVE_ALPHA,
                                                             run_seed=7))
    proc = run_cli(tmp_path, "compare", str(logs["native_alpha"]), str(logs["egip_alpha"]),
                   str(other_native), str(other_egip), "--pair", "egip=native",
                   "--pair", "egip2=native2", "--resamples", "500", "--flips", "500")
    rows = read_csv(tmp_path / "reports" / "comparison.csv")
    assert [(r["method"], r["baseline"]) for r in rows] == [("egip", "native"),
                                                            ("egip2", "native2")]
    assert [float(r["difference_pp"]) for r in rows] == pytest.approx([25 / 3, -25 / 3])
    assert "Holm-adjusted over the 2 comparison(s)" in proc.stdout

    proc = run_cli(tmp_path, "compare", str(logs["native_alpha"]), str(logs["egip_alpha"]),
                   "--by", "question_type", "--resamples", "500", "--flips", "500",
                   "--plot")
    rows = read_csv(tmp_path / "reports" / "comparison_by_question_type.csv")
    assert [(r["stratum"], r["n_cases"]) for r in rows] == [
        ("diagnosis", "3"), ("etiology", "1"), ("other", "1")]
    assert "Holm-adjusted over the 3 comparison(s)" in proc.stdout
    check_png(tmp_path / "reports" / "comparison.png")
    check_png(tmp_path / "reports" / "comparison_by_question_type.png")

    proc = main_cli(tmp_path, "compare", str(logs["native_alpha"]), str(logs["egip_alpha"]),
                    "--pair", "egip=nobody", code=2)
    assert "no run is labelled 'nobody'" in one_error_line(proc)
    proc = main_cli(tmp_path, "compare", str(logs["native_alpha"]), str(logs["egip_alpha"]),
                    "--pair", "egip", code=2)
    assert "expected METHOD=BASE" in one_error_line(proc)


def test_eval_by_with_plot_plots_the_stratified_table(tmp_path, logs):
    run_cli(tmp_path, "eval", str(logs["native_alpha"]), str(logs["egip_alpha"]), "--by",
            "question_type", "--plot", "--resamples", "200")
    check_png(tmp_path / "reports" / "accuracy.png")
    check_png(tmp_path / "reports" / "accuracy_by_question_type.png")


def test_small_cli_errors(tmp_path, logs):
    for command in ("eval", "compare"):
        proc = main_cli(tmp_path, command, str(logs["native_alpha"]),
                        str(logs["egip_alpha"]), "--by", "", code=2)
        assert "--by needs a case_strata key" in one_error_line(proc)
    proc = main_cli(tmp_path, "eval", str(logs["native_alpha"].parent), code=2)
    assert "is a folder, not a run-log file" in one_error_line(proc)
    # a log without doctor.name works when named LABEL=path
    lines = log_lines("alpha", "x", NATIVE_ALPHA)
    for line in lines:
        del line["doctor"]
    anon = write_log(tmp_path / "anon.jsonl", lines)
    proc = main_cli(tmp_path, "eval", str(anon), code=2)
    assert "LABEL=path" in one_error_line(proc)
    proc = run_cli(tmp_path, "eval", f"mine={anon}")
    assert any(row.startswith("mine ") for row in proc.stdout.splitlines())


def test_closed_stdout_exits_quietly(tmp_path, logs):
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "clinenv", "eval",
                             str(logs["native_alpha"]), str(logs["egip_alpha"]), "--by",
                             "question_type"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # like `| head -n 0`
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 141
    assert err == ""


def test_eval_similarity_column_from_a_real_run(tmp_path):
    log = tmp_path / "demo.jsonl"
    subprocess.run([sys.executable, "-m", "clinenv", "run", "--env", "EGIP-Demo-v0",
                    "--quiet", "--out", str(log)], check=True, capture_output=True)
    proc = subprocess.run([sys.executable, "-m", "clinenv", "eval", str(log),
                           "--similarity", "lexical", "--out-dir", str(tmp_path / "rep")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "demo lexical similarity" in proc.stdout
    rows = list(csv.DictReader(
        (tmp_path / "rep" / "accuracy.csv").read_text(encoding="utf-8").splitlines()))
    assert 0.0 < float(rows[0]["similarity"]) <= 100.0
