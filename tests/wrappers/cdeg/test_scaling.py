"""CDEG's experience-scaling curve (clinenv.wrappers.cdeg.scaling, ``clinenv cdeg
scale``).

Unit tests pin the nested seeded subsets against an order computed here with hashlib.
The end-to-end test runs offline on 15 synthetic NEJM-schema cases written here (the
registry's ``nejm`` file name in a temporary ``--data-dir``, ``--no-verify``): each is a
vesicular chest rash after a new skin cream, target herpes zoster, options as NEJM's
five. The vesicle-swab PCR names herpes zoster; without it the scripted doctor reads
"contact" in the history and answers allergic contact dermatitis. Construction cases
nejm-0001..0012, evaluation cases nejm-0013..0015 (with the PCR). Only three
construction cases hold the PCR: the 2nd-4th of the seeded order, so the 10 % subset
(1 case) cannot validate an edge and the 50 % and 100 % subsets can. Expected
accuracies, corrections and regressions are recomputed here from the run logs.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from pathlib import Path

import pytest

from clinenv.cli import main
from clinenv.runlog import read_run_log
from clinenv.runlog_lock import RunLogLock, RunLogLocked
from clinenv.wrappers.cdeg.graph import CDEGraph
from clinenv.wrappers.cdeg.scaling import (
    check_fractions,
    log_cases,
    nested_subsets,
    subset_size,
    write_subset_log,
)


def order(seed, cases):
    return sorted(cases, key=lambda c: hashlib.sha256(
        f"clinenv.scale/{seed}/{c[0]}/{c[1]}".encode()).hexdigest())


CASES = [("demo", f"demo-{i:02d}") for i in range(1, 21)]


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_subsets_are_nested_prefixes_of_the_seeded_order(seed):
    subsets = nested_subsets(CASES, [1.0, 0.1, 0.5], seed)
    assert list(subsets) == [0.1, 0.5, 1.0]
    ranked = order(seed, CASES)
    for f, n in ((0.1, 2), (0.5, 10), (1.0, 20)):
        assert set(subsets[f]) == set(ranked[:n])
        assert list(subsets[f]) == [c for c in CASES if c in subsets[f]]  # input order
    assert set(subsets[0.1]) < set(subsets[0.5]) < set(subsets[1.0])


def test_subset_sizes_round_half_up_and_keep_one_case():
    assert [subset_size(f, 15) for f in (0.1, 0.5, 0.3, 1.0)] == [2, 8, 5, 15]  # 1.5->2
    assert subset_size(0.01, 20) == 1
    assert subset_size(0.25, 10) == 3  # 2.5 -> 3
    # exact halves that binary floating point puts just below .5 (0.7 * 45 = 31.4999...)
    assert (subset_size(0.7, 45), subset_size(0.35, 90)) == (32, 32)  # 31.5, 31.5


@pytest.mark.parametrize(("values", "message"), [
    ([], "at least one"), ([0.0], r"\(0, 1\]"), ([1.5], r"\(0, 1\]"),
    ([0.5, 0.5], "twice"), ([math.nan], r"\(0, 1\]")])
def test_bad_fractions(values, message):
    with pytest.raises(ValueError, match=message):
        check_fractions(values)


def test_bad_subsets_input():
    with pytest.raises(ValueError, match="no construction case"):
        nested_subsets([], [0.5])
    with pytest.raises(ValueError, match="twice"):
        nested_subsets([("d", "a"), ("d", "a")], [0.5])
    with pytest.raises(ValueError, match="seed"):
        nested_subsets(CASES, [0.5], seed=-1)


def test_the_subset_log_holds_only_the_subset_lines(tmp_path):
    lines = [{"schema": "clinenv.runlog/1", "case_id": c, "dataset": "d", "repetition": r}
             for c in ("a", "b", "c") for r in (0, 1)]
    first, second = tmp_path / "1.jsonl", tmp_path / "2.jsonl"
    first.write_text("".join(json.dumps(x) + "\n" for x in lines[:4]), encoding="utf-8")
    second.write_text("".join(json.dumps(x) + "\n" for x in lines[4:]), encoding="utf-8")
    assert log_cases([first, second]) == [("d", "a"), ("d", "b"), ("d", "c")]
    out = tmp_path / "sub.jsonl"
    assert write_subset_log([first, second], [("d", "c"), ("d", "a")], out) == 4
    kept = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert kept == [lines[0], lines[1], lines[4], lines[5]]
    before = first.read_bytes()
    with pytest.raises(ValueError, match="would overwrite one of its input logs"):
        write_subset_log([first, second], [("d", "a")], tmp_path / "." / "1.jsonl")
    assert first.read_bytes() == before
    with RunLogLock(out), pytest.raises(RunLogLocked):
        write_subset_log([first, second], [("d", "a")], out)
    assert len(out.read_bytes().splitlines()) == 4  # the held log is untouched


# ------------------------------------------------------------------ end to end (CLI)
OPTIONS = ["Allergic contact dermatitis", "Herpes zoster", "Bullous pemphigoid",
           "Dermatitis herpetiformis", "Bullous impetigo"]
PCR = "Vesicle swab PCR: Varicella-zoster virus DNA detected; herpes zoster reactivation.\n"
CONSTRUCTION = [f"nejm-{i:04d}" for i in range(1, 13)]
EVALUATION = ["nejm-0013", "nejm-0014", "nejm-0015"]
INFORMATIVE = [c for _, c in order(0, [("nejm", c) for c in CONSTRUCTION])[1:4]]


def record(with_pcr: bool) -> dict:
    exams = ("Patch test: Positive reaction to the cream.\nSkin examination: Vesicles on "
             "an erythematous base over the left chest.\n" + (PCR if with_pcr else "")
             + "Lymph nodes: Tender left axillary lymph nodes.")
    return {"question": "A 72-year-old woman presents with an itchy blistering rash on the "
                        "left side of her chest. What is the most likely diagnosis?",
            "patient_info": "You are a 72-year-old retired teacher. Two days ago an itchy "
                            "rash of small blisters appeared on the left side of your chest "
                            "where a new skin cream made contact with your skin.",
            "physical_exams": exams,
            "answers": [{"text": t, "correct": t == "Herpes zoster"} for t in OPTIONS]}


@pytest.fixture
def study(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    ids = CONSTRUCTION + EVALUATION
    (tmp_path / "agentclinic_nejm.jsonl").write_text("".join(
        json.dumps(record(c in INFORMATIVE or c in EVALUATION)) + "\n" for c in ids),
        encoding="utf-8")
    (tmp_path / "construction.txt").write_text("\n".join(CONSTRUCTION) + "\n")
    (tmp_path / "evaluation.txt").write_text("\n".join(EVALUATION) + "\n")
    return tmp_path


ENV = ["--env", "EGIP-NEJM-v0", "--data-dir", ".", "--no-verify", "--premature-diagnosis",
       "decide"]
RUN_ARGS = ("--run-args=" + " ".join(ENV) + " --exam-budget 0 --cdeg-coverage-basis "
            "edge+context --cdeg-coverage-threshold 0.4")


def construct():
    assert main(["run", "--quiet", *ENV, "--exploration", "0.5", "--exam-budget", "1",
                 "--repetitions", "6", "--cases", "construction.txt",
                 "--out", "construct.jsonl"]) == 0


def majority(path):
    """Per case: strictly more than half of its repetitions correct."""
    votes = {}
    for line in read_run_log(path).lines:
        votes.setdefault(line["case_id"], []).append(line["verdict"] == "correct")
    return {c: sum(v) > len(v) / 2 for c, v in votes.items()}


def accuracy(path):
    lines = read_run_log(path).lines
    return 100.0 * sum(x["verdict"] == "correct" for x in lines) / len(lines)


@pytest.mark.filterwarnings("ignore::clinenv.errors.ChecksumWarning")
def test_the_scaling_study_end_to_end(study, capsys):
    construct()
    assert main(["cdeg", "scale", "construct.jsonl", "--eval-cases", "evaluation.txt",
                 "--fractions", "1.0,0.1,0.5", "--out-dir", "scale", "--plot",
                 RUN_ARGS]) == 0
    out = capsys.readouterr().out
    scale = study / "scale"
    ranked = [c for _, c in order(0, [("nejm", c) for c in CONSTRUCTION])]
    expected = {"10": ranked[:1], "50": ranked[:6], "100": ranked}
    vanilla = majority(scale / "vanilla.jsonl")
    assert vanilla == dict.fromkeys(EVALUATION, False)  # dermatitis from the history
    rows = {r["fraction"]: r for r in csv.DictReader(
        (scale / "scaling.csv").read_text(encoding="utf-8").splitlines())}
    assert list(rows) == ["0.1", "0.5", "1.0"]
    for pct, fraction in (("10", "0.1"), ("50", "0.5"), ("100", "1.0")):
        graph = CDEGraph.load(scale / f"graph-{pct}.cdeg.json")
        assert graph.metadata["construction_cases"] == {"nejm": sorted(expected[pct])}
        lines = read_run_log(scale / f"construct-{pct}.jsonl").lines
        assert {x["case_id"] for x in lines} == set(expected[pct])
        assert len(lines) == 6 * len(expected[pct])
        has_edge = bool(set(expected[pct]) & set(INFORMATIVE))
        assert bool(graph.revisions) is has_edge
        wrapped = scale / f"cdeg-{pct}.jsonl"
        assert sorted({x["case_id"] for x in read_run_log(wrapped).lines}) == EVALUATION
        fixed = sum(majority(wrapped)[c] and not vanilla[c] for c in EVALUATION)
        row = rows[fraction]
        assert int(row["n_construction"]) == len(expected[pct])
        assert int(row["n_revisions"]) == len(graph.revisions)
        assert float(row["accuracy"]) == pytest.approx(accuracy(wrapped))
        assert float(row["base_accuracy"]) == pytest.approx(accuracy(scale / "vanilla.jsonl"))
        assert (int(row["n_fix"]), int(row["n_baseline_wrong"])) == (fixed, 3)
        assert float(row["correction"]) == pytest.approx(100.0 * fixed / 3)
        assert row["regression"] == ""  # no case right for vanilla: N_V+ = 0
        assert fixed == (3 if has_edge else 0)
    assert "CDEG experience scaling" in out and "table  scale/scaling.md" in out
    assert (scale / "scaling.png").stat().st_size > 0
    md = (scale / "scaling.md").read_text(encoding="utf-8")
    assert "| 100 % | 12 |" in md and "| vanilla |" in md


@pytest.mark.filterwarnings("ignore::clinenv.errors.ChecksumWarning")
def test_errors_name_the_option(study, capsys):
    construct()
    (study / "overlap.txt").write_text("nejm-0013\nnejm-0002\n")
    base = ["cdeg", "scale", "construct.jsonl", "--out-dir", "s"]
    cases = [
        ([*base, "--eval-cases", "overlap.txt", RUN_ARGS],
         "1 evaluation case(s) are construction cases of the logs (nejm-0002)"),
        ([*base, "--eval-cases", "evaluation.txt", "--run-args=--env X --cases a.txt"],
         "--run-args: --cases is set by `clinenv cdeg scale` itself"),
        ([*base, "--eval-cases", "evaluation.txt", "--build-args=--force"],
         "--build-args: --force is set by `clinenv cdeg scale` itself"),
        ([*base, "--eval-cases", "none.txt"], "--eval-cases none.txt"),
        (["cdeg", "scale", "missing.jsonl", "--eval-cases", "evaluation.txt"],
         "missing.jsonl: no such run log"),
        ([*base, "--eval-cases", "evaluation.txt", "--force", "--run-args=--env EGIP-Nope-v0"],
         "the vanilla run failed: "),
        ([*base, "--eval-cases", "evaluation.txt", "--force", "--run-args=--no-such-option"],
         "the vanilla run: options refused: clinenv run --quiet --no-such-option"),
    ]
    for argv, message in cases:
        assert main(argv) == 2
        assert message in capsys.readouterr().err
    # a study never deletes or overwrites a log it reads or that a run is writing
    Path("s").mkdir(exist_ok=True)
    Path("s/construct-100.jsonl").write_bytes(Path("construct.jsonl").read_bytes())
    assert main(["cdeg", "scale", "s/construct-100.jsonl", "--out-dir", "s", "--force",
                 "--eval-cases", "evaluation.txt", RUN_ARGS]) == 2
    assert "s/construct-100.jsonl would overwrite an input log" in capsys.readouterr().err
    with RunLogLock("s/vanilla.jsonl"):
        Path("s/vanilla.jsonl").write_text("{}\n")
        assert main([*base, "--eval-cases", "evaluation.txt", "--force", RUN_ARGS]) == 2
        assert "s/vanilla.jsonl: in use by another run" in capsys.readouterr().err
        assert Path("s/vanilla.jsonl").read_text() == "{}\n"
    Path("s/vanilla.jsonl").unlink()
    Path("s/construct-100.jsonl").unlink()
    # the failed study left files: a second one needs --force
    assert main([*base, "--eval-cases", "evaluation.txt"]) == 2
    assert "--out-dir s is not empty; use --force" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*base, "--eval-cases", "evaluation.txt", "--fractions", "0.5,2"])
    assert "expected fractions in (0, 1]" in capsys.readouterr().err


def test_runs_that_do_not_pair_are_a_one_line_error(tmp_path, monkeypatch, capsys):
    """The sub-commands are replaced by writers of real files (an empty graph; a vanilla
    run of demo-01 and a wrapped run of demo-02): the comparison finds no common case,
    and the command exits 2 naming the point instead of a traceback."""
    import clinenv.cli.cdeg_scale as scale

    monkeypatch.chdir(tmp_path)
    (tmp_path / "one.txt").write_text("demo-01\n")
    (tmp_path / "two.txt").write_text("demo-02\n")
    for name, cases in (("v", "one.txt"), ("w", "two.txt"), ("construct", "two.txt")):
        assert main(["run", "--quiet", "--env", "EGIP-Demo-v0", "--cases", cases,
                     "--out", f"{name}.jsonl"]) == 0

    def fake_sub(parser, argv, log, what, ok=(0,)):
        out = Path(argv[argv.index("--out") + 1])
        if argv[0] != "run":
            CDEGraph().save(out)
        else:
            out.write_bytes((tmp_path / ("w.jsonl" if "--cdeg" in argv else "v.jsonl"))
                            .read_bytes())
        return 0

    monkeypatch.setattr(scale, "_sub", fake_sub)
    assert main(["cdeg", "scale", "construct.jsonl", "--eval-cases", "one.txt",
                 "--fractions", "1.0", "--out-dir", "s"]) == 2
    err = capsys.readouterr().err
    assert "the 100 % point: no case in common" in err and "Traceback" not in err
