"""Reward specs (:mod:`clinenv.reward_spec`) and the environment's terminal reward.

The ``accuracy`` preset, computed from the components, is today's reward (the verdict's
:data:`clinenv.env.rewards.CORRECT` / ``WRONG`` / ``UNSCORED``) over every scripted
episode of the demo and MedQA sets; the legacy per-step terms add to it as before; the
Gym env, the PettingZoo doctor seat and run logs give one number; the spec is recorded
in ``env_spec`` and checked by resume.
"""

from __future__ import annotations

import hashlib
import json
import math

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.scripted_doctor import ScriptedDoctor
from clinenv.cli import main
from clinenv.env import EGIPEnv, rewards
from clinenv.env.config import EnvConfig
from clinenv.multiagent.aec import DOCTOR, EGIPAECEnv
from clinenv.reward_components import DEFAULT_EXAM_COSTS, RewardComponents, reward_components
from clinenv.reward_spec import (
    DEFAULT_SPEC,
    PRESETS,
    RewardSpec,
    RewardSpecError,
    load_reward_spec,
    spec_of_line,
)
from clinenv.runlog import RunLogError, env_spec_dict, read_run_log
from clinenv.runs import RunSpec, run
from clinenv.seeding import episode_seed
from clinenv.testing.data import needs_shared_data

VERDICT_REWARD = {"correct": rewards.CORRECT, "wrong": rewards.WRONG,
                  "unscored": rewards.UNSCORED}


def scripted(env, case_id, seed, exploration=0.0):
    """``(actions, step rewards, infos)`` of the scripted doctor's episode."""
    doctor = ScriptedDoctor(exploration=exploration)
    obs, info = env.reset(seed=seed, options={"case_id": case_id})
    doctor.reset(seed=seed)
    actions, step_rewards, infos = [], [], [info]
    done = False
    while not done:
        action = doctor.act(obs, info)
        obs, reward, terminated, truncated, info = env.step(action)
        actions.append(action)
        step_rewards.append(reward)
        infos.append(info)
        done = terminated or truncated
    return actions, step_rewards, infos


def legacy_charges(record, exam_cost, penalty):
    """The legacy per-step terms, from the events (a test returned: one id of a
    measurement event; a group request lists all its ids)."""
    tests = sum(len(e["exam_id"].split(",")) for e in record["events"]
                if e["source"] == "measurement" and e["exam_id"])
    return exam_cost * tests + penalty * record["invalid_actions"]


# ------------------------------------------------------------------ presets
HAND = RewardComponents(diagnosis=1.0, workup_recall=0.5, workup_precision=None,
                        workup_f1=0.4, exam_spend=6.0, turns=10, invalid_actions=2, format=1)
WRONG = RewardComponents(0.0, 0.25, 1.0, 0.4, 2.0, 19, 0, 1)
UNFINISHED = RewardComponents(0.0, 0.25, 1.0, 0.4, 2.0, 7, 1, 0)


@pytest.mark.parametrize(("name", "components", "expected"), [
    ("accuracy", HAND, 1.0), ("accuracy", WRONG, 0.0), ("accuracy", UNFINISHED, 0.0),
    ("diagagent", HAND, 1.0 + 0.5 * 0.4 - 0.01 * 10),
    ("diagagent", WRONG, 0.5 * 0.4 - 0.01 * 19),
    ("diagagent", UNFINISHED, 0.5 * 0.4 - 0.01 * 7),
    ("cost-aware", HAND, 1.0 - 0.03 * 6.0), ("cost-aware", WRONG, -0.03 * 2.0),
])
def test_presets_on_hand_built_components(name, components, expected):
    spec = load_reward_spec(name)
    assert spec is PRESETS[name] and spec.name == name
    assert spec.reward(components) == pytest.approx(expected)
    assert spec.reward(components.to_dict()) == pytest.approx(expected)


def test_the_accuracy_preset_is_the_verdict_reward():
    assert DEFAULT_SPEC is PRESETS["accuracy"]
    assert PRESETS["accuracy"].weights == {"diagnosis": rewards.CORRECT}
    assert rewards.WRONG == rewards.UNSCORED == 0.0
    assert EnvConfig().reward_spec is DEFAULT_SPEC


def test_none_counts_0_and_the_gate_holds_process_terms():
    spec = RewardSpec("g", {"diagnosis": 2.0, "workup_precision": 5.0, "turns": -0.1,
                            "format": 0.5}, gate="format")
    assert spec.reward(HAND) == pytest.approx(2.0 - 1.0 + 0.5)  # precision None: 0
    assert spec.reward(UNFINISHED) == 0.0                       # gate shut, diagnosis 0
    shut = RewardComponents(1.0, 1.0, 1.0, 1.0, 0.0, 3, 0, 0)   # (a correct cut: no)
    assert spec.reward(shut) == pytest.approx(2.0)
    on_correct = RewardSpec("c", {"diagnosis": 1.0, "turns": -0.1}, gate="diagnosis")
    assert on_correct.reward(WRONG) == 0.0
    assert on_correct.reward(HAND) == pytest.approx(0.0)


def test_load_forms_and_the_canonical_json(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text('{"weights": {"turns": -0.5, "diagnosis": 1}, "gate": "format",\n'
                    ' "exam_costs": {"ecg_imaging": 4}}', encoding="utf-8")
    spec = load_reward_spec(str(path))
    assert load_reward_spec(path) == spec
    assert spec.name == "custom" and spec.gate == "format"  # never the file's stem
    assert spec.exam_costs == {**DEFAULT_EXAM_COSTS, "ecg_imaging": 4.0}
    assert spec.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    data = json.loads(spec.to_json())
    assert data == {"name": "custom", "weights": {"diagnosis": 1.0, "turns": -0.5},
                    "gate": "format", "exam_costs": spec.exam_costs,
                    "sha256": spec.sha256}
    assert str(tmp_path) not in spec.to_json()
    assert load_reward_spec(data) == spec and hash(load_reward_spec(data)) == hash(spec)
    assert load_reward_spec(spec) is spec
    assert load_reward_spec(PRESETS["diagagent"].to_dict()) == PRESETS["diagagent"]
    assert RewardSpec.from_dict({"weights": {"turns": -1}}).name == "custom"


def bad_file(tmp_path, text):
    path = tmp_path / "spec.json"
    path.write_text(text, encoding="utf-8")
    return str(path)


BAD = [
    ('{"weights": {"diagnosis": 1, "workup_f2": 0.5}}',
     "field 'weights.workup_f2': unknown component 'workup_f2'; did you mean 'workup_f1'? "
     "(components: diagnosis, workup_recall, workup_precision, workup_f1, exam_spend, "
     "turns, invalid_actions, format)"),
    ('{"weights": {"diagnosis": NaN}}', "field 'weights.diagnosis': a weight must be "
                                        "a finite number, got nan"),
    ('{"weights": {"turns": -Infinity}}', "field 'weights.turns': a weight must be a "
                                          "finite number, got -inf"),
    ('{"weights": {"turns": -1%s}}' % ("0" * 400),  # 401 digits: no float holds it
     "field 'weights.turns': a weight must be a finite number, got -1" + "0" * 18
     + "... (401 digits)"),
    ('{"weights": {"diagnosis": 1}, "exam_costs": {"other": 1%s}}' % ("0" * 400),
     "field 'exam_costs.other': a cost must be a finite number, got 1" + "0" * 19
     + "... (401 digits)"),
    ('{"weights": {}}', "field 'weights': gives no component a non-zero weight, so the "
                        "reward would always be 0 (e.g. {\"diagnosis\": 1.0})"),
    ('{"weights": {"diagnosis": 0, "turns": -0.0}}',
     "field 'weights': gives no component a non-zero weight, so the reward would always "
     "be 0 (e.g. {\"diagnosis\": 1.0})"),
    ('{"weights": {"turns": "-0.1"}}', "field 'weights.turns': a weight must be a number, "
                                       "got '-0.1'"),
    ('{"weights": {"turns": true}}', "field 'weights.turns': a weight must be a number, "
                                     "got True"),
    ('{"wieghts": {"diagnosis": 1}}', "field 'wieghts': unknown key 'wieghts'; did you "
                                      "mean 'weights'? (keys: name, weights, gate, "
                                      "exam_costs)"),
    ('{"name": "x"}', "field 'weights': is missing (an object {component: number})"),
    ('{"weights": {}, "gate": "formt"}', "field 'gate': unknown gate 'formt'; did you mean "
                                         "'format'? (gates: format, diagnosis, or null)"),
    ('{"weights": {}, "exam_costs": {"imaging": 1}}',
     "field 'exam_costs.imaging': unknown tier 'imaging'; did you mean 'ecg_imaging'? "
     "(tiers: vital_signs, physical_exam, basic_labs, blood_urine, ecg_imaging, "
     "microbiology, specialized, other)"),
    ('{"weights": {}, "exam_costs": {"other": -1}}',
     "field 'exam_costs.other': a cost must be >= 0, got -1"),
    ('[1, 2]', "must be a JSON object, got list"),
    ('{"weights": ', "is not valid JSON (Expecting value: line 1 column 13 (char 12))"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_bad_spec_files_name_the_file_the_field_and_the_nearest_name(tmp_path, text,
                                                                     message):
    path = bad_file(tmp_path, text)
    with pytest.raises(RewardSpecError) as caught:
        load_reward_spec(path)
    assert str(caught.value) == f"reward spec {path}" + (
        ", " if message.startswith("field") else ": ") + message
    assert isinstance(caught.value, ValueError) and "\n" not in str(caught.value)


def test_bad_preset_names_and_kinds():
    with pytest.raises(RewardSpecError) as caught:
        load_reward_spec("diagagnt")
    assert str(caught.value) == ("reward spec: unknown preset 'diagagnt'; did you mean "
                                 "'diagagent'? (presets: accuracy, diagagent, cost-aware; "
                                 "or a .json file)")
    with pytest.raises(RewardSpecError, match=r"^reward spec: must be a preset name, a "
                                              r"JSON file, a dict or a RewardSpec, got int$"):
        load_reward_spec(3)
    with pytest.raises(RewardSpecError, match=r"missing\.json: no such file$"):
        load_reward_spec("missing.json")
    with pytest.raises(RewardSpecError, match=r"^reward spec, field 'weights.x': unknown"):
        RewardSpec("x", {"x": 1.0})
    # an environment refuses it at construction, with the same message
    with pytest.raises(ValueError, match=r"unknown preset 'cost_aware'; did you mean "
                                         r"'cost-aware'\?"):
        gym.make("EGIP-Demo-v0", reward_spec="cost_aware")


# ------------------------------------------------------- the environment's reward
def demo_ids():
    return [c.case_id for c in gym.make("EGIP-Demo-v0").unwrapped.pool.cases]


def check_accuracy_is_the_old_reward(env_id, exploration, legacy):
    costs = dict(exam_cost=0.1, invalid_action_penalty=0.2) if legacy else {}
    env = gym.make(env_id, **costs).unwrapped
    assert env.reward_spec is PRESETS["accuracy"]
    n = 0
    for index, case in enumerate(env.pool.cases):
        seed = episode_seed(7, 0, index)
        _, step_rewards, infos = scripted(env, case.case_id, seed, exploration)
        record = json.loads(json.dumps(env.episode_record()))
        components = reward_components(record, case)  # computed, not passed through
        old = VERDICT_REWARD[record["verdict"]]
        assert PRESETS["accuracy"].reward(components) == old
        assert step_rewards[-1] == old  # the decision step carries no legacy term
        charges = legacy_charges(record, **({"exam_cost": 0.1, "penalty": 0.2} if legacy
                                            else {"exam_cost": 0.0, "penalty": 0.0}))
        assert math.fsum(step_rewards) == pytest.approx(old - charges, abs=1e-12)
        assert components.to_dict() == infos[-1]["reward_components"]
        n += 1
    return n


@pytest.mark.parametrize("exploration", [0.0, 0.6])
@pytest.mark.parametrize("legacy", [False, True])
def test_accuracy_is_todays_reward_over_every_demo_episode(exploration, legacy):
    assert check_accuracy_is_the_old_reward("EGIP-Demo-v0", exploration, legacy) == len(
        demo_ids())


@needs_shared_data()
@pytest.mark.parametrize("exploration", [0.0, 0.6])
@pytest.mark.parametrize("legacy", [False, True])
def test_accuracy_is_todays_reward_over_every_medqa_episode(shared_data_dir, exploration,
                                                            legacy):
    assert check_accuracy_is_the_old_reward("EGIP-MedQA-v0", exploration, legacy) == 107


@pytest.mark.parametrize("case_id", ["demo-01", "demo-05", "demo-11"])
def test_step_rewards_are_the_spec_reward_minus_the_legacy_charges(case_id):
    env = gym.make("EGIP-Demo-v0", reward_spec="diagagent", exam_cost=0.25,
                   invalid_action_penalty=0.5).unwrapped
    fixed = iter(["REQUEST TEST: T99", "REQUEST TEST: Blood Tests", "REQUEST TEST: PE1"])
    doctor = ScriptedDoctor()
    obs, info = env.reset(seed=2, options={"case_id": case_id})
    doctor.reset(seed=2)
    infos, step_rewards, done = [], [], False
    while not done:
        obs, reward, terminated, truncated, info = env.step(
            next(fixed, None) or doctor.act(obs, info))
        step_rewards.append(reward)
        infos.append(info)
        done = terminated or truncated
    record = env.episode_record()
    spec_reward = PRESETS["diagagent"].score(record, env.pool.case(case_id))
    assert math.fsum(step_rewards) == pytest.approx(
        spec_reward - legacy_charges(record, 0.25, 0.5))
    assert step_rewards[-1] == pytest.approx(spec_reward)  # the decision step
    # non-terminal steps: only the legacy terms; components on the terminal step only
    assert step_rewards[0] == -0.5
    assert all("reward_components" not in i for i in infos[:-1])
    assert infos[-1]["reward_components"] == env.reward_components().to_dict()
    _, after, _, _, info = env.step("anything")
    assert after == 0.0 and "reward_components" not in info and info["verdict"]


@pytest.mark.parametrize("spec", ["accuracy", "diagagent", "cost-aware"])
@pytest.mark.parametrize("case_id", ["demo-01", "demo-07", "demo-12"])
def test_the_pettingzoo_doctor_seat_gets_the_gym_reward(spec, case_id):
    costs = dict(exam_cost=0.05, invalid_action_penalty=0.1)
    gym_env = gym.make("EGIP-Demo-v0", reward_spec=spec, **costs).unwrapped
    actions, step_rewards, infos = scripted(gym_env, case_id, seed=5, exploration=0.5)
    actions = ["REQUEST TEST: T99"] + actions  # an invalid action first
    gym_env.reset(seed=5, options={"case_id": case_id})
    step_rewards = []
    for action in actions:
        _, reward, terminated, _, info = gym_env.step(action)
        step_rewards.append(reward)
        if terminated:
            break
    aec = EGIPAECEnv("demo", patient="retrieval", examiner="lookup", reward_spec=spec,
                     **costs)
    aec.reset(seed=5, options={"case_id": case_id})
    seat_rewards = []
    for action in actions[:len(step_rewards)]:
        aec.step(action)
        seat_rewards.append(aec.rewards[DOCTOR])
    assert all(aec.terminations.values())
    assert seat_rewards == pytest.approx(step_rewards)
    assert aec.infos[DOCTOR]["reward_components"] == info["reward_components"]


def test_the_native_loop_charges_the_spec(tmp_path):
    env = gym.make("AgentClinic-Demo-v0", reward_spec="diagagent").unwrapped
    _, step_rewards, infos = scripted(env, "demo-03", seed=1)
    record = env.episode_record()
    components = infos[-1]["reward_components"]
    assert components["workup_f1"] is None
    assert step_rewards[-1] == pytest.approx(
        components["diagnosis"] - 0.01 * components["turns"])
    assert PRESETS["diagagent"].score(record, env.pool.case("demo-03")) == step_rewards[-1]


# ----------------------------------------------------------- settings and env_spec
def test_reward_spec_is_a_setting_given_through_gym_make():
    spec = PRESETS["cost-aware"]
    by_kwarg = gym.make("EGIP-Demo-v0", reward_spec="cost-aware").unwrapped
    by_settings = gym.make("EGIP-Demo-v0", env_config=EnvConfig(reward_spec=spec)).unwrapped
    assert by_kwarg.env_config == by_settings.env_config
    assert by_kwarg.reward_spec is spec and by_kwarg.loop.reward_spec is spec
    with pytest.raises(TypeError, match=r"got both env_config= \(reward_spec=.*\) and "
                                        r"reward_spec='diagagent'"):
        EGIPEnv("demo", env_config=EnvConfig(reward_spec="cost-aware"), reward_spec="diagagent")
    # a keyword fills a field the config leaves at its default
    assert EGIPEnv("demo", env_config=EnvConfig(max_exams=8),
                   reward_spec="diagagent").reward_spec is PRESETS["diagagent"]
    # the default given again adds nothing; a protocol keyword still reaches the protocol
    env = EGIPEnv("demo", env_config=EnvConfig(max_exams=8), reward_spec="accuracy",
                  acquisition_rounds=4)
    assert env.config.acquisition_rounds == 4 and env.max_exams == 8
    with pytest.raises(TypeError, match=r"got both env_config= \(reward_spec="):
        EGIPAECEnv("demo", env_config=EnvConfig(reward_spec="cost-aware"),
                   reward_spec="diagagent")


@pytest.mark.parametrize("how", ["preset", "file", "object", "settings", "dict"])
def test_env_spec_records_the_canonical_json_and_rebuilds_the_spec(tmp_path, how):
    path = tmp_path / "spec.json"
    path.write_text('{"name": "mine", "weights": {"diagnosis": 1, "exam_spend": -0.1}}',
                    encoding="utf-8")
    spec = {"preset": PRESETS["diagagent"], "file": load_reward_spec(path),
            "object": PRESETS["cost-aware"], "settings": load_reward_spec(path),
            "dict": load_reward_spec(path)}[how]
    kwargs = {"preset": {"reward_spec": "diagagent"},
              "file": {"reward_spec": str(path)},
              "object": {"reward_spec": spec},
              "settings": {"env_config": EnvConfig(reward_spec=path)},
              "dict": {"reward_spec": spec.to_dict()}}[how]
    env = gym.make("EGIP-Demo-v0", **kwargs)
    recorded = env_spec_dict(env)
    text = json.dumps(recorded)
    assert str(tmp_path) not in text  # a file by content hash, never by path
    # env_config= is recorded as its fields, flat: the keyword route's form
    assert recorded["kwargs"] == {"dataset": "demo", "reward_spec": spec.to_dict()}
    rebuilt = gym.make(recorded["id"], **recorded["kwargs"]).unwrapped
    assert rebuilt.reward_spec == spec
    assert spec_of_line({"env_spec": recorded}) == spec
    assert spec_of_line({}) is DEFAULT_SPEC


def run_demo(tmp_path, **kwargs):
    out = tmp_path / "log.jsonl"
    with gym.make("EGIP-Demo-v0", **kwargs) as env:
        run(lambda: env, ScriptedDoctor, RunSpec(out=out, episodes=3, resume=out.exists()))
    return out


def test_resume_refuses_a_changed_spec(tmp_path):
    out = run_demo(tmp_path, reward_spec="diagagent")
    before = out.read_bytes()
    for other in ("accuracy", "cost-aware"):
        with pytest.raises(RunLogError, match=r"log\.jsonl, line 1: env_spec\.kwargs\."
                                              r"reward_spec"):
            run_demo(tmp_path, reward_spec=other)
        assert out.read_bytes() == before
    run_demo(tmp_path, reward_spec=PRESETS["diagagent"].to_dict())  # the same spec
    assert out.read_bytes() == before


def test_resume_refuses_a_changed_spec_file_and_keeps_the_default(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text('{"weights": {"diagnosis": 1, "turns": -0.1}}', encoding="utf-8")
    logs = tmp_path / "a"
    logs.mkdir()
    out = run_demo(logs, reward_spec=str(path))
    path.write_text('{"weights": {"diagnosis": 1, "turns": -0.2}}', encoding="utf-8")
    with pytest.raises(RunLogError, match=r"env_spec\.kwargs\.reward_spec\.weights\.turns "
                                          r"is -0\.1 but this run has -0\.2"):
        run_demo(logs, reward_spec=str(path))
    # a log written without a spec resumes with the default named explicitly
    plain = tmp_path / "b"
    plain.mkdir()
    out = run_demo(plain)
    before = out.read_bytes()
    run_demo(plain, reward_spec="accuracy")
    assert out.read_bytes() == before


# ------------------------------------------------------------------ run logs
def test_every_line_has_the_components_and_an_old_log_gets_them(tmp_path, monkeypatch,
                                                                capsys):
    out = tmp_path / "run.jsonl"
    assert main(["run", "--env", "EGIP-Demo-v0", "--doctor", "scripted", "--exploration",
                 "0.5", "--reward-spec", "diagagent", "--out", str(out), "--quiet"]) == 0
    lines = list(read_run_log(out).episodes().values())
    pool = gym.make("EGIP-Demo-v0").unwrapped.pool
    assert len(lines) == len(pool.cases)
    for line in lines:
        stored = line.pop("reward_components")  # an old log has none
        spec = spec_of_line(line)
        assert spec == PRESETS["diagagent"]
        case = pool.case(line["case_id"])
        assert spec.components(line, case).to_dict() == stored
        assert spec.score(line, case) == pytest.approx(line["reward"])
    # accuracy from a plain log: the line's reward
    plain = tmp_path / "plain.jsonl"
    assert main(["run", "--env", "EGIP-Demo-v0", "--out", str(plain), "--quiet"]) == 0
    for line in read_run_log(plain).episodes().values():
        line.pop("reward_components")
        assert spec_of_line(line) is DEFAULT_SPEC
        assert DEFAULT_SPEC.score(line, pool.case(line["case_id"])) == line["reward"]


def test_cut_off_lines_get_the_unfinished_rule(tmp_path):
    from clinenv.runs.episode import run_episode

    env = gym.make("EGIP-Demo-v0", reward_spec="diagagent")
    record = run_episode(env, ScriptedDoctor(), case_id="demo-01", seed=0, max_steps=4)
    assert record["truncated"] and record["phase"] == "acquire"
    components = record["reward_components"]
    assert components["diagnosis"] == 0.0 and components["format"] == 0
    assert components["turns"] == 4
    assert components == reward_components(record, env.unwrapped.pool.case("demo-01"),
                                           exam_costs=DEFAULT_EXAM_COSTS).to_dict()


def test_replayed_lines_carry_their_own_components_and_reward(tmp_path):
    from clinenv.runs import replay_run

    source = tmp_path / "source.jsonl"
    with gym.make("EGIP-Demo-v0", reward_spec="diagagent", exam_cost=0.05) as env:
        run(lambda: env, ScriptedDoctor, RunSpec(out=source))
    out = tmp_path / "replay.jsonl"
    replay_run(source, ScriptedDoctor, RunSpec(out=out), ablation="no_candidates")
    sources = read_run_log(source).episodes()
    pool = gym.make("EGIP-Demo-v0").unwrapped.pool
    spec, changed = PRESETS["diagagent"], 0
    for key, line in read_run_log(out).episodes().items():
        src, case = sources[key], pool.case(line["case_id"])
        assert spec_of_line(line) == spec
        assert line["reward_components"] == spec.components(line, case).to_dict()
        legacy = src["reward"] - spec.score(src, case)
        assert line["reward"] == pytest.approx(legacy + spec.score(line, case))
        changed += line["verdict"] != src["verdict"]
    assert changed  # some verdicts move without the candidate labels


class FailingDoctor(ScriptedDoctor):
    """The scripted doctor whose model backend fails on its third move."""

    def act(self, observation, info):
        if info.get("turn", 0) >= 2:
            from clinenv.llm.base import BackendError

            raise BackendError("server down", backend="openai")
        return "REQUEST TEST: PE1" if info.get("turn", 0) == 0 else "REQUEST TEST: T4"


def test_error_lines_get_the_unfinished_rule(tmp_path):
    out = tmp_path / "log.jsonl"
    with gym.make("EGIP-Demo-v0", reward_spec="diagagent") as env:
        run(lambda: env, FailingDoctor, RunSpec(out=out, episodes=1, max_consecutive_errors=None))
    (line,) = read_run_log(out).episodes().values()
    assert line["error"]["message"] == "server down" and line["case_id"] == "demo-01"
    assert line["reward_components"] == pytest.approx({
        "diagnosis": 0.0, "workup_recall": 2 / 9, "workup_precision": 1.0,
        "workup_f1": 2 * (2 / 9) / (1 + 2 / 9), "exam_spend": 3.1, "turns": 2,
        "invalid_actions": 0, "format": 0})


def test_the_cli_records_a_file_by_its_hash_and_refuses_a_bad_spec(tmp_path, capsys):
    path = tmp_path / "cheap.json"
    path.write_text('{"weights": {"diagnosis": 1, "exam_spend": -0.05}}', encoding="utf-8")
    out = tmp_path / "run.jsonl"
    assert main(["run", "--env", "EGIP-Demo-v0", "--episodes", "2", "--reward-spec",
                 str(path), "--out", str(out), "--quiet"]) == 0
    line = next(iter(read_run_log(out).episodes().values()))
    assert line["env_spec"]["kwargs"]["reward_spec"] == load_reward_spec(path).to_dict()
    assert str(tmp_path) not in json.dumps(line["env_spec"])
    capsys.readouterr()
    bad = tmp_path / "bad.json"
    bad.write_text('{"weights": {"diagnosis": 1, "exam_spnd": -0.05}}', encoding="utf-8")
    assert main(["run", "--env", "EGIP-Demo-v0", "--reward-spec", str(bad),
                 "--out", str(tmp_path / "x.jsonl"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err == (f"clinenv: error: --reward-spec {bad}, field 'weights.exam_spnd': "
                   "unknown component 'exam_spnd'; did you mean 'exam_spend'? (components: "
                   "diagnosis, workup_recall, workup_precision, workup_f1, exam_spend, turns, "
                   "invalid_actions, format)\n")
    assert not (tmp_path / "x.jsonl").exists()
    assert main(["run", "--env", "EGIP-Demo-v0", "--reward-spec", "accuracyy",
                 "--quiet"]) == 2
    assert capsys.readouterr().err == (
        "clinenv: error: --reward-spec: unknown preset 'accuracyy'; did you mean "
        "'accuracy'? (presets: accuracy, diagagent, cost-aware; or a .json file)\n")


# ------------------------------------------------------------- review fixes
@pytest.mark.parametrize("legacy", [False, True])
def test_a_cut_off_episode_reward_is_the_adapters_number(legacy):
    """A line cut by max_steps holds the step rewards so far plus the spec's reward of
    the unfinished episode: the number of ToolEpisode.episode_reward() and of the
    environment's own unfinished rule (0.5 * F1 0.25 - 0.01 * 4 turns = 0.085)."""
    from clinenv.integrations.tools import ToolEpisode
    from clinenv.runs.episode import run_episode

    costs = dict(exam_cost=0.05, invalid_action_penalty=0.1) if legacy else {}
    kwargs = dict(reward_spec="diagagent", observation_format="delta",
                  premature_diagnosis="decide", **costs)
    env = gym.make("EGIP-Demo-v0", **kwargs)
    record = run_episode(env, ScriptedDoctor(), case_id="demo-01", seed=1, max_steps=4)
    components = RewardComponents.from_dict(record["reward_components"])
    spec_term = PRESETS["diagagent"].reward(components)
    assert spec_term != 0.0 and record["truncated"] and record["turns"] == 4
    charges = legacy_charges(record, **({"exam_cost": 0.05, "penalty": 0.1} if legacy
                                        else {"exam_cost": 0.0, "penalty": 0.0}))
    assert record["reward"] == pytest.approx(spec_term - charges)
    actions = [e["text"] for e in record["events"] if e["source"] == "doctor"]
    episode = ToolEpisode("EGIP-Demo-v0", **{k: v for k, v in kwargs.items()
                                             if k not in ("observation_format",
                                                          "premature_diagnosis")})
    episode.reset("demo-01", 1)
    for action in actions:
        episode.step_text(action)
    assert episode.episode_reward() == pytest.approx(record["reward"])


@needs_shared_data()
def test_the_reviewers_medqa_cut_off_line(shared_data_dir):
    from clinenv.runs.episode import run_episode

    env = gym.make("EGIP-MedQA-v0", reward_spec="diagagent", observation_format="delta",
                   premature_diagnosis="decide")
    record = run_episode(env, ScriptedDoctor(), case_id="medqa-0003", seed=1, max_steps=4)
    assert record["reward_components"]["workup_f1"] == pytest.approx(0.25)
    assert record["reward_components"]["turns"] == 4
    assert record["reward"] == pytest.approx(0.5 * 0.25 - 0.01 * 4)  # 0.085
    unwrapped = env.unwrapped
    assert record["reward"] == pytest.approx(
        unwrapped.reward_spec.reward(unwrapped.reward_components()))


def test_a_cut_off_line_under_accuracy_is_the_plain_sum(tmp_path):
    from clinenv.runs.episode import run_episode

    env = gym.make("EGIP-Demo-v0", exam_cost=0.25)
    record = run_episode(env, ScriptedDoctor(), case_id="demo-01", seed=0, max_steps=3)
    assert record["truncated"]
    assert record["reward"] == -legacy_charges(record, 0.25, 0.0)  # exactly, 0 added


def test_an_error_line_reward_holds_the_spec_term(tmp_path):
    out = tmp_path / "log.jsonl"
    with gym.make("EGIP-Demo-v0", reward_spec="diagagent") as env:
        run(lambda: env, FailingDoctor, RunSpec(out=out, episodes=1, max_consecutive_errors=None))
    (line,) = read_run_log(out).episodes().values()
    assert line["error"]
    f1 = line["reward_components"]["workup_f1"]
    assert line["reward"] == pytest.approx(0.5 * f1 - 0.01 * 2)


def test_replay_sources_are_finished_lines_so_the_subtraction_needs_no_version(
        tmp_path):
    """replay_run subtracts spec.score(src) from a source's reward: right for finished
    lines of every version; a cut-off line (whose reward now holds the unfinished spec
    term) has no target and never reaches it."""
    from clinenv.runs import replay_run
    from clinenv.runs.replay import ReplayError

    source = tmp_path / "source.jsonl"
    with gym.make("EGIP-Demo-v0", reward_spec="diagagent", exam_cost=0.05,
                  max_episode_steps=3) as env:
        run(lambda: env, ScriptedDoctor, RunSpec(out=source, episodes=2))
    assert all(line["truncated"] for line in read_run_log(source).lines)
    with pytest.raises(ReplayError, match=r"line 1: field 'target'"):
        replay_run(source, ScriptedDoctor, RunSpec(out=tmp_path / "replay.jsonl"))


def test_settings_and_keyword_runs_share_env_spec_and_resume_each_other(tmp_path,
                                                                         capsys):
    out = tmp_path / "run.jsonl"
    with gym.make("EGIP-Demo-v0", env_config=EnvConfig(reward_spec="diagagent")) as env:
        run(lambda: env, ScriptedDoctor, RunSpec(out=out, episodes=3))
    with gym.make("EGIP-Demo-v0", reward_spec="diagagent") as env:
        assert read_run_log(out).lines[0]["env_spec"] == env_spec_dict(env)
    before = out.read_bytes()
    # the CLI's keyword route resumes it, and export rebuilds its environment
    assert main(["run", "--env", "EGIP-Demo-v0", "--episodes", "3", "--reward-spec",
                 "diagagent", "--out", str(out), "--resume", "--quiet"]) == 0
    assert out.read_bytes() == before
    assert main(["export", str(out), "--out", str(tmp_path / "rows.jsonl")]) == 0
    rows = (tmp_path / "rows.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 3
    # and the other way round: a keyword log resumed by settings=
    keyword = tmp_path / "keyword.jsonl"
    with gym.make("EGIP-Demo-v0", reward_spec="diagagent", exam_cost=0.1) as env:
        run(lambda: env, ScriptedDoctor, RunSpec(out=keyword, episodes=2))
    with gym.make("EGIP-Demo-v0", env_config=EnvConfig(reward_spec="diagagent",
                                                       exam_cost=0.1)) as env:
        run(lambda: env, ScriptedDoctor, RunSpec(out=keyword, episodes=3, resume=True))
    assert len(read_run_log(keyword).lines) == 3


def test_an_older_settings_dict_in_env_spec_compares_as_its_fields():
    from clinenv.runlog import env_settings

    flat = env_spec_dict(gym.make("EGIP-Demo-v0", reward_spec="diagagent", max_exams=8))
    old = {**flat, "kwargs": {"dataset": "demo", "settings": {
        **EnvConfig().describe(), "max_exams": 8,
        "reward_spec": PRESETS["diagagent"].to_dict()}}}
    assert env_settings(old) == env_settings(flat)
    assert spec_of_line({"env_spec": old}) == PRESETS["diagagent"]
    # a field given at its default compares as absent
    assert env_settings(env_spec_dict(gym.make("EGIP-Demo-v0", exam_cost=0.0))) == \
        env_settings(env_spec_dict(gym.make("EGIP-Demo-v0")))


def test_presets_and_the_cost_table_are_read_only():
    env = gym.make("EGIP-Demo-v0").unwrapped
    with pytest.raises(TypeError):
        env.reward_spec.weights["turns"] = -1
    with pytest.raises(TypeError):
        env.reward_spec.exam_costs["other"] = 0.0
    with pytest.raises(TypeError):
        PRESETS["mine"] = PRESETS["accuracy"]
    with pytest.raises(TypeError):
        DEFAULT_EXAM_COSTS["other"] = 0.0
    assert dict(PRESETS["accuracy"].weights) == {"diagnosis": 1.0}
    assert gym.make("EGIP-Demo-v0").unwrapped.reward_spec.weights == {"diagnosis": 1.0}
    # a spec made from a caller's dict does not follow later changes to it
    weights = {"diagnosis": 1.0}
    spec = RewardSpec("mine", weights)
    weights["turns"] = -1.0
    assert dict(spec.weights) == {"diagnosis": 1.0}


@pytest.mark.parametrize("spec", ["diagagent", "cost-aware"])
def test_specs_and_their_environments_pickle_and_copy(spec):
    import copy
    import pickle

    for value in (PRESETS[spec], RewardSpec("c", {"turns": -1.0}, gate="format",
                                           exam_costs={"other": 3.0}, sha256="ab")):
        for twin in (pickle.loads(pickle.dumps(value)), copy.deepcopy(value),
                     copy.copy(value)):
            assert twin == value and twin.to_json() == value.to_json()
            with pytest.raises(TypeError):
                twin.weights["turns"] = 0.5
    env = gym.make("EGIP-Demo-v0", reward_spec=spec).unwrapped
    env.reset(seed=0, options={"case_id": "demo-01"})
    env.step("REQUEST TEST: PE1")
    for twin in (pickle.loads(pickle.dumps(env)), copy.deepcopy(env)):
        assert twin.reward_spec == PRESETS[spec]
        assert twin.reward_components() == env.reward_components()


def test_an_empty_name_and_a_missing_file_named_like_a_preset(tmp_path, capsys,
                                                              monkeypatch):
    monkeypatch.chdir(tmp_path)  # "" would otherwise read the current folder
    with pytest.raises(RewardSpecError) as caught:
        load_reward_spec("")
    assert str(caught.value) == ("reward spec: empty name '': give a preset (accuracy, "
                                 "diagagent, cost-aware) or a .json file")
    with pytest.raises(RewardSpecError) as caught:
        load_reward_spec("diagagent.json")
    assert str(caught.value) == ("reward spec diagagent.json: no such file; did you mean "
                                 "the preset 'diagagent' (a preset name, without .json)?")
    assert main(["run", "--env", "EGIP-Demo-v0", "--reward-spec", "", "--quiet"]) == 2
    assert capsys.readouterr().err == (
        "clinenv: error: --reward-spec: empty name '': give a preset (accuracy, "
        "diagagent, cost-aware) or a .json file\n")
    assert not (tmp_path / "runs").exists()


def test_a_spec_file_is_its_content_not_its_path(tmp_path, capsys):
    from clinenv.cli.run import reward_spec_label

    text = '{"weights": {"diagnosis": 1, "turns": -0.05}}'
    ms2, ms3 = tmp_path / "ms2.json", tmp_path / "ms3.json"
    ms2.write_text(text, encoding="utf-8")
    ms3.write_text(text, encoding="utf-8")
    assert load_reward_spec(ms2) == load_reward_spec(ms3)
    assert load_reward_spec(ms2).name == "custom"
    logs = tmp_path / "logs"
    logs.mkdir()
    out = run_demo(logs, reward_spec=str(ms2))
    before = out.read_bytes()
    run_demo(logs, reward_spec=str(ms3))  # resumes: the same spec
    assert out.read_bytes() == before
    # the default --out names a nameless file by its content
    sha = load_reward_spec(ms2).sha256
    assert reward_spec_label(load_reward_spec(ms3)) == f"_reward-custom-{sha[:8]}"
    assert reward_spec_label(PRESETS["diagagent"]) == "_reward-diagagent"
    assert reward_spec_label(PRESETS["accuracy"]) == ""
    named = tmp_path / "named.json"
    named.write_text('{"name": "mine", "weights": {"diagnosis": 1}}', encoding="utf-8")
    assert reward_spec_label(load_reward_spec(named)) == "_reward-mine"


def test_terminal_info_and_records_hold_their_own_copies():
    env = gym.make("EGIP-Demo-v0", reward_spec="diagagent").unwrapped
    _, _, infos = scripted(env, "demo-01", seed=0)
    record = env.episode_record()
    logged = json.loads(json.dumps(record))
    info = infos[-1]
    info["reward_components"]["turns"] = -1
    info["verdict"] = "changed"
    for value in info.values():
        if isinstance(value, dict):
            value["x"] = 1
        elif isinstance(value, list):
            value.append("x")
    assert env.episode_record() == logged
    for value in record.values():  # nor does changing one record change the next
        if isinstance(value, dict):
            value["x"] = 1
        elif isinstance(value, list):
            value.append("x")
    assert env.episode_record() == logged
    _, _, _, _, after = env.step("anything")  # after the end: the outcome, copied
    for value in after.values():
        if isinstance(value, dict):
            value["x"] = 1
        elif isinstance(value, list):
            value.append("x")
    assert env.episode_record() == logged


def test_a_run_without_gym_make_records_its_spec_in_the_line(tmp_path):
    out = tmp_path / "direct.jsonl"
    run(lambda: EGIPEnv("demo", reward_spec="diagagent"), ScriptedDoctor, RunSpec(out=out,
                                                                                  episodes=2,
                                                                                  env_id="EGIP-Demo-v0"))
    lines = read_run_log(out).lines
    assert all(line["env_spec"] is None for line in lines)
    assert lines[0]["reward_spec"] == PRESETS["diagagent"].to_dict()
    assert spec_of_line(lines[0]) == PRESETS["diagagent"]
    with pytest.raises(RunLogError, match=r"line 1: reward_spec is "):
        run(lambda: EGIPEnv("demo"), ScriptedDoctor, RunSpec(out=out, episodes=3,
                                                             env_id="EGIP-Demo-v0", resume=True))
    run(lambda: EGIPEnv("demo", reward_spec="diagagent"), ScriptedDoctor, RunSpec(out=out,
                                                                                  episodes=3,
                                                                                  env_id="EGIP-Demo-v0",
                                                                                  resume=True))
    assert len(read_run_log(out).lines) == 3
    # the default spec writes no such field
    plain = tmp_path / "plain.jsonl"
    run(lambda: EGIPEnv("demo"), ScriptedDoctor, RunSpec(out=plain, episodes=1,
                                                         env_id="EGIP-Demo-v0"))
    assert "reward_spec" not in read_run_log(plain).lines[0]


def test_a_spec_is_a_settings_object():
    """A :class:`~clinenv.config_model.ConfigModel`: a variant is checked again and raises
    the same one-line error; ``source`` is neither compared nor dumped."""
    spec = PRESETS["diagagent"]
    assert spec.replace(source="mine.json") == spec
    assert spec.replace(gate="format").gate == "format"
    with pytest.raises(RewardSpecError, match=r"^reward spec x\.json, field 'gate': unknown "
                                              r"gate 'fromat'; did you mean 'format'\?"):
        spec.replace(gate="fromat", source="x.json")
    assert spec.model_dump() == {**spec.to_dict(), "sha256": None}
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        RewardSpec("x", {"diagnosis": 1.0}, bogus=1)
