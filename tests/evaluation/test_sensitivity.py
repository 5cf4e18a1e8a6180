"""EGIP appendix B shared-answer sensitivity: effect bounds and conservative envelope.

Expected values are worked out by hand below and cross-checked by brute force over every
assignment of the unknown labels (2^K harmonized matrices scored with the plain paired
difference), independently of the closed form the module uses.
"""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from clinenv.evaluation import (
    compare,
    effect_bounds,
    label_pool,
    load_runs,
    pair_runs,
    paired_differences,
    sensitivity,
    sensitivity_table,
)
from clinenv.evaluation.comparison import _seed_for
from clinenv.runlog import SCHEMA
from clinenv.scoring import normalize_answer
from clinenv.testing.cli_calls import main_cli, run_cli

# (case, repetition, answer, verdict, judge_verdict); None answer = no answer.
# Hand analysis (pool = native + egip):
#  c1: "Flu" wrong / "flu." correct in native, "**Flu**" correct in egip -> key flu has
#      labels {0, 1}: unresolved x1, weight 1/2 (egip) - 2/2 (native) = -1/2; egip's
#      "Measles" is resolved correct: known +1/2. l1 = 0, u1 = 1/2. Automated d1 = +1/2.
#  c2: "Asthma" with an unreadable judge reply in both methods (absent label): weight
#      +1/2 - 1/2 = 0, a shared answer that cancels; "COPD" wrong. l2 = u2 = 0; d2 = 0.
#  c3: native "Gout" correct twice (resolved 1); egip "Pseudogout" wrong + unreadable ->
#      resolved 0, so egip's unscored output is harmonized to 0. l3 = u3 = -1; d3 = -1.
#  Automated Δ = (1/2 + 0 - 1) / 3 = -1/6; bounds [(0 + 0 - 1) / 3, (1/2 + 0 - 1) / 3].
NATIVE = [("c1", 0, "Flu", "wrong", None), ("c1", 1, "flu.", "correct", None),
          ("c2", 0, "Asthma", "unscored", "unparsed"), ("c2", 1, None, "unscored", None),
          ("c3", 0, "Gout", "correct", None), ("c3", 1, "Gout", "correct", None)]
EGIP = [("c1", 0, "**Flu**", "correct", None), ("c1", 1, "Measles", "correct", None),
        ("c2", 0, "asthma", "unscored", "unparsed"), ("c2", 1, "COPD", "wrong", None),
        ("c3", 0, "Pseudogout", "wrong", None),
        ("c3", 1, "Pseudogout", "unscored", "unparsed")]
# A third run in the pool scores "Pseudogout" correct: the key conflicts, egip's c3
# weight +2/2 becomes unknown, so u3 = -1 + 1 = 0 and the upper bound (1/2 + 0 + 0) / 3.
VOTE = [("c1", 0, "Flu", "wrong", None), ("c2", 0, "Asthma", "wrong", None),
        ("c3", 0, "pseudogout", "correct", None)]


def lines(doctor: str, rows, *, dataset: str = "d", n_reps: int = 2,
          strata: dict | None = None) -> list[dict]:
    cases = list(dict.fromkeys(r[0] for r in rows))
    out = []
    for case, rep, answer, verdict, judge in rows:
        line = {"schema": SCHEMA, "case_id": case, "case_index": cases.index(case),
                "repetition": rep, "seed": rep, "run_seed": 0,
                "env_id": f"EGIP-{dataset}-v0", "env_spec": None, "dataset": dataset,
                "dataset_sha256": f"sha-{dataset}", "doctor": {"name": doctor, "config": {}},
                "turns": 3, "n_exams_requested": 1, "answer": answer, "verdict": verdict,
                "correct": verdict == "correct",
                "answer_status": "no_answer" if answer is None else "answer",
                "n_cases_scheduled": len(cases), "n_repetitions": n_reps,
                "case_strata": {"question_type": strata[case]} if strata else {}}
        if judge:
            line["judge_verdict"] = judge
        out.append(line)
    return out


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def logs(tmp_path) -> dict[str, Path]:
    return {"native": write(tmp_path / "native.jsonl", lines("native", NATIVE)),
            "egip": write(tmp_path / "egip.jsonl", lines("egip", EGIP)),
            "vote": write(tmp_path / "vote.jsonl", lines("vote", VOTE, n_reps=1))}


def brute_force(al, pool_runs) -> tuple[float, float, int]:
    """min / max of Δ over every assignment of the unresolved keys, the keys counted.

    Written from the definition: collect labels per (dataset, case, normalized answer)
    over the pool, resolve consistent ones, enumerate the rest, rebuild both matrices.
    """
    labels: dict[tuple, set] = {}
    for run in pool_runs:
        for r in run.records:
            if r.get("answer_status") == "answer":
                key = (run.dataset, r["case_id"], normalize_answer(r["answer"]))
                got = {"correct": {1}, "wrong": {0}}.get(r["verdict"], set())
                labels.setdefault(key, set()).update(got)
    cells = []  # (side, row, rep, key or None, fixed value)
    for side, run, matrix in (("a", al.base, al.a), ("b", al.method, al.b)):
        by = {(r["case_id"], r["repetition"]): r for r in run.records}
        for i, case in enumerate(al.case_ids):
            for rep in range(matrix.shape[1]):
                r = by.get((case, rep))
                if r is None or r.get("answer_status") != "answer":
                    cells.append((side, i, rep, None, 0.0))
                    continue
                key = (run.dataset, case, normalize_answer(r["answer"]))
                seen = labels[key]
                cells.append((side, i, rep, key, None) if len(seen) != 1
                             else (side, i, rep, None, float(next(iter(seen)))))
    unknown = sorted({c[3] for c in cells if c[3] is not None})
    deltas = []
    for bits in itertools.product((0.0, 1.0), repeat=len(unknown)):
        value = dict(zip(unknown, bits, strict=True))
        a, b = np.zeros(al.a.shape), np.zeros(al.b.shape)
        for side, i, rep, key, fixed in cells:
            (a if side == "a" else b)[i, rep] = value[key] if key is not None else fixed
        deltas.append(100.0 * paired_differences(a, b).mean())
    return min(deltas), max(deltas), len(unknown)


def test_bounds_by_hand_and_by_brute_force(logs):
    runs = load_runs([logs["native"], logs["egip"]])
    (al,) = [c.alignment for c in compare(pair_runs(runs, base_label="native"),
                                          n_resamples=50, n_flips=50)]
    low, high = effect_bounds(al, label_pool(runs))
    assert low == pytest.approx(-100.0 / 3.0)
    assert high == pytest.approx(-100.0 / 6.0)
    assert (low, high) == pytest.approx(brute_force(al, runs)[:2])
    (s,) = sensitivity(pair_runs(runs, base_label="native"), n_resamples=200, n_flips=50)
    assert s.comparison.ci.difference == pytest.approx(-100.0 / 6.0)  # automated Δ
    assert s.n_unresolved_keys == 2  # flu, asthma
    assert s.n_unresolved_outputs == 5  # 3 flu + 2 asthma
    np.testing.assert_allclose(s.case_bounds, [[0.0, 0.5], [0.0, 0.0], [-1.0, -1.0]])


def test_a_third_run_in_the_pool_unresolves_a_key(logs):
    runs = load_runs([logs["native"], logs["egip"], logs["vote"]])
    (pair,) = pair_runs(runs, pairs=[("egip", "native")])
    (s,) = sensitivity([pair], pool=label_pool(runs), n_resamples=200, n_flips=50)
    assert (s.bound_low, s.bound_high) == pytest.approx((-100.0 / 3.0, 100.0 / 6.0))
    assert (s.bound_low, s.bound_high) == pytest.approx(
        brute_force(s.comparison.alignment, runs)[:2])
    # the default pool is the compared runs only: the vote run changes nothing then
    (alone,) = sensitivity([pair], n_resamples=200, n_flips=50)
    assert alone.bound_high == pytest.approx(-100.0 / 6.0)


def test_envelope_is_the_bounds_within_the_paired_bootstrap_resamples(logs):
    runs = load_runs([logs["native"], logs["egip"], logs["vote"]])
    (pair,) = pair_runs(runs, pairs=[("egip", "native")])
    n_res = 400
    (s,) = sensitivity([pair], pool=label_pool(runs), n_resamples=n_res, n_flips=50,
                       seed=7)
    al = s.comparison.alignment
    boot, _ = _seed_for(7, "d", "native", "egip").spawn(2)
    idx = np.random.default_rng(boot).integers(0, 3, size=(n_res, 3))
    lows, highs = [], []
    for rows in idx:  # brute force on each resampled alignment
        sub = type(al)(al.base, al.method, tuple(al.case_ids[i] for i in rows),
                       al.a[rows], al.b[rows])
        sub_low, sub_high, _ = brute_force(sub, runs)
        lows.append(sub_low)
        highs.append(sub_high)
    assert s.envelope_low == pytest.approx(np.quantile(lows, 0.025))
    assert s.envelope_high == pytest.approx(np.quantile(highs, 0.975))
    assert s.envelope_low <= s.bound_low <= s.bound_high <= s.envelope_high


def test_no_unresolved_label_gives_the_automated_delta_and_ci(tmp_path):
    # every answer differs between methods and is scored once: nothing to harmonize
    native = [(f"k{i}", 0, f"dx native {i}", v, None)
              for i, v in enumerate(["correct", "wrong", "wrong", "correct", "wrong"])]
    egip = [(f"k{i}", 0, f"dx egip {i}", v, None)
            for i, v in enumerate(["correct", "correct", "wrong", "correct", "correct"])]
    runs = load_runs([write(tmp_path / "n.jsonl", lines("native", native, n_reps=1)),
                      write(tmp_path / "e.jsonl", lines("egip", egip, n_reps=1))])
    (s,) = sensitivity(pair_runs(runs, base_label="native"), n_resamples=3000,
                       n_flips=100, seed=3)
    ci = s.comparison.ci
    assert ci.difference == pytest.approx(40.0)  # (4 - 2) / 5
    assert (s.bound_low, s.bound_high) == pytest.approx((40.0, 40.0))
    assert (s.envelope_low, s.envelope_high) == pytest.approx((ci.low, ci.high))
    assert s.n_unresolved_keys == 0
    # no unscored baseline output: the extreme assumption changes nothing
    assert s.n_unscored_base == 0 and s.unscored_correct_difference == pytest.approx(40.0)


def test_every_key_unresolved_spans_the_widest_bounds(tmp_path):
    # every answer got an unreadable judge reply: no label anywhere. Per case the
    # baseline's key weighs -1 and the method's +1, so l_i = -1, u_i = +1: [-100, 100]
    # around the automated 0 (nothing scored correct on either side).
    native = [(f"k{i}", 0, f"dx native {i}", "unscored", "unparsed") for i in range(3)]
    egip = [(f"k{i}", 0, f"dx egip {i}", "unscored", "unparsed") for i in range(3)]
    runs = load_runs([write(tmp_path / "n.jsonl", lines("native", native, n_reps=1)),
                      write(tmp_path / "e.jsonl", lines("egip", egip, n_reps=1))])
    (s,) = sensitivity(pair_runs(runs, base_label="native"), n_resamples=200, n_flips=50)
    assert s.comparison.ci.difference == 0.0
    assert (s.bound_low, s.bound_high) == (-100.0, 100.0)
    assert (s.envelope_low, s.envelope_high) == (-100.0, 100.0)  # every resample alike
    assert (s.n_unresolved_keys, s.n_unresolved_outputs) == (6, 6)
    assert s.n_unscored_base == 0  # answers that could not be judged are not unscored


def test_table_rows_csv_and_notes(logs):
    runs = load_runs([logs["native"], logs["egip"], logs["vote"]])
    table = sensitivity_table(pair_runs(runs, pairs=[("egip", "native")]),
                              pool=label_pool(runs), n_resamples=300, n_flips=50)
    (row,) = table.rows
    assert row[:5] == ("d", "egip", "native", "3", "-16.67")
    assert row[6] == "[-33.33, 16.67]"
    rec = dict(zip(table.csv_header, next(csv.reader(table.to_csv().splitlines()[1:])),
                   strict=True))
    assert float(rec["bound_low"]) == pytest.approx(-33.333333)
    assert rec["n_unresolved_keys"] == "2"  # flu, pseudogout
    assert any("not systematic scorer error" in n for n in table.notes)


def test_single_case_has_no_envelope(tmp_path):
    runs = load_runs([write(tmp_path / "n.jsonl", lines("native", [("x", 0, "A", "wrong",
                                                                     None)], n_reps=1)),
                      write(tmp_path / "e.jsonl", lines("egip", [("x", 0, "a", "correct",
                                                                   None)], n_reps=1))])
    (s,) = sensitivity(pair_runs(runs, base_label="native"), n_resamples=20, n_flips=20)
    # "A" and "a" share a key labelled wrong and correct: unknown, weight 1 - 1 = 0
    assert (s.bound_low, s.bound_high) == (0.0, 0.0)
    assert np.isnan(s.envelope_low) and np.isnan(s.envelope_high)


def test_cli_compare_sensitivity(tmp_path, logs):
    proc = main_cli(tmp_path, "compare", str(logs["native"]), str(logs["egip"]),
                    str(logs["vote"]), "--pair", "egip=native", "--sensitivity",
                    "--resamples", "300", "--flips", "50", "--out-dir", str(tmp_path / "r"))
    assert "Shared-answer scoring sensitivity" in proc.stdout
    with (tmp_path / "r" / "sensitivity.csv").open(encoding="utf-8") as fh:
        (rec,) = list(csv.DictReader(fh))
    # the CLI pools the labels of every log given, the vote log included
    assert float(rec["bound_high"]) == pytest.approx(100.0 / 6.0)
    assert float(rec["difference_pp"]) == pytest.approx(-100.0 / 6.0)
    assert (tmp_path / "r" / "sensitivity.md").is_file()


def test_real_cli_process_writes_the_table(tmp_path, logs):
    proc = run_cli(tmp_path, "compare", str(logs["native"]), str(logs["egip"]),
                   "--sensitivity", "--resamples", "200", "--flips", "50", "--out-dir",
                   str(tmp_path / "out"))
    assert "Effect bounds" in proc.stdout
    assert "[-33.33, -16.67]" in proc.stdout  # the hand bounds of the two-run pool
    assert "sensitivity.csv" in proc.stdout.splitlines()[-1]


def test_by_stratum_bounds_over_the_stratum_cases(tmp_path):
    strata = {"c1": ["diagnosis"], "c2": ["diagnosis"], "c3": ["etiology"]}
    runs = load_runs([write(tmp_path / "n.jsonl", lines("native", NATIVE, strata=strata)),
                      write(tmp_path / "e.jsonl", lines("egip", EGIP, strata=strata))])
    table = sensitivity_table(pair_runs(runs, base_label="native"), n_resamples=200,
                              n_flips=50, by="question_type")
    got = {s.comparison.stratum: s for s in table.data}
    # diagnosis: cases c1 (l 0, u 1/2) and c2 (0, 0); etiology: c3 alone (-1, -1)
    assert (got["diagnosis"].bound_low, got["diagnosis"].bound_high) == pytest.approx(
        (0.0, 25.0))
    assert (got["etiology"].bound_low, got["etiology"].bound_high) == pytest.approx(
        (-100.0, -100.0))
    assert np.isnan(got["etiology"].envelope_low)  # one case: no resampling
    assert table.header[1] == "question_type" and table.csv_header[1] == "stratum"
    assert [row[1] for row in table.rows] == ["diagnosis", "etiology"]
    main_cli(tmp_path, "compare", str(tmp_path / "n.jsonl"), str(tmp_path / "e.jsonl"),
             "--sensitivity", "--by", "question_type", "--resamples", "200", "--flips",
             "50", "--out-dir", str(tmp_path / "r"))
    with (tmp_path / "r" / "sensitivity_by_question_type.csv").open(encoding="utf-8") as fh:
        assert [r["stratum"] for r in csv.DictReader(fh)] == ["diagnosis", "etiology"]


def test_delta_if_unscored_baseline_outputs_were_correct(logs):
    # native's only unscored output is c2 rep 1 (no answer); c2 rep 0 has an answer
    # whose judge reply was unreadable, which is not unscored. By hand, native c2
    # becomes [0, 1]: d = (1/2 + (0 - 1/2) + (0 - 1)) / 3 = -1/3.
    runs = load_runs([logs["native"], logs["egip"]])
    (s,) = sensitivity(pair_runs(runs, base_label="native"), n_resamples=50, n_flips=50)
    assert s.n_unscored_base == 1 == s.comparison.u_base
    assert s.unscored_correct_difference == pytest.approx(-100.0 / 3.0)
    assert s.comparison.ci.difference == pytest.approx(-100.0 / 6.0)  # unchanged
    table = sensitivity_table(pair_runs(runs, base_label="native"), n_resamples=50,
                              n_flips=50)
    (row,) = table.rows
    assert table.header[-2:] == ("Baseline U", "Δ if unscored correct (pp)")
    assert row[-2:] == ("1", "-33.33")
    rec = dict(zip(table.csv_header, next(csv.reader(table.to_csv().splitlines()[1:])),
                   strict=True))
    assert float(rec["difference_if_unscored_correct_pp"]) == pytest.approx(-100.0 / 3.0)
    assert rec["u_baseline"] == "1"


def test_unscored_correct_counts_error_lines_not_missing_ones_nor_the_method(tmp_path):
    # baseline k1: no answer, then an error line (both unscored); k2: wrong, then no
    # line at all (a missing scheduled output: not an output, stays 0). The method's
    # unscored k1 rep 1 keeps its automated 0.
    base = lines("native", [("k1", 0, None, "wrong", None),
                            ("k1", 1, "Flu", "unscored", None),
                            ("k2", 0, "X", "wrong", None)])
    base[1]["error"] = {"type": "BackendError", "message": "HTTP 503 after 3 retries"}
    method = lines("egip", [("k1", 0, "Y", "correct", None), ("k1", 1, None, "wrong", None),
                            ("k2", 0, "Z", "correct", None), ("k2", 1, "Z", "correct", None)])
    runs = load_runs([write(tmp_path / "n.jsonl", base), write(tmp_path / "e.jsonl", method)])
    (s,) = sensitivity(pair_runs(runs, base_label="native"), n_resamples=50, n_flips=50)
    # automated: a = [[0, 0], [0, 0]], b = [[1, 0], [1, 1]] -> d = [1/2, 1], Δ = 75;
    # a' = [[1, 1], [0, 0]] -> d' = [1/2 - 1, 1 - 0] = [-1/2, 1], Δ' = 25
    assert s.comparison.ci.difference == pytest.approx(75.0)
    assert s.n_unscored_base == 2
    assert s.unscored_correct_difference == pytest.approx(25.0)
