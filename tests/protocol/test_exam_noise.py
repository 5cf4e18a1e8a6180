"""Examiner noise of record lookup O (:mod:`clinenv.protocol.exam_noise`).

Expected texts come from the demo case ``demo-01``'s records (Vital Signs is PE1; its
stored values are the ones shown), written out here by hand.
"""
# issue 34 §2

from __future__ import annotations

import copy
import hashlib
import pickle

import gymnasium as gym
import pytest
from pydantic import ValidationError

import clinenv  # noqa: F401  (registers the ids)
from clinenv.env import EnvConfig
from clinenv.protocol.exam_noise import DELAYED_TEXT, ExamNoise, ExamNoiseConfig
from clinenv.protocol.lookup import UNAVAILABLE_TEXT
from clinenv.seeding import keyed_uniform

DELAYED_VITALS = DELAYED_TEXT.format("Vital Signs")


def _env(**kwargs):
    env = gym.make("EGIP-Demo-v0", **kwargs)
    env.reset(seed=0, options={"case_id": "demo-01"})
    return env


def _events(env, source=None):
    events = env.unwrapped.episode_record()["events"]
    return [e for e in events if source is None or e["source"] == source]


# --- settings -------------------------------------------------------------------------


def test_noise_settings_take_a_dict_and_go_into_to_kwargs():
    config = EnvConfig(exam_noise={"unavailable": 0.2})
    assert config.exam_noise == ExamNoiseConfig(unavailable=0.2, delayed=0.0)
    assert config.to_kwargs() == {"exam_noise": {"unavailable": 0.2}}
    assert EnvConfig.merge(None, config.to_kwargs(), caller="t") == config
    assert EnvConfig(exam_noise={}).to_kwargs() == EnvConfig(exam_noise=None).to_kwargs() == {}
    assert not ExamNoiseConfig().active


@pytest.mark.parametrize("bad, field", [({"unavailable": 1.5}, "exam_noise.unavailable"),
                                        ({"delayed": True}, "exam_noise.delayed"),
                                        ({"late": 0.1}, "exam_noise.late")])
def test_bad_noise_is_refused_naming_the_field(bad, field):
    with pytest.raises(ValidationError, match=field.replace(".", r"\.")):
        EnvConfig(exam_noise=bad)


def test_noise_is_refused_where_there_is_no_record_lookup():
    from clinenv.multiagent.aec import EGIPAECEnv

    with pytest.raises(ValueError, match="applies to record lookup O under EGIP"):
        gym.make("AgentClinic-Demo-v0", exam_noise={"delayed": 0.5})
    with pytest.raises(ValueError, match="examiner=NativeRecordReader"):
        gym.make("EGIP-Demo-v0", exam_noise={"delayed": 0.5}, examiner="reader")
    with pytest.raises(ValueError, match="external examiner seat"):
        EGIPAECEnv("demo", exam_noise={"unavailable": 0.5})
    EGIPAECEnv("demo", examiner="lookup", exam_noise={"unavailable": 0.5})


# --- draws ----------------------------------------------------------------------------


def test_keyed_uniform_is_blake2b_of_the_keys():
    digest = hashlib.blake2b(b"5\x1fcase\x1fT1\x1fdelayed", digest_size=8).digest()
    assert keyed_uniform(5, "case", "T1", "delayed") == int.from_bytes(digest, "big") / 2**64
    assert 0.0 <= keyed_uniform(0) < 1.0
    assert keyed_uniform(5, "case", "T1") != keyed_uniform(5, "case", "T2")


def test_a_draw_depends_on_seed_case_and_exam_only():
    noise = ExamNoise(ExamNoiseConfig(unavailable=0.5, delayed=0.5), 11, "demo-01")
    hits = [noise.unavailable(f"T{i}") for i in range(40)]
    assert hits == [ExamNoise(noise.config, 11, "demo-01").unavailable(f"T{i}")
                    for i in range(40)]
    assert 5 < sum(hits) < 35
    assert hits != [ExamNoise(noise.config, 12, "demo-01").unavailable(f"T{i}")
                    for i in range(40)]


# --- unavailable ----------------------------------------------------------------------


def test_without_noise_events_have_no_noise_keys():
    env = _env()
    env.step("REQUEST TEST: PE1")
    (event,) = _events(env, "measurement")
    assert "noise" not in event and "delayed_from" not in event
    assert env.unwrapped.runtime.noise is None


def test_unavailable_noise_shows_a_recorded_result_as_unavailable():
    env = _env(exam_noise={"unavailable": 1.0})
    obs, *_ = env.step("REQUEST TEST: PE1")
    (event,) = _events(env, "measurement")
    assert event == {"turn": 1, "request": "PE1", "exam_id": "PE1", "name": "Vital Signs",
                     "source_paths": [["physical_exam", "Vital_Signs"]],
                     "recorded_value": UNAVAILABLE_TEXT,
                     "result_availability": "unavailable", "source": "measurement",
                     "noise": True}
    assert ("Examiner [PE1 Vital Signs] (result not available):\n  result not available"
            in obs["text"])
    assert env.unwrapped.episode_record()["evidence"]["observations"][0]["availability"] \
        == "unavailable"


def test_unavailable_noise_leaves_misses_as_not_recorded():
    env = _env(exam_noise={"unavailable": 1.0})
    env.step("REQUEST TEST: Brain MRI")
    (event,) = _events(env, "measurement")
    assert event["result_availability"] == "not_recorded" and "noise" not in event


def test_unavailable_noise_hits_each_test_of_a_group():
    env = _env(exam_noise={"unavailable": 1.0})
    env.step("REQUEST TEST: Blood Tests")
    (event,) = _events(env, "measurement")
    assert event["exam_id"] == "T1,T2,T3" and event["noise"] is True
    assert event["result_availability"] == "unavailable"
    assert event["recorded_value"] == ("Complete Blood Count:\n  result not available\n"
                                       "C-Reactive Protein:\n  result not available\n"
                                       "Urea:\n  result not available")


# --- delayed --------------------------------------------------------------------------


def test_a_delayed_result_arrives_one_round_later():
    env = _env(exam_noise={"delayed": 1.0})
    obs, *_ = env.step("REQUEST TEST: PE1")
    assert _events(env, "measurement") == []
    assert f"Interface: {DELAYED_VITALS}" in obs["text"]
    obs, *_ = env.step("Do you smoke?")
    (event,) = _events(env, "measurement")
    assert (event["turn"], event["delayed_from"], event["noise"]) == (2, 1, True)
    assert event["result_availability"] == "recorded"
    assert event["recorded_value"].startswith("Temperature: 38.9 °C (102 °F)")
    kinds = [(e["turn"], e["source"]) for e in _events(env)]
    assert kinds == [(1, "doctor"), (1, "interface"), (2, "doctor"), (2, "patient"),
                     (2, "measurement")]
    # requested at once: the menu no longer offers it, and asking again is a repeat
    assert "PE1" not in [m["id"] for m in env.unwrapped._info(action_kind=None)["menu"]]


def test_a_result_delayed_in_the_last_round_arrives_before_the_decision():
    env = _env(exam_noise={"delayed": 1.0}, acquisition_rounds=2)
    env.step("Do you smoke?")
    obs, *_ = env.step("REQUEST TEST: PE1")
    events = _events(env)
    assert [(e["source"], e.get("kind")) for e in events[-3:]] == [
        ("interface", "result_delayed"), ("measurement", None),
        ("interface", "decision_phase")]
    assert events[-2]["turn"] == 2 and events[-2]["delayed_from"] == 2
    assert "Temperature: 38.9 °C (102 °F)" in obs["text"]


def test_an_early_stop_delivers_the_delayed_results():
    env = _env(exam_noise={"delayed": 1.0}, premature_diagnosis="decide")
    env.step("REQUEST TEST: PE1")
    env.step("DIAGNOSIS READY: pneumonia")
    (event,) = _events(env, "measurement")
    assert event["turn"] == 2 and event["delayed_from"] == 1
    assert env.unwrapped.runtime.phase == "decide"


def test_delayed_exams_count_in_the_workup():
    env = _env(exam_noise={"delayed": 1.0}, acquisition_rounds=3)
    for action in ("REQUEST TEST: PE1", "REQUEST TEST: T1", "Do you smoke?"):
        env.step(action)
    *_, info = env.step("DIAGNOSIS READY: pneumonia")
    assert info["n_exams_requested"] == 2
    assert [e["exam_id"] for e in _events(env, "measurement")] == ["PE1", "T1"]


def test_a_copy_with_a_pending_result_goes_on_as_the_original():
    env = _env(exam_noise={"delayed": 1.0, "unavailable": 0.5})
    env.step("REQUEST TEST: T1")
    twins = [pickle.loads(pickle.dumps(env)), copy.deepcopy(env)]
    for one in (env, *twins):
        one.step("REQUEST TEST: T4")
        one.step("Do you smoke?")
    assert _events(twins[0]) == _events(twins[1]) == _events(env)
    assert len(_events(env, "measurement")) == 2


def test_the_same_seed_draws_the_same_noise():
    def play(seed):
        env = gym.make("EGIP-Demo-v0", exam_noise={"unavailable": 0.5, "delayed": 0.5})
        env.reset(seed=seed)
        for exam in ("PE1", "PE2", "PE3", "T1", "T2", "T3"):
            env.step(f"REQUEST TEST: {exam}")
        return _events(env)

    assert play(4) == play(4)
    assert any(play(4) != play(seed) for seed in range(5, 10))
