"""Vector environments over the text environments."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import clinenv  # noqa: F401  (registers the ids and the shared-memory guard)
from clinenv.env.vector import autoreset, make_vec

pytestmark = pytest.mark.filterwarnings("error")

#: demo-01's Vital Signs record, as stored (non-ASCII: the degree sign).
TEMPERATURE = "38.9 °C (102 °F)"
DOCTOR_LINES = ("REQUEST TEST: PE1", "Do you smoke?", "REQUEST TEST: T4")


def _pinned(mode: str, **kwargs):
    vec = make_vec("EGIP-Demo-v0", 3, mode=mode, **kwargs)
    obs, info = vec.reset(seed=0, options={"case_id": "demo-01"})
    return vec, obs, info


# field-bug-reports B13
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_round_trip_keeps_unicode_text(mode):
    """Three sub-envs on demo-01, three different doctor lines: each sub-env's text
    is what a single env returns for that line, degree signs included."""
    vec, obs, info = _pinned(mode)
    assert list(info["case_id"]) == ["demo-01"] * 3
    obs, reward, terminated, truncated, info = vec.step(DOCTOR_LINES)
    vec.close()
    single = gym.make("EGIP-Demo-v0").unwrapped
    for i, line in enumerate(DOCTOR_LINES):
        single.reset(seed=0, options={"case_id": "demo-01"})
        expected, *_ = single.step(line)
        assert obs["text"][i] == expected["text"]
        np.testing.assert_array_equal(obs["exam_mask"][i], expected["exam_mask"])
    assert TEMPERATURE in obs["text"][0] and TEMPERATURE not in obs["text"][1]
    assert obs["exam_mask"].dtype == np.int8 and obs["exam_mask"].shape == (3, 64)
    assert list(obs["exam_mask"].sum(axis=1)) == [8, 9, 8]  # 9 catalog entries, minus one


def test_sync_and_async_agree_step_by_step():
    results = []
    for mode in ("sync", "async"):
        vec, obs, info = _pinned(mode, acquisition_rounds=2)
        trace = [obs["text"]]
        for lines in (DOCTOR_LINES, DOCTOR_LINES[::-1], ("DIAGNOSIS READY: lobar pneumonia",) * 3):
            obs, reward, terminated, truncated, info = vec.step(lines)
            trace.append((obs["text"], tuple(reward), tuple(terminated)))
        vec.close()
        results.append(trace)
    assert results[0] == results[1]
    assert results[1][-1][1] == (1.0, 1.0, 1.0) and results[1][-1][2] == (True, True, True)


def test_shared_memory_is_refused_with_instructions():
    """A plain async make_vec would corrupt text; it fails at construction instead."""
    with pytest.raises(TypeError, match=r"shared_memory.*False|make_vec"):
        gym.make_vec("EGIP-Demo-v0", 2, vectorization_mode="async")


def test_menu_ids_vectorize_with_batched_action_mask():
    vec = make_vec("EGIP-Demo-Menu-v0", 2, mode="async")
    obs, info = vec.reset(seed=0, options={"case_id": "demo-01"})
    assert obs["action_mask"].shape == (2, vec.single_action_space.n)
    np.testing.assert_array_equal(info["action_mask"], obs["action_mask"])
    obs, *_ = vec.step(np.array([0, 6]))  # PE1 and T4 (catalog order)
    vec.close()
    assert TEMPERATURE in obs["text"][0]
    assert "consistent with lobar pneumonia" in obs["text"][1]


@pytest.mark.parametrize("mode", ["SAME_STEP", "same_step", "SameStep", "samestep",
                                  gym.vector.AutoresetMode.SAME_STEP])
def test_autoreset_mode_is_passed_on(mode):
    """The enum, its value and its name (any case) all give SAME_STEP: the terminal step
    returns the reset observation and puts the last one in info["final_obs"]."""
    vec = make_vec("EGIP-Demo-v0", 2, autoreset_mode=mode, acquisition_rounds=1)
    assert vec.metadata["autoreset_mode"] is gym.vector.AutoresetMode.SAME_STEP
    vec.reset(seed=0)
    vec.step(("Hello?", "Hello?"))
    obs, reward, terminated, truncated, info = vec.step(("DIAGNOSIS READY: x",) * 2)
    assert terminated.all() and "final_obs" in info
    vec.close()


@pytest.mark.parametrize("value, expected", [
    ("NEXT_STEP", gym.vector.AutoresetMode.NEXT_STEP),
    ("next-step", gym.vector.AutoresetMode.NEXT_STEP),
    ("Disabled", gym.vector.AutoresetMode.DISABLED),
    ("DISABLED", gym.vector.AutoresetMode.DISABLED),
])
def test_autoreset_names_and_values(value, expected):
    assert autoreset(value) is expected


@pytest.mark.parametrize("value", ["same", "", 1, None])
def test_unknown_autoreset_mode_names_the_field(value):
    with pytest.raises(ValueError, match="autoreset_mode must be one of NEXT_STEP, "
                                         "SAME_STEP, DISABLED"):
        autoreset(value)


@pytest.mark.parametrize("kwargs, field", [({"mode": "shared"}, "mode"),
                                           ({"num_envs": 0}, "num_envs")])
def test_bad_arguments_name_the_field(kwargs, field):
    args = {"mode": "sync", "num_envs": 2, **kwargs}
    with pytest.raises(ValueError, match=field):
        make_vec("EGIP-Demo-v0", args.pop("num_envs"), **args)
