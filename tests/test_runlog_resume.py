"""Resuming may raise a run's counts, never lower them (:meth:`RunContext.check`): a
lower count made ``run`` and ``eval`` report different accuracies of one log."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.scripted_doctor import ScriptedDoctor
from clinenv.cli import main
from clinenv.evaluation.runs import load_runs
from clinenv.runlog import RunLogError
from clinenv.runs import RunSpec, run

N_DEMO = 17


def _cut(path, n):
    path.write_bytes(b"".join(path.read_bytes().splitlines(True)[:n]))


def test_the_issue_case_lower_repetitions_is_refused(tmp_path, capsys, monkeypatch):
    """A 4-repetition demo log cut to 20 lines, resumed with --repetitions 2 (it printed
    29.41 % in run and 14.71 % in eval)."""
    monkeypatch.delenv("CLINENV_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--env", "EGIP-Demo-v0", "--repetitions", "4", "--out", "r.jsonl",
                 "--quiet"]) == 0
    _cut(tmp_path / "r.jsonl", 20)
    before = (tmp_path / "r.jsonl").read_bytes()
    capsys.readouterr()
    assert main(["run", "--env", "EGIP-Demo-v0", "--repetitions", "2", "--out", "r.jsonl",
                 "--resume", "--quiet"]) == 2
    assert capsys.readouterr().err == (
        "clinenv: error: r.jsonl, line 1: the log was written with --repetitions 4 but "
        "this run has --repetitions 2: resuming may raise --repetitions, never lower it (a "
        "smaller run needs another --out file)\n")
    assert (tmp_path / "r.jsonl").read_bytes() == before
    # the same count finishes the run, and run and eval agree
    assert main(["run", "--env", "EGIP-Demo-v0", "--repetitions", "4", "--out", "r.jsonl",
                 "--resume", "--quiet"]) == 0
    run_out = capsys.readouterr().out
    (run,) = load_runs([tmp_path / "r.jsonl"])
    assert (run.n_cases_scheduled, run.n_repetitions) == (N_DEMO, 4)
    accuracy = [x for x in run_out.splitlines() if x.startswith("  accuracy    ")][0]
    n_correct = sum(json.loads(x)["correct"] for x in
                    (tmp_path / "r.jsonl").read_text(encoding="utf-8").splitlines())
    assert f"{100 * n_correct / (4 * N_DEMO):.2f} %" in accuracy


def test_lower_episodes_is_refused_and_higher_extends(tmp_path):
    out = tmp_path / "log.jsonl"
    with gym.make("EGIP-Demo-v0") as env:
        run(lambda: env, ScriptedDoctor, RunSpec(out=out, episodes=10))
        _cut(out, 4)
        with pytest.raises(RunLogError, match=r"log\.jsonl, line 1: the log was written "
                                              r"with --episodes 10 but this run has "
                                              r"--episodes 5"):
            run(lambda: env, ScriptedDoctor, RunSpec(out=out, episodes=5, resume=True))
        assert len(out.read_bytes().splitlines()) == 4
        more = run(lambda: env, ScriptedDoctor, RunSpec(out=out, episodes=12, repetitions=2,
                                                        resume=True))
        assert (more.n_new, more.n_resumed, more.n_extra) == (20, 4, 0)
        with pytest.raises(RunLogError, match="--repetitions 2 but this run has "
                                              "--repetitions 1"):
            run(lambda: env, ScriptedDoctor, RunSpec(out=out, episodes=12, resume=True))


def test_a_log_without_schedule_fields_is_judged_by_its_lines(tmp_path):
    """Logs written before the schedule fields existed: the highest repetition and case
    index present give the counts the log was started with."""
    out = tmp_path / "log.jsonl"
    with gym.make("EGIP-Demo-v0") as env:
        run(lambda: env, ScriptedDoctor, RunSpec(out=out, episodes=3, repetitions=2))
        lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
        for line in lines:
            del line["n_cases_scheduled"], line["n_repetitions"]
        out.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
        with pytest.raises(RunLogError, match=r"line 4: the log holds repetition 1, so it "
                                              r"was run with --repetitions 2 or more but "
                                              r"this run has --repetitions 1"):
            run(lambda: env, ScriptedDoctor, RunSpec(out=out, episodes=3, resume=True))
        with pytest.raises(RunLogError, match=r"line 3: the log holds case index 2, so it "
                                              r"was run with --episodes 3 or more but this "
                                              r"run has --episodes 2"):
            run(lambda: env, ScriptedDoctor, RunSpec(out=out, episodes=2, repetitions=2,
                                                     resume=True))
        assert run(lambda: env, ScriptedDoctor, RunSpec(out=out, episodes=3, repetitions=2,
                                                        resume=True)).n_new == 0
