"""Personas and examiner noise through the run tools: ``clinenv run`` flags, the run
log's ``env_spec``, export rebuild, the tool view / ``task_rows`` and ``clinenv audit``."""
# issue 34 §2

from __future__ import annotations

import json

import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.env.persona import PERSONAS, PersonaPatient

SETTINGS = [{"patient_persona": f"{name}:0.5"} for name in PERSONAS[1:]] + [
    {"exam_noise": {"unavailable": 0.5}}, {"exam_noise": {"delayed": 0.5}},
    {"patient_persona": "reluctant", "exam_noise": {"unavailable": 0.3, "delayed": 0.3}}]


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def noisy_log(tmp_path, monkeypatch):
    from clinenv.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["run", "--env", "EGIP-Demo-v0", "--episodes", "4", "--out", "l.jsonl",
                 "--quiet", "--patient-persona", "forgetful:0.5",
                 "--exam-noise", "unavailable=0.3,delayed=0.5"]) == 0
    return tmp_path / "l.jsonl"


def test_run_flags_go_into_env_spec(noisy_log):
    lines = _lines(noisy_log)
    assert {json.dumps(line["env_spec"]["kwargs"], sort_keys=True) for line in lines} == {
        json.dumps({"dataset": "demo", "patient_persona": "forgetful:0.5",
                    "exam_noise": {"unavailable": 0.3, "delayed": 0.5}}, sort_keys=True)}
    events = [e for line in lines for e in line["events"] if e["source"] == "measurement"]
    assert any(e.get("delayed_from") for e in events)


def test_export_rebuilds_a_noisy_persona_run(noisy_log):
    from clinenv.export import episode_rows

    rows = list(episode_rows([noisy_log], rebuild=True))  # replays, compares the events
    assert len(rows) == 4


@pytest.mark.parametrize("flags, message", [
    (["--patient-persona", "grumpy"], "setting 'patient_persona'"),
    (["--exam-noise", "unavailable"], "--exam-noise 'unavailable': 'unavailable' is not "
                                      "KIND=P"),
    (["--exam-noise", "late=0.1"], "setting 'exam_noise.late'"),
    (["--exam-noise", "unavailable=2"], "setting 'exam_noise.unavailable'"),
])
def test_bad_flags_are_one_error_line(flags, message, tmp_path, monkeypatch, capsys):
    from clinenv.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["run", "--env", "EGIP-Demo-v0", "--episodes", "1", "--quiet", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.splitlines()) == 1


def test_the_tool_view_and_task_rows_take_the_settings():
    from clinenv.integrations.tools import ToolEpisode, task_rows

    episode = ToolEpisode("EGIP-Demo-v0", patient_persona="lay",
                          exam_noise={"delayed": 1.0})
    assert isinstance(episode.env.patient, PersonaPatient)
    assert episode.env.exam_noise.delayed == 1.0
    rows = task_rows("EGIP-Demo-v0", patient_persona="lay")
    assert rows == task_rows("EGIP-Demo-v0")  # rows pin episodes; settings stay env kwargs
    with pytest.raises(ValueError, match="must be one of"):
        task_rows("EGIP-Demo-v0", patient_persona="grumpy")


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: json.dumps(s))
def test_the_audit_passes_under_every_persona_and_noise(settings):
    from clinenv.audit.runner import run_audit

    report = run_audit("EGIP-Demo-v0", limit=4, **settings)
    assert report.leaks == [] and report.passed


def test_gymnasium_and_pettingzoo_checks_pass_with_persona_and_noise():
    import warnings

    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env
    from pettingzoo.test import api_test

    from clinenv.multiagent.aec import EGIPAECEnv

    noise = {"unavailable": 0.5, "delayed": 0.5}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(gym.make("EGIP-Demo-v0", patient_persona="tangential:0.5",
                           exam_noise=noise).unwrapped, skip_render_check=True)
        api_test(EGIPAECEnv("demo", patient="retrieval", examiner="lookup",
                            patient_persona="forgetful", exam_noise=noise), num_cycles=30)
