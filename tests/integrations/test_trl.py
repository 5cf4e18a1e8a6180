"""The TRL adapter against the real TRL: GRPOTrainer(environment_factory=...).train().

Runs in the ``.venv-trl`` environment (``pip install -e '.[test,trl]'`` over torch 2.13.0
CPU; ``.ci/run`` builds it); elsewhere it skips. The model is a two-layer Qwen3 with
random weights from a config and the tokenizer a byte-level BPE trained here on the
demo cases' opening texts, with TRL's Qwen3 chat template (TRL parses tool calls only
for the templates it lists).
"""

from __future__ import annotations

import inspect
import json
import re

import pytest

trl = pytest.importorskip("trl", reason="TRL is not installed: run in .venv-trl "
                                         "(pip install -e '.[test,trl]'), as .ci/run does")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

import clinenv  # noqa: E402,F401
from clinenv.cli import main  # noqa: E402
from clinenv.integrations import tools as tool_view  # noqa: E402
from clinenv.integrations.tools import TOOL_SCHEMAS, TOOL_SYSTEM_PROMPT  # noqa: E402
from clinenv.integrations.trl import TASK_INTRO, make_env_factory, task_dataset  # noqa: E402
from clinenv.testing.tiny_models import chatml_tokenizer, tiny_qwen3  # noqa: E402

ENV_ID = "EGIP-Demo-v0"


@pytest.fixture(scope="module")
def tokenizer():
    """A ChatML tokenizer: byte-level BPE (1,000 tokens) trained on the opening texts."""
    episode = tool_view.ToolEpisode(ENV_ID)
    corpus = [TOOL_SYSTEM_PROMPT, TASK_INTRO, json.dumps(TOOL_SCHEMAS)]
    for case in episode.env.pool.cases:
        corpus.append(episode.reset(case.case_id, 0))
        corpus.append(episode.submit_diagnosis(case.target.text))
    return chatml_tokenizer(corpus, vocab_size=1000)


def grpo_args(tmp_path, **kw):
    return trl.GRPOConfig(
        output_dir=str(tmp_path / "out"), max_steps=1, per_device_train_batch_size=4,
        num_generations=2, learning_rate=1e-4, logging_steps=1, report_to="none",
        use_cpu=True, save_strategy="no", seed=0, **kw)


def recording_factory(log):
    """The adapter's class, logging each reset row and each reward (not a tool)."""
    base = make_env_factory(ENV_ID)

    class Recorded(base):
        def reset(self, **row):
            log["resets"].append(row)
            return super().reset(**row)

        def get_reward(self):
            value = super().get_reward()
            log["rewards"].append((self._episode.env.runtime.case.case_id, value))
            return value

    Recorded.__name__ = base.__name__  # the reward column keeps its name
    return Recorded


def test_tool_schemas_trl_builds_equal_the_tool_view(tokenizer):
    env = make_env_factory(ENV_ID)()
    public = sorted(n for n in dir(env) if not n.startswith("_"))
    assert public == ["ask_patient", "get_reward", "list_exams", "order_exam",
                      "patient_cache", "reset", "submit_diagnosis"]
    # TRL makes a tool of each public function but reset and get_reward
    assert sorted(n for n, _ in inspect.getmembers(type(env), inspect.isfunction)
                  if not n.startswith("_")) == ["ask_patient", "get_reward", "list_exams",
                                                "order_exam", "reset", "submit_diagnosis"]
    assert env.patient_cache is None
    for schema in TOOL_SCHEMAS:
        built = transformers.utils.get_json_schema(getattr(env, schema["function"]["name"]))
        assert built["function"]["return"] == {"type": "string"}
        assert json.dumps(built) == json.dumps(schema)  # key order too (tojson)
    assert trl.chat_template_utils.supports_tool_calling(tokenizer)


def test_grpo_train_with_the_environment_factory(tmp_path, tokenizer):
    rows = task_dataset(ENV_ID, split=["demo-02", "demo-09", "demo-13", "demo-16"])
    log = {"resets": [], "rewards": []}
    trainer = trl.GRPOTrainer(model=tiny_qwen3(tokenizer), processing_class=tokenizer,
                              args=grpo_args(tmp_path, max_completion_length=24),
                              train_dataset=rows,
                              environment_factory=recording_factory(log))
    assert trainer.reward_func_names == ["ClinenvToolEnv"]  # the only reward: the env's
    trainer.train()
    assert trainer.state.global_step == 1
    reset_ids = [row["case_id"] for row in log["resets"]]
    assert len(reset_ids) == 4 and set(reset_ids) <= set(rows["case_id"])
    assert reset_ids[0::2] == reset_ids[1::2]  # each row twice: one GRPO group
    by_id = {r["case_id"]: r for r in rows}
    for row in log["resets"]:  # every column of the row reached reset
        assert row["seed"] == by_id[row["case_id"]]["seed"]
        assert row["env_id"] == ENV_ID and row["prompt"][0]["content"] == TOOL_SYSTEM_PROMPT
    assert [case for case, _ in log["rewards"]] == reset_ids
    logged = trainer.state.log_history[0]
    mean = sum(v for _, v in log["rewards"]) / len(log["rewards"])
    assert logged["rewards/ClinenvToolEnv/mean"] == pytest.approx(mean)
    assert logged["reward"] == pytest.approx(mean)


#: Scripted doctor turns per case: (tool, arguments) in order; the last is scored.
SCRIPTS = {
    "demo-01": [("ask_patient", {"question": "How long have you had the cough?"}),
                ("order_exam", {"exam": "Chest X-Ray"}),
                ("list_exams", {}),
                ("submit_diagnosis", {"diagnosis": "pneumonia"}),
                ("submit_diagnosis", {"diagnosis": "Lobar pneumonia"})],
    "demo-05": [("order_exam", {"exam": "PE1"}),
                ("ask_patient", {"question": "Where exactly is the pain?"}),
                ("submit_diagnosis", {"diagnosis": "gastroenteritis"}),
                ("submit_diagnosis", {"diagnosis": "Viral gastroenteritis"})],
}


def scripted_generation(tok, objectives):
    """A stand-in for the model's sampling: each rollout's next turn, as token ids."""

    def generate(self, prompt_ids, images, multimodal_fields, num_generations,
                 has_tool_images=False):
        out = []
        for ids in prompt_ids:
            text = tok.decode(ids)
            case = next(c for c, objective in objectives.items() if objective in text)
            turn = text.count("<tool_response>")
            if turn < len(SCRIPTS[case]):
                name, args = SCRIPTS[case][turn]
                call = json.dumps({"name": name, "arguments": args})
                reply = f"<tool_call>\n{call}\n</tool_call><|im_end|>"
            else:  # after the final answer's result: a plain reply ends the rollout
                reply = "Thank you.<|im_end|>"
            out.append(tok.encode(reply, add_special_tokens=False))
        return out, None

    return generate


def text_protocol_score(case_id, seed, script):
    """The terminal reward of the same actions as text, in a plain environment."""
    env = gym.make(ENV_ID, premature_diagnosis="decide").unwrapped
    env.reset(seed=seed, options={"case_id": case_id})
    texts = [tool_view.tool_to_action(name, args) for name, args in script]
    for text in [t for t in texts if t is not None]:
        _, reward, terminated, _, info = env.step(text)
    assert terminated
    return reward, info["verdict"]


def test_tool_calls_go_through_trl_parsing_and_execution(tmp_path, tokenizer, monkeypatch):
    rows = task_dataset(ENV_ID, split=list(SCRIPTS))
    pool = tool_view.ToolEpisode(ENV_ID).env.pool
    objectives = {case_id: pool.case(case_id).objective for case_id in SCRIPTS}
    executed = []
    call = tool_view.ToolEpisode.call

    def recording_call(self, name, arguments=None):
        result = call(self, name, arguments)
        executed.append((id(self), self.env.runtime.case.case_id, name, dict(arguments or {}),
                         result))
        return result

    monkeypatch.setattr(tool_view.ToolEpisode, "call", recording_call)
    monkeypatch.setattr(trl.GRPOTrainer, "_generate_single_turn",
                        scripted_generation(tokenizer, objectives))
    log = {"resets": [], "rewards": []}
    trainer = trl.GRPOTrainer(model=tiny_qwen3(tokenizer), processing_class=tokenizer,
                              args=grpo_args(tmp_path, max_completion_length=4096),
                              train_dataset=rows,
                              environment_factory=recording_factory(log))
    trainer.train()
    # each rollout ran its case's whole script, with the arguments TRL parsed
    episodes: dict[int, list] = {}
    for key, case_id, name, args, _ in executed:
        episodes.setdefault(key, [case_id]).append((name, args))
    assert sorted((calls[0], calls[1:]) for calls in episodes.values()) == sorted(
        (case_id, script) for case_id, script in SCRIPTS.items() for _ in range(2))
    assert {name for _, _, name, _, _ in executed} == set(tool_view.TOOL_NAMES)
    early = next(r for _, c, n, _, r in executed if n == "submit_diagnosis" and c == "demo-01")
    assert "# Acquired observations" in early and "[O2] Measurement T4 Chest X-Ray" in early
    expected = {c: text_protocol_score(c, rows[i]["seed"], SCRIPTS[c])
                for i, c in enumerate(rows["case_id"])}
    assert expected == {"demo-01": (1.0, "correct"), "demo-05": (0.0, "wrong")}
    assert sorted(log["rewards"]) == sorted(
        (c, expected[c][0]) for c in SCRIPTS for _ in range(2))
    logged = trainer.state.log_history[0]
    assert logged["rewards/ClinenvToolEnv/mean"] == pytest.approx(0.5)
    assert logged["reward_std"] > 0  # rewards differ across groups
    assert logged["tools/call_frequency"] == pytest.approx(
        sum(len(s) for s in SCRIPTS.values()) / 2)
    assert logged["tools/failure_frequency"] == 0


def test_adapter_instances_follow_the_tool_view():
    env = make_env_factory(ENV_ID)()
    with pytest.raises(ValueError, match="no episode"):
        env.order_exam("T1")
    row = task_dataset(ENV_ID, split=["demo-03"])[0]
    assert env.reset(**row) == tool_view.ToolEpisode(ENV_ID).reset("demo-03", row["seed"])
    assert env.submit_diagnosis("Botulism").startswith("Interface: Acquisition ended early")
    with pytest.raises(ValueError, match="evidence gathering is over"):
        env.ask_patient("Any fever?")
    env.submit_diagnosis("Guillain-Barre syndrome")
    assert env.get_reward() == 1.0
    with pytest.raises(ValueError, match="episode is over"):
        env.list_exams()
    assert env.get_reward() == 1.0
    assert re.search(r"Round 1 of 19", env.reset(case_id="demo-03", seed=1, other=3))
    assert env.get_reward() == 0.0  # reset clears the episode
    with pytest.raises(ValueError, match="the row has no seed"):
        env.reset(case_id="demo-03", prompt=[])
    with pytest.raises(ValueError, match="the row is for 'EGIP-MedQA-v0'"):
        env.reset(case_id="demo-03", seed=0, env_id="EGIP-MedQA-v0")


def test_task_dataset_rows_pin_cases_and_seeds(tmp_path):
    rows = task_dataset(ENV_ID)
    assert rows.column_names == ["prompt", "case_id", "seed", "env_id"]
    assert rows["case_id"] == [f"demo-{i:02d}" for i in range(1, 18)]
    # the seed rule, computed here from SeedSequence directly
    assert rows["seed"] == [int(np.random.SeedSequence([0, 0, i]).generate_state(1)[0])
                            & 0x7FFF_FFFF for i in range(17)]
    assert rows[0]["prompt"] == [{"role": "system", "content": TOOL_SYSTEM_PROMPT},
                                 {"role": "user", "content": TASK_INTRO}]
    assert task_dataset(ENV_ID, seed=4)["seed"][3] != rows["seed"][3]
    listed = tmp_path / "construction.txt"
    listed.write_text("demo-11\n# held out below\n\ndemo-02\n", encoding="utf-8")
    assert task_dataset(ENV_ID, split=listed)["case_id"] == ["demo-02", "demo-11"]
    assert task_dataset(ENV_ID, split=str(listed))["seed"] == [rows["seed"][1], rows["seed"][10]]
    listed.write_text("demo-02\ndemo-7\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"construction.txt, line 2: case id 'demo-7' is not "
                                         r"in EGIP-Demo-v0 .* nearest id .* 'demo-07'"):
        task_dataset(ENV_ID, split=listed)
    with pytest.raises(ValueError, match="split item 1: case id 'demo-02' is listed twice"):
        task_dataset(ENV_ID, split=["demo-02", "demo-02"])
    with pytest.raises(ValueError, match="nearest id is 'demo-12'"):
        task_dataset(ENV_ID, split=["demo-12x"])


# issue 30
def test_sft_prompts_render_as_grpo_renders_them(tmp_path, tokenizer):
    """A prompt rendered with tools=TOOL_SCHEMAS (clinenv export's tools column,
    SFT rows) is, character for character, the prompt GRPOTrainer renders with the tools
    it builds from make_env_factory's class (trl 1.16: the bound methods, listed by
    inspect.getmembers, rendered through transformers' get_json_schema)."""
    rows = task_dataset(ENV_ID, split=["demo-02", "demo-09"])
    trainer = trl.GRPOTrainer(model=tiny_qwen3(tokenizer), processing_class=tokenizer,
                              args=grpo_args(tmp_path, max_completion_length=8),
                              train_dataset=rows, environment_factory=make_env_factory(ENV_ID))
    built = trainer._env_tools[None]  # what _tokenize_prompts renders for each row
    assert built == trainer.tools
    assert [tool.__name__ for tool in built] == list(tool_view.TOOL_NAMES)
    env = make_env_factory(ENV_ID)()
    for row in rows:
        prompt = trl_prompt(row, env.reset(**row))
        grpo = tokenizer.apply_chat_template(prompt, tools=built, tokenize=False,
                                             add_generation_prompt=True)
        sft = tokenizer.apply_chat_template(prompt, tools=json.loads(json.dumps(
            TOOL_SCHEMAS)), tokenize=False, add_generation_prompt=True)
        assert sft == grpo
        assert '"return": {"type": "string"}' in grpo
        assert grpo.index('"name": "list_exams"') < grpo.index('"name": "order_exam"')


# issue 30
def test_task_dataset_leaves_out_flagged_cases_and_says_so():
    """``exclude_flags`` (the demo records name the target in demo-01, -05, -13 and
    -17, by hand); the other rows and their seeds as without it."""
    every = task_dataset(ENV_ID)
    note = ("EGIP-Demo-v0: exclude_flags left out 4 of 17 cases (target_in_records: 4, "
            "target_in_menu: 0); 13 rows remain, `excluded` lists the case ids")
    with pytest.warns(UserWarning, match=re.escape(note)):
        rows = task_dataset(ENV_ID, exclude_flags=tool_view.LEAK_FLAGS)
    leaks = ("demo-01", "demo-05", "demo-13", "demo-17")
    assert rows.excluded == {"target_in_records": leaks, "target_in_menu": ()}
    assert rows.info.description == note
    assert rows.shuffle(seed=0).info.description == note
    assert rows.to_list() == [r for r in every.to_list() if r["case_id"] not in leaks]
    assert every.excluded == {} and every.info.description == ""
    with pytest.raises(ValueError, match="unknown flag 'in_records'; the flags are "
                                         "target_in_records, target_in_patient_facts"):
        task_dataset(ENV_ID, exclude_flags=("in_records",))


def trl_prompt(row, reset_text):
    """The prompt TRL generates from for a row: ``reset``'s text appended to the last
    message's content by string concatenation, the other messages as they are (trl
    1.16, trl/trainer/grpo_trainer.py, GRPOTrainer._generate_and_score_completions:
    ``prompt[:-1] + [{**prompt[-1], "content": content + observation}]``)."""
    prompt = row["prompt"]
    return prompt[:-1] + [{**prompt[-1], "content": prompt[-1]["content"] + reset_text}]


def test_tools_export_starts_as_the_grpo_prompt(workdir, tokenizer):
    """SFT rows of ``clinenv export --format tools`` open with the very messages GRPO
    shows for the same episode, so SFT and GRPO train on one prompt."""
    assert main(["run", "--env", ENV_ID, "--doctor", "scripted", "--seed", "0",
                 "--episodes", "3", "--quiet", "--out", "run.jsonl"]) == 0
    assert main(["export", "run.jsonl", "--format", "tools", "--out", "sft.jsonl"]) == 0
    exported = [json.loads(x) for x in (workdir / "sft.jsonl").read_text(
        encoding="utf-8").splitlines()]
    rows = task_dataset(ENV_ID)  # run seed 0, repetition 0: the rows' seeds
    env = make_env_factory(ENV_ID)()
    assert [e["case_id"] for e in exported] == rows["case_id"][:3]
    for sft, row in zip(exported, rows, strict=False):
        assert sft["seed"] == row["seed"]
        grpo = trl_prompt(row, env.reset(**row))
        head = [{"role": m["role"], "content": m["content"]} for m in sft["messages"][:2]]
        assert json.dumps(head).encode() == json.dumps(grpo).encode()
        assert head[1]["content"].startswith(TASK_INTRO + "# Task\n")
        # the export's extra keys (tool_calls [], tool_call_id and name None) render
        # nothing: the chat template gives the same text as for the GRPO prompt
        assert tokenizer.apply_chat_template(sft["messages"][:2], tools=TOOL_SCHEMAS,
                                             tokenize=False) == \
            tokenizer.apply_chat_template(grpo, tools=TOOL_SCHEMAS, tokenize=False)


# Issue 29 §1: the reward spec through the factory, the unfinished rule and one column
# per component. demo-01 orders the Chest X-Ray (1 of its 9 exams), asks, then stops
# calling tools: a rollout cut before any answer. demo-05 asks and answers, ordering
# nothing (workup precision undefined).
REWARD_SCRIPTS = {
    "demo-01": [("order_exam", {"exam": "Chest X-Ray"}),
                ("ask_patient", {"question": "How long have you had the cough?"})],
    "demo-05": [("ask_patient", {"question": "Where exactly is the pain?"}),
                ("submit_diagnosis", {"diagnosis": "Acute appendicitis"}),
                ("submit_diagnosis", {"diagnosis": "Acute appendicitis"})],
}


def scripted_turns(tok, objectives, scripts):
    """The model's sampling replaced by ``scripts``' calls, then a plain reply (no tool
    call), which ends the rollout whether or not the episode is over."""

    def generate(self, prompt_ids, images, multimodal_fields, num_generations,
                 has_tool_images=False):
        out = []
        for ids in prompt_ids:
            text = tok.decode(ids)
            case = next(c for c, objective in objectives.items() if objective in text)
            turn = text.count("<tool_response>")
            if turn < len(scripts[case]):
                name, args = scripts[case][turn]
                reply = ("<tool_call>\n" + json.dumps({"name": name, "arguments": args})
                         + "\n</tool_call><|im_end|>")
            else:
                reply = "Thank you.<|im_end|>"
            out.append(tok.encode(reply, add_special_tokens=False))
        return out, None

    return generate


def gym_reward(case_id, seed, script, spec):
    """A plain Gym env stepped with the script's action texts: (the spec's reward of its
    components, finished or not, and the components as a dict)."""
    from clinenv.testing.rewards import gym_reward as reference

    return reference(ENV_ID, case_id, seed,
                     [tool_view.tool_to_action(name, args) for name, args in script], spec)


def test_grpo_logs_each_component_and_rewards_the_cut_off_rollout(tmp_path, tokenizer,
                                                                  monkeypatch):
    from clinenv.integrations.trl import component_reward_funcs
    from clinenv.reward_components import COMPONENTS

    rows = task_dataset(ENV_ID, split=list(REWARD_SCRIPTS))
    pool = tool_view.ToolEpisode(ENV_ID).env.pool
    objectives = {case_id: pool.case(case_id).objective for case_id in REWARD_SCRIPTS}
    monkeypatch.setattr(trl.GRPOTrainer, "_generate_single_turn",
                        scripted_turns(tokenizer, objectives, REWARD_SCRIPTS))
    base = make_env_factory(ENV_ID, reward_spec="diagagent")
    log = []

    class Recorded(base):
        def get_reward(self):
            value = super().get_reward()
            log.append((self._episode.env.runtime.case.case_id, value,
                        self._reward_components().to_dict(), self._episode.done))
            return value

    Recorded.__name__ = base.__name__
    funcs = component_reward_funcs()
    trainer = trl.GRPOTrainer(
        model=tiny_qwen3(tokenizer), processing_class=tokenizer, reward_funcs=funcs,
        args=grpo_args(tmp_path, max_completion_length=4096,
                       reward_weights=[0.0] * len(funcs)),
        train_dataset=rows, environment_factory=Recorded)
    assert trainer.reward_func_names == [*COMPONENTS, "ClinenvToolEnv"]
    assert trainer.reward_weights.tolist() == [0.0] * len(COMPONENTS) + [1.0]
    trainer.train()
    expected = {c: gym_reward(c, rows[i]["seed"], REWARD_SCRIPTS[c], "diagagent")
                for i, c in enumerate(rows["case_id"])}
    # by hand: cut, 0.5 * F1(1/9, 1) - 0.01 * 2 turns; finished, 1 - 0.01 * 2
    assert expected["demo-01"][0] == pytest.approx(0.5 * 0.2 - 0.02)
    assert expected["demo-05"][0] == pytest.approx(1.0 - 0.02)
    assert sorted(log, key=str) == sorted(
        [(c, expected[c][0], expected[c][1], c == "demo-05") for c in REWARD_SCRIPTS] * 2,
        key=str)
    logged = trainer.state.log_history[0]
    for name in COMPONENTS:  # each case twice: the mean over the cases where defined
        defined = [expected[c][1][name] for c in REWARD_SCRIPTS
                   if expected[c][1][name] is not None]
        assert logged[f"rewards/{name}/mean"] == pytest.approx(sum(defined) / len(defined))
    assert expected["demo-05"][1]["workup_precision"] is None
    assert logged["rewards/workup_precision/mean"] == 1.0  # demo-05's None: left out
    assert logged["rewards/format/mean"] == 0.5 and logged["rewards/turns/mean"] == 2.0
    mean = (expected["demo-01"][0] + expected["demo-05"][0]) / 2
    assert logged["rewards/ClinenvToolEnv/mean"] == pytest.approx(mean)
    assert logged["reward"] == pytest.approx(mean)  # the components weigh 0


def test_component_reward_funcs_read_each_rollouts_components():
    import pickle

    from trl.trainer.utils import get_callable_name

    from clinenv.integrations.trl import component_reward_funcs
    from clinenv.reward_components import COMPONENTS
    from clinenv.reward_spec import RewardSpecError

    funcs = component_reward_funcs()
    assert [get_callable_name(f) for f in funcs] == list(COMPONENTS)
    assert [get_callable_name(f) for f in pickle.loads(pickle.dumps(funcs))] == \
        list(COMPONENTS)
    env = make_env_factory(ENV_ID, reward_spec="diagagent")()
    with pytest.raises(ValueError, match="no episode"):
        env.get_reward()
    row = task_dataset(ENV_ID, split=["demo-01"])[0]
    env.reset(**row)
    for name, args in REWARD_SCRIPTS["demo-01"]:
        getattr(env, name)(**args)
    want, components = gym_reward("demo-01", row["seed"], REWARD_SCRIPTS["demo-01"],
                                  "diagagent")
    assert env.get_reward() == want == pytest.approx(0.08)
    foreign = object()  # another environment of a multi-environment factory
    for func in funcs:
        value = components[func.__name__]
        assert func(prompts=["p", "p"], completions=["c", "c"],
                    environments=[env, foreign]) == [float(value), None]
    with pytest.raises(ValueError, match="environment_factory"):
        funcs[0](prompts=["p"], completions=["c"])
    with pytest.raises(ValueError, match="unknown component 'workup_f2'"):
        component_reward_funcs(["workup_f2"])
    with pytest.raises(RewardSpecError, match="did you mean 'diagagent'"):
        make_env_factory(ENV_ID, reward_spec="diagagnet")
    # the spec reaches gym.make as a setting; no new tool appears
    assert env._episode.env.reward_spec.name == "diagagent"
    assert sorted(n for n, _ in inspect.getmembers(type(env), inspect.isfunction)
                  if not n.startswith("_")) == ["ask_patient", "get_reward", "list_exams",
                                                "order_exam", "reset", "submit_diagnosis"]


# issue 30
def test_text_answer_at_end_counts_a_text_answer_instead_of_a_call():
    """A rollout that ends with the answer as text (TRL stops at a completion
    without a tool call) is counted by the weight-0 reward function, and the tool view
    told it to call submit_diagnosis."""
    from trl.trainer.utils import get_callable_name

    from clinenv.integrations.trl import TextAnswerAtEnd

    func = TextAnswerAtEnd()
    assert get_callable_name(func) == "text_answer_at_end"
    factory = make_env_factory(ENV_ID, acquisition_rounds=3)
    row = task_dataset(ENV_ID, split=["demo-05"])[0]
    texted, called = factory(), factory()
    opening = texted.reset(**row)
    assert "call `submit_diagnosis` with your final answer" in opening
    assert "DIAGNOSIS READY" not in opening and "REQUEST TEST" not in opening
    called.reset(**row)
    for env in (texted, called):
        env.ask_patient(question="Where exactly is the pain?")
    called.submit_diagnosis(diagnosis="Acute appendicitis")
    called.submit_diagnosis(diagnosis="Acute appendicitis")
    call_msg = {"role": "assistant", "content": "",
                "tool_calls": [{"type": "function", "function": {
                    "name": "ask_patient", "arguments": {"question": "x"}}}]}
    tool_msg = {"role": "tool", "name": "ask_patient", "content": "Patient: ..."}
    completions = [
        [call_msg, tool_msg, {"role": "assistant", "content": "Acute appendicitis"}],
        [call_msg, tool_msg, {"role": "assistant", "content": "Done."}],
        [call_msg, tool_msg],  # cut off after a tool result
        "Acute appendicitis",
    ]
    foreign = object()
    assert func(prompts=["p"] * 4, completions=completions,
                environments=[texted, called, texted, foreign]) == [1.0, 0.0, 0.0, None]
    assert texted.get_reward() == 0.0 and called.get_reward() == 1.0
    with pytest.raises(ValueError, match="environment_factory"):
        func(prompts=["p"], completions=["c"])


# issue 30
def test_compact_tool_results_through_the_factory():
    """``tool_results="compact"``: a tool result is the result and the round."""
    factory = make_env_factory(ENV_ID, acquisition_rounds=3, tool_results="compact")
    env = factory()
    row = task_dataset(ENV_ID, split=["demo-01"], tool_results="compact")[0]
    env.reset(**row)
    result = env.ask_patient(question="How long have you had the cough?")
    assert result.startswith("Patient") and result.endswith("\n\nRound 2 of 3.")
    assert "# Available examinations" not in result
    assert "PE1  " in env.list_exams()
    assert env._episode.env.spec.kwargs["tool_results"] == "compact"


# Issue 30 "done when": a scripted tool-calling policy through TRL's real parser, at the
# documented budget (docs/training.md: compact results, 3,072 tokens, T + 2 calls),
# reaches 1.0 on a case it answers by calls; the same answer written as text scores 0.0
# and is counted by text_answer_at_end.
BUDGET_SCRIPTS = {
    "demo-05": [("ask_patient", {"question": "Where exactly is the pain?"}),
                ("order_exam", {"exam": "PE1"}),
                ("list_exams", {}),
                ("submit_diagnosis", {"diagnosis": "Acute appendicitis"}),
                ("submit_diagnosis", {"diagnosis": "Acute appendicitis"})],
    "demo-01": [("ask_patient", {"question": "How long have you had the cough?"}),
                ("order_exam", {"exam": "Chest X-Ray"})],  # then "Thank you." as text
}


def test_scripted_policy_reaches_reward_one_at_the_documented_budget(tmp_path, tokenizer,
                                                                     monkeypatch):
    from clinenv.integrations.trl import TextAnswerAtEnd

    rows = task_dataset(ENV_ID, split=list(BUDGET_SCRIPTS), tool_results="compact")
    pool = tool_view.ToolEpisode(ENV_ID).env.pool
    objectives = {case_id: pool.case(case_id).objective for case_id in BUDGET_SCRIPTS}
    monkeypatch.setattr(trl.GRPOTrainer, "_generate_single_turn",
                        scripted_turns(tokenizer, objectives, BUDGET_SCRIPTS))
    base = make_env_factory(ENV_ID, tool_results="compact")
    log = []

    class Recorded(base):
        def get_reward(self):
            value = super().get_reward()
            log.append((self._episode.env.runtime.case.case_id, value, self._episode.done))
            return value

    Recorded.__name__ = base.__name__
    trainer = trl.GRPOTrainer(
        model=tiny_qwen3(tokenizer), processing_class=tokenizer,
        reward_funcs=[TextAnswerAtEnd()],
        args=grpo_args(tmp_path, max_completion_length=3072,
                       max_tool_calling_iterations=21, reward_weights=[0.0]),
        train_dataset=rows, environment_factory=Recorded)
    trainer.train()
    assert sorted(log) == sorted([("demo-01", 0.0, False), ("demo-05", 1.0, True)] * 2)
    logged = trainer.state.log_history[0]
    assert logged["rewards/text_answer_at_end/mean"] == 0.5  # demo-01's "Thank you."
    assert logged["reward"] == pytest.approx(0.5)


def test_tool_view_tokens_counts_with_a_local_tokenizer_folder(tokenizer, tmp_path):
    """benchmarks/tool_view_tokens.py --tokenizer FOLDER renders an episode as TRL does:
    the prompt is task_prompt() + the opening text, the completion the rest."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "tool_view_tokens.py"
    spec = importlib.util.spec_from_file_location("tool_view_tokens", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    tokenizer.save_pretrained(tmp_path / "tok")
    count, unit = bench.counter(str(tmp_path / "tok"))
    assert unit.endswith("(own chat template)")
    episode = tool_view.ToolEpisode(ENV_ID, acquisition_rounds=3)
    teacher = bench.TeacherDoctor(episode.env.pool)
    prompt, completion, calls, reward = bench.episode_tokens(episode, teacher, "demo-01", 0,
                                                             count)
    assert (calls, reward) == (4, 1.0)  # the teacher: 2 acquisition calls, submit twice
    opening = tool_view.ToolEpisode(ENV_ID, acquisition_rounds=3).reset("demo-01", 0)
    rows = task_dataset(ENV_ID)
    messages = [dict(m) for m in rows[0]["prompt"]]
    messages[-1]["content"] += opening
    assert prompt == len(tokenizer.apply_chat_template(
        messages, tools=TOOL_SCHEMAS, add_generation_prompt=True, tokenize=True,
        return_dict=True)["input_ids"])
    assert 5 * 20 < completion < 5 * 1000


def test_curriculum_rows_keep_their_order_only_without_trl_shuffling():
    """TRL shuffles the rows by default (GRPOConfig.shuffle_dataset, trl 1.16): a
    curriculum needs shuffle_dataset=False; the rows' max_rounds reach reset."""
    import dataclasses

    from trl import GRPOConfig

    from clinenv.integrations.curriculum import assign_max_rounds

    default = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    assert default["shuffle_dataset"] is True
    rows = task_dataset(ENV_ID, order="curriculum")
    assert rows["case_id"][:4] == ["demo-12", "demo-13", "demo-05", "demo-01"]
    staged = assign_max_rounds(rows.to_list(), (5, 10, 19))
    env = make_env_factory(ENV_ID)()
    assert "Round 1 of 5." in env.reset(**staged[0])
    assert "Round 1 of 19." in env.reset(**staged[-1])
