"""Held-out case lists: ``split_cases``, ``clinenv data split`` and ``clinenv run --cases``.

Expected splits are recomputed here from the documented rule (groups ordered by
``sha256("clinenv.split/<seed>/<first case id>")``, construction filled up to
``round(FRAC * n)``, halves up) with hashlib, and one is pinned as literal ids; the run
tests compare a ``--cases`` run with a full run of the same seed (same episode seeds,
same verdicts) and read the real log files back.
"""

from __future__ import annotations

import hashlib
import json
import math
from importlib import resources

import pytest

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv.case_list import CaseListError, nearest_id, read_case_list
from clinenv.cases import Case
from clinenv.cli import main
from clinenv.datasets import load_cases
from clinenv.datasets.case_split import split_cases
from clinenv.evaluation.runs import load_runs
from clinenv.runlog import read_run_log
from clinenv.testing.data import MEDQA_FILE, skip_without_shared_data

DEMO = [f"demo-{i:02d}" for i in range(1, 18)]
#: ``split demo --construction 0.5 --seed 0``: the 9 ids of smallest
#: sha256("clinenv.split/0/<id>"), in dataset order.
DEMO_SEED0 = ["demo-02", "demo-04", "demo-05", "demo-06", "demo-08", "demo-10", "demo-12",
              "demo-13", "demo-16"]


def expected_split(ids, roots, fraction, seed):
    """The documented rule, written out again: (construction, evaluation)."""
    groups = {}
    for case_id, root in zip(ids, roots, strict=True):
        groups.setdefault(root or case_id, []).append(case_id)
    target = math.floor(fraction * len(ids) + 0.5)
    taken = []
    for root in sorted(groups, key=lambda r: hashlib.sha256(
            f"clinenv.split/{seed}/{r}".encode()).hexdigest()):
        if len(taken) + len(groups[root]) <= target:
            taken += groups[root]
    return ([c for c in ids if c in taken], [c for c in ids if c not in taken])


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def demo_file():
    return resources.files("clinenv.datasets") / "data" / "demo.jsonl"


# ------------------------------------------------------------------ split_cases
def test_demo_split_matches_the_documented_rule_and_the_pinned_ids():
    cases = load_cases("demo")
    assert [c.case_id for c in cases] == DEMO
    split = split_cases(cases, 0.5, 0)
    assert list(split.construction) == DEMO_SEED0
    assert list(split.evaluation) == [c for c in DEMO if c not in DEMO_SEED0]
    for fraction, seed in ((0.5, 0), (0.3, 7), (0.8, 12345), (0.06, 3), (0.94, 3)):
        split = split_cases(cases, fraction, seed)
        want = expected_split(DEMO, [None] * 17, fraction, seed)
        assert (list(split.construction), list(split.evaluation)) == want
        # singleton groups: exactly round(FRAC * 17) construction cases (halves up)
        assert len(split.construction) == math.floor(fraction * 17 + 0.5)
    assert split_cases(cases, 0.5, 1).construction != split_cases(cases, 0.5, 0).construction


def _with_duplicates():
    """The demo cases plus copies flagged as near-duplicates: demo-01b and demo-01c of
    demo-01, demo-05b of demo-05 (groups of 3 and 2)."""
    cases = load_cases("demo")
    extra = []
    for source, new in (("demo-01", "demo-01b"), ("demo-01", "demo-01c"),
                        ("demo-05", "demo-05b")):
        case = next(c for c in cases if c.case_id == source)
        extra.append(case.model_copy(update={
            "case_id": new, "flags": case.flags.model_copy(
                update={"near_duplicate_of": source})}))
    return cases + extra


def test_near_duplicates_stay_on_one_side_for_every_seed():
    cases = _with_duplicates()
    ids = [c.case_id for c in cases]
    roots = [c.flags.near_duplicate_of for c in cases]
    sides_seen = set()
    for seed in range(40):
        for fraction in (0.2, 0.5, 0.7):
            split = split_cases(cases, fraction, seed)
            assert (list(split.construction), list(split.evaluation)) == expected_split(
                ids, roots, fraction, seed)
            assert split.n_duplicate_groups == 2
            for group in (("demo-01", "demo-01b", "demo-01c"), ("demo-05", "demo-05b")):
                sides = {c in split.construction for c in group}
                assert len(sides) == 1, (seed, fraction, group)
                sides_seen.add((group[0], sides.pop()))
            assert set(split.construction).isdisjoint(split.evaluation)
            assert sorted(split.construction + split.evaluation) == sorted(ids)
    # both groups land on both sides for some seeds (the rule does not pin them)
    assert sides_seen == {("demo-01", True), ("demo-01", False), ("demo-05", True),
                          ("demo-05", False)}


def test_the_loader_flags_near_duplicates_of_a_real_file_and_the_split_keeps_them(tmp_path):
    data = skip_without_shared_data(MEDQA_FILE)
    lines = (data / MEDQA_FILE).read_text(encoding="utf-8").splitlines()[:12]
    record = json.loads(lines[3])
    # a near-copy of record 4: the same history with one word changed
    exam = record["OSCE_Examination"]
    exam["Objective_for_Doctor"] = exam["Objective_for_Doctor"] + " Please."
    path = tmp_path / "medqa_dup.jsonl"
    path.write_text("\n".join([*lines, json.dumps(record)]) + "\n", encoding="utf-8")
    cases = load_cases(path)
    dup = cases[-1]
    assert dup.flags.near_duplicate_of == cases[3].case_id
    for seed in range(20):
        split = split_cases(cases, 0.5, seed)
        assert (dup.case_id in split.construction) == (cases[3].case_id in split.construction)


@pytest.mark.parametrize("fraction", [0, 1, 1.0, -0.2, 1.5, float("nan"), True, "0.5"])
def test_fractions_outside_the_open_unit_interval_are_refused(fraction):
    with pytest.raises(ValueError, match=r"construction fraction must be a number in \(0, 1\)"):
        split_cases(load_cases("demo"), fraction, 0)


def test_a_fraction_that_leaves_a_side_empty_is_refused():
    cases = load_cases("demo")
    with pytest.raises(ValueError, match="leaves no construction case"):
        split_cases(cases, 0.02, 0)  # round(0.34) = 0
    with pytest.raises(ValueError, match="leaves no evaluation case"):
        split_cases(cases, 0.98, 0)  # round(16.66) = 17
    assert len(split_cases(cases, 0.03, 0).construction) == 1  # round(0.51) = 1
    with pytest.raises(ValueError, match="seed must be an integer >= 0"):
        split_cases(cases, 0.5, -1)


def test_one_group_larger_than_the_construction_target_cannot_fill_it():
    base = load_cases("demo")[0]
    cases = [base.model_copy(update={"case_id": f"x{i}", "flags": base.flags.model_copy(
        update={"near_duplicate_of": None if i == 0 else "x0"})}) for i in range(4)]
    cases.append(base.model_copy(update={"case_id": "y"}))
    assert isinstance(cases[0], Case)
    # 5 cases, target round(2.5) = 3: the group of 4 never fits, "y" alone goes
    split = split_cases(cases, 0.5, 0)
    assert (split.construction, split.evaluation) == (("y",), ("x0", "x1", "x2", "x3"))


# ------------------------------------------------------------------ clinenv data split
def test_data_split_writes_the_lists_and_the_manifest(workdir, capsys):
    assert main(["data", "split", "demo", "--construction", "0.5", "--seed", "0",
                 "--out", "splits/demo"]) == 0
    out = capsys.readouterr().out
    assert "17 cases -> 9 construction" in out and "8 evaluation" in out
    folder = workdir / "splits" / "demo"
    construction = (folder / "construction.txt").read_text(encoding="utf-8")
    evaluation = (folder / "evaluation.txt").read_text(encoding="utf-8")
    assert construction == "".join(f"{c}\n" for c in DEMO_SEED0)
    assert evaluation == "".join(f"{c}\n" for c in DEMO if c not in DEMO_SEED0)
    manifest = json.loads((folder / "split.json").read_text(encoding="utf-8"))
    demo_sha = hashlib.sha256(demo_file().read_bytes()).hexdigest()
    records_sha = manifest.pop("dataset_sha256")
    assert manifest == {
        "format": "clinenv.split/1", "dataset": "demo", "dataset_file": "demo.jsonl",
        "dataset_file_sha256": demo_sha, "construction_fraction": 0.5, "seed": 0,
        "counts": {"cases": 17, "construction": 9, "evaluation": 8,
                   "near_duplicate_groups": 0},
        "files": {"construction": "construction.txt", "evaluation": "evaluation.txt"},
        "sha256": {"construction": hashlib.sha256(construction.encode()).hexdigest(),
                   "evaluation": hashlib.sha256(evaluation.encode()).hexdigest()}}
    # the dataset digest is the one run logs record
    assert main(["run", "--quiet", "--env", "EGIP-Demo-v0", "--cases",
                 "splits/demo/evaluation.txt", "--out", "run.jsonl"]) == 0
    line = read_run_log(workdir / "run.jsonl").lines[0]
    assert line["dataset_sha256"] == records_sha
    assert line["case_list"]["sha256"] == manifest["sha256"]["evaluation"]


def test_data_split_is_deterministic_and_refuses_to_overwrite(workdir, capsys):
    args = ["data", "split", "demo", "--construction", "0.3", "--seed", "5"]
    assert main([*args, "--out", "a"]) == 0
    assert main([*args, "--out", "b"]) == 0
    for name in ("construction.txt", "evaluation.txt", "split.json"):
        assert (workdir / "a" / name).read_bytes() == (workdir / "b" / name).read_bytes()
    capsys.readouterr()
    assert main([*args, "--out", "a"]) == 2
    assert "use --force to overwrite" in capsys.readouterr().err
    assert main(["data", "split", "demo", "--construction", "0.6", "--seed", "5", "--out",
                 "a", "--force"]) == 0
    assert len(read_case_list(workdir / "a" / "construction.txt").case_ids) == 10
    (workdir / "file").write_text("x")
    assert main([*args, "--out", "file"]) == 2
    assert "--out file is a file" in capsys.readouterr().err


def test_data_split_of_a_case_file_keeps_flagged_duplicates_together(workdir):
    path = workdir / "dups.jsonl"
    path.write_text("".join(c.model_dump_json() + "\n" for c in _with_duplicates()),
                    encoding="utf-8")
    assert main(["data", "split", str(path), "--construction", "0.5", "--seed", "2",
                 "--out", "s"]) == 0
    construction = read_case_list(workdir / "s" / "construction.txt").case_ids
    evaluation = read_case_list(workdir / "s" / "evaluation.txt").case_ids
    cases = _with_duplicates()
    assert (list(construction), list(evaluation)) == expected_split(
        [c.case_id for c in cases], [c.flags.near_duplicate_of for c in cases], 0.5, 2)
    manifest = json.loads((workdir / "s" / "split.json").read_text())
    assert manifest["counts"]["near_duplicate_groups"] == 2
    assert manifest["dataset_file"] == "dups.jsonl"


@pytest.mark.parametrize(("value", "message"), [
    ("1.5", "argument --construction: must be a number in (0, 1)"),
    ("0", "argument --construction: must be a number in (0, 1)"),
    ("1", "argument --construction: must be a number in (0, 1)"),
    ("half", "argument --construction: expected a number in (0, 1), got 'half'"),
    ("nan", "argument --construction: must be a number in (0, 1)"),
])
def test_data_split_names_the_flag_of_a_bad_fraction(workdir, capsys, value, message):
    with pytest.raises(SystemExit) as exit_:
        main(["data", "split", "demo", "--construction", value, "--out", "s"])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
    assert not (workdir / "s").exists()


def test_data_split_names_the_flag_when_a_side_would_be_empty(workdir, capsys):
    assert main(["data", "split", "demo", "--construction", "0.02", "--out", "s"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("clinenv: error: --construction 0.02: ")
    assert "leaves no construction case (17 cases, 0 for construction)" in err
    assert not (workdir / "s").exists()


# ------------------------------------------------------------------ clinenv run --cases
def _lines(path):
    return read_run_log(path).lines


def test_run_cases_runs_only_the_listed_cases_with_the_full_run_seeds(workdir):
    (workdir / "pick.txt").write_text("# two held-out cases\ndemo-09\n\n  demo-03  \n",
                                      encoding="utf-8")
    assert main(["run", "--quiet", "--env", "EGIP-Demo-v0", "--repetitions", "2",
                 "--exam-budget", "3", "--cases", "pick.txt", "--out", "pick.jsonl"]) == 0
    assert main(["run", "--quiet", "--env", "EGIP-Demo-v0", "--repetitions", "2",
                 "--exam-budget", "3", "--out", "full.jsonl"]) == 0
    picked = _lines(workdir / "pick.jsonl")
    full = {(x["case_id"], x["repetition"]): x for x in _lines(workdir / "full.jsonl")}
    # repetition-major, dataset order (demo-03 before demo-09 though listed after it)
    assert [(x["case_id"], x["repetition"]) for x in picked] == [
        ("demo-03", 0), ("demo-09", 0), ("demo-03", 1), ("demo-09", 1)]
    for line in picked:
        twin = full[(line["case_id"], line["repetition"])]
        assert (line["case_index"], line["seed"], line["answer"], line["verdict"]) == (
            twin["case_index"], twin["seed"], twin["answer"], twin["verdict"])
        assert line["n_cases_scheduled"] == 2
        assert line["case_list"] == {
            "path": "pick.txt",
            "sha256": hashlib.sha256((workdir / "pick.txt").read_bytes()).hexdigest(),
            "case_ids": ["demo-03", "demo-09"]}
    assert [x["case_index"] for x in picked[:2]] == [2, 8]
    assert "case_list" not in next(iter(full.values()))


def test_eval_schedules_the_list_even_when_episodes_are_missing(workdir, capsys):
    (workdir / "ev.txt").write_text("demo-04\ndemo-11\ndemo-17\n", encoding="utf-8")
    assert main(["run", "--quiet", "--env", "EGIP-Demo-v0", "--cases", "ev.txt",
                 "--out", "ev.jsonl"]) == 0
    log = workdir / "ev.jsonl"
    kept = log.read_text(encoding="utf-8").splitlines()[:1]  # an interrupted run
    log.write_text(kept[0] + "\n", encoding="utf-8")
    (run,) = load_runs([log])
    # the list, not indices 0..16 with placeholders
    assert run.case_ids == ("demo-04", "demo-11", "demo-17")
    assert (run.n_scheduled, run.n_missing()) == (3, 2)
    assert not run.schedule_inferred
    capsys.readouterr()
    assert main(["eval", str(log), "--out-dir", "rep"]) == 0
    assert "demo 3 x 1" in capsys.readouterr().out


@pytest.mark.parametrize(("listed", "line", "near"), [
    ("demo-01\ndemo-7\n", 2, "demo-07"),        # leading zero left out
    ("demo-02\n\n# c\nDEMO-3\n", 4, "demo-03"),  # letter case
    ("dmeo-12\n", 1, "demo-12"),                # a typo
    ("medqa-0001\n", 1, None),                  # another dataset's id
])
def test_an_unknown_case_id_names_the_file_line_and_nearest_id(workdir, capsys, listed, line,
                                                               near):
    (workdir / "bad.txt").write_text(listed, encoding="utf-8")
    assert main(["run", "--quiet", "--env", "EGIP-Demo-v0", "--cases", "bad.txt",
                 "--out", "x.jsonl"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"bad.txt, line {line}: case id" in err
    assert "is not in dataset demo (17 cases)" in err
    if near:
        assert err.endswith(f"the nearest id of dataset demo is {near!r}")
    assert not (workdir / "x.jsonl").exists()


def test_nearest_id_prefers_an_id_equal_but_for_case_and_zeros():
    ids = ["demo-17", "demo-07", "demo-70"]
    assert nearest_id("demo-7", ids) == "demo-07"
    assert nearest_id("Demo-007", ids) == "demo-07"
    assert nearest_id("demo-71", ids) in ("demo-17", "demo-70")
    assert nearest_id("x", []) is None


@pytest.mark.parametrize(("content", "message"), [
    ("demo-01\ndemo-02\ndemo-01\n", "line 3: case id 'demo-01' is listed twice (also on line 1)"),
    ("\n# only a comment\n", "no case id"),
    (b"demo-01\n\xff\n", "not UTF-8 text"),
])
def test_bad_case_lists_are_refused_with_file_and_line(workdir, capsys, content, message):
    path = workdir / "l.txt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(CaseListError, match="l.txt"):
        read_case_list(path)
    assert main(["run", "--quiet", "--env", "EGIP-Demo-v0", "--cases", "l.txt",
                 "--out", "x.jsonl"]) == 2
    assert message in capsys.readouterr().err


def test_cases_refuses_a_missing_file_a_folder_and_episodes(workdir, capsys):
    assert main(["run", "--quiet", "--env", "EGIP-Demo-v0", "--cases", "nope.txt"]) == 2
    assert "--cases nope.txt: no such file" in capsys.readouterr().err
    (workdir / "dir").mkdir()
    assert main(["run", "--quiet", "--env", "EGIP-Demo-v0", "--cases", "dir"]) == 2
    assert "--cases dir: is a folder" in capsys.readouterr().err
    (workdir / "l.txt").write_text("demo-01\n")
    assert main(["run", "--quiet", "--env", "EGIP-Demo-v0", "--cases", "l.txt",
                 "--episodes", "2"]) == 2
    assert "--cases and --episodes both choose the cases" in capsys.readouterr().err
    assert not (workdir / "runs").exists()


def test_resume_checks_the_case_list(workdir, capsys):
    (workdir / "a.txt").write_text("demo-02\ndemo-05\n")
    (workdir / "b.txt").write_text("demo-02\ndemo-06\n")
    base = ["run", "--env", "EGIP-Demo-v0", "--out", "r.jsonl"]
    assert main([*base, "--quiet", "--cases", "a.txt"]) == 0
    capsys.readouterr()
    assert main([*base, "--cases", "a.txt", "--resume"]) == 0
    assert "0 run now, 2 resumed" in capsys.readouterr().out
    # the same list at another path is the same list
    (workdir / "copy.txt").write_bytes((workdir / "a.txt").read_bytes())
    assert main([*base, "--quiet", "--cases", "copy.txt", "--resume"]) == 0
    for other, shown in ((["--cases", "b.txt"], "this run has --cases b.txt"),
                         ([], "this run has no case list (the first N cases)")):
        capsys.readouterr()
        assert main([*base, "--quiet", "--resume", *other]) == 2
        err = capsys.readouterr().err
        assert "r.jsonl, line 1: case_list: the log was written with --cases a.txt" in err
        assert shown in err and "refusing to resume a different run" in err
    # and a log of the first N cases refuses a list
    assert main(["run", "--quiet", "--env", "EGIP-Demo-v0", "--episodes", "2",
                 "--out", "n.jsonl"]) == 0
    capsys.readouterr()
    assert main(["run", "--quiet", "--env", "EGIP-Demo-v0", "--cases", "a.txt",
                 "--out", "n.jsonl", "--resume"]) == 2
    assert "written with no case list" in capsys.readouterr().err
    assert len(_lines(workdir / "r.jsonl")) == 2


def test_concurrent_run_over_a_case_list_writes_the_same_lines(workdir):
    (workdir / "l.txt").write_text("demo-12\ndemo-01\ndemo-16\n")
    common = ["run", "--quiet", "--env", "EGIP-Demo-v0", "--cases", "l.txt",
              "--exploration", "0.5", "--repetitions", "2"]
    assert main([*common, "--out", "seq.jsonl"]) == 0
    assert main([*common, "--concurrency", "3", "--out", "con.jsonl"]) == 0

    def strip(lines):
        return sorted(json.dumps({k: v for k, v in x.items() if k not in ("timing", "llm")},
                                  sort_keys=True) for x in lines)

    assert strip(_lines(workdir / "seq.jsonl")) == strip(_lines(workdir / "con.jsonl"))
