"""The environment config (:mod:`clinenv.env.config`) against the keywords it maps.

An environment built from :class:`EnvConfig` is the environment built from the same
keywords: the same observations, rewards and infos over whole episodes (Gymnasium and
PettingZoo forms). Values pinned by hand from the demo case ``demo-01`` (catalog PE1-PE3,
T1-T6; ``T99`` is not in it).
"""

from __future__ import annotations

import inspect
import math

import gymnasium as gym
import numpy as np
import pydantic
import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.scripted_doctor import ScriptedDoctor
from clinenv.env import EGIPEnv
from clinenv.env.config import DEFAULT_MAX_EXAMS, DEFAULT_MAX_TEXT_CHARS, EnvConfig
from clinenv.multiagent.aec import DOCTOR, EGIPAECEnv
from clinenv.reward_spec import PRESETS
from clinenv.runlog import env_spec_dict

#: Every field away from its default; 300 characters clip the demo doctor views.
CUSTOM = dict(observation_format="delta", max_exams=8, max_text_chars=300,
              invalid_action_penalty=0.5, exam_cost=0.25, render_mode="ansi")


def scripted_episode(env, case_id):
    """``[(obs text, exam_mask, reward, info), ...]`` of the scripted doctor's episode,
    plus two fixed actions first: a test request (PE1) and an invalid one (T99)."""
    obs, info = env.reset(seed=11, options={"case_id": case_id})
    steps = [(obs["text"], obs["exam_mask"].tolist(), 0.0, info)]
    doctor = ScriptedDoctor()
    doctor.reset(seed=11)
    actions = iter(["REQUEST TEST: PE1", "REQUEST TEST: T99"])
    done = False
    while not done:
        action = next(actions, None) or doctor.act(obs, info)
        obs, reward, terminated, truncated, info = env.step(action)
        steps.append((obs["text"], obs["exam_mask"].tolist(), reward, info))
        done = terminated or truncated
    return steps


@pytest.mark.parametrize("case_id", ["demo-01", "demo-11"])
def test_settings_and_keywords_give_the_same_episode(case_id):
    by_kwargs = scripted_episode(gym.make("EGIP-Demo-v0", **CUSTOM).unwrapped, case_id)
    by_settings = scripted_episode(
        gym.make("EGIP-Demo-v0", env_config=EnvConfig(**CUSTOM)).unwrapped, case_id)
    direct = scripted_episode(EGIPEnv("demo", env_config=EnvConfig(**CUSTOM)), case_id)
    assert by_settings == by_kwargs == direct
    # and the settings took effect (by hand: 8 mask slots, 300 characters, the costs)
    assert all(len(mask) == 8 and len(text) <= 300 for text, mask, _, _ in by_settings)
    assert any(info["text_clipped"] for *_, info in by_settings)
    if case_id == "demo-01":
        assert by_settings[1][2] == pytest.approx(-0.25)  # PE1: one test returned
        assert by_settings[2][2] == pytest.approx(-0.5)   # T99: an invalid request
    default = scripted_episode(gym.make("EGIP-Demo-v0").unwrapped, case_id)
    assert default != by_settings  # the settings change the episode


def test_attributes_stay_readable_and_follow_the_settings():
    settings = EnvConfig(**CUSTOM)
    env = EGIPEnv("demo", env_config=settings)
    assert env.env_config is settings
    assert (env.observation_format, env.max_exams, env.max_text_chars,
            env.invalid_action_penalty, env.exam_cost, env.render_mode) == (
        "delta", 8, 300, 0.5, 0.25, "ansi")
    assert env.observation_space["exam_mask"].shape == (8,)
    assert env.action_space.max_length == 300
    assert EGIPEnv("demo", **CUSTOM).env_config == settings.replace(dataset="demo")
    env.reset(seed=0, options={"case_id": "demo-01"})
    assert env.render().startswith("Case demo-01 (demo)")


def test_defaults_are_the_constructor_defaults():
    settings = EnvConfig()
    assert (settings.observation_format, settings.max_exams, settings.max_text_chars,
            settings.invalid_action_penalty, settings.exam_cost, settings.render_mode) == (
        "view", 64, 65_536, 0.0, 0.0, None)
    assert settings.reward_spec is PRESETS["accuracy"]
    assert (settings.dataset, settings.disclosure, settings.protocol_options) == (
        "demo", "presentation", {})
    assert (DEFAULT_MAX_EXAMS, DEFAULT_MAX_TEXT_CHARS) == (64, 65_536)
    for cls in (EGIPEnv, EGIPAECEnv):
        params = inspect.signature(cls.__init__).parameters
        assert params["env_config"].default is None
        # every setting is a field, mapped from **overrides: no keyword of its own
        # (the positional dataset shorthand aside)
        assert set(EnvConfig.model_fields) & set(params) == {"dataset"}, cls
        assert len(params) - 1 <= 10, cls  # self aside: about 12 at most (issue 32)
        env = cls("demo")
        assert env.env_config == EnvConfig()


def test_the_aec_game_takes_the_same_settings():
    def doctor_views(env):
        """Doctor PE1 -> examiner seat -> doctor T99 -> doctor: what each agent saw."""
        env.reset(seed=3, options={"case_id": "demo-01"})
        seen = []
        for action in ["REQUEST TEST: PE1", "Temperature 38.9 C", "REQUEST TEST: T99"]:
            agent = env.agent_selection
            obs = env.observe(agent)
            seen.append((agent, obs["text"], obs["exam_mask"].tolist()))
            env.step(action)
            seen.append(dict(env.rewards))
        return seen

    kwargs = CUSTOM
    by_kwargs = EGIPAECEnv("demo", examiner="external", **kwargs)
    by_settings = EGIPAECEnv("demo", examiner="external", env_config=EnvConfig(**kwargs))
    assert by_settings.env_config == by_kwargs.env_config == EnvConfig(**kwargs)
    views = doctor_views(by_settings)
    assert views == doctor_views(by_kwargs)
    assert [v[0] for v in views[::2]] == [DOCTOR, "examiner_0", DOCTOR]
    # by hand: the test is returned in the examiner seat's step, the invalid request
    # costs the penalty in the doctor's
    assert views[3][DOCTOR] == pytest.approx(-0.25) and views[5][DOCTOR] == pytest.approx(-0.5)
    assert by_settings.observation_space(DOCTOR)["exam_mask"].shape == (8,)
    assert by_settings.exam_cost == 0.25


# ------------------------------------------------------------------ errors
BAD = [
    ({"observation_format": "xml"}, r"observation_format must be 'view' or 'delta', got 'xml'"),
    ({"render_mode": "human"}, r"render_mode must be None or 'ansi', got 'human'"),
    ({"max_exams": 0}, r"max_exams must be >= 1 and max_text_chars >= 256"),
    ({"max_exams": 2.5}, r"max_exams must be >= 1 .* got max_exams=2\.5"),
    ({"max_text_chars": 255}, r"max_exams must be >= 1 and max_text_chars >= 256 .*=255"),
    ({"exam_cost": -1}, r"exam_cost must be a finite number >= 0, got -1: .*non-negative"),
    ({"exam_cost": math.nan}, r"exam_cost must be a finite number >= 0, got nan"),
    ({"invalid_action_penalty": True}, r"invalid_action_penalty must be a finite number"),
    ({"invalid_action_penalty": "0.5"}, r"invalid_action_penalty .* non-negative amounts"),
]


@pytest.mark.filterwarnings("ignore:.*not in the possible render_modes:UserWarning")
@pytest.mark.parametrize(("bad", "message"), BAD)
def test_bad_settings_name_the_field(bad, message):
    with pytest.raises(ValueError, match=message):
        EnvConfig(**bad)
    with pytest.raises(ValueError, match=message):
        gym.make("EGIP-Demo-v0", **bad)
    with pytest.raises(ValueError, match=message):
        EGIPAECEnv("demo", **bad)


def test_a_config_and_a_differing_field_keyword_is_a_type_error():
    settings = EnvConfig(max_exams=8, observation_format="delta", show_menu=False)
    for make in (lambda **kw: EGIPEnv("demo", env_config=settings, **kw),
                 lambda **kw: EGIPAECEnv("demo", env_config=settings, **kw)):
        with pytest.raises(TypeError, match=r"got both env_config= \(max_exams=8\) and "
                                            r"max_exams=16"):
            make(max_exams=16)
        # observation_format="view" is the default: it adds nothing, the config's "delta"
        assert make(observation_format="view").observation_format == "delta"
        with pytest.raises(TypeError, match=r"got both env_config= \(show_menu=False\)"):
            make(show_menu=True)
        # a keyword at its default adds nothing: the config stands; one that differs
        # fills a field the config leaves at its default (gym.make's registered dataset)
        env = make(max_exams=64, exam_cost=0)
        assert env.max_exams == 8 and env.exam_cost == 0.0
        filled = make(exam_cost=0.5, acquisition_rounds=4)
        assert (filled.exam_cost, filled.config.acquisition_rounds, filled.max_exams,
                filled.config.show_menu) == (0.5, 4, 8, False)
    with pytest.raises(TypeError, match="env_config must be a clinenv.env.config.EnvConfig"):
        EGIPEnv("demo", env_config={"max_exams": 8})
    with pytest.raises(pydantic.ValidationError, match="bogus"):
        EnvConfig(bogus=1)
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        settings.max_exams = 4


def test_numbers_are_normalised():
    settings = EnvConfig(max_exams=np.int64(12), exam_cost=1,
                           invalid_action_penalty=np.float32(0.5))
    assert type(settings.max_exams) is int and settings.max_exams == 12
    assert type(settings.exam_cost) is float and settings.exam_cost == 1.0
    assert type(settings.invalid_action_penalty) is float


def test_a_run_log_records_a_config_given_to_gym_make():
    settings = EnvConfig(observation_format="delta", max_exams=8)
    env = gym.make("EGIP-Demo-v0", env_config=settings)
    # flat, the fields that differ from their defaults: the keyword route's form
    assert env_spec_dict(env)["kwargs"] == {"dataset": "demo",
                                            "observation_format": "delta", "max_exams": 8}
    assert env_spec_dict(env) == env_spec_dict(
        gym.make("EGIP-Demo-v0", observation_format="delta", max_exams=8))
    rebuilt = gym.make("EGIP-Demo-v0", **env_spec_dict(env)["kwargs"]).unwrapped
    assert rebuilt.env_config == settings and EnvConfig(**settings.to_kwargs()) == settings
    assert EnvConfig().to_kwargs() == {}
    assert EnvConfig(reward_spec=PRESETS["accuracy"]).to_kwargs() == {}
    assert EnvConfig(reward_spec="diagagent", exam_cost=1).to_kwargs() == {
        "exam_cost": 1.0, "reward_spec": PRESETS["diagagent"].to_dict()}


def test_a_bad_reward_spec_is_the_reward_specs_own_one_line_error():
    """Not a pydantic error wrapping it: the SkyRL, verifiers and CLI callers catch
    RewardSpecError and show its one line (file, field, nearest name)."""
    from clinenv.reward_spec import RewardSpecError

    for make in (lambda: EnvConfig(reward_spec="diagagnet"),
                 lambda: gym.make("EGIP-Demo-v0", reward_spec="diagagnet"),
                 lambda: EGIPAECEnv("demo", reward_spec="diagagnet")):
        with pytest.raises(RewardSpecError, match=r"^reward spec: unknown preset "
                                                  r"'diagagnet'; did you mean 'diagagent'"):
            make()
