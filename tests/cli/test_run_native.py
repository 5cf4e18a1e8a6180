"""``clinenv run`` on the native ids and with ``--preset`` (in process, offline)."""

from __future__ import annotations

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.scripted_doctor import EXAM_NAMES
from clinenv.cli import main
from clinenv.runlog import read_run_log


def test_preset_runs_the_no_menu_ablation_and_names_the_default_log(workdir, capsys):
    """``--preset egip-no-menu``: the environment gets the preset (its spec says so), the
    scripted doctor requests by name, the default log and the title name the preset."""
    assert main(["run", "--env", "EGIP-Demo-v0", "--preset", "egip-no-menu",
                 "--episodes", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("EGIP-Demo-v0 (preset egip-no-menu) | doctor scripted | seed 0")
    log = workdir / "runs" / "EGIP-Demo-v0_egip-no-menu_scripted_seed0.jsonl"
    (line,) = read_run_log(log).lines
    assert line["env_spec"]["kwargs"]["preset"] == "egip-no-menu"
    requests = [e["request"] for e in line["events"] if e["source"] == "measurement"]
    assert requests[0] == EXAM_NAMES[0] and "PE1" not in requests


def test_examiner_lookup_is_refused_under_a_native_preset(workdir, capsys):
    code = main(["run", "--env", "EGIP-Demo-v0", "--preset", "agentclinic", "--examiner",
                 "lookup"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("clinenv: error: --examiner lookup: the agentclinic protocol has "
                          "no seat for record lookup")
    assert not (workdir / "runs").exists()


def test_native_id_with_the_scripted_doctor_ends_every_episode_itself(workdir, capsys):
    """No episode of the scripted doctor reaches the turn cap unfinished."""
    assert main(["run", "--env", "AgentClinic-Demo-v0", "--quiet", "--out", "a.jsonl"]) == 0
    lines = read_run_log(workdir / "a.jsonl").lines
    assert len(lines) == 17
    assert {x["end_reason"] for x in lines} == {"diagnosis"}
    assert all(x["answer"].startswith("DIAGNOSIS READY: ") for x in lines)
    assert sum(x["correct"] for x in lines) == 3  # demo-01, -05, -17 name it in imaging


def test_premature_diagnosis_decide_lets_the_doctor_stop_early(workdir, capsys):
    """``--premature-diagnosis decide`` reaches the environment: the scripted doctor's
    first diagnosis proposal ends acquisition (fewer rounds than T = 19), and the spec in
    the log records the setting; under the default every episode runs all 19 rounds."""
    assert main(["run", "--env", "EGIP-Demo-v0", "--premature-diagnosis", "decide",
                 "--episodes", "3", "--quiet", "--out", "decide.jsonl"]) == 0
    assert main(["run", "--env", "EGIP-Demo-v0", "--episodes", "3", "--quiet",
                 "--out", "clarify.jsonl"]) == 0
    decide = read_run_log(workdir / "decide.jsonl").lines
    clarify = read_run_log(workdir / "clarify.jsonl").lines
    assert all(x["env_spec"]["kwargs"]["premature_diagnosis"] == "decide" for x in decide)
    assert [x["turns"] for x in clarify] == [19, 19, 19]
    assert all(x["stopped_early"] and x["turns"] < 19 for x in decide)


def test_premature_diagnosis_on_a_native_id_is_one_line(workdir, capsys):
    code = main(["run", "--env", "AgentClinic-Demo-v0", "--premature-diagnosis", "decide",
                 "--episodes", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "'premature_diagnosis'" in err and "NativeConfig" in err
    assert not (workdir / "runs").exists()
