"""The ``cdeg-30`` preset: the CDEG paper's 30-turn interaction budget, the doctor
deciding when to stop (clinenv.protocol.presets)."""

from __future__ import annotations

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv.cli import main
from clinenv.protocol.presets import PRESETS, resolve_preset
from clinenv.runlog import read_run_log


def test_the_preset_sets_29_acquisition_rounds_and_early_decisions():
    assert dict(PRESETS["cdeg-30"]) == {"acquisition_rounds": 29,
                                        "premature_diagnosis": "decide",
                                        "history_review": True}
    # an explicit kwarg wins over the preset
    assert resolve_preset("cdeg-30", {"acquisition_rounds": 9})["acquisition_rounds"] == 9


def test_a_doctor_that_never_stops_gets_exactly_30_turns():
    env = gym.make("EGIP-Demo-v0", preset="cdeg-30")
    env.reset(seed=0, options={"case_id": "demo-01"})
    phases = []
    for _ in range(29):
        _, _, terminated, truncated, info = env.step("How are you feeling?")
        assert not (terminated or truncated)
        phases.append(info["phase"])
    assert phases == ["acquire"] * 28 + ["decide"]  # the 29th round opens the decision
    _, _, terminated, _, info = env.step("DIAGNOSIS READY: Community-acquired pneumonia")
    assert terminated and info["verdict"] in ("correct", "wrong")
    # 29 doctor rounds of acquisition (the record's ``turns``) + the decision: 30 steps
    assert env.unwrapped.episode_record()["turns"] == 29


def test_a_diagnosis_marker_ends_acquisition_early():
    env = gym.make("EGIP-Demo-v0", preset="cdeg-30")
    env.reset(seed=0, options={"case_id": "demo-01"})
    env.step("How are you feeling?")
    _, _, terminated, _, info = env.step("DIAGNOSIS READY: pneumonia")
    assert not terminated and info["phase"] == "decide"


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_clinenv_run_preset_cdeg_30(workdir, capsys):
    assert main(["run", "--quiet", "--env", "EGIP-Demo-v0", "--preset", "cdeg-30",
                 "--episodes", "2", "--out", "r.jsonl"]) == 0
    lines = read_run_log(workdir / "r.jsonl").lines
    assert [x["case_id"] for x in lines] == ["demo-01", "demo-02"]
    assert all(x["env_spec"]["kwargs"]["preset"] == "cdeg-30" for x in lines)
    assert all(x["turns"] <= 29 for x in lines)
