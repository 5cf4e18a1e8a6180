"""The Gymnasium environment: API conformance, seeding, robustness, and information flow."""

from __future__ import annotations

import copy
import re
import string
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import clinenv
from clinenv.agents.scripted_doctor import ScriptedDoctor
from clinenv.datasets.flags import fold, target_phrases
from clinenv.env import EGIPEnv
from clinenv.errors import DatasetNotFoundError
from clinenv.protocol.catalog import Catalog
from clinenv.protocol.lookup import record_at
from clinenv.testing.data import leaves

PRESENT_IDS = ["EGIP-Demo-v0", "EGIP-MedQA-v0", "EGIP-NEJM-v0"]
ABSENT_IDS = ["EGIP-MedQA_Ext-v0", "EGIP-NEJM_Ext-v0", "EGIP-MIMIC-IV-v0"]


def test_every_id_is_registered():
    assert set(clinenv.EGIP_IDS) == set(PRESENT_IDS + ABSENT_IDS)
    for env_id in clinenv.EGIP_IDS:
        assert env_id in gym.registry


@pytest.mark.parametrize("env_id", PRESENT_IDS)
def test_check_env_passes(env_id, shared_data_dir):
    env = gym.make(env_id, render_mode="ansi")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=False)


@pytest.mark.parametrize("env_id", ABSENT_IDS)
def test_absent_datasets_fail_at_make_with_instructions(env_id, shared_data_dir):
    with pytest.raises(DatasetNotFoundError) as err:
        gym.make(env_id)
    assert "CLINENV_DATA_DIR" in str(err.value)


def _episode(env, doctor, seed, case_id=None):
    options = None if case_id is None else {"case_id": case_id}
    obs, info = env.reset(seed=seed, options=options)
    doctor.reset(seed=seed)
    trace = [(copy.deepcopy(obs), copy.deepcopy(info))]
    done = False
    while not done:
        obs, reward, terminated, truncated, info = env.step(doctor.act(obs, info))
        trace.append((copy.deepcopy(obs), reward, terminated, truncated, copy.deepcopy(info)))
        done = terminated or truncated
    return trace


def _same(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b) and a.dtype == b.dtype
    return a == b


def test_same_seed_same_episode(shared_data_dir):
    env = gym.make("EGIP-MedQA-v0").unwrapped
    first = _episode(env, ScriptedDoctor(exploration=0.3), seed=11)
    second = _episode(gym.make("EGIP-MedQA-v0").unwrapped, ScriptedDoctor(exploration=0.3),
                      seed=11)
    assert _same(first, second)


def test_reset_sequence_is_deterministic_and_fresh():
    # B12: reset(seed) then reset() continues from the env's own generator.
    env = gym.make("EGIP-Demo-v0").unwrapped
    o1, _ = env.reset(seed=123)
    o1_copy = copy.deepcopy(o1)
    o2, _ = env.reset()
    o1["exam_mask"][:] = 0  # mutating a returned observation changes nothing later
    o3, _ = env.reset(seed=123)
    o4, _ = env.reset()
    assert _same(o1_copy, o3) and _same(o2, o4)
    cases = {env.reset(seed=s)[1]["case_id"] for s in range(40)}
    assert len(cases) > 5  # the seed really draws the case


def test_case_id_option_pins_the_case():
    env = gym.make("EGIP-Demo-v0").unwrapped
    assert env.reset(seed=1, options={"case_id": "demo-07"})[1]["case_id"] == "demo-07"
    assert env.reset(options={"case_id": 2})[1]["case_id"] == "demo-03"
    with pytest.raises(KeyError):
        env.reset(options={"case_id": "nope"})


def test_random_and_unicode_actions_never_raise():
    env = gym.make("EGIP-Demo-v0").unwrapped
    env.action_space.seed(0)
    rng = np.random.default_rng(0)
    alphabet = list(string.printable) + list("°µβ’–é漢字🙂\u0000\u202e")
    obs, info = env.reset(seed=0)
    for i in range(200):
        if i % 2:
            action = env.action_space.sample()
        else:
            n = int(rng.integers(0, 6000))
            action = "".join(rng.choice(alphabet, size=n).tolist())  # Python str items
        obs, reward, terminated, truncated, info = env.step(action)
        assert env.observation_space.contains(obs)
        if terminated or truncated:
            obs, info = env.reset()


def test_info_is_deterministic_data_only():
    env = gym.make("EGIP-Demo-v0").unwrapped
    _, info = env.reset(seed=0)
    forbidden = {"time", "latency", "tokens", "elapsed"}
    assert not any(any(f in k for f in forbidden) for k in info)
    assert info["phase"] == "acquire" and info["turn"] == 0




def _norm(text: str) -> str:
    return fold(text)  # the folding target_phrases uses (case, accents, punctuation)


@pytest.mark.parametrize("dataset", ["demo", "medqa", "nejm"])
def test_doctor_never_sees_target_or_unrequested_results(dataset, shared_data_dir):
    """Across a full scripted episode on every case: Y only inside K or a requested record
    (or the doctor's own words), and no result of an unrequested examination."""
    env = EGIPEnv(dataset)
    doctor = ScriptedDoctor(exam_budget=3)
    checked = 0
    for case in env.pool.cases:
        trace = _episode(env, doctor, seed=0, case_id=case.case_id)
        seen = _norm("\n".join(step[0]["text"] for step in trace))
        requested = set(env.runtime.requested)
        catalog = Catalog(case.records)
        # remove what the doctor may legitimately see: K, requested records, own words
        allowed = list(case.candidates or ())
        allowed += [leaf for e in catalog if e.exam_id in requested
                    for leaf in leaves(record_at(case.records, e.source_path), strings_only=True)]
        allowed += [e.text for e in env.runtime.history if e.source == "doctor"]
        for text in sorted((_norm(a).strip() for a in allowed), key=len, reverse=True):
            # whole-word removal, so short leaves cannot mask a leak. The pattern is
            # (?<!\w)TEXT(?!\w) with the look-behind moved after the literal (the same
            # matches; a leading literal lets the regex engine search for it quickly)
            if len(text) >= 3 and text in seen:
                word = re.escape(text)
                seen = re.sub(word + r"(?<!\w" + word + r")(?!\w)", " ", seen)
        for phrase in target_phrases(case.target.text):
            if len(phrase) >= 5:
                assert _norm(phrase) not in seen, (case.case_id, phrase)
        public = _norm(case.objective + " " + " ".join(leaves(case.patient, strings_only=True)))
        for entry in catalog:
            if entry.exam_id in requested:
                continue
            for leaf in leaves(record_at(case.records, entry.source_path), strings_only=True):
                leaf_n = _norm(leaf)
                if len(leaf_n) >= 25 and leaf_n not in public:
                    assert leaf_n not in seen, (case.case_id, entry.exam_id, leaf)
                    checked += 1
    assert checked > 0


def test_delta_format_only_adds_new_text():
    env = gym.make("EGIP-Demo-v0", observation_format="delta").unwrapped
    obs, info = env.reset(seed=0, options={"case_id": "demo-01"})
    assert obs["text"].startswith("# Task")
    obs, *_ = env.step("REQUEST TEST: PE1")
    assert "# Task" not in obs["text"]
    assert "Temperature" in obs["text"]
    assert "Doctor:" not in obs["text"]  # the doctor's own turn is not echoed back


def test_exam_mask_tracks_requests():
    env = gym.make("EGIP-Demo-v0").unwrapped
    obs, info = env.reset(seed=0, options={"case_id": "demo-01"})
    n = len(env.runtime.catalog)
    assert obs["exam_mask"].dtype == np.int8
    assert obs["exam_mask"][:n].all() and not obs["exam_mask"][n:].any()
    obs, *_ = env.step("REQUEST TEST: PE1")
    assert obs["exam_mask"][0] == 0 and obs["exam_mask"][1:n].all()
    no_menu = gym.make("EGIP-Demo-v0", show_menu=False).unwrapped
    obs, info = no_menu.reset(seed=0)
    assert not obs["exam_mask"].any() and info["menu"] == []
    assert "Available examinations" not in obs["text"]


def test_terminal_step_scores_and_stepping_after_end_is_inert():
    env = gym.make("EGIP-Demo-v0", acquisition_rounds=2).unwrapped
    obs, info = env.reset(seed=0, options={"case_id": "demo-13"})
    env.step("REQUEST TEST: CT pulmonary angiogram")
    obs, reward, terminated, truncated, info = env.step("What brings you in?")
    assert info["phase"] == "decide" and not terminated
    assert "# Acquired observations" in obs["text"]
    obs, reward, terminated, truncated, info = env.step("DIAGNOSIS READY: D")
    assert terminated and not truncated
    assert info["answer"] == "D" and info["verdict"] == "correct" and reward == 1.0
    obs, reward, terminated, truncated, info = env.step("anything")
    assert terminated and reward == 0.0 and info["action_kind"] == "after_end"


def test_render_ansi_shows_transcript():
    env = gym.make("EGIP-Demo-v0", render_mode="ansi")
    env.reset(seed=0, options={"case_id": "demo-01"})
    env.step("REQUEST TEST: PE1")
    text = env.render()
    assert "demo-01" in text and "Temperature" in text


def test_bad_kwargs_fail_clearly():
    with pytest.raises(ValueError, match="observation_format"):
        gym.make("EGIP-Demo-v0", observation_format="xml")
    with pytest.raises(Exception, match="acquisition_rounds"):
        gym.make("EGIP-Demo-v0", acquisition_rounds=0)


def test_costs_are_subtracted():
    env = gym.make("EGIP-Demo-v0", exam_cost=0.1, invalid_action_penalty=0.5).unwrapped
    env.reset(seed=0, options={"case_id": "demo-01"})
    assert env.step("REQUEST TEST: PE1")[1] == pytest.approx(-0.1)
    assert env.step("REQUEST TEST: T99")[1] == pytest.approx(-0.5)
    assert env.step("How are you?")[1] == 0.0
    with pytest.raises(ValueError, match="non-negative"):
        gym.make("EGIP-Demo-v0", exam_cost=-1)


def test_case_keys_are_ids_or_int_indexes():
    env = gym.make("EGIP-Demo-v0").unwrapped
    with pytest.raises(KeyError, match="int index"):
        env.reset(options={"case_id": 2.7})
    with pytest.raises(IndexError):
        env.reset(options={"case_id": 999})


def test_episode_record_holds_the_target_only_after_the_end():
    env = gym.make("EGIP-Demo-v0", acquisition_rounds=1).unwrapped
    env.reset(seed=0, options={"case_id": "demo-05"})
    env.step("Hello")
    assert "target" not in env.episode_record()
    env.step("DIAGNOSIS READY: appendicitis")
    assert env.episode_record()["target"] == "Acute appendicitis"
