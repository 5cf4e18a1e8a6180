"""``clinenv export --per-turn`` rows under TRL's own Qwen3 chat templates.

Runs in the ``.venv-trl`` environment (``pip install -e '.[test,trl]'`` over torch 2.13.0
CPU; ``.ci/run`` builds it); elsewhere it skips. The templates are TRL's strings
(``trl.chat_template_utils``): the Qwen3 template, which supports tool calls (SmolLM2's
own has none) and which TRL's SFT trainer renders prompt-completion rows with, and its
prefix-preserving training variant (``get_training_chat_template``: what TRL swaps in
for GRPO's tool loop and for assistant-only loss). The rows are a teacher run's and a
scripted run's on the demo set, in both formats.
"""
# issue 29 §2

from __future__ import annotations

import json

import pytest

trl = pytest.importorskip("trl", reason="TRL is not installed: run in .venv-trl "
                                         "(pip install -e '.[test,trl]'), as .ci/run does")
transformers = pytest.importorskip("transformers")

from trl.chat_template_utils import (  # noqa: E402
    get_training_chat_template,
    qwen3_chat_template,
    qwen3_training_chat_template,
)

import clinenv  # noqa: F401,E402
from clinenv.cli import main  # noqa: E402
from clinenv.export import episode_rows, episodes_dataset  # noqa: E402
from clinenv.testing.tiny_models import chatml_tokenizer, tiny_qwen3  # noqa: E402


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs")
    for doctor in ("teacher", "scripted"):
        assert main(["run", "--env", "EGIP-Demo-v0", "--doctor", doctor, "--episodes", "5",
                     "--quiet", "--out", str(folder / f"{doctor}.jsonl")]) == 0
    return [folder / "teacher.jsonl", folder / "scripted.jsonl"]


@pytest.fixture(scope="module")
def tokenizer(logs):
    """A ChatML tokenizer with TRL's Qwen3 template: byte-level BPE (800 tokens) trained
    here on the exported turns, so that tokens merge across message boundaries as a real
    tokenizer's do."""
    corpus = [json.dumps(r["prompt"] + r["completion"])
              for fmt in ("tools", "messages") for r in episode_rows(logs, fmt=fmt,
                                                                     per_turn=True)]
    return chatml_tokenizer(corpus, vocab_size=800)


def render(tok, messages, tools, template, **kwargs):
    return tok.apply_chat_template(messages, tools=json.loads(tools) or None,
                                   chat_template=template, tokenize=False, **kwargs)


def test_trl_maps_qwen3_to_its_training_variant(tokenizer):
    assert get_training_chat_template(tokenizer) == qwen3_training_chat_template


@pytest.mark.parametrize("fmt", ["tools", "messages"])
def test_a_rendered_turn_is_a_prefix_of_the_rendered_episode(tokenizer, logs, fmt):
    """Per row, with the tools column as TRL's SFT trainer passes it: under the training
    template, prompt + completion renders as a prefix of the whole episode, and the
    prompt with the generation prompt as a prefix of both; under Qwen3's own template
    the prompt with the generation prompt is a prefix of the whole episode too (that
    template gives only the last assistant turn a thinking block, so there prompt +
    completion is not a prefix of a longer episode: why TRL has the variant)."""
    episodes = {(r["group_id"], r["repetition"]): r for r in episode_rows(logs, fmt=fmt)}
    turns = list(episode_rows(logs, fmt=fmt, per_turn=True))
    assert len(turns) > 5 * 10
    wholes: dict = {}
    for row in turns:
        key = (row["group_id"], row["repetition"])
        episode = episodes[key]
        if key not in wholes:
            wholes[key] = {t: render(tokenizer, episode["messages"], row["tools"], t)
                           for t in (qwen3_training_chat_template, qwen3_chat_template)}
        whole = wholes[key][qwen3_training_chat_template]
        done = render(tokenizer, row["prompt"] + row["completion"], row["tools"],
                      qwen3_training_chat_template)
        asked = render(tokenizer, row["prompt"], row["tools"], qwen3_training_chat_template,
                       add_generation_prompt=True)
        assert whole.startswith(done), (key, row["turn_index"])
        assert done.startswith(asked) and len(done) > len(asked)
        plain = render(tokenizer, row["prompt"], row["tools"], qwen3_chat_template,
                       add_generation_prompt=True)
        assert wholes[key][qwen3_chat_template].startswith(plain)
        if fmt == "tools":
            (call,) = row["completion"][0]["tool_calls"]
            assert "<tool_call>" in done[len(asked):]
            assert call["function"]["name"] in done[len(asked):]
            assert "<tools>" in whole and '"name": "order_exam"' in whole
        else:
            assert row["completion"][0]["content"] in done[len(asked):]
            assert "<tools>" not in whole


def test_trls_sft_trainer_trains_on_exactly_the_turns(tokenizer, logs, tmp_path):
    """TRL's SFT trainer on the tools rows (its own dataset preparation, with the tools
    column as exported and the tokenizer's Qwen3 template, which it uses for
    prompt-completion rows), one training step of a tiny random Qwen3: the tokens it
    trains on (labels not -100) are, for every row, exactly the rendered assistant turn,
    so each prompt tokenized as a prefix of prompt + completion."""
    pytest.importorskip("datasets")
    pytest.importorskip("torch")
    rows = list(episode_rows(logs[:1], fmt="tools", per_turn=True))[:16]
    # episodes_dataset stores the messages as JSON objects (datasets.Json): an Arrow
    # struct would give each call every tool's argument keys, None where absent, and
    # the template would write them (issue 30)
    dataset = episodes_dataset(logs[:1], fmt="tools", per_turn=True).select(
        range(16)).select_columns(["prompt", "completion", "tools"])
    assert [dict(x) for x in dataset] == [
        {k: r[k] for k in ("prompt", "completion", "tools")} for r in rows]
    args = trl.SFTConfig(output_dir=str(tmp_path / "out"), max_steps=1,
                         per_device_train_batch_size=4, report_to="none", use_cpu=True,
                         save_strategy="no", max_length=None, seed=0)
    trainer = trl.SFTTrainer(model=tiny_qwen3(tokenizer),
                             processing_class=tokenizer, train_dataset=dataset, args=args)
    for row, example in zip(rows, trainer.train_dataset, strict=True):
        trained = [i for i, label in zip(example["input_ids"], example["labels"],
                                         strict=True) if label != -100]
        done = render(tokenizer, row["prompt"] + row["completion"], row["tools"],
                      qwen3_chat_template)
        asked = render(tokenizer, row["prompt"], row["tools"], qwen3_chat_template,
                       add_generation_prompt=True)
        assert done.startswith(asked)
        assert tokenizer.decode(trained) == done[len(asked):]
        assert '"name": "' + row["completion"][0]["tool_calls"][0]["function"]["name"] \
            in done[len(asked):]
        assert tokenizer.decode(example["input_ids"]) == done
    assert trainer.train().training_loss > 0
