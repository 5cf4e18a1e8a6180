"""Reward components in evaluation: ``clinenv eval --components`` and
:mod:`clinenv.evaluation.components`.

- hand-made logs whose lines carry ``reward_components``: means worked out by hand,
  ``None`` left out of the means and of n, per stratum;
- the case-cluster CI against an independent plain-numpy resampling with the same seed
  scheme, against scipy's bootstrap for one repetition, and its degenerate cases (a
  constant component: zero width; one case: no interval);
- old logs (written before ``reward_components``) get the logged numbers back from the
  line and its case; a line whose case cannot be found is one error line naming the
  file, the line and the case id;
- the command: tables printed and written as ``components.md`` / ``.csv`` (and
  ``components_by_<STRATUM>``), owned by ``eval`` (an ``eval`` without ``--components``
  removes them); one real ``clinenv run`` log.
"""
# issue 29 §1

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from clinenv.cli import main
from clinenv.evaluation.components import (
    CaseLookup,
    ComponentsError,
    component_ci,
    component_means,
    components_table,
    run_components,
)
from clinenv.evaluation.runs import load_runs
from clinenv.reward_components import COMPONENTS
from clinenv.testing.eval_logs import log_lines, write_log

NAN = math.nan


def comps(diagnosis=1.0, recall=0.5, precision=1.0, f1=None, spend=2.0, turns=10,
          invalid=0, fmt=1):
    """A ``reward_components`` dict (``f1`` from recall and precision unless given)."""
    if f1 is None and recall is not None and precision is not None:
        f1 = 2 * recall * precision / (recall + precision) if recall + precision else 0.0
    return {"diagnosis": diagnosis, "workup_recall": recall, "workup_precision": precision,
            "workup_f1": f1, "exam_spend": spend, "turns": turns,
            "invalid_actions": invalid, "format": fmt}


#: Method "m" on dataset "alpha": 3 cases x 2 repetitions, components per (case, rep).
GRID = {"a1": "CC", "a2": "CW", "a3": "WU"}
VALUES = {
    ("a1", 0): comps(1.0, 1.0, 1.0, spend=4.0, turns=8),
    ("a1", 1): comps(1.0, 0.5, 1.0, spend=3.0, turns=10),
    ("a2", 0): comps(1.0, None, None, f1=None, spend=0.0, turns=12),   # nothing recorded
    ("a2", 1): comps(0.0, 0.25, 0.5, spend=1.0, turns=14, invalid=2),
    ("a3", 0): comps(0.0, 0.0, None, f1=0.0, spend=0.0, turns=16, invalid=1),
    ("a3", 1): comps(0.0, 0.5, 1.0, spend=2.0, turns=18, fmt=0),
}
STRATA = {"a1": ["x"], "a2": ["x", "y"], "a3": ["y"]}


def hand_log(folder: Path, name: str = "m.jsonl") -> Path:
    lines = log_lines("alpha", "m", GRID, strata=STRATA)
    for line in lines:
        line["reward_components"] = VALUES[(line["case_id"], line["repetition"])]
    return write_log(folder / name, lines)


def cells_by(table):
    return {(c.label, c.stratum, c.component): c for c in table.data}


def seed_for(seed, *names):
    """The stream of one (method, dataset, stratum, component), worked out here as the
    module docstring says (seed and a blake2b digest of the names)."""
    digest = hashlib.blake2b("\0".join(names).encode("utf-8"), digest_size=16).digest()
    words = [int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4)]
    return np.random.SeedSequence([int(seed), *words])


# --------------------------------------------------------------------- hand-computed
def test_means_and_n_by_hand_with_none_left_out(tmp_path):
    runs = load_runs([hand_log(tmp_path)])
    table = components_table(runs, n_resamples=500, seed=0)
    got = cells_by(table)
    expected = {  # (mean, n): None values are not in the mean and not counted
        "diagnosis": (3 / 6, 6),
        "workup_recall": ((1.0 + 0.5 + 0.25 + 0.0 + 0.5) / 5, 5),
        "workup_precision": ((1.0 + 1.0 + 0.5 + 1.0) / 4, 4),
        "workup_f1": ((1.0 + 2 / 3 + 1 / 3 + 0.0 + 2 / 3) / 5, 5),
        "exam_spend": (10.0 / 6, 6),
        "turns": (78 / 6, 6),
        "invalid_actions": (3 / 6, 6),
        "format": (5 / 6, 6),
    }
    assert [c.component for c in table.data] == list(COMPONENTS)
    for name, (mean, n) in expected.items():
        cell = got[("m", None, name)]
        assert cell.mean == pytest.approx(mean, abs=1e-12), name
        assert cell.n == n and cell.n_episodes == 6, name
        assert cell.low <= cell.mean <= cell.high, name
    assert got[("m", None, "workup_precision")].n_cases == 3  # a2 keeps one value
    # printed and written as the other eval tables: display rows, tidy full-precision CSV
    row = next(r for r in table.rows if r[2] == "workup_recall")
    assert row[:4] == ("m", "alpha", "workup_recall", "0.450") and row[5] == "5"
    records = list(csv.DictReader(io.StringIO(table.to_csv())))
    assert [r["component"] for r in records] == list(COMPONENTS)
    assert float(records[1]["mean"]) == pytest.approx(0.45)
    assert records[1]["n"] == "5" and records[1]["stratum"] == ""
    assert "| m | alpha | workup_recall | 0.450 |" in table.to_markdown()


def test_means_per_stratum_by_hand(tmp_path):
    runs = load_runs([hand_log(tmp_path)])
    got = cells_by(components_table(runs, by="question_type", n_resamples=200))
    # x = a1, a2 (4 episodes), y = a2, a3 (a2 in both strata)
    assert got[("m", "x", "diagnosis")].mean == pytest.approx(3 / 4)
    assert got[("m", "y", "diagnosis")].mean == pytest.approx(1 / 4)
    assert got[("m", "x", "workup_recall")].mean == pytest.approx((1.0 + 0.5 + 0.25) / 3)
    assert got[("m", "x", "workup_recall")].n == 3
    assert got[("m", "y", "turns")].mean == pytest.approx((12 + 14 + 16 + 18) / 4)
    with pytest.raises(Exception, match="no case has stratum 'specialty'"):
        components_table(runs, by="specialty")


# ------------------------------------------------------------------- the interval
def test_ci_is_a_plain_case_resampling_with_the_documented_seed(tmp_path):
    """The same interval from an independent plain-numpy case-cluster resampling of the
    pooled mean, drawn from the stream the module docstring defines."""
    runs = load_runs([hand_log(tmp_path)])
    n_resamples = 3000
    got = cells_by(components_table(runs, n_resamples=n_resamples, seed=11))
    for name in ("diagnosis", "workup_recall", "exam_spend", "turns"):
        per_case = []
        for case in GRID:
            values = [VALUES[(case, r)][name] for r in range(2)]
            values = [v for v in values if v is not None]
            if values:
                per_case.append(values)
        sums = np.array([sum(v) for v in per_case])
        counts = np.array([len(v) for v in per_case])
        rng = np.random.default_rng(seed_for(11, "m", "alpha", "", name))
        idx = rng.integers(0, len(per_case), size=(n_resamples, len(per_case)))
        pooled = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
        low, high = np.quantile(pooled, [0.025, 0.975])
        cell = got[("m", None, name)]
        assert (cell.low, cell.high) == pytest.approx((low, high), abs=1e-12), name


def test_ci_agrees_with_scipy_bootstrap_for_one_repetition():
    rng = np.random.default_rng(5)
    x = rng.normal(0.6, 0.2, size=80)
    mean, low, high, degenerate = component_ci([[v] for v in x], n_resamples=10_000,
                                               seed=1)
    ref = sps.bootstrap((x,), np.mean, vectorized=True, method="percentile",
                        n_resamples=10_000, confidence_level=0.95,
                        rng=np.random.default_rng(2))
    assert not degenerate and mean == pytest.approx(x.mean())
    se = x.std(ddof=1) / math.sqrt(x.size)
    assert low == pytest.approx(ref.confidence_interval.low, abs=0.1 * se)
    assert high == pytest.approx(ref.confidence_interval.high, abs=0.1 * se)


def test_degenerate_intervals():
    # a constant component: a zero-width interval at its value
    assert component_ci([[19, 19], [19], [19, 19]], seed=0) == (19.0, 19.0, 19.0, True)
    # one case: no interval
    mean, low, high, degenerate = component_ci([[0.0, 1.0]], seed=0)
    assert mean == 0.5 and math.isnan(low) and math.isnan(high) and degenerate
    # no defined value (a native run's workup): no mean either
    assert all(math.isnan(v) for v in component_ci([[], []])[:3])
    with pytest.raises(ValueError, match="confidence"):
        component_ci([[1.0]], confidence=1.0)


def test_a_constant_and_an_undefined_component_in_the_table(tmp_path):
    lines = log_lines("alpha", "m", {"a1": "C", "a2": "W", "a3": "C"})
    for line in lines:
        line["reward_components"] = comps(recall=None, precision=None, f1=None,
                                          spend=None, turns=19)
    runs = load_runs([write_log(tmp_path / "c.jsonl", lines)])
    table = components_table(runs, n_resamples=200)
    rows = {r[2]: r for r in table.rows}
    assert rows["turns"][3:] == ("19.000", "[19.000, 19.000]", "3")
    assert rows["workup_f1"][3:] == ("–", "–", "0")
    assert rows["exam_spend"][3:] == ("–", "–", "0")


def test_each_component_has_its_own_stream(tmp_path):
    """A cell's CI does not depend on what else is reported (another run beside it)."""
    path = hand_log(tmp_path)
    other = log_lines("alpha", "other", {"a1": "CW"})
    for line in other:
        line["reward_components"] = comps()
    alone = cells_by(components_table(load_runs([path]), n_resamples=400, seed=3))
    both = cells_by(components_table(
        load_runs([write_log(tmp_path / "o.jsonl", other), path]), n_resamples=400, seed=3))
    for key, cell in alone.items():
        assert (both[key].low, both[key].high) == (cell.low, cell.high)


# ---------------------------------------------------------------- old logs, errors
@pytest.fixture
def demo_run(workdir):
    """A real clinenv run log: the scripted doctor on the demo cases, two repetitions."""
    assert main(["run", "--env", "EGIP-Demo-v0", "--repetitions", "2", "--quiet",
                 "--out", "run.jsonl"]) == 0
    return workdir / "run.jsonl"


def without_components(path: Path, out: Path, **second_line) -> Path:
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    for line in lines:
        line.pop("reward_components")
    lines[1].update(second_line)
    out.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return out


def test_old_logs_get_the_logged_components_back(demo_run, workdir):
    old = without_components(demo_run, workdir / "old.jsonl")
    new_runs, old_runs = load_runs([demo_run]), load_runs([old])
    computed = run_components(old_runs)
    assert computed.n_computed == len(old_runs[0].records) == 34
    assert [c.to_dict() for c in computed.per_run[0]] == [
        r["reward_components"] for r in new_runs[0].records]
    assert run_components(new_runs).n_computed == 0
    new_table = components_table(new_runs, n_resamples=300)
    old_table = components_table(old_runs, n_resamples=300)
    assert old_table.rows == new_table.rows
    assert any("34 episode(s) from logs written before reward_components" in n
               for n in old_table.notes)


def test_a_line_whose_case_cannot_be_found_is_one_error(demo_run, workdir, capsys):
    bad = without_components(demo_run, workdir / "bad.jsonl", case_id="demo-99")
    with pytest.raises(ComponentsError, match=r"bad.jsonl, line 2: case 'demo-99': the "
                                              r"line has no reward_components and its "
                                              r"case cannot be found"):
        run_components(load_runs([bad]))
    code = main(["eval", "--components", str(bad), "--out-dir", "out"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0].startswith("clinenv: error: ") and "line 2: case 'demo-99'" in err[0]
    assert not (workdir / "out").exists()
    # an environment that cannot be made (a hand-made line of an unknown id)
    lines = log_lines("alpha", "m", {"a1": "C"})
    lines[0].update(events=[], turns=3)
    hand = write_log(workdir / "hand.jsonl", lines)
    with pytest.raises(ComponentsError, match=r"hand.jsonl, line 1: case 'a1': .*cannot "
                                              r"make 'EGIP-alpha-v0'"):
        run_components(load_runs([hand]), lookup=CaseLookup())
    # left out instead, for the report
    loose = run_components(load_runs([hand]), strict=False)
    assert loose.per_run == ((None,),) and len(loose.failures) == 1


def test_a_dataset_file_other_than_the_runs_is_refused(demo_run, workdir):
    bad = without_components(demo_run, workdir / "other.jsonl")
    lines = [json.loads(x) for x in bad.read_text(encoding="utf-8").splitlines()]
    for line in lines:
        line["dataset_sha256"] = "0" * 64
    bad.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    with pytest.raises(ComponentsError, match=r"line 1: case 'demo-01': .*another file "
                                              r"than the run used"):
        run_components(load_runs([bad]))


# ------------------------------------------------------------------- the command
def read_csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))


def test_cli_prints_and_writes_the_components_tables(workdir, capsys):
    path = hand_log(workdir / "logs")
    assert main(["eval", "--components", str(path), "--by", "question_type",
                 "--resamples", "300", "--out-dir", "out"]) == 0
    out = capsys.readouterr().out
    assert "Reward components by method and dataset" in out
    assert ["m", "alpha", "workup_recall", "0.450"] == next(
        line.split()[:4] for line in out.splitlines() if "workup_recall" in line)
    written = {p.name for p in (workdir / "out").iterdir()}
    assert written == {"accuracy.md", "accuracy.csv", "accuracy_by_question_type.md",
                       "accuracy_by_question_type.csv", "components.md", "components.csv",
                       "components_by_question_type.md", "components_by_question_type.csv"}
    rows = read_csv(workdir / "out" / "components.csv")
    assert [(r["method"], r["component"]) for r in rows] == [("m", c) for c in COMPONENTS]
    by = read_csv(workdir / "out" / "components_by_question_type.csv")
    assert {r["stratum"] for r in by} == {"x", "y"}
    # the same call again replaces them; eval without --components removes them
    assert main(["eval", "--components", str(path), "--by", "question_type",
                 "--resamples", "300", "--out-dir", "out"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "replaced 8 earlier files in out"
    assert main(["eval", str(path), "--out-dir", "out"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("removed 6 earlier files of clinenv eval in out")
    assert "components.md" in last
    assert {p.name for p in (workdir / "out").iterdir()} == {"accuracy.md", "accuracy.csv"}


def test_cli_on_a_real_run_log(demo_run, workdir, capsys):
    assert main(["eval", "--components", str(demo_run), "--resamples", "500",
                 "--out-dir", "out"]) == 0
    capsys.readouterr()
    lines = [json.loads(x) for x in demo_run.read_text(encoding="utf-8").splitlines()]
    rows = {r["component"]: r for r in read_csv(workdir / "out" / "components.csv")}
    for name in COMPONENTS:
        values = [line["reward_components"][name] for line in lines
                  if line["reward_components"][name] is not None]
        row = rows[name]
        assert int(row["n"]) == len(values) and int(row["n_episodes"]) == 34
        assert float(row["mean"]) == pytest.approx(sum(values) / len(values), abs=1e-6)
        assert float(row["ci_low"]) <= float(row["mean"]) <= float(row["ci_high"])
        assert row["n_cases"] == "17" and row["n_resamples"] == "500"
    # the scripted doctor plays 19 turns in every episode: a zero-width interval
    assert rows["turns"]["ci_low"] == rows["turns"]["ci_high"] == "19.0"
    assert rows["turns"]["degenerate"] == "1"


def test_component_means_needs_runs():
    with pytest.raises(Exception, match="no runs"):
        component_means([])
