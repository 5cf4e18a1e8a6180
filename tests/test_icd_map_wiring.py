"""The ICD mapping where clinenv scores: the EGIP environment (``icd_map=`` and ``clinenv
run --icd-map``) and CDEG construction (Eq. 3 outcomes; ``clinenv cdeg build
--icd-map``). Expected verdicts follow from the hand-written maps: the demo case
demo-01's target is "Lobar pneumonia", which the plain scorer never merges with
"Pneumococcal pneumonia"; the map gives both ICD-10 J18.1.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv.cli import main
from clinenv.icd_map import IcdMap
from clinenv.runlog import read_run_log
from clinenv.testing.cdeg_logs import fixture_lines, log_line, obs_spec, write_log
from clinenv.wrappers.cdeg.graph import CDEGraph
from clinenv.wrappers.cdeg.trajectories import load_trajectories

LOBAR = "J18.1\tLobar pneumonia\tPneumococcal pneumonia\n"


def answer(env, text):
    env.reset(seed=0, options={"case_id": "demo-01"})
    env.step(f"DIAGNOSIS READY: {text}")  # acquisition ends early ("decide")
    _, reward, terminated, _, info = env.step(f"DIAGNOSIS READY: {text}")
    assert terminated
    return {**info, "step_reward": reward}


def test_the_environment_scores_through_the_map_only_when_given(tmp_path):
    path = tmp_path / "icd.tsv"
    path.write_text(LOBAR + "J15.9\tBacterial pneumonia\n", encoding="utf-8")
    plain = gym.make("EGIP-Demo-v0", premature_diagnosis="decide")
    mapped = gym.make("EGIP-Demo-v0", premature_diagnosis="decide", icd_map=str(path))
    wrong = answer(plain, "Pneumococcal pneumonia")
    right = answer(mapped, "Pneumococcal pneumonia")
    assert (wrong["verdict"], right["verdict"]) == ("wrong", "correct")
    assert right["step_reward"] > wrong["step_reward"]
    assert answer(mapped, "Bacterial pneumonia")["verdict"] == "wrong"  # J15.9 != J18.1
    assert answer(mapped, "Lobar pneumonia")["verdict"] == "correct"


def test_clinenv_run_icd_map(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "icd.tsv").write_text(LOBAR, encoding="utf-8")
    base = ["run", "--quiet", "--env", "EGIP-Demo-v0", "--episodes", "1"]
    assert main([*base, "--icd-map", "icd.tsv", "--out", "r.jsonl"]) == 0
    (line,) = read_run_log(tmp_path / "r.jsonl").lines
    assert line["env_spec"]["kwargs"]["icd_map"] == "icd.tsv"
    assert main([*base, "--icd-map", "none.tsv", "--out", "s.jsonl"]) == 2
    assert "--icd-map none.tsv: no such file" in capsys.readouterr().err
    assert not (tmp_path / "s.jsonl").exists()
    (tmp_path / "bad.tsv").write_text("PE\tPulmonary embolism\n", encoding="utf-8")
    assert main([*base, "--icd-map", "bad.tsv", "--out", "t.jsonl"]) == 2
    assert "bad.tsv, line 1, field 'code'" in capsys.readouterr().err


PE_MAP = IcdMap({"I26.99": ["Pulmonary embolism", "PE"], "J18.9": ["Pneumonia"]})


def test_construction_outcomes_follow_the_codes(tmp_path):
    sob = obs_spec("Patient", "What brings you in?", "Shortness of breath.")
    lines = [log_line("c1", 0, "PE", "wrong", [sob], target="Pulmonary embolism"),
             log_line("c1", 1, "Pneumonia", "correct", [sob], target="Pulmonary embolism"),
             log_line("c1", 2, "Sepsis", "wrong", [sob], target="Pulmonary embolism"),
             log_line("c1", 3, "Undetermined", "unscored", [sob], abstained=True,
                      target="Pulmonary embolism"),
             log_line("c1", 4, "PE", "unscored", [sob], target="Pulmonary embolism"),
             log_line("c1", 5, "PE", "wrong", [sob])]  # no target logged
    path = write_log(tmp_path / "r.jsonl", lines)
    plain = load_trajectories([path]).trajectories
    mapped = load_trajectories([path], icd_map=PE_MAP).trajectories
    assert [t.outcome for t in plain] == ["failure", "success", "failure", "abstained",
                                          "unscored", "failure"]
    assert [(t.outcome, t.by_icd) for t in mapped] == [
        ("success", True), ("failure", True), ("failure", False), ("abstained", False),
        ("success", True), ("failure", False)]


def test_cdeg_build_icd_map(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    targets = {"c1": "Pulmonary embolism", "c2": "Migraine"}
    lines = [{**x, "target": targets[x["case_id"]]} for x in fixture_lines()]
    write_log(tmp_path / "r.jsonl", lines)
    (tmp_path / "icd.tsv").write_text(
        "I26.99\tPulmonary embolism\nJ18.9\tPneumonia\nG43.909\tMigraine\n"
        "I60.9\tSubarachnoid hemorrhage\n", encoding="utf-8")
    build = ["cdeg", "build", "r.jsonl", "--pair-threshold", "0.3"]
    assert main([*build, "--out", "plain.json"]) in (0, 1)
    assert main([*build, "--out", "icd.json", "--icd-map", "icd.tsv"]) in (0, 1)
    out = capsys.readouterr().out
    # c1: reps 0, 1, 3 (the retry); c2: reps 0, 1, 2; rep 2 of c1 abstains
    assert "icd map       icd.tsv: 6 trajectory outcomes decided by ICD code" in out
    plain, icd = CDEGraph.load(tmp_path / "plain.json"), CDEGraph.load(tmp_path / "icd.json")
    assert icd.metadata["icd_map"] == {"name": "icd.tsv", "codes": 4}
    assert icd.metadata["counts"]["icd_outcomes"] == 6
    # the codes agree with the logged verdicts here, so the graphs agree
    assert [(e.source, e.target, e.support) for e in icd.revisions] == [
        (e.source, e.target, e.support) for e in plain.revisions]
    assert main([*build, "--out", "x.json", "--icd-map", "missing.tsv"]) == 2
    assert "--icd-map missing.tsv: no such file" in capsys.readouterr().err


@pytest.mark.parametrize("env_id", ["AgentClinic-Demo-v0"])
def test_native_ids_refuse_the_map(tmp_path, env_id):
    (tmp_path / "icd.tsv").write_text(LOBAR, encoding="utf-8")
    with pytest.raises(Exception, match="icd_map"):
        gym.make(env_id, icd_map=str(tmp_path / "icd.tsv"))


def test_a_path_object_is_accepted(tmp_path):
    path = tmp_path / "icd.tsv"
    path.write_text(LOBAR, encoding="utf-8")
    env = gym.make("EGIP-Demo-v0", premature_diagnosis="decide", icd_map=path)
    assert env.unwrapped.config.icd_map == str(path)
    assert answer(env, "Pneumococcal pneumonia")["verdict"] == "correct"


class FixedDoctor:
    """Answers every decision with one fixed action."""

    name = "fixed"

    def __init__(self, action: str) -> None:
        self.action = action

    def reset(self, seed=None) -> None:
        pass

    def act(self, observation, info) -> str:
        return self.action


def test_replay_scores_through_the_runs_map(tmp_path, monkeypatch):
    """``clinenv replay`` scores "as the environment scores it": a run made with
    ``icd_map`` is replayed through the same map (demo-01: "Pneumococcal pneumonia" is
    J18.1 like the target), a run without it is not; a map gone since the run is a
    one-line error naming the field."""
    import asyncio

    from clinenv.runs.replay import ReplayError, load_source
    from clinenv.runs.replaying import decide_and_score

    monkeypatch.chdir(tmp_path)
    (tmp_path / "icd.tsv").write_text(LOBAR, encoding="utf-8")
    base = ["run", "--quiet", "--env", "EGIP-Demo-v0", "--episodes", "1"]
    assert main([*base, "--icd-map", "icd.tsv", "--out", "mapped.jsonl"]) == 0
    assert main([*base, "--out", "plain.jsonl"]) == 0
    doctor = FixedDoctor("DIAGNOSIS READY: Pneumococcal pneumonia")
    verdicts = {}
    for name in ("mapped", "plain"):
        (episode,) = load_source(tmp_path / f"{name}.jsonl").episodes
        result = asyncio.run(decide_and_score(episode, doctor, ablation="full"))
        verdicts[name] = (result["outcome"]["verdict"], result["outcome"]["match_score"])
    assert verdicts == {"mapped": ("correct", 100.0), "plain": ("wrong", verdicts["plain"][1])}
    (tmp_path / "icd.tsv").unlink()
    with pytest.raises(ReplayError, match=r"mapped.jsonl, line 1: field "
                                          r"'env_spec.kwargs.icd_map'"):
        load_source(tmp_path / "mapped.jsonl")
