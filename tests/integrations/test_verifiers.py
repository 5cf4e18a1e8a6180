"""The verifiers adapter against the real verifiers 0.4 (v1): the taskset and the
environment loaded by verifiers' own plugin loader from the id ``clinenv-verifiers``,
and ``ClinenvEnv.run`` played by fake agents (scripted doctors behind verifiers'
``Interaction`` surface: bare ``turn()`` first, then ``turn(message)``, each returning a
real ``vf.Segment`` and writing to a real ``vf.Trace``). verifiers' own harnesses run
through ``uv`` fetched from the network, which these machines cannot reach.

Runs in the ``.venv-verifiers`` environment (``pip install -e '.[test,verifiers]'``;
``.ci/run`` builds it); elsewhere it skips. Reference values come from a plain
``gym.make`` of the same environment stepped with the same replies, and by hand from
the demo records.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

vf = pytest.importorskip(
    "verifiers.v1", reason="verifiers is not installed: run in .venv-verifiers "
                           "(pip install -e '.[test,verifiers]', Python >= 3.11), as "
                           ".ci/run does")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
from verifiers.v1.utils.loaders import load_environment, resolve_env_config  # noqa: E402

import clinenv  # noqa: E402,F401
from clinenv.integrations.tools import TEXT_SYSTEM_PROMPT, ToolEpisode  # noqa: E402
from clinenv.integrations.verifiers import (  # noqa: E402
    ClinenvEnv,
    ClinenvTaskset,
    ClinenvTasksetConfig,
)

ENV_ID = "EGIP-Demo-v0"
CASES = ["demo-01", "demo-02", "demo-05", "demo-13"]
# Targets as written in clinenv/datasets/data/demo.jsonl.
TARGET = {"demo-01": "Lobar pneumonia",
          "demo-02": "Acute inferior ST-elevation myocardial infarction",
          "demo-05": "Acute appendicitis", "demo-13": "Pulmonary embolism"}


def seed_of(case_index: int) -> int:
    """``clinenv run --seed 0``'s seed of repetition 0 (numpy SeedSequence, 31 bits)."""
    return int(np.random.SeedSequence([0, 0, case_index]).generate_state(1)[0]) & 0x7FFFFFFF


def replies_for(case_id: str, answer: str) -> list[str]:
    return ["What brings you in today?", "REQUEST TEST: PE1",
            f"DIAGNOSIS READY: {answer}", f"DIAGNOSIS READY: {answer}"]


# (case, replies, terminal score by hand): exact target = 1, another disease = 0.
EPISODES = [
    ("demo-01", replies_for("demo-01", TARGET["demo-01"]), 1.0),
    ("demo-02", replies_for("demo-02", "Acute gout"), 0.0),
    ("demo-05", ["REQUEST TEST: Vital Signs", f"DIAGNOSIS READY: {TARGET['demo-05']}",
                 f"Diagnosis: {TARGET['demo-05']}"], 1.0),
    ("demo-13", replies_for("demo-13", "Community-acquired pneumonia"), 0.0),
]


def reference(case_id, seed, replies):
    """(opening text, observation texts, return, terminated) of a plain gym env."""
    env = gym.make(ENV_ID, observation_format="delta", premature_diagnosis="decide")
    obs, _ = env.reset(seed=seed, options={"case_id": case_id})
    texts, total, done = [], 0.0, False
    for reply in replies:
        o, r, term, trunc, _ = env.step(reply)
        texts.append(o["text"])
        total += float(r)
        done = term or trunc
    return obs["text"], texts, total, done


class FakeInteraction:
    """verifiers' ``Interaction`` surface over scripted replies."""

    def __init__(self, task, replies):
        self.trace = vf.Trace(task=vf.TraceTask(type=type(task).__name__, data=task.data),
                              agent=vf.AgentInfo(config=vf.AgentConfig()))
        self.replies = list(replies)
        self.received: list[str | None] = []

    async def turn(self, message=None):
        if not self.received and message is not None:
            raise ValueError("a prompted task opens with a bare turn()")
        self.received.append(message)
        await asyncio.sleep(0)  # let concurrent episodes interleave
        if not self.replies:
            return vf.Segment(messages=[], terminated=True)
        return vf.Segment(messages=[vf.AssistantMessage(content=self.replies.pop(0))])


class FakeDoctor:
    def __init__(self, replies):
        self.replies = replies
        self.interactions: list[FakeInteraction] = []

    @contextlib.asynccontextmanager
    async def interaction(self, task):
        it = FakeInteraction(task, self.replies)
        self.interactions.append(it)
        yield it
        it.trace.stop("user_closed")


class FakeAgents:
    def __init__(self, replies):
        self.doctor = FakeDoctor(replies)


@pytest.fixture(scope="module")
def env():
    config = resolve_env_config({"taskset": {"id": "clinenv-verifiers", "env_id": ENV_ID,
                                             "split": CASES}})
    return load_environment(config)


@pytest.fixture(scope="module")
def tasks(env):
    return {task.data.info["case_id"]: task for task in env.taskset}


def play(env, task, replies):
    agents = FakeAgents(replies)
    asyncio.run(env.run(task, agents))
    (it,) = agents.doctor.interactions
    return it


def test_loader_resolves_the_taskset_and_env(env, tasks):
    assert type(env) is ClinenvEnv and isinstance(env.taskset, ClinenvTaskset)
    assert env.config.doctor.harness.id == "null"
    assert list(tasks) == CASES
    indices = {"demo-01": 0, "demo-02": 1, "demo-05": 4, "demo-13": 12}
    for case_id, task in tasks.items():
        assert task.data.info == {"case_id": case_id, "seed": seed_of(indices[case_id]),
                                  "env_id": ENV_ID}
        assert task.key == f"{ENV_ID}/{case_id}/{seed_of(indices[case_id])}"


def test_task_prompt_is_the_reset_text(tasks):
    for case_id, task in tasks.items():
        seed = task.data.info["seed"]
        # the doctor writes text actions: the text protocol's wording (issue 30)
        assert task.data.prompt == ToolEpisode(ENV_ID, action_format="text").reset(
            case_id, seed)
        assert "REQUEST TEST:" in task.data.prompt
        assert task.data.prompt == reference(case_id, seed, [])[0]
        assert task.data.system_prompt == TEXT_SYSTEM_PROMPT
    # Another iteration (and another taskset object) gives the same tasks.
    again = ClinenvTaskset(ClinenvTasksetConfig(env_id=ENV_ID, split=CASES))
    assert [t.data for t in again] == [t.data for t in tasks.values()]


@pytest.mark.parametrize("case_id, replies, score", EPISODES)
def test_reward_is_the_terminal_score(env, tasks, case_id, replies, score):
    task = tasks[case_id]
    it = play(env, task, replies)
    _, texts, total, done = reference(case_id, task.data.info["seed"], replies)
    assert done and total == score
    assert it.trace.rewards["clinenv_reward"].score == score
    # The doctor saw the delta observations as its user turns, none after the answer.
    assert it.received == [None, *texts[:-1]]
    record = it.trace.info["clinenv"]
    assert record["finished"] is True and record["env_info"]["correct"] is (score == 1.0)
    assert record["calls"][-1] == {"name": "submit_diagnosis",
                                   "arguments": {"diagnosis": TARGET[case_id] if score
                                                 else replies[-1].split(": ", 1)[1]}}
    assert it.trace.metrics["turns"] == len(replies)
    assert it.trace.metrics["exams_ordered"] == 1.0


def test_the_system_prompt_states_what_an_early_diagnosis_does(env, tasks):
    task = tasks["demo-05"]
    assert ("DIAGNOSIS READY: <diagnosis> once you have enough evidence. This ends "
            "evidence gathering early: you are then shown the acquired evidence and asked "
            "for your final answer") in task.data.system_prompt
    answer = f"DIAGNOSIS READY: {TARGET['demo-05']}"
    it = play(env, task, [answer, answer])  # diagnoses in round 1, as the prompt allows
    assert it.received[1].startswith("Interface: Acquisition ended early at your request")
    assert "# Acquired observations" in it.received[1]
    assert it.trace.rewards["clinenv_reward"].score == 1.0
    assert it.trace.metrics["turns"] == 2 and it.trace.metrics["finished"] == 1.0


# issue 29 §3
def test_a_placeholder_reply_is_no_call(env, tasks):
    """The environment refuses a template placeholder, so the recorded
    calls and exams leave it out (it still uses its round)."""
    answer = f"DIAGNOSIS READY: {TARGET['demo-05']}"
    it = play(env, tasks["demo-05"], ["DIAGNOSIS READY: [diagnosis]",
                                      "REQUEST TEST: <id or name>", "REQUEST TEST: T4",
                                      answer, "DIAGNOSIS READY: N/A"])
    assert it.received[1].startswith("Interface: That is the template's placeholder")
    record = it.trace.info["clinenv"]
    assert record["calls"] == [{"name": "order_exam", "arguments": {"exam": "T4"}},
                               {"name": "submit_diagnosis",
                                "arguments": {"diagnosis": TARGET["demo-05"]}}]
    assert it.trace.metrics["exams_ordered"] == 1.0 and it.trace.metrics["turns"] == 5
    assert record["env_info"]["answer_status"] == "placeholder"
    assert it.trace.rewards["clinenv_reward"].score == 0.0


def test_a_doctor_that_stops_early_scores_zero(env, tasks):
    it = play(env, tasks["demo-01"], ["REQUEST TEST: T4", "Any chest pain?"])
    assert it.trace.rewards["clinenv_reward"].score == 0.0
    assert it.trace.metrics["finished"] == 0.0 and len(it.received) == 3


def test_concurrent_episodes_do_not_share_state(env, tasks):
    async def run_all():
        runs = [FakeAgents(replies) for _, replies, _ in EPISODES * 3]
        await asyncio.gather(*(env.run(tasks[case_id], agents)
                               for (case_id, _, _), agents in zip(EPISODES * 3, runs,
                                                                  strict=True)))
        return [agents.doctor.interactions[0] for agents in runs]

    its = asyncio.run(run_all())
    assert [it.trace.rewards["clinenv_reward"].score for it in its] == \
        [score for _, _, score in EPISODES * 3]
    # Each episode's own history: one exam each, its own answer.
    assert [it.trace.info["clinenv"]["env_info"]["n_exams_requested"] for it in its] == \
        [1] * len(its)


def test_a_prompt_from_other_settings_is_refused(env, tasks):
    task = tasks["demo-02"]
    stale = task.with_data(prompt=task.data.prompt.replace("Round 1 of 19", "Round 1 of 5"))
    with pytest.raises(ValueError, match="not the opening text"):
        asyncio.run(env.run(stale, FakeAgents(["x"])))


# Issue 29 §1: the same reward as the Gym env, for a doctor that stops before any answer
# and for finished episodes; the components as metrics. demo-01 orders 1 of its 9 exams.
CUT = ["REQUEST TEST: Chest X-Ray", "How long have you had the cough?"]
ROLLOUTS = [  # (case, replies, finished, diagagent reward by hand)
    ("demo-01", CUT, False, 0.5 * 0.2 - 0.01 * 2),
    ("demo-01", CUT + ["DIAGNOSIS READY: pneumonia", f"DIAGNOSIS READY: {TARGET['demo-01']}"],
     True, 1.0 + 0.5 * 0.2 - 0.01 * 3),
    ("demo-05", ["Where exactly is the pain?", f"DIAGNOSIS READY: {TARGET['demo-05']}",
                 f"DIAGNOSIS READY: {TARGET['demo-05']}"], True, 1.0 - 0.01 * 2),
]


@pytest.fixture(scope="module")
def diagagent_env():
    config = resolve_env_config({"taskset": {
        "id": "clinenv-verifiers", "env_id": ENV_ID, "split": ["demo-01", "demo-05"],
        "env_kwargs": {"reward_spec": "diagagent"}}})
    return load_environment(config)


def gym_reward(case_id, seed, replies, spec):
    """The plain Gym env's number (:func:`clinenv.testing.rewards.gym_reward`)."""
    from clinenv.testing.rewards import gym_reward as reference

    return reference(ENV_ID, case_id, seed, replies, spec)


@pytest.mark.parametrize("case_id, replies, finished, by_hand", ROLLOUTS)
def test_reward_and_component_metrics_are_the_gym_ones(diagagent_env, case_id, replies,
                                                       finished, by_hand):
    from clinenv.reward_components import COMPONENTS

    task = next(t for t in diagagent_env.taskset if t.data.info["case_id"] == case_id)
    it = play(diagagent_env, task, replies)
    want, components = gym_reward(case_id, task.data.info["seed"], replies, "diagagent")
    assert want == pytest.approx(by_hand)
    reward = it.trace.rewards["clinenv_reward"]
    assert (reward.score, reward.weight) == (want, 1.0) and it.trace.reward == want
    assert it.trace.metrics["finished"] == float(finished)
    assert {name: it.trace.metrics[f"reward_components/{name}"] for name in COMPONENTS} == \
        {k: (None if v is None else float(v)) for k, v in components.items()}
    assert it.trace.info["clinenv"]["reward_components"] == components
    # metrics are not summed into the reward; the trace still serializes with a None
    assert "reward_components/diagnosis" not in it.trace.rewards
    dumped = it.trace.model_dump(mode="json")["metrics"]
    assert dumped["reward_components/workup_precision"] == components["workup_precision"]


UV_SHIM = """#!/bin/sh
# An offline stand-in for uv: verifiers' chat program (a PEP 723 script) runs with this
# venv's python, which holds its packages; no download.
case "$*" in
  *--help*) echo "--script";;
  "sync --script"*) exit 0;;
  "python find --script"*) echo "{python}";;
  *) echo "uv shim: unsupported: $*" >&2; exit 2;;
esac
"""


# issue 30
def test_exclude_flags_leave_out_the_leaking_cases():
    """The taskset's exclude_flags (of CASES, demo-01, demo-05 and demo-13
    name their target in a record: by hand from the demo records), as vf-eval's own
    command-line parser reads them."""
    import sys as _sys

    from pydantic_config import cli
    from verifiers.v1.cli.resolve import narrow_config
    from verifiers.v1.configs.cli.eval import EvalConfig

    argv = ["--env.taskset.id", "clinenv-verifiers", "--env.taskset.env-id", ENV_ID,
            "--env.taskset.exclude-flags", "target_in_records", "target_in_menu",
            "-m", "fake-model"]
    saved = _sys.argv
    try:
        _sys.argv = ["vf-eval", *argv]
        config = cli(narrow_config(EvalConfig, argv))
    finally:
        _sys.argv = saved
    assert config.env.taskset.exclude_flags == ["target_in_records", "target_in_menu"]
    taskset = ClinenvTaskset(ClinenvTasksetConfig(
        env_id=ENV_ID, split=CASES, exclude_flags=["target_in_records", "target_in_menu"]))
    with pytest.warns(UserWarning, match="left out 3 of 4 cases"):
        names = [t.data.name for t in taskset]
        rows = taskset.rows()
    assert names == ["EGIP-Demo-v0/demo-02"]
    assert rows.excluded == {"target_in_records": ("demo-01", "demo-05", "demo-13"),
                             "target_in_menu": ()}
    with pytest.raises(ValueError, match="unknown flag 'leaks'; the flags are "):
        ClinenvTasksetConfig(env_id=ENV_ID, exclude_flags=["leaks"])


def test_vf_eval_runs_one_episode_end_to_end_against_the_fake_server(tmp_path):
    """The documented ``vf-eval`` command (the real console script), with the taskset's
    default runtime (a subprocess, no Prime login), against the fake server's streaming
    replies on 127.0.0.1. ``uv`` is a shim that points verifiers at this venv's python."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from clinenv.testing.fake_server import FakeChatServer

    vf_eval = Path(sys.executable).with_name("vf-eval")
    if not vf_eval.exists():
        vf_eval = Path(shutil.which("vf-eval") or "vf-eval")
    shim = tmp_path / "bin" / "uv"
    shim.parent.mkdir()
    shim.write_text(UV_SHIM.format(python=sys.executable))
    shim.chmod(0o755)
    env = dict(os.environ, PATH=f"{shim.parent}{os.pathsep}{os.environ['PATH']}",
               HOME=str(tmp_path / "home"), FAKE_API_KEY="x", NO_COLOR="1", COLUMNS="200")
    with FakeChatServer("clinician") as server:
        proc = subprocess.run(
            [str(vf_eval), "clinenv-verifiers", "--env.taskset.env-id", "EGIP-Demo-v0",
             "-m", "fake-model", "--client.base-url", server.base_url,
             "--client.api-key-var", "FAKE_API_KEY", "--no-push", "-n", "1"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
        streamed = [body.get("stream") for body in server.requests]
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "subprocess runtime" in out
    assert "1/1" in out and "clinenv_reward 0.00" in out, out[-4000:]
    assert "reward_components/format 1.00" in out and "finished 1.00" in out
    assert streamed and all(streamed), streamed
    traces = list(tmp_path.glob("outputs/*/traces.jsonl"))
    assert len(traces) == 1 and traces[0].read_text().strip()
