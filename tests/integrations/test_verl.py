"""The verl agent loop against the real verl 0.9: built from verl's registry as its
``AgentLoopWorker`` builds it (``hydra.utils.instantiate`` with verl's default trainer
config), driven by a fake server manager that returns verl's ``TokenOutput`` with
scripted doctors' replies; and once through verl's own worker, dataset and collate, from
parquet rows of :func:`clinenv.integrations.verl.verl_rows` to the padded batch.

Runs in the ``.venv-verl`` environment (torch, then ``pip install -e '.[test,verl]'``;
``.ci/run`` builds it); elsewhere it skips. Reference values come from a plain
``gym.make`` of the same environment stepped with the same replies; the expected token
ids from the tiny ChatML tokenizer's template.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("verl.experimental.agent_loop.agent_loop",
                    reason="verl is not installed: run in .venv-verl (torch, then pip "
                           "install -e '.[test,verl]'), as .ci/run does")

import gymnasium as gym  # noqa: E402
import hydra  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import verl  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import (  # noqa: E402
    AgentLoopOutput,
    AgentLoopWorker,
    DictConfigWrap,
    ToolListWrap,
    _agent_loop_registry,
)
from verl.protocol import DataProto  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

import clinenv  # noqa: E402,F401
from clinenv.integrations.tools import (  # noqa: E402
    TASK_INTRO,
    TEXT_SYSTEM_PROMPT,
    ToolEpisode,
)
from clinenv.integrations.verl import (  # noqa: E402
    AGENT_NAME,
    ClinenvAgentLoop,
    verl_rows,
)
from clinenv.llm.decoding import decode_reply  # noqa: E402
from clinenv.reward_components import COMPONENTS  # noqa: E402
from clinenv.testing.tiny_models import CHATML_TEMPLATE, chatml_tokenizer  # noqa: E402

ENV_ID = "EGIP-Demo-v0"
DATA = Path(clinenv.__file__).parent / "datasets" / "data" / "demo.jsonl"
PNEUMONIA, APPENDICITIS = "Lobar pneumonia", "Acute appendicitis"
# (case, replies, terminal score by hand): exact target = 1, another disease = 0.
EPISODES = [
    ("demo-01", ["What brings you here today?", "REQUEST TEST: T4",
                 f"DIAGNOSIS READY: {PNEUMONIA}", f"DIAGNOSIS READY: {PNEUMONIA}"], 1.0),
    ("demo-02", ["REQUEST TEST: PE1", "Where exactly is the pain?",
                 "DIAGNOSIS READY: Asthma", "DIAGNOSIS READY: Asthma"], 0.0),
    # Qwen3-style thinking before each action: the environment reads the action after
    # </think> (the reasoning is kept apart); the mask still covers the whole reply
    ("demo-04", ["<think>thirst and vomiting</think>\nWhat brings you here today?",
                 "<think>check the glucose</think>\nREQUEST TEST: T1",
                 "<think>ketones</think>\nDIAGNOSIS READY: Diabetic ketoacidosis",
                 "<think>the same</think>\nDiabetic ketoacidosis"], 1.0),
    ("demo-05", ["REQUEST TEST: Vital Signs", f"DIAGNOSIS READY: {APPENDICITIS}",
                 f"Diagnosis: {APPENDICITIS}"], 1.0),
]
PROMPT = [{"role": "system", "content": TEXT_SYSTEM_PROMPT},
          {"role": "user", "content": TASK_INTRO}]


@pytest.fixture(scope="module")
def tok():
    corpus = [TEXT_SYSTEM_PROMPT, TASK_INTRO, *DATA.read_text().splitlines()]
    return chatml_tokenizer(corpus, vocab_size=1000, chat_template=CHATML_TEMPLATE)


def trainer_config(**rollout):
    """verl's own default trainer config (the generated ppo_trainer.yaml), with
    ``rollout`` settings over it."""
    path = Path(verl.__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml"
    config = OmegaConf.load(path)
    config.actor_rollout_ref.rollout.prompt_length = 2048
    config.actor_rollout_ref.rollout.response_length = 4096
    for key, value in rollout.items():
        OmegaConf.update(config.actor_rollout_ref.rollout, key, value)
    return config


class FakeServer:
    """verl's server manager interface (``generate(request_id, *, prompt_ids,
    sampling_params, ...) -> TokenOutput``): replies from a script chosen by the
    episode's opening text, each as its tokens plus ``<|im_end|>``, with logprobs."""

    def __init__(self, tok, scripts):
        self.tok, self.scripts = tok, scripts  # {opening text: [reply, ...]}
        self.calls: dict[str, list[list[int]]] = {}
        self.replies: dict[str, list[str]] = {}

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        calls = self.calls.setdefault(request_id, [])
        if not calls:
            text = self.tok.decode(prompt_ids)
            (script,) = [s for opening, s in self.scripts.items() if opening in text]
            self.replies[request_id] = list(script)
        calls.append(list(prompt_ids))
        reply = self.replies[request_id][len(calls) - 1]
        ids = self.tok.encode(reply, add_special_tokens=False) + [self.tok.eos_token_id]
        return TokenOutput(token_ids=ids, log_probs=[-(i + 1) / 100 for i in range(len(ids))],
                           stop_reason="completed", num_preempted=0)


def opening_of(case_id, seed):
    return ToolEpisode(ENV_ID, action_format="text").reset(case_id, seed)


def reference(case_id, seed, replies):
    """(observation texts, episode reward, done) of the tool view stepped with replies."""
    episode = ToolEpisode(ENV_ID, action_format="text")
    episode.reset(case_id, seed)
    texts = [episode.step_text(reply) for reply in replies]
    return texts, episode.episode_reward(), episode.done


def make_loop(tok, server, config=None, **entry):
    """As verl's worker builds a loop: ``hydra.utils.instantiate`` of the registry entry
    (inside the running event loop, which the loop keeps, as in verl's worker)."""
    config = config or trainer_config()
    return hydra.utils.instantiate(
        config={**_agent_loop_registry[AGENT_NAME], **entry},
        trainer_config=DictConfigWrap(config=config), server_manager=server,
        tokenizer=tok, processor=None, hf_model_type="qwen2", dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data), tools=ToolListWrap([]))


def run_loop(tok, server, case_id, seed=7, config=None, extra_info=None, **entry):
    """Build the loop and run it on the row of ``(case_id, seed)``."""
    async def go():
        loop = make_loop(tok, server, config, **entry)
        assert isinstance(loop, ClinenvAgentLoop)
        info = {"case_id": case_id, "seed": seed, "env_id": ENV_ID} \
            if extra_info is None else extra_info
        return await loop.run({"temperature": 1.0, "logprobs": True}, raw_prompt=PROMPT,
                              index=0, extra_info=info, tools_kwargs={})
    return asyncio.run(go())


def runs(mask):
    """(start, end, value) of each run of equal values."""
    out, start = [], 0
    for i in range(1, len(mask) + 1):
        if i == len(mask) or mask[i] != mask[start]:
            out.append((start, i, mask[start]))
            start = i
    return out


def test_registered_under_clinenv_agent():
    assert _agent_loop_registry[AGENT_NAME] == {
        "_target_": "clinenv.integrations.verl.ClinenvAgentLoop"}


@pytest.mark.parametrize("case_id, replies, score", EPISODES)
def test_full_episode_masks_token_by_token(tok, case_id, replies, score):
    opening = opening_of(case_id, 7)
    server = FakeServer(tok, {opening: replies})
    out = run_loop(tok, server, case_id)
    assert isinstance(out, AgentLoopOutput)
    texts, reward, done = reference(case_id, 7, replies)
    assert done and reward == score and out.reward_score == score
    assert out.num_turns == 2 * len(replies)  # replies + observations + the prompt

    # The prompt: the row's messages with the opening, rendered with the generation prompt.
    first = PROMPT[:1] + [{"role": "user", "content": TASK_INTRO + opening}]
    assert out.prompt_ids == tok.apply_chat_template(
        first, tokenize=True, add_generation_prompt=True, return_dict=False)
    # The whole sequence is the template's rendering of the conversation (append-only).
    convo = list(first)
    for reply, text in zip(replies, texts, strict=True):
        convo.append({"role": "assistant", "content": reply})
        convo.append({"role": "user", "content": text})
    full = tok.apply_chat_template(convo[:-1], tokenize=True, return_dict=False)
    ids = out.prompt_ids + out.response_ids
    assert ids == full[:-1]  # all but the newline after the last <|im_end|>

    # Each call's prompt is the running ids (continuous tokens), extended.
    (calls,) = server.calls.values()
    assert len(calls) == len(replies) and calls[0] == out.prompt_ids
    for call in calls:
        assert ids[:len(call)] == call

    # Token by token: mask 1 exactly on the doctor's reply tokens and <|im_end|>; mask 0
    # on the boundary newline and the environment's user turns.
    mask = out.response_mask
    assert len(mask) == len(out.response_ids) == len(out.response_logprobs)
    spans = runs(mask)
    doctor = [(s, e) for s, e, v in spans if v == 1]
    env = [(s, e) for s, e, v in spans if v == 0]
    assert len(doctor) == len(replies) and len(env) == len(replies) - 1
    eos = tok.eos_token_id
    for (s, e), reply in zip(doctor, replies, strict=True):
        assert out.response_ids[s:e] == tok.encode(reply, add_special_tokens=False) + [eos]
        assert decode_reply(tok, out.response_ids[s:e]) == reply  # <think> kept
        assert out.response_logprobs[s:e] == [-(i + 1) / 100 for i in range(e - s)]
    for (s, e), text in zip(env, texts[:-1], strict=True):
        assert tok.decode(out.response_ids[s:e]) == \
            f"\n<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
        assert set(out.response_logprobs[s:e]) == {0.0}
    # The doctor's masked tokens, decoded, are exactly its turns.
    masked = [t for t, m in zip(out.response_ids, mask, strict=True) if m]
    assert decode_reply(tok, masked) == "".join(replies)
    assert tok.decode(masked) == "".join(r + "<|im_end|>" for r in replies)

    # The reward's components and the episode's record.
    extra = out.extra_fields["reward_extra_info"]
    assert set(extra) == {f"reward_components/{n}" for n in COMPONENTS} | {
        "turns", "exams_ordered", "finished"}
    assert extra["reward_components/diagnosis"] == score and extra["finished"] == 1.0
    assert extra["turns"] == len(replies)
    record = out.extra_fields["clinenv"]
    assert record["case_id"] == case_id and record["finished"] is True
    assert record["calls"][-1]["name"] == "submit_diagnosis"
    assert out.metrics.generate_sequences >= 0 and out.metrics.tool_calls > 0
    assert out.metrics.num_preempted == 0


def test_turn_cap_ends_an_unfinished_episode_with_its_reward(tok):
    case_id, replies, _ = EPISODES[0]
    server = FakeServer(tok, {opening_of(case_id, 7): replies})
    config = trainer_config(**{"multi_turn.max_assistant_turns": 2})
    out = run_loop(tok, server, case_id, config=config)
    _, reward, done = reference(case_id, 7, replies[:2])
    assert not done and out.reward_score == reward == 0.0
    assert sum(1 for _, _, v in runs(out.response_mask) if v == 1) == 2
    assert out.response_mask[-1] == 1  # ends on the doctor's second reply
    assert out.extra_fields["reward_extra_info"]["finished"] == 0.0
    assert out.extra_fields["clinenv"]["calls"] == [
        {"name": "ask_patient", "arguments": {"question": replies[0]}},
        {"name": "order_exam", "arguments": {"exam": "T4"}}]


def test_a_rows_round_budget_reaches_the_episode(tok):
    """extra_info.max_rounds (assign_max_rounds / draw_max_rounds on verl rows): the
    episode has exactly that many rounds; the second reply is already the decision."""
    case_id = "demo-01"
    opening = ToolEpisode(ENV_ID, action_format="text").reset(case_id, 7, max_rounds=1)
    assert "Round 1 of 1." in opening
    replies = ["What brings you here today?", PNEUMONIA]
    server = FakeServer(tok, {opening: replies})
    out = run_loop(tok, server, case_id, extra_info={
        "case_id": case_id, "seed": 7, "env_id": ENV_ID, "max_rounds": 1})
    assert out.reward_score == 1.0 and out.extra_fields["reward_extra_info"]["turns"] == 2
    assert out.extra_fields["clinenv"]["calls"][-1] == {
        "name": "submit_diagnosis", "arguments": {"diagnosis": PNEUMONIA}}


def test_response_length_cuts_ids_mask_and_logprobs(tok):
    case_id, replies, _ = EPISODES[0]
    server = FakeServer(tok, {opening_of(case_id, 7): replies})
    out = run_loop(tok, server, case_id, config=trainer_config(response_length=40))
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs)
    assert len(out.response_ids) <= 40
    assert out.extra_fields["reward_extra_info"]["finished"] == 0.0


def test_env_kwargs_from_the_registry_entry_set_the_reward_spec(tok):
    case_id, replies, _ = EPISODES[0]
    server = FakeServer(tok, {opening_of(case_id, 7): replies})
    out = run_loop(tok, server, case_id,
                   env_kwargs=OmegaConf.create({"reward_spec": "diagagent"}))
    episode = ToolEpisode(ENV_ID, action_format="text", reward_spec="diagagent")
    episode.reset(case_id, 7)
    for reply in replies:
        episode.step_text(reply)
    assert out.reward_score == episode.episode_reward()
    assert out.extra_fields["clinenv"]["reward_components"] == \
        episode.reward_components().to_dict()


def test_a_row_without_its_episode_is_refused(tok):
    with pytest.raises(ValueError, match="extra_info has no case_id, seed"):
        run_loop(tok, FakeServer(tok, {}), "demo-01", extra_info={"env_id": ENV_ID})


def test_rows_columns_and_parquet(tmp_path):
    rows = verl_rows(ENV_ID, ["demo-05", "demo-01"])
    assert [r["extra_info"]["case_id"] for r in rows] == ["demo-01", "demo-05"]
    for index, row in enumerate(rows):
        assert set(row) == {"data_source", "prompt", "ability", "reward_model",
                            "extra_info", "agent_name"}
        assert row["data_source"] == ENV_ID and row["agent_name"] == AGENT_NAME
        assert row["prompt"] == PROMPT and row["ability"] == "clinical_diagnosis"
        assert set(row["extra_info"]) == {"case_id", "seed", "env_id", "index"}
        assert row["extra_info"]["index"] == index
    path = tmp_path / "train.parquet"
    pd.DataFrame(list(rows)).to_parquet(path)
    back = pd.read_parquet(path)
    assert list(back["agent_name"]) == [AGENT_NAME] * 2
    assert back["extra_info"][1]["case_id"] == "demo-05"


def test_verl_worker_plays_parquet_rows_end_to_end(tok, tmp_path):
    """verl_rows -> parquet -> verl's RLHFDataset and collate -> AgentLoopWorker
    .generate_sequences (model dir: the tiny tokenizer and a qwen2 config) -> the padded
    batch with the scores on each response's last token."""
    import transformers

    model_dir = tmp_path / "model"
    tok.save_pretrained(model_dir)
    transformers.Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                             num_hidden_layers=1, num_attention_heads=2,
                             num_key_value_heads=1, architectures=["Qwen2ForCausalLM"],
                             ).save_pretrained(model_dir)
    rows = verl_rows(ENV_ID, [case for case, _, _ in EPISODES])
    pd.DataFrame(list(rows)).to_parquet(tmp_path / "train.parquet")
    config = trainer_config()
    config.actor_rollout_ref.model.path = str(model_dir)
    config.actor_rollout_ref.rollout.name = "vllm"  # mandatory; no server is started
    config.data.max_prompt_length = 2048
    dataset = RLHFDataset(str(tmp_path / "train.parquet"), tok, config.data)
    batch = DataProto.from_single_dict(collate_fn([dataset[i] for i in range(len(dataset))]))
    n_rows = len(EPISODES)
    assert list(batch.non_tensor_batch["agent_name"]) == [AGENT_NAME] * n_rows

    scripts = {opening_of(r["extra_info"]["case_id"], r["extra_info"]["seed"]): replies
               for r, (_, replies, _) in zip(rows, EPISODES, strict=True)}
    async def go():
        worker = AgentLoopWorker(config, llm_client=FakeServer(tok, scripts))
        return await worker.generate_sequences(batch)
    out = asyncio.run(go())
    rollout = config.actor_rollout_ref.rollout
    assert out.batch["responses"].shape == (n_rows, rollout.response_length)
    assert out.batch["prompts"].shape == (n_rows, rollout.prompt_length)
    scores = out.batch["rm_scores"].sum(dim=1).tolist()
    assert scores == [score for _, _, score in EPISODES]
    lengths = out.batch["attention_mask"][:, rollout.prompt_length:].sum(dim=1)
    for i, (_, replies, _) in enumerate(EPISODES):
        n = int(lengths[i])
        assert float(out.batch["rm_scores"][i, n - 1]) == scores[i]
        mask = out.batch["response_mask"][i].tolist()
        assert sum(mask[n:]) == 0
        masked = [t for t, m in zip(out.batch["responses"][i].tolist(), mask, strict=True) if m]
        assert decode_reply(tok, masked) == "".join(replies)
    keys = out.meta_info["reward_extra_keys"]
    assert "reward_components/diagnosis" in keys and "finished" in keys
    assert list(out.non_tensor_batch["finished"]) == [1.0] * n_rows
    assert [r["case_id"] for r in out.non_tensor_batch["clinenv"]] == \
        [case for case, _, _ in EPISODES]
    assert [m["tool_calls"] > 0 for m in out.meta_info["metrics"]] == [True] * n_rows
    assert np.all(out.non_tensor_batch["__num_turns__"] ==
                  [2 * len(r) for _, r, _ in EPISODES])


def test_gym_reference_agrees_with_the_tool_view():
    """The reference used above is the plain environment's terminal reward."""
    case_id, replies, score = EPISODES[0]
    env = gym.make(ENV_ID, observation_format="delta", premature_diagnosis="decide")
    env.reset(seed=7, options={"case_id": case_id})
    total = sum(float(env.step(r)[1]) for r in replies)
    assert total == score


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "verl"


@pytest.mark.parametrize("profile, spec, rounds", [("diagagent", "diagagent", 12),
                                                   ("doctoragent_rl", "accuracy", 10)])
def test_example_agent_loop_files_build_the_loop(tok, profile, spec, rounds):
    """Each example YAML loads as verl's worker loads agent_loop_config_path and builds
    the loop with its settings; its episodes are the tool view's with those settings."""
    (entry,) = OmegaConf.load(EXAMPLES / f"agent_loop_{profile}.yaml")
    assert entry.name == AGENT_NAME
    case_id, replies, _ = EPISODES[0]
    opening = ToolEpisode(ENV_ID, action_format="text", acquisition_rounds=rounds,
                          reward_spec=spec).reset(case_id, 7)
    server = FakeServer(tok, {opening: replies})
    out = run_loop(tok, server, case_id, **{k: v for k, v in entry.items() if k != "name"})
    episode = ToolEpisode(ENV_ID, action_format="text", acquisition_rounds=rounds,
                          reward_spec=spec)
    episode.reset(case_id, 7)
    for reply in replies:
        episode.step_text(reply)
    assert episode.done and out.reward_score == episode.episode_reward()


def test_example_script_sets_only_keys_of_verls_config():
    """run_clinenv_grpo.sh (not run here) names keys that verl 0.9.1's trainer config has,
    and the settings the issue asks for: GRPO, a group of 8, a turn cap."""
    config = OmegaConf.load(Path(verl.__file__).parent / "trainer" / "config"
                            / "_generated_ppo_trainer.yaml")
    text = (EXAMPLES / "run_clinenv_grpo.sh").read_text()
    overrides = dict(line.strip().rstrip("\\").strip().split("=", 1)
                     for line in text.splitlines()
                     if line.startswith("  ") and "=" in line and "." in line.split("=")[0]
                     and not line.strip().startswith(("#", "python", "*")))
    assert len(overrides) > 25
    plain = OmegaConf.to_container(config, resolve=False)
    for key in overrides:
        node = plain
        for part in key.split("."):
            assert isinstance(node, dict) and part in node, key
            node = node[part]
    assert overrides["algorithm.adv_estimator"] == "grpo"
    assert overrides["actor_rollout_ref.rollout.n"] == "8"
    assert "max_assistant_turns" in " ".join(overrides)


def test_example_write_data_rows_load_in_verls_dataset(tok, tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("write_data", EXAMPLES / "write_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    paths = module.write_dataset(tmp_path, ENV_ID)
    config = trainer_config()
    config.data.max_prompt_length = 2048
    seen = []
    for path in paths.values():
        dataset = RLHFDataset(str(path), tok, config.data)
        for i in range(len(dataset)):
            item = dataset[i]
            assert item["raw_prompt"] == PROMPT and item["agent_name"] == AGENT_NAME
            seen.append(item["extra_info"]["case_id"])
    ids = [case.case_id for case in gym.make(ENV_ID).unwrapped.pool.cases]
    assert sorted(seen) == sorted(ids) and len(set(seen)) == len(seen)
