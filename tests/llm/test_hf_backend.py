"""The transformers backend on a tiny random-weight model and a tokenizer trained in the
test (nothing downloaded). Expected values come from calling the model directly."""

from __future__ import annotations

import asyncio
import sys

import pytest

from clinenv.llm import BackendError, BackendUnavailableError
from clinenv.llm.hf_backend import TransformersChatModel, cut_at_stop
from clinenv.testing.tiny_chat import CONVERSATIONS, build_tiny_chat_model, user

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return build_tiny_chat_model(tmp_path_factory.mktemp("tiny") / "llama", arch="llama")


@pytest.fixture(scope="module")
def model(folder):
    return TransformersChatModel(str(folder))


def raw_greedy(model: TransformersChatModel, messages, max_new_tokens: int) -> list[int]:
    """New token ids of a direct greedy ``generate`` on the hand-rendered prompt."""
    tok = model.tokenizer
    prompt = tok(hand_template(messages), return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.model_obj.generate(**prompt, max_new_tokens=max_new_tokens,
                                       do_sample=False, pad_token_id=tok.pad_token_id)
    return out[0, prompt["input_ids"].shape[1]:].tolist()


def hand_template(messages) -> str:
    """The chat template of clinenv.testing.tiny_chat, written out by hand."""
    return "".join(f"<|{m['role']}|> {m['content']} </s> " for m in messages) + "<|assistant|>"


def test_prompt_is_the_chat_template_with_generation_prompt(model):
    # The word-level tokenizer makes one token per whitespace-separated piece.
    expected = [len(hand_template(c).split()) for c in CONVERSATIONS]
    assert expected == [21, 5]
    results = model.generate_batch(CONVERSATIONS, max_tokens=2)
    assert [r.prompt_tokens for r in results] == expected  # padding not counted


def test_greedy_reply_equals_direct_generate_and_is_cut_by_length(model):
    tokens = raw_greedy(model, CONVERSATIONS[0], 8)
    eos = model.tokenizer.eos_token_id
    assert len(tokens) == 8 and eos not in tokens  # precondition of this case
    result = model.generate(CONVERSATIONS[0], max_tokens=8)
    (choice,) = result.choices
    assert choice.text == model.tokenizer.decode(tokens, skip_special_tokens=True)
    assert (choice.finish_reason, choice.truncated, result.completion_tokens) == (
        "length", True, 8)
    assert (result.backend, result.n_requests, result.warnings) == ("transformers", 1, ())


def test_end_token_stops_the_reply(model):
    tokens = raw_greedy(model, CONVERSATIONS[1], 8)
    eos = model.tokenizer.eos_token_id
    assert eos in tokens  # precondition: this prompt ends early under these weights
    end = tokens.index(eos)
    result = model.generate(CONVERSATIONS[1], max_tokens=8)
    assert result.text == model.tokenizer.decode(tokens[:end], skip_special_tokens=True)
    assert result.choices[0].finish_reason == "stop"
    assert result.completion_tokens == end + 1


def test_stop_strings_cut_the_decoded_text(model):
    full = model.generate(CONVERSATIONS[0], max_tokens=8).text
    words = full.split()
    stop = words[2]
    cut = model.generate(CONVERSATIONS[0], max_tokens=8, stop=[stop, "never-there"])
    assert cut.text == full[:full.index(stop)]
    assert cut.choices[0].finish_reason == "stop"


def test_batched_greedy_equals_single_calls_with_left_padding(model):
    assert model.tokenizer.padding_side == "left"
    batched = [r.text for r in model.generate_batch(CONVERSATIONS, max_tokens=8)]
    single = [model.generate(c, max_tokens=8).text for c in CONVERSATIONS]
    assert batched == single
    assert model.generate_batch([]) == []


def test_seeded_sampling_is_reproducible_and_leaves_global_rng_alone(model):
    state = torch.random.get_rng_state()
    a = model.generate(CONVERSATIONS[0], temperature=1.0, seed=5, n=3, max_tokens=8)
    b = model.generate(CONVERSATIONS[0], temperature=1.0, seed=5, n=3, max_tokens=8)
    c = model.generate(CONVERSATIONS[0], temperature=1.0, seed=6, n=3, max_tokens=8)
    assert torch.equal(state, torch.random.get_rng_state())
    assert a.texts == b.texts and len(a.texts) == 3 and a.seed == 5
    assert a.texts != c.texts
    assert len(set(a.texts)) > 1 and a.warnings == ()


def test_greedy_n_repeats_the_one_greedy_reply(model):
    result = model.generate(CONVERSATIONS[1], n=3, max_tokens=4)
    assert result.texts == [model.generate(CONVERSATIONS[1], max_tokens=4).text] * 3
    assert result.warnings == ()  # identical is expected at temperature 0


def test_async_calls_match_sync_calls(model):
    async def main():
        return await asyncio.gather(*(model.agenerate(c, max_tokens=6) for c in CONVERSATIONS))

    assert [r.text for r in asyncio.run(main())] == [
        model.generate(c, max_tokens=6).text for c in CONVERSATIONS]


def test_qwen2_architecture_and_given_objects(tmp_path):
    folder = build_tiny_chat_model(tmp_path / "qwen2", arch="qwen2", seed=1)
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    lm = transformers.AutoModelForCausalLM.from_pretrained(folder)
    model = TransformersChatModel("my-qwen", tokenizer=tok, model_obj=lm)
    result = model.generate(user("chest pain"), max_tokens=3)
    assert result.model == "my-qwen" and 1 <= result.completion_tokens <= 3
    model.close()
    with pytest.raises(BackendError) as caught:
        model.generate(user("chest pain"))
    assert caught.value.detail == "closed"


def test_tokenizer_without_chat_template_is_rejected(folder):
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    tok.chat_template = None
    with pytest.raises(ValueError, match="chat_template"):
        TransformersChatModel(str(folder), tokenizer=tok)


def test_cut_at_stop():
    assert cut_at_stop("a STOP b END", ["END", "STOP"]) == ("a ", True)
    assert cut_at_stop("abc", ["", "x"]) == ("abc", False)


def test_missing_torch_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(BackendUnavailableError,
            match=r"pip install -e '\.\[hf\]' in a clinenv clone"):
        TransformersChatModel("any/model")
