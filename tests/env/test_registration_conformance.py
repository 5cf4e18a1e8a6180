"""API conformance of every registered environment id.

For each ``EGIP-*`` id (text actions and ``-Menu`` Discrete actions) and each native
protocol id (``AgentClinic-*``, ``MedAgentSim-*``):

- Gymnasium's ``check_env`` on ``gym.make(id).unwrapped`` (render modes included);
- vector round trips: sync and async-without-shared-memory give identical results;
- a fuzz of 1,000 random and Unicode actions (100k-character, emoji, NUL, RTL, combining
  marks, lone surrogates, markers with garbage, non-string objects; random indices for
  Menu ids) with every observation inside its space and no exception.

For each dataset, PettingZoo's ``api_test``, ``seed_test``, ``parallel_api_test`` and
``parallel_seed_test`` on ``clinenv.multiagent.egip_v0``, with external seats and with
built-in seats (actions up to 4,096 characters there: sampling 65,536-character actions
was most of their time), and a multi-agent fuzz.

No id is skipped. A dataset whose AgentClinic file is in the shared test data
(``CLINENV_TEST_DATA``, e.g. MedQA and NEJM) is read from it; the others (e.g.
MedQA_Ext, NEJM_Ext, MIMIC-IV) run on four hand-written records in their source schema
(OSCE or NEJM) under the registry file name (conftest
``dataset_kwargs``), so every registered id's entry point, loader and spaces are
exercised. Every warning is an error except the three that PettingZoo's ``api_test``
always raises for text spaces ("Observation is not a NumPy array", "... should be
gymnasium.spaces.box or gymnasium.spaces.discrete" for the observation and the action
space), ignored by exact message around the ``api_test`` call only
(:data:`TEXT_SPACE_WARNINGS`).
"""
# issue 4, issue 6

from __future__ import annotations

import math
import re
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, seed_test

import clinenv  # noqa: F401  (registers the ids)
from clinenv.env.vector import make_vec
from clinenv.multiagent import egip_v0

pytestmark = pytest.mark.filterwarnings("error")

EGIP_ONLY_IDS = sorted(i for i in gym.registry if i.startswith("EGIP-"))
#: The native-protocol ids (AgentClinic / MedAgentSim loops over the same datasets).
NATIVE_IDS = sorted(i for i in gym.registry if i.startswith(("AgentClinic-", "MedAgentSim-")))
ALL_IDS = EGIP_ONLY_IDS + NATIVE_IDS
#: Messages of the warnings PettingZoo's api_test always raises for Dict/Text spaces.
TEXT_SPACE_WARNINGS = (
    "Observation is not a NumPy array",
    "Observation space for each agent probably should be gymnasium.spaces.box or "
    "gymnasium.spaces.discrete",
    "Action space for each agent probably should be gymnasium.spaces.box or "
    "gymnasium.spaces.discrete",
)
FUZZ_ACTIONS = 1000


def _dataset(env_id: str) -> str:
    return gym.spec(env_id).kwargs["dataset"]


@pytest.fixture
def available(request, dataset_kwargs) -> dict:
    """Environment kwargs that make the test's dataset available: ``{}`` (bundled or
    shared file) or ``{"dataset": <synthetic file>}`` (see the module docstring)."""
    env_id = request.node.callspec.params.get("env_id")
    return dataset_kwargs(_dataset(env_id) if env_id else request.node.callspec.params["dataset"])


def test_every_dataset_has_a_text_and_a_menu_id():
    assert len(EGIP_ONLY_IDS) == 12
    assert {_dataset(i) for i in EGIP_ONLY_IDS if i.endswith("-Menu-v0")} == \
        {_dataset(i) for i in EGIP_ONLY_IDS if not i.endswith("-Menu-v0")} == \
        {"demo", "medqa", "medqa_ext", "nejm", "nejm_ext", "mimiciv"}


def test_every_dataset_has_both_native_ids():
    """AgentClinic-<Dataset>-v0 and MedAgentSim-<Dataset>-v0 for all six datasets."""
    assert len(NATIVE_IDS) == 12
    for prefix, preset in (("AgentClinic-", "agentclinic"), ("MedAgentSim-", "medagentsim")):
        ids = [i for i in NATIVE_IDS if i.startswith(prefix)]
        assert {_dataset(i) for i in ids} == set(DATASET_IDS)
        assert {gym.spec(i).kwargs["preset"] for i in ids} == {preset}


# ------------------------------------------------------------------------ Gymnasium
@pytest.mark.parametrize("env_id", ALL_IDS)
def test_check_env(env_id, available):
    check_env(gym.make(env_id, **available).unwrapped, skip_render_check=False)


def _equal(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and (
            np.array_equal(a, b) if a.dtype != object else all(map(_equal, a, b)))
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(map(_equal, a, b))
    return a == b


def _utterances(env_id: str, obs, step: int):
    """Three different doctor actions per step (one per sub-env)."""
    if env_id.endswith("-Menu-v0"):
        masks = obs["action_mask"]
        return np.array([int(np.flatnonzero(m)[(step + i) % int(m.sum())])
                         for i, m in enumerate(masks)])
    return ("What brings you in today? °C µ 🙂", "REQUEST TEST: PE1",
            f"REQUEST TEST: T{step + 1}")


# field-bug-reports B13
@pytest.mark.parametrize("env_id", ALL_IDS)
def test_vector_sync_and_async_agree(env_id, available):
    """Three sub-envs, three cases, three different actions per step; the async
    env (without shared memory) returns exactly what the sync env returns, including
    non-ASCII text, and each sub-env matches a single env with the same seed."""
    rounds = {"max_turns": 4} if env_id in NATIVE_IDS else {"acquisition_rounds": 3}
    runs = []
    for mode in ("sync", "async"):
        vec = make_vec(env_id, 3, mode=mode, **rounds, **available)
        obs, info = vec.reset(seed=40)
        trace = [(obs, info)]
        for step in range(4):
            obs, *rest = vec.step(_utterances(env_id, obs, step))
            trace.append((obs, *rest))
        vec.close()
        runs.append(trace)
    assert _equal(runs[0], runs[1])
    single = gym.make(env_id, **rounds, **available).unwrapped
    for i in range(3):
        obs, info = single.reset(seed=40 + i)
        assert obs["text"] == runs[1][0][0]["text"][i]
        assert info["case_id"] == runs[1][0][1]["case_id"][i]
    assert len(set(runs[1][0][1]["case_id"])) > 1
    if not env_id.endswith("-Menu-v0"):
        assert any("°" in text for step in runs[1] for text in step[0]["text"])


def fuzz_actions(rng: np.random.Generator, n: int):
    """Random and hostile doctor or seat utterances (seeded)."""
    pools = [
        "".join(chr(c) for c in range(32, 127)),
        "°µβ×⁹’–éñ漢字한국어",
        "🙂🩺💊🧬👩🏽‍⚕️",
        "\u202e\u202d\u200f\u200e\u061c",  # bidirectional controls
        "\u0301\u0308\u0336\u20dd",  # combining marks
        "\0\x01\x1b\x7f\t\r\n\u2028\u2029\ufeff",
        "\ud800\udfff",  # lone surrogates (legal in str, not encodable)
    ]
    markers = ["REQUEST TEST: ", "DIAGNOSIS READY: ", "**REQUEST TEST:** ", "request test:",
               "<think>", "</think>", "PE1", "T3", "diagnosis ready:\n"]
    for i in range(n):
        kind = i % 10
        if kind == 0 and i % 50 == 0:
            # .tolist(): joining Python strings, not NumPy scalars (the same text, faster)
            yield "".join(rng.choice(list("".join(pools)), size=100_000).tolist())  # long
        elif kind == 1:
            marker = rng.choice(markers)
            yield marker + "".join(rng.choice(list(rng.choice(pools)),
                                              size=int(rng.integers(0, 40))).tolist())
        elif kind == 2:
            yield [None, "", "   ", 42, 3.5, b"REQUEST TEST: PE1", ["x"], "\0"][i % 8]
        elif kind == 3:
            yield f"REQUEST TEST: {rng.choice(['PE', 'T'])}{int(rng.integers(0, 12))}"
        else:
            chars = list("".join(rng.choice(pools, size=2)))
            yield "".join(rng.choice(chars, size=int(rng.integers(0, 300))).tolist())


def _assert_inside(space, obs, where):
    assert space.contains(obs), where
    assert len(obs["text"]) <= space["text"].max_length


# field-bug-reports B11
@pytest.mark.parametrize("env_id", ALL_IDS)
def test_fuzz_1000_actions(env_id, available):
    """Every observation of 1,000 hostile actions lies inside the observation space;
    nothing raises; rewards are finite; text ids never put action_mask in info."""
    env = gym.make(env_id, **available).unwrapped
    rng = np.random.default_rng(7)
    obs, info = env.reset(seed=7)
    menu = env_id.endswith("-Menu-v0")
    actions = (int(rng.integers(-5, env.action_space.n + 5)) for _ in range(FUZZ_ACTIONS)) \
        if menu else fuzz_actions(rng, FUZZ_ACTIONS)
    episodes = 0
    for i, action in enumerate(actions):
        obs, reward, terminated, truncated, info = env.step(action)
        _assert_inside(env.observation_space, obs, (env_id, i))
        assert math.isfinite(reward) and isinstance(info, dict)
        assert menu == ("action_mask" in info)
        if terminated or truncated:
            episodes += 1
            obs, info = env.reset()
            _assert_inside(env.observation_space, obs, (env_id, i, "reset"))
    # every action closes one of the T = 19 rounds, then one answer: 20 steps an episode;
    # a native episode also ends at the first utterance holding DIAGNOSIS READY
    if env_id in NATIVE_IDS:
        assert episodes >= FUZZ_ACTIONS // 20
    else:
        assert episodes == FUZZ_ACTIONS // 20


@pytest.mark.parametrize("env_id", [i for i in EGIP_ONLY_IDS if not i.endswith("-Menu-v0")])
@pytest.mark.parametrize("action", ["DIAGNOSIS READY: ", "DIAGNOSIS READY: )",
                                    "REQUEST TEST: ]", "REQUEST TEST: (", "**DIAGNOSIS READY:**"])
def test_markers_with_nothing_after_them(env_id, action, available):
    """A marker whose payload is empty or only a bracket is interface feedback, in both
    phases (found by the fuzz below: the payload cleaner indexed an empty string)."""
    env = gym.make(env_id, acquisition_rounds=2, **available).unwrapped
    obs, info = env.reset(seed=1)
    for _ in range(3):
        obs, reward, terminated, truncated, info = env.step(action)
        assert env.observation_space.contains(obs)
    assert terminated and info["verdict"] == "unscored"


# ----------------------------------------------------------------------- PettingZoo
DATASET_IDS = ["demo", "medqa", "medqa_ext", "nejm", "nejm_ext", "mimiciv"]


@pytest.mark.parametrize("dataset", DATASET_IDS)
@pytest.mark.parametrize("seats", ["external", "built-in"])
def test_pettingzoo_api_and_seed_tests(dataset, seats, available):
    # Text.sample draws actions up to max_length characters; at the default 65,536 that
    # sampling is ~90% of these tests' time. Long actions are the fuzz's job.
    kwargs = {"dataset": dataset, "max_text_chars": 4096, **available}
    if seats == "built-in":
        kwargs.update(patient="retrieval", examiner="lookup")
    with warnings.catch_warnings():  # only these three, by message; all others are errors
        for message in TEXT_SPACE_WARNINGS:
            warnings.filterwarnings("ignore", message=re.escape(message), category=UserWarning)
        api_test(egip_v0.env(**kwargs), num_cycles=100)
    seed_test(lambda: egip_v0.env(**kwargs), num_cycles=100)
    parallel_api_test(egip_v0.parallel_env(**kwargs), num_cycles=100)
    parallel_seed_test(lambda: egip_v0.parallel_env(**kwargs), num_cycles=100)


@pytest.mark.parametrize("dataset", DATASET_IDS)
def test_pettingzoo_fuzz(dataset, available):
    """Hostile text in every seat for 1,000 AEC steps: all observations in the space."""
    env = egip_v0.env(**{"dataset": dataset, **available})
    env.reset(seed=11)
    space = env.observation_space("doctor_0")
    actions = fuzz_actions(np.random.default_rng(11), FUZZ_ACTIONS)
    ended = 0
    for action in actions:
        if not env.agents:
            ended += 1
            env.reset()
        _, reward, terminated, truncated, _ = env.last()
        env.step(None if terminated or truncated else action)
        assert math.isfinite(reward)
        for other in env.agents:
            _assert_inside(space, env.observe(other), (dataset, other))
    assert ended >= 1
