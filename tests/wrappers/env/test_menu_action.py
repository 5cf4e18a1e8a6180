"""The Discrete menu-index doctor (EGIP-*-Menu-v0): layout, mask, answers, check_env.

demo-01 (no K, lobar pneumonia): catalog PE1, PE2, PE3, T1..T6 (9 entries; T4 is the
chest X-ray "consistent with lobar pneumonia"). demo-13 has K = five options, the
largest K of the demo set, so the demo ids have S = 5 answer slots:
Discrete(64 exams + 5 questions + 5 answers) = Discrete(74).
"""

from __future__ import annotations

import json
import warnings
from importlib import resources

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import clinenv  # noqa: F401
from clinenv.agents.scripted_doctor import HISTORY_QUESTIONS
from clinenv.wrappers.env.menu_action import MenuActionEnv

pytestmark = pytest.mark.filterwarnings("error")

EXAMS, QUESTIONS = 64, len(HISTORY_QUESTIONS)
FIRST_ANSWER = EXAMS + QUESTIONS


def _demo_records():
    text = resources.files("clinenv.datasets").joinpath("data/demo.jsonl").read_text("utf-8")
    return {r["case_id"]: r for r in map(json.loads, text.splitlines()) if r}


def menu_env(case_id="demo-01", **kwargs):
    env = gym.make("EGIP-Demo-Menu-v0", **kwargs).unwrapped
    obs, info = env.reset(seed=0, options={"case_id": case_id})
    return env, obs, info


def test_check_env_passes_with_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gym.make("EGIP-Demo-Menu-v0", render_mode="ansi").unwrapped,
                  skip_render_check=False)


def test_layout_from_the_demo_file():
    largest_k = max(len(r["candidates"] or ()) for r in _demo_records().values())
    env, obs, info = menu_env()
    assert largest_k == 5
    assert env.action_space == gym.spaces.Discrete(EXAMS + QUESTIONS + largest_k)
    assert env.observation_space["action_mask"].shape == (74,)


def test_acquisition_mask_and_actions():
    env, obs, info = menu_env()
    expected = np.zeros(74, dtype=np.int8)
    expected[:9] = 1  # demo-01's nine catalog entries
    expected[EXAMS:FIRST_ANSWER] = 1  # the five questions
    np.testing.assert_array_equal(obs["action_mask"], expected)
    np.testing.assert_array_equal(info["action_mask"], expected)
    assert info["action_mask"] is not obs["action_mask"]
    obs, reward, terminated, truncated, info = env.step(6)
    assert info["utterance"] == "REQUEST TEST: T4"
    assert "consistent with lobar pneumonia" in obs["text"]
    assert obs["action_mask"][6] == 0 and obs["action_mask"].sum() == 13
    obs, reward, terminated, truncated, info = env.step(EXAMS + 3)
    assert info["utterance"] == HISTORY_QUESTIONS[3]
    assert info["invalid_actions"] == 0


@pytest.mark.parametrize("action", [6, 20, FIRST_ANSWER, 1000, -1, np.int64(30)])
def test_masked_or_out_of_range_actions_are_invalid_not_errors(action):
    env, obs, info = menu_env()
    env.step(6)  # T4 requested: slot 6 is masked now
    obs, reward, terminated, truncated, info = env.step(action)
    assert info["utterance"] == "" and info["invalid_actions"] == 1
    assert env.observation_space.contains(obs) and not terminated


@pytest.mark.parametrize("action", ["3", 1.0, True, None])
def test_non_integer_actions_name_the_problem(action):
    env, obs, info = menu_env()
    with pytest.raises(TypeError, match="action must be an int"):
        env.step(action)


def test_answer_slot_k_answers_candidate_k():
    record = _demo_records()["demo-13"]
    right = record["target"]["option_index"]
    env, obs, info = menu_env("demo-13", acquisition_rounds=1)
    obs, *_ = env.step(EXAMS)  # one question, then the decision phase
    expected = np.zeros(74, dtype=np.int8)
    expected[FIRST_ANSWER:FIRST_ANSWER + 5] = 1
    np.testing.assert_array_equal(obs["action_mask"], expected)
    obs, reward, terminated, truncated, info = env.step(FIRST_ANSWER + right)
    assert info["utterance"] == f"DIAGNOSIS READY: {record['candidates'][right]}"
    assert info["answer_source"] == "candidate"
    assert (reward, terminated, info["verdict"]) == (1.0, True, "correct")
    assert obs["action_mask"].sum() == 0  # done: nothing is valid


def test_without_candidates_slot_0_answers_from_the_evidence():
    env, obs, info = menu_env(acquisition_rounds=1)
    obs, reward, terminated, truncated, info = env.step(6)  # the X-ray names it
    assert info["answer_source"] is None  # not an answer step
    assert list(np.flatnonzero(obs["action_mask"])) == [FIRST_ANSWER]
    obs, reward, terminated, truncated, info = env.step(FIRST_ANSWER)
    assert info["utterance"] == "DIAGNOSIS READY: lobar pneumonia"
    # the record-leak caveat: the answer is copied from a record that names Y
    assert info["answer_source"] == "evidence" and env.egip.runtime.case.flags.target_in_records
    assert info["verdict"] == "correct" and reward == 1.0


def test_without_named_evidence_slot_0_abstains():
    env, obs, info = menu_env(acquisition_rounds=1)
    env.step(0)  # vital signs name no diagnosis
    obs, reward, terminated, truncated, info = env.step(FIRST_ANSWER)
    assert info["utterance"] == "DIAGNOSIS READY: Undetermined"
    assert info["answer_source"] == "abstain"
    assert info["verdict"] == "unscored" and reward == 0.0


def test_masked_sampling_always_picks_a_valid_action():
    env, obs, info = menu_env("demo-13")
    env.action_space.seed(0)
    for _ in range(25):
        action = env.action_space.sample(mask=info["action_mask"])
        obs, reward, terminated, truncated, info = env.step(action)
        assert info["invalid_actions"] == 0
        if terminated:
            break
    assert terminated


def test_wraps_an_existing_env_and_refuses_ambiguous_arguments():
    inner = gym.make("EGIP-Demo-v0", observation_format="delta").unwrapped
    env = MenuActionEnv(inner, questions=("Where does it hurt?",), n_answer_slots=2)
    assert env.action_space.n == EXAMS + 1 + 2
    obs, info = env.reset(seed=0, options={"case_id": "demo-01"})
    obs, *_ = env.step(EXAMS)
    assert obs["text"].startswith("Patient")  # the delta format of the inner env
    with pytest.raises(ValueError, match="either env"):
        MenuActionEnv(inner, dataset="demo")
    with pytest.raises(ValueError, match="n_answer_slots"):
        MenuActionEnv(inner, n_answer_slots=0)
    with pytest.raises(ValueError, match="questions"):
        MenuActionEnv(inner, questions=("",))
    with pytest.raises(ValueError, match=r"questions.*Q >= 1"):
        MenuActionEnv(inner, questions=())


def test_a_masked_answer_in_the_decision_phase_has_no_source():
    env, obs, info = menu_env(acquisition_rounds=1)
    env.step(EXAMS)
    obs, reward, terminated, truncated, info = env.step(0)  # an exam slot: masked now
    assert (info["utterance"], info["answer_source"], info["verdict"]) == ("", None,
                                                                          "unscored")


def test_accepts_the_env_of_gym_make_and_steps_through_its_wrappers():
    """gym.make returns OrderEnforcing(PassiveEnvChecker(EGIPEnv)); the episode state
    comes from .unwrapped, steps go through the wrappers (a reward wrapper applies)."""
    wrapped = gym.wrappers.TransformReward(gym.make("EGIP-Demo-v0", acquisition_rounds=1),
                                           lambda r: 10 * r)
    env = MenuActionEnv(wrapped)
    assert env.egip is wrapped.unwrapped and env.action_space.n == 74
    obs, info = env.reset(seed=0, options={"case_id": "demo-01"})
    env.step(6)
    obs, reward, terminated, truncated, info = env.step(FIRST_ANSWER)
    assert (reward, terminated, info["verdict"]) == (10.0, True, "correct")
    assert obs["action_mask"].sum() == 0


def test_refuses_what_it_cannot_drive():
    from clinenv.wrappers.env.chat_history import ChatHistory

    with pytest.raises(ValueError, match="env must be an EGIPEnv.*CartPoleEnv"):
        MenuActionEnv(gym.make("CartPole-v1"))
    menu = gym.make("EGIP-Demo-Menu-v0")
    with pytest.raises(ValueError, match="env must be an EGIPEnv.*MenuActionEnv"):
        MenuActionEnv(menu)
    chat = ChatHistory(gym.make("EGIP-Demo-v0", observation_format="delta"))
    with pytest.raises(ValueError, match="wrappers change the EGIP observation"):
        MenuActionEnv(chat)
