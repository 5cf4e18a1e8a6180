"""The SkyRL adapter against the real skyrl-gym: environments made as SkyRL's generator
makes them (``skyrl_gym.make(env_class, env_config=..., extras=row + max_turns)``), then
``init(prompt)`` and ``step(reply)`` with scripted doctors' replies.

Runs in the ``.venv-skyrl`` environment (``pip install -e '.[test,skyrl]'``; ``.ci/run``
builds it); elsewhere it skips. Reference values come from a plain ``gym.make`` of the
same environment stepped with the same replies, and by hand from the demo records.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

skyrl_gym = pytest.importorskip(
    "skyrl_gym", reason="skyrl-gym is not installed: run in .venv-skyrl "
                        "(pip install -e '.[test,skyrl]'), as .ci/run does")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from skyrl_gym.envs.base_text_env import BaseTextEnv  # noqa: E402

import clinenv  # noqa: E402,F401
from clinenv.integrations.skyrl import (  # noqa: E402
    ClinenvTextEnv,
    register_clinenv,
    task_rows,
)
from clinenv.integrations.tools import (  # noqa: E402
    LEAK_FLAGS,
    TASK_INTRO,
    TEXT_SYSTEM_PROMPT,
    ToolEpisode,
)

ENV_ID = "EGIP-Demo-v0"
# Targets as written in clinenv/datasets/data/demo.jsonl.
PNEUMONIA, STEMI, APPENDICITIS = ("Lobar pneumonia",
                                  "Acute inferior ST-elevation myocardial infarction",
                                  "Acute appendicitis")
# (case, replies, terminal score by hand): exact target = 1, another disease = 0.
EPISODES = [
    ("demo-01", ["What brings you here today?", "REQUEST TEST: T4",
                 f"DIAGNOSIS READY: {PNEUMONIA}", f"DIAGNOSIS READY: {PNEUMONIA}"], 1.0),
    ("demo-02", ["REQUEST TEST: PE1", "Where exactly is the pain?",
                 "DIAGNOSIS READY: Asthma", "DIAGNOSIS READY: Asthma"], 0.0),
    ("demo-05", ["REQUEST TEST: Vital Signs", f"DIAGNOSIS READY: {APPENDICITIS}",
                 f"Diagnosis: {APPENDICITIS}"], 1.0),
    ("demo-02", ["DIAGNOSIS READY: myocardial infarction, inferior STEMI",
                 f"DIAGNOSIS READY: {STEMI}"], 1.0),
]


def seed_of(case_index: int) -> int:
    """``clinenv run --seed 0``'s seed of repetition 0 (numpy SeedSequence, 31 bits)."""
    return int(np.random.SeedSequence([0, 0, case_index]).generate_state(1)[0]) & 0x7FFFFFFF


def reference(case_id, seed, replies):
    """(opening text, observation texts, step rewards, terminated) of a plain gym env."""
    env = gym.make(ENV_ID, observation_format="delta", premature_diagnosis="decide")
    obs, _ = env.reset(seed=seed, options={"case_id": case_id})
    texts, rewards, done = [], [], False
    for reply in replies:
        o, r, term, trunc, _ = env.step(reply)
        texts.append(o["text"])
        rewards.append(float(r))
        done = term or trunc
    return obs["text"], texts, rewards, done


def make(case_id, seed=7, max_turns=30, env_config=None, **extra):
    """As SkyRL's generator: the row's extras plus max_turns."""
    register_clinenv()
    extras = {"data_source": ENV_ID,
              "extra_info": {"case_id": case_id, "seed": seed, "env_id": ENV_ID},
              "max_turns": max_turns, **extra}
    return skyrl_gym.make("clinenv", env_config=env_config, extras=extras)


def play(env, replies):
    outs = [env.step(reply) for reply in replies]
    return outs


PROMPT = [{"role": "system", "content": TEXT_SYSTEM_PROMPT},
          {"role": "user", "content": TASK_INTRO}]


@pytest.mark.parametrize("case_id, replies, score", EPISODES)
def test_rewards_are_the_terminal_scores(case_id, replies, score):
    env = make(case_id)
    assert isinstance(env, BaseTextEnv) and isinstance(env, ClinenvTextEnv)
    messages, info = env.init(PROMPT)
    opening, texts, rewards, done = reference(case_id, 7, replies)
    assert done and sum(rewards) == score
    assert messages[0] == PROMPT[0] and messages[1]["content"] == TASK_INTRO + opening
    assert info["case_id"] == case_id
    outs = play(env, replies)
    assert [o["reward"] for o in outs] == [0.0] * (len(replies) - 1) + [score]
    assert [o["done"] for o in outs] == [False] * (len(replies) - 1) + [True]
    # Delta observations as user turns; none after the final answer.
    assert [o["observations"] for o in outs[:-1]] == [[{"role": "user", "content": t}]
                                                      for t in texts[:-1]]
    assert outs[-1]["observations"] == []
    last = outs[-1]["metadata"]
    assert last["correct"] is (score == 1.0) and last["clinenv_done"] is True
    assert last["calls"][-1]["name"] == "submit_diagnosis"
    assert env.get_metrics()["reward"] == score


def test_opening_equals_the_tool_view_reset_and_rows_pin_it():
    rows = task_rows(ENV_ID, ["demo-03", "demo-01"])
    assert [r["extra_info"]["case_id"] for r in rows] == ["demo-01", "demo-03"]
    assert [r["extra_info"]["seed"] for r in rows] == [seed_of(0), seed_of(2)]
    for row in rows:
        assert row["env_class"] == "clinenv" and row["prompt"] == PROMPT
        # SkyRL's dataset passes every column but prompt and env_class as extras.
        extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")}
        env = skyrl_gym.make(register_clinenv(), env_config=None, extras=extras)
        first, _ = env.init(row["prompt"])
        again, _ = skyrl_gym.make("clinenv", env_config=None, extras=extras).init(row["prompt"])
        info = row["extra_info"]
        assert first == again
        # the doctor writes text actions: the text protocol's wording (issue 30)
        assert first[-1]["content"] == TASK_INTRO + ToolEpisode(
            ENV_ID, action_format="text").reset(info["case_id"], info["seed"])
        assert "REQUEST TEST:" in first[-1]["content"]
    # A prompt without a user message gets the opening as one.
    env = make("demo-04", seed=3)
    messages, _ = env.init([{"role": "system", "content": "S"}])
    assert messages[1] == {"role": "user", "content": reference("demo-04", 3, [])[0]}


def test_the_rows_prompt_states_what_an_early_diagnosis_does():
    (row,) = task_rows(ENV_ID, ["demo-05"])
    assert ("DIAGNOSIS READY: <diagnosis> once you have enough evidence. This ends "
            "evidence gathering early: you are then shown the acquired evidence and asked "
            "for your final answer") in row["prompt"][0]["content"]
    env = make("demo-05")
    env.init(row["prompt"])
    early = env.step(f"DIAGNOSIS READY: {APPENDICITIS}")  # round 1, as the prompt allows
    (shown,) = early["observations"]
    assert not early["done"] and early["reward"] == 0.0
    assert shown["content"].startswith("Interface: Acquisition ended early at your request")
    assert "# Acquired observations" in shown["content"]
    final = env.step(f"DIAGNOSIS READY: {APPENDICITIS}")
    assert final["done"] and final["reward"] == 1.0


def test_no_state_leaks_between_instances_or_episodes():
    a, b = make("demo-01"), make("demo-02")
    a.init(PROMPT)
    b.init(PROMPT)
    (_, right, _), (_, wrong, _) = EPISODES[0], EPISODES[1]
    outs_a, outs_b = [], []
    for i in range(max(len(right), len(wrong))):  # interleaved
        if i < len(right):
            outs_a.append(a.step(right[i]))
        if i < len(wrong):
            outs_b.append(b.step(wrong[i]))
    assert outs_a[-1]["reward"] == 1.0 and outs_b[-1]["reward"] == 0.0
    assert outs_b[-1]["metadata"]["n_exams_requested"] == 1
    # init again: a fresh episode with the turn count and history cleared.
    a.init(PROMPT)
    assert a.turns == 0 and a.episode.calls == [] and a.episode.reward == 0.0
    out = a.step(wrong[0])
    assert out["reward"] == 0.0 and not out["done"]
    assert out["metadata"]["calls"] == [{"name": "order_exam", "arguments": {"exam": "PE1"}}]


def test_thread_pool_gives_the_sequential_rewards():
    def run(spec):
        case_id, replies, _ = spec
        env = make(case_id)
        env.init(PROMPT)
        return [o["reward"] for o in play(env, replies)][-1]

    specs = EPISODES * 4
    with ThreadPoolExecutor(8) as pool:
        rewards = list(pool.map(run, specs))
    assert rewards == [score for _, _, score in specs]


def test_max_turns_ends_an_unfinished_episode_with_zero():
    env = make("demo-01", max_turns=2)
    env.init(PROMPT)
    first = env.step("How long have you had the cough?")
    second = env.step("REQUEST TEST: T4")
    assert not first["done"] and second["done"] and second["reward"] == 0.0
    assert second["observations"] == [] and second["metadata"]["clinenv_done"] is False
    metrics = env.get_metrics()
    assert {k: metrics[k] for k in ("reward", "turns", "exams_ordered", "finished")} == \
        {"reward": 0.0, "turns": 2, "exams_ordered": 1, "finished": 0.0}
    assert metrics["reward_components/diagnosis"] == 0.0  # accuracy: the unfinished rule


# issue 29 §3
def test_a_placeholder_reply_is_no_call():
    """The environment refuses a template placeholder, so ``metadata``'s
    calls and ``exams_ordered`` leave it out (it still uses its turn)."""
    env = make("demo-05")
    env.init(PROMPT)
    out = env.step("DIAGNOSIS READY: [diagnosis]")
    assert not out["done"] and out["metadata"]["calls"] == []
    assert out["metadata"]["action_kind"] == "placeholder"
    assert out["observations"][0]["content"].startswith(
        "Interface: That is the template's placeholder")
    env.step("REQUEST TEST: <id or name>")
    env.step("REQUEST TEST: T4")
    env.step(f"DIAGNOSIS READY: {APPENDICITIS}")
    out = env.step("DIAGNOSIS READY: <single diagnosis>")
    assert out["done"] and out["reward"] == 0.0
    assert out["metadata"]["answer_status"] == "placeholder"
    assert out["metadata"]["calls"] == [
        {"name": "order_exam", "arguments": {"exam": "T4"}},
        {"name": "submit_diagnosis", "arguments": {"diagnosis": APPENDICITIS}}]
    metrics = env.get_metrics()
    assert {k: metrics[k] for k in ("reward", "turns", "exams_ordered", "finished")} == \
        {"reward": 0.0, "turns": 5, "exams_ordered": 1, "finished": 1.0}
    assert metrics["reward_components/format"] == 0.0  # a placeholder is no scored answer


def test_env_config_settings_reach_the_environment():
    config = OmegaConf.create({"env_id": ENV_ID, "acquisition_rounds": 2})
    env = skyrl_gym.make(register_clinenv(), env_config=config,
                         extras={"case_id": "demo-06", "seed": 1, "max_turns": 9})
    messages, _ = env.init([])
    assert "Round 1 of 2." in messages[0]["content"]
    outs = play(env, ["REQUEST TEST: T1", "Any tiredness?"])
    # After the last round the decision step asks for the answer; the answer ends it.
    assert "DIAGNOSIS READY: <single diagnosis>" in outs[-1]["observations"][0]["content"]
    final = env.step("DIAGNOSIS READY: Iron deficiency anemia")
    assert final["done"] and final["reward"] == 1.0
    with pytest.raises(ValueError, match="episode is over"):
        env.step("anything")


def test_register_is_idempotent_and_rows_must_name_the_episode():
    assert register_clinenv() == register_clinenv() == "clinenv"
    assert register_clinenv("clinenv-medqa") == "clinenv-medqa"
    with pytest.raises(ValueError, match="no case_id, seed"):
        skyrl_gym.make("clinenv", env_config={"env_id": ENV_ID}, extras={"max_turns": 3})
    with pytest.raises(ValueError, match="no env_id"):
        skyrl_gym.make("clinenv", env_config=None, extras={"case_id": "demo-01", "seed": 0})


# Issue 29 §1: the same reward as the Gym env, for a rollout cut before any answer
# (max_turns) and for finished ones. demo-01 orders 1 of its 9 exams.
CUT = ["REQUEST TEST: Chest X-Ray", "How long have you had the cough?"]
ROLLOUTS = [  # (case, replies, max_turns, finished, diagagent reward by hand)
    ("demo-01", CUT, 2, False, 0.5 * 0.2 - 0.01 * 2),
    ("demo-01", CUT + ["DIAGNOSIS READY: pneumonia", "DIAGNOSIS READY: Lobar pneumonia"],
     30, True, 1.0 + 0.5 * 0.2 - 0.01 * 3),
    ("demo-05", ["Where exactly is the pain?", f"DIAGNOSIS READY: {APPENDICITIS}",
                 f"DIAGNOSIS READY: {APPENDICITIS}"], 30, True, 1.0 - 0.01 * 2),
]


def gym_reward(case_id, seed, replies, spec):
    """The plain Gym env's number (:func:`clinenv.testing.rewards.gym_reward`)."""
    from clinenv.testing.rewards import gym_reward as reference

    return reference(ENV_ID, case_id, seed, replies, spec)


@pytest.mark.parametrize("case_id, replies, max_turns, finished, by_hand", ROLLOUTS)
def test_the_last_step_carries_the_gym_reward_cut_off_or_finished(
        case_id, replies, max_turns, finished, by_hand):
    want, components = gym_reward(case_id, 7, replies, "diagagent")
    assert want == pytest.approx(by_hand)
    env = make(case_id, max_turns=max_turns, env_config={"reward_spec": "diagagent"})
    env.init(PROMPT)
    outs = play(env, replies)
    assert [o["done"] for o in outs] == [False] * (len(replies) - 1) + [True]
    assert [o["reward"] for o in outs] == [0.0] * (len(replies) - 1) + [want]
    assert outs[-1]["metadata"]["clinenv_done"] is finished
    assert outs[-1]["metadata"]["reward_components"] == components
    assert all("reward_components" not in o["metadata"] for o in outs[:-1])
    metrics = env.get_metrics()
    assert metrics["reward"] == want and metrics["finished"] == float(finished)
    assert {k.removeprefix("reward_components/"): v for k, v in metrics.items()
            if k.startswith("reward_components/")} == {
        k: (None if v is None else float(v)) for k, v in components.items()}


def test_aggregated_metrics_leave_undefined_components_out():
    metrics = []
    for case_id, replies, max_turns, _, _ in ROLLOUTS:
        env = make(case_id, max_turns=max_turns, env_config={"reward_spec": "diagagent"})
        env.init(PROMPT)
        play(env, replies)
        metrics.append(env.get_metrics())
    assert metrics[2]["reward_components/workup_precision"] is None  # nothing ordered
    mean = ClinenvTextEnv.aggregate_metrics(metrics)
    assert mean["reward_components/workup_precision"] == 1.0
    assert mean["reward_components/diagnosis"] == pytest.approx(2 / 3)
    assert mean["reward"] == pytest.approx(sum(r[4] for r in ROLLOUTS) / 3)


def test_a_bad_reward_spec_names_the_nearest_preset():
    from clinenv.reward_spec import RewardSpecError

    with pytest.raises(RewardSpecError, match="did you mean 'diagagent'"):
        make("demo-01", env_config={"reward_spec": "diagagnet"})


def test_the_shipped_entrypoint_writes_parquet_rows_that_play_an_episode(tmp_path):
    """examples/skyrl/main_clinenv.py (SkyRL's ``main_<env>.py`` shape) without SkyRL's
    trainer or a GPU: its dataset mode writes train/validation parquet (datasets is in
    the skyrl extra), the rows build the registered environment, and an episode plays
    within the ``generator.max_turns`` it sets."""
    import importlib.util
    import subprocess
    import sys
    from pathlib import Path

    datasets = pytest.importorskip("datasets")
    root = Path(__file__).resolve().parents[2]
    script = root / "examples" / "skyrl" / "main_clinenv.py"
    spec = importlib.util.spec_from_file_location("main_clinenv", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert {"generator.batched=false", "environment.env_class=clinenv"} <= set(
        module.REQUIRED_OVERRIDES)
    max_turns = int(next(o for o in module.REQUIRED_OVERRIDES
                         if o.startswith("generator.max_turns=")).split("=")[1])
    assert max_turns >= 20

    proc = subprocess.run([sys.executable, str(script), "--write-data", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"train: {tmp_path / 'train.parquet'}",
                                        f"validation: {tmp_path / 'validation.parquet'}"]
    train = datasets.Dataset.from_parquet(str(tmp_path / "train.parquet")).to_list()
    val = datasets.Dataset.from_parquet(str(tmp_path / "validation.parquet")).to_list()
    ids = [r["extra_info"]["case_id"] for r in train + val]
    assert (len(train), len(val)) == (12, 5) and len(set(ids)) == 17
    row = train[0]
    env = skyrl_gym.make(register_clinenv(), env_config={},
                         extras={**row, "max_turns": max_turns})
    env.init(row["prompt"])
    turns = 0
    while True:
        turns += 1
        out = env.step("REQUEST TEST: T1" if turns < 5 else "DIAGNOSIS READY: flu")
        if out["done"]:
            break
    assert turns <= max_turns and "reward_components" in out["metadata"]

    # training without SkyRL's trainer installed is one clear message
    if importlib.util.find_spec("skyrl") is None and importlib.util.find_spec(
            "skyrl_train") is None:
        proc = subprocess.run([sys.executable, str(script), "trainer.epochs=1"],
                              capture_output=True, text=True, timeout=120, cwd=root)
        assert proc.returncode == 1 and "SkyRL's trainer is not installed" in proc.stderr


# issue 30
def test_compact_tool_results_and_text_wording_in_env_config():
    """``tool_results="compact"`` in the env's ``env_config`` reaches the
    environment (recorded in its spec); the wording stays the text protocol's."""
    row = task_rows(ENV_ID, ["demo-01"], tool_results="compact")[0]
    extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")}
    env = skyrl_gym.make(register_clinenv(), env_config={"tool_results": "compact"},
                         extras=extras)
    first, _ = env.init(row["prompt"])
    assert "REQUEST TEST:" in first[-1]["content"]
    out = env.step("How long have you had the cough?")
    text = out["observations"][0]["content"]
    assert text.startswith("Patient") and text.endswith("\n\nRound 2 of 19.")
    assert "# Available examinations" not in text
    kwargs = env.episode.env.spec.kwargs
    assert (kwargs["tool_results"], kwargs["action_format"]) == ("compact", "text")


# issue 30
def test_rows_leave_out_flagged_cases_and_say_so():
    """``exclude_flags`` (demo-01 and demo-13 name their target in a record; by
    hand from the demo records)."""
    with pytest.warns(UserWarning, match=r"left out 2 of 3 cases \(target_in_records: 2, "
                                         r"target_in_menu: 0\); 1 rows remain"):
        rows = task_rows(ENV_ID, ["demo-13", "demo-03", "demo-01"],
                         exclude_flags=("target_in_records", "target_in_menu"))
    assert [r["extra_info"] for r in rows] == [
        {"case_id": "demo-03", "seed": seed_of(2), "env_id": ENV_ID}]
    assert rows.excluded == {"target_in_records": ("demo-01", "demo-13"),
                             "target_in_menu": ()}
    assert rows.note.startswith("EGIP-Demo-v0: exclude_flags left out 2 of 3 cases")
    with pytest.raises(ValueError, match="unknown flag 'leak'; the flags are "
                                         "target_in_records, "):
        task_rows(ENV_ID, exclude_flags=("leak",))


# issue 30
def test_the_shipped_entrypoint_leaves_flagged_cases_out(tmp_path):
    """``--write-data DIR --exclude-flags ...`` leaves the flagged cases out of
    both files, after the split (demo-01, -05, -13 and -17 name their target in a record:
    by hand from the demo records; the 0.7 split holds 01 out), and says so; an unknown
    flag is one usage error."""
    import subprocess
    import sys
    from pathlib import Path

    datasets = pytest.importorskip("datasets")
    root = Path(__file__).resolve().parents[2]
    script = root / "examples" / "skyrl" / "main_clinenv.py"
    proc = subprocess.run([sys.executable, str(script), "--write-data", str(tmp_path),
                           "--exclude-flags", *LEAK_FLAGS],
                          capture_output=True, text=True, timeout=120, cwd=root)
    assert proc.returncode == 0, proc.stderr
    notes = [x for x in proc.stderr.splitlines() if "exclude_flags left out" in x]
    assert notes == [
        "train: EGIP-Demo-v0: exclude_flags left out 3 of 12 cases (target_in_records: 3, "
        "target_in_menu: 0); 9 rows remain, `excluded` lists the case ids",
        "validation: EGIP-Demo-v0: exclude_flags left out 1 of 5 cases (target_in_records: "
        "1, target_in_menu: 0); 4 rows remain, `excluded` lists the case ids"]
    ids = {name: [r["extra_info"]["case_id"] for r in datasets.Dataset.from_parquet(
        str(tmp_path / f"{name}.parquet")).to_list()] for name in ("train", "validation")}
    assert ids["validation"] == ["demo-03", "demo-07", "demo-11", "demo-15"]
    assert len(ids["train"]) == 9
    assert not {"demo-01", "demo-05", "demo-13", "demo-17"} & set(ids["train"])

    proc = subprocess.run([sys.executable, str(script), "--write-data", str(tmp_path),
                           "--exclude-flags", "leak"],
                          capture_output=True, text=True, timeout=120, cwd=root)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1].startswith(
        "main_clinenv.py: error: exclude_flags: unknown flag 'leak'; the flags are ")
