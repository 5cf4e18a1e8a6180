"""The chat-history wrapper: role/content messages that only ever grow."""

from __future__ import annotations

import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import clinenv  # noqa: F401
from clinenv.wrappers.env.chat_history import ChatHistory

pytestmark = pytest.mark.filterwarnings("error")

SYSTEM = "You are a careful physician."
ACTIONS = ["What brings you in today?", "REQUEST TEST: T4",
           "<think>X-ray first</think>REQUEST TEST: T4", "DIAGNOSIS READY: lobar pneumonia"]


def chat_env(**kwargs):
    return ChatHistory(gym.make("EGIP-Demo-v0", observation_format="delta", **kwargs),
                       system_prompt=SYSTEM)


def test_check_env_passes():
    """check_env warns that a wrapper is not the unwrapped env (by design here: the
    wrapper is what is checked); every other warning is an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=r".*is different from the unwrapped version")
        check_env(chat_env(render_mode="ansi"), skip_render_check=False)


def test_messages_follow_the_episode_and_never_change():
    env = chat_env(acquisition_rounds=3)
    bare = gym.make("EGIP-Demo-v0", observation_format="delta", acquisition_rounds=3)
    messages, _ = env.reset(seed=0, options={"case_id": "demo-01"})
    expected, _ = bare.reset(seed=0, options={"case_id": "demo-01"})
    assert messages == ({"role": "system", "content": SYSTEM},
                        {"role": "user", "content": expected["text"]})
    assert env.observation_space.contains(messages)
    assert not env.observation_space.contains(list(messages))  # Sequence needs a tuple
    for action in ACTIONS:
        before = messages
        messages, reward, terminated, truncated, info = env.step(action)
        expected, *_ = bare.step(action)
        assert messages[:len(before)] == before  # earlier turns are never rewritten
        assert messages[len(before)] == {"role": "assistant", "content": action}
        if expected["text"]:
            user = {"role": "user", "content": expected["text"]}
            assert messages[len(before) + 1:] == (user,)
        assert env.observation_space.contains(messages)
    assert terminated and reward == 1.0
    roles = [m["role"] for m in messages]
    assert roles == ["system", "user"] + ["assistant", "user"] * 3 + ["assistant"]
    assert "Examiner [T4 Chest X-Ray (Imaging)]" in messages[5]["content"]
    assert "already requested" in messages[7]["content"]  # the repeat, clarified


def test_fresh_objects_each_step():
    env = chat_env()
    first, _ = env.reset(seed=0)
    first[0]["content"] = "tampered"
    second, *_ = env.step("Hello?")
    assert second[0]["content"] == SYSTEM


def test_needs_the_delta_format():
    with pytest.raises(ValueError, match="observation_format='delta'"):
        ChatHistory(gym.make("EGIP-Demo-v0"))


def test_long_actions_are_clipped_to_the_space():
    env = chat_env(max_text_chars=1000)
    env.reset(seed=0)
    messages, *_ = env.step("x" * 5000)
    assert len(messages[2]["content"]) == 1000 and env.observation_space.contains(messages)


def test_steps_after_the_end_add_no_message():
    """The conversation is final once the answer is given: a further step returns the
    environment's after-end result (reward 0, terminated) and the same messages."""
    env = chat_env(acquisition_rounds=1)
    env.reset(seed=0, options={"case_id": "demo-01"})
    env.step("REQUEST TEST: T4")
    final, reward, terminated, *_ = env.step("DIAGNOSIS READY: lobar pneumonia")
    assert terminated and reward == 1.0 and final[-1]["role"] == "assistant"
    after, reward, terminated, truncated, info = env.step("DIAGNOSIS READY: asthma")
    assert after == final and (reward, terminated) == (0.0, True)
    assert info["action_kind"] == "after_end" and info["answer"] == "lobar pneumonia"
    again, _ = env.reset(seed=0)
    assert [m["role"] for m in again] == ["system", "user"]
    assert len(env.step("Hello?")[0]) == 4  # a new episode grows again


def test_menu_ids_are_refused_with_the_reason():
    with pytest.raises(ValueError, match=r"text-action environments.*Discrete\(74\)"):
        ChatHistory(gym.make("EGIP-Demo-Menu-v0", observation_format="delta"))
