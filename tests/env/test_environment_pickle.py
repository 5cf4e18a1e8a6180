"""An environment mid-episode survives pickle and deepcopy: the copy goes on exactly as
the original (same observations, rewards, infos), and the original is untouched."""

from __future__ import annotations

import copy
import json
import pickle

import gymnasium as gym
import numpy as np
import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.scripted_doctor import ScriptedDoctor


def _plain(value):
    """Observation/info as comparable JSON text (arrays as lists)."""
    return json.dumps(value, sort_keys=True, default=lambda v: (
        v.tolist() if isinstance(v, np.ndarray) else repr(v)))


def _rest(env, doctor, obs, info, limit=60):
    """(observation, reward, terminated, truncated, info) of every remaining step."""
    out = []
    for _ in range(limit):
        action = doctor.act(obs, info)
        obs, reward, terminated, truncated, info = env.step(action)
        out.append(_plain([obs, reward, terminated, truncated, info]))
        if terminated or truncated:
            break
    return out


@pytest.mark.parametrize("env_id", ["EGIP-Demo-v0", "AgentClinic-Demo-v0",
                                    "MedAgentSim-Demo-v0"])
@pytest.mark.parametrize("clone", [pickle.loads, copy.deepcopy], ids=["pickle", "deepcopy"])
def test_a_copy_mid_episode_goes_on_as_the_original(env_id, clone):
    env = gym.make(env_id)
    doctor = ScriptedDoctor()
    doctor.reset(seed=3)
    obs, info = env.reset(seed=3, options={"case_id": 1})
    for _ in range(3):  # a few acquisition steps before the copy
        obs, _, terminated, truncated, info = env.step(doctor.act(obs, info))
        assert not (terminated or truncated)
    blob = pickle.dumps(env) if clone is pickle.loads else env
    twin = clone(blob)
    twin_doctor = copy.deepcopy(doctor)
    expected = _rest(env, doctor, obs, info)
    got = _rest(twin, twin_doctor, obs, info)
    assert got == expected
    assert json.loads(expected[-1])[2] or json.loads(expected[-1])[3]  # the episode ended


def test_a_pickled_fresh_environment_resets_like_a_new_one():
    env = gym.make("EGIP-Demo-v0")
    twin = pickle.loads(pickle.dumps(env))
    assert _plain(twin.reset(seed=5)) == _plain(gym.make("EGIP-Demo-v0").reset(seed=5))
