"""The in-process vLLM backend's own logic, with a fake engine (no vLLM needed), and one
real-engine run on a tiny random-weight model when a CUDA GPU and vLLM are present."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field

import pytest

from clinenv.llm import BackendError, BackendUnavailableError, GenerationConfig
from clinenv.llm.batcher import MicroBatcher
from clinenv.llm.vllm_backend import (
    VLLMChatModel,
    make_sampling_params,
    sampling_kwargs,
    to_chat_result,
)
from clinenv.testing.tiny_chat import CONVERSATIONS, build_tiny_chat_model, user


@dataclass
class FakeCompletion:
    text: str
    finish_reason: str | None
    token_ids: list[int]


@dataclass
class FakeRequestOutput:
    prompt_token_ids: list[int]
    outputs: list[FakeCompletion]


@dataclass
class FakeEngine:
    """Stands in for ``vllm.LLM``: replies ``"<last user text>#<i>"`` for each of n
    outputs, one token per word; records every ``chat`` call."""

    calls: list[tuple[list, object]] = field(default_factory=list)
    fail: bool = False

    def chat(self, conversations, sampling_params, use_tqdm=True):
        self.calls.append((conversations, sampling_params))
        if self.fail:
            raise RuntimeError("CUDA out of memory")
        params = (sampling_params if isinstance(sampling_params, list)
                  else [sampling_params] * len(conversations))
        outputs = []
        for conv, p in zip(conversations, params, strict=True):
            n = p["n"] if isinstance(p, dict) else p.n
            prompt = " ".join(m["content"] for m in conv).split()
            last = conv[-1]["content"]
            outputs.append(FakeRequestOutput(
                list(range(len(prompt))),
                [FakeCompletion(f"{last}#{i}", "stop" if i == 0 else "length",
                                [1] * len(f"{last}#{i}".split())) for i in range(n)]))
        return outputs


@pytest.fixture(autouse=True)
def no_vllm(monkeypatch):
    """These tests run as if vLLM were not installed (the fake engine gets dicts)."""
    monkeypatch.setitem(sys.modules, "vllm", None)


# --------------------------------------------------------------------------- pure parts
def test_sampling_kwargs_map_every_field_and_extra_last():
    cfg = GenerationConfig(temperature=0.7, top_p=0.9, max_tokens=32, n=3, seed=5,
                           stop=["\n\n"], extra={"top_k": 20, "max_tokens": 16})
    assert sampling_kwargs(cfg) == {"temperature": 0.7, "top_p": 0.9, "max_tokens": 16,
                                    "n": 3, "seed": 5, "stop": ["\n\n"], "top_k": 20}
    assert sampling_kwargs(GenerationConfig()) == {
        "temperature": 0.0, "top_p": 1.0, "max_tokens": 200, "n": 1, "seed": None}


def test_make_sampling_params_without_vllm_gives_the_kwargs():
    cfg = GenerationConfig(n=2)
    assert make_sampling_params(cfg) == sampling_kwargs(cfg)


def test_to_chat_result_converts_texts_reasons_and_tokens():
    out = FakeRequestOutput([7, 8, 9], [FakeCompletion("a b", "stop", [1, 2]),
                                        FakeCompletion("c", "length", [3]),
                                        FakeCompletion("d", None, [4])])
    result = to_chat_result(out, GenerationConfig(n=3, seed=9), model="m", latency_s=0.5)
    assert [(c.text, c.finish_reason) for c in result.choices] == [
        ("a b", "stop"), ("c", "length"), ("d", "unknown")]
    assert (result.prompt_tokens, result.completion_tokens, result.seed) == (3, 4, 9)
    assert (result.backend, result.model, result.n_requests, result.warnings) == (
        "vllm", "m", 1, ())


def test_to_chat_result_flags_identical_samples_and_rejects_missing_ones():
    same = FakeRequestOutput([1], [FakeCompletion("x", "stop", [1])] * 2)
    assert to_chat_result(same, GenerationConfig(n=2, temperature=1.0), model="m").warnings
    with pytest.raises(BackendError) as caught:
        to_chat_result(FakeRequestOutput([1], [FakeCompletion("x", "stop", [1])]),
                       GenerationConfig(n=2), model="m")
    assert caught.value.detail == "too_few_choices"
    with pytest.raises(BackendError) as caught:
        to_chat_result(FakeRequestOutput([1], []), GenerationConfig(), model="m")
    assert caught.value.detail == "no_choices"


# --------------------------------------------------------------------------- model
def test_generate_batch_is_one_engine_call_in_input_order():
    engine = FakeEngine()
    model = VLLMChatModel("tiny", llm=engine, config=GenerationConfig(max_tokens=8))
    results = model.generate_batch(CONVERSATIONS + [user("third")], n=2)
    assert len(engine.calls) == 1
    conversations, params = engine.calls[0]
    assert [c[-1]["content"] for c in conversations] == [
        CONVERSATIONS[0][-1]["content"], "Chest pain.", "third"]
    assert params == {"temperature": 0.0, "top_p": 1.0, "max_tokens": 8, "n": 2, "seed": None}
    assert [r.texts for r in results] == [
        [f"{c[-1]['content']}#0", f"{c[-1]['content']}#1"]
        for c in CONVERSATIONS + [user("third")]]
    assert results[1].prompt_tokens == 2 and results[1].choices[1].truncated


def test_generate_batch_validates_messages():
    model = VLLMChatModel("tiny", llm=FakeEngine())
    with pytest.raises(ValueError, match=r"messages\[0\]\.role"):
        model.generate_batch([[{"role": "doctor", "content": "x"}]])
    assert model.generate_batch([]) == []


def test_16_concurrent_agenerate_calls_share_one_engine_call():
    engine = FakeEngine()
    model = VLLMChatModel("tiny", llm=engine)

    async def main():
        return await asyncio.gather(*(model.agenerate(user(f"patient {i}"), seed=i)
                                      for i in range(16)))

    results = asyncio.run(main())
    assert model.n_engine_calls == 1 and len(engine.calls) == 1
    conversations, params = engine.calls[0]
    assert len(conversations) == 16
    assert [p["seed"] for p in params] == list(range(16))  # per-request params, paired
    assert [r.text for r in results] == [f"patient {i}#0" for i in range(16)]
    assert [r.seed for r in results] == list(range(16))


def test_batches_respect_max_batch_and_run_one_at_a_time():
    engine = FakeEngine()
    model = VLLMChatModel("tiny", llm=engine, max_batch=4)

    async def main():
        return await asyncio.gather(*(model.agenerate(user(f"p{i}")) for i in range(10)))

    results = asyncio.run(main())
    assert [len(conversations) for conversations, _ in engine.calls] == [4, 4, 2]
    assert [r.text for r in results] == [f"p{i}#0" for i in range(10)]


def test_engine_failure_reaches_every_caller_as_backend_error():
    model = VLLMChatModel("tiny", llm=FakeEngine(fail=True))

    async def main():
        return await asyncio.gather(*(model.agenerate(user(f"p{i}")) for i in range(3)),
                                    return_exceptions=True)

    errors = asyncio.run(main())
    assert [(type(e), e.detail) for e in errors] == [(BackendError, "engine_error")] * 3
    assert "CUDA out of memory" in str(errors[0])


def test_batcher_survives_a_cancelled_caller_and_successive_loops():
    engine = FakeEngine()
    model = VLLMChatModel("tiny", llm=engine, batch_window_s=0.05)

    async def main():
        doomed = asyncio.ensure_future(model.agenerate(user("cancelled")))
        kept = asyncio.ensure_future(model.agenerate(user("kept")))
        await asyncio.sleep(0)
        doomed.cancel()
        return await kept

    assert asyncio.run(main()).text == "kept#0"
    assert asyncio.run(model.agenerate(user("next loop"))).text == "next loop#0"


def test_closed_model_raises_backend_error():
    model = VLLMChatModel("tiny", llm=FakeEngine())
    model.close()
    with pytest.raises(BackendError) as caught:
        model.generate(user("x"))
    assert caught.value.detail == "closed"


def test_missing_vllm_names_the_extra():
    with pytest.raises(BackendUnavailableError,
            match=r"pip install -e '\.\[vllm\]' in a clinenv clone"):
        VLLMChatModel("some/model")


@pytest.mark.parametrize("kwargs", [{"max_batch": 0}, {"window_s": -1.0}])
def test_batcher_rejects_bad_settings(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        MicroBatcher(lambda items: items, **kwargs)


# --------------------------------------------------------------------------- real engine
def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU")
def test_real_engine_on_a_tiny_random_model(tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "vllm")  # undo the autouse fixture: use real vLLM
    pytest.importorskip("vllm")
    folder = build_tiny_chat_model(tmp_path / "tiny", arch="llama")
    model = VLLMChatModel(str(folder), engine_kwargs={
        "dtype": "float16", "max_model_len": 256, "gpu_memory_utilization": 0.2,
        "enforce_eager": True, "seed": 0})
    try:
        results = model.generate_batch(CONVERSATIONS, max_tokens=6)
        assert len(results) == 2
        for r in results:
            assert r.completion_tokens <= 6 and r.prompt_tokens > 0
            assert r.choices[0].finish_reason in ("stop", "length")
        a = model.generate(CONVERSATIONS[0], temperature=1.0, seed=3, max_tokens=6, n=2)
        b = model.generate(CONVERSATIONS[0], temperature=1.0, seed=3, max_tokens=6, n=2)
        assert a.texts == b.texts and len(a.texts) == 2

        async def many():
            return await asyncio.gather(*(model.agenerate(c, max_tokens=4)
                                          for c in CONVERSATIONS * 4))

        assert len(asyncio.run(many())) == 8 and model.n_engine_calls >= 1
    finally:
        model.close()
