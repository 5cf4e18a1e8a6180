"""The chat-model contract: config validation, messages, results, the scripted model."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from clinenv.llm import ChatResult, Choice, GenerationConfig, ScriptedChatModel
from clinenv.llm.base import check_messages, enforce_stop
from clinenv.seeding import call_seed

MSGS = [{"role": "system", "content": "You are a doctor."},
        {"role": "user", "content": "Cough for 3 weeks."}]


def test_config_defaults_follow_egip_appendix_a1():
    cfg = GenerationConfig()
    assert (cfg.temperature, cfg.max_tokens, cfg.n, cfg.seed, cfg.stop) == (0.0, 200, 1, None, ())


@pytest.mark.parametrize("bad", [{"temperature": -0.1}, {"max_tokens": 0}, {"n": 0},
                                 {"top_p": 0.0}, {"top_p": 1.5}, {"nucleus": 0.9}])
def test_config_rejects_out_of_range_and_unknown_fields(bad):
    with pytest.raises(ValidationError):
        GenerationConfig(**bad)


def test_merged_applies_overrides_ignores_none_and_validates():
    cfg = GenerationConfig(temperature=0.7, stop="\n")
    assert cfg.stop == ("\n",)
    merged = cfg.merged(n=5, seed=None, max_tokens=64)
    assert (merged.n, merged.temperature, merged.max_tokens, merged.seed) == (5, 0.7, 64, None)
    assert cfg.n == 1  # frozen original unchanged
    with pytest.raises(ValidationError):
        cfg.merged(n=-1)


@pytest.mark.parametrize("messages, where", [
    ([], "empty"),
    ([{"role": "doctor", "content": "hi"}], "messages[0].role"),
    ([{"role": "user", "content": "a"}, {"role": "user", "content": None}], "messages[1].content"),
])
def test_check_messages_names_the_bad_message(messages, where):
    with pytest.raises(ValueError, match=where.replace("[", r"\[").replace("]", r"\]")):
        check_messages(messages)


def test_choice_and_result_views():
    result = ChatResult(choices=(Choice("A"), Choice("", finish_reason="length")),
                        model="m", backend="scripted", prompt_tokens=10, completion_tokens=3,
                        latency_s=0.1234567, n_requests=2, seed=7)
    assert result.text == "A" and result.texts == ["A", ""]
    log = result.to_log(turn=4, purpose="acquire")
    assert list(log)[:2] == ["turn", "purpose"]
    assert log["truncated"] is True and log["finish_reasons"] == ["stop", "length"]
    assert (log["n"], log["n_requests"], log["seed"], log["latency_s"]) == (2, 2, 7, 0.123457)


def test_scripted_model_cycles_records_calls_and_honours_n():
    model = ScriptedChatModel(["one", "two", "three"])
    first = model.generate(MSGS)
    batch = model.generate(MSGS, n=3, seed=11)
    assert first.text == "one"
    assert batch.texts == ["two", "three", "one"]
    assert batch.seed == 11 and len(model.calls) == 2
    assert model.calls[1][1].n == 3
    assert model.calls[0][0] == MSGS
    assert model.generate_batch([MSGS, MSGS])[1].text == "three"


def test_scripted_model_async_and_responder_function():
    def responder(messages, config, index):
        return Choice(f"{messages[-1]['content']}#{index}", finish_reason="stop")

    model = ScriptedChatModel(responder)
    result = asyncio.run(model.agenerate(MSGS, n=2))
    assert result.texts == ["Cough for 3 weeks.#0", "Cough for 3 weeks.#1"]
    with pytest.raises(ValueError):
        ScriptedChatModel([])


def test_call_seed_is_stable_distinct_and_in_range():
    # Values pinned: SeedSequence([5, 3, int.from_bytes(b"vote".ljust(16, b"\0"), "little")]).
    import numpy as np

    expected = int(np.random.SeedSequence(
        [5, 3, int.from_bytes(b"vote".ljust(16, b"\0"), "little")]
    ).generate_state(1, dtype=np.uint32)[0]) & 0x7FFF_FFFF
    assert call_seed(5, 3, "vote") == expected
    seeds = {call_seed(5, turn, "acquire") for turn in range(50)}
    assert len(seeds) == 50 and all(0 <= s < 2**31 for s in seeds)
    assert call_seed(5, 3, "vote") != call_seed(5, 3, "direct")
    assert call_seed(None, 3) is None
    with pytest.raises(ValueError):
        call_seed(-1, 2)


def test_enforce_stop_keeps_the_earliest_stop():
    choice = enforce_stop(Choice("a ### b <|im_end|> c", finish_reason="length"),
                          ["<|im_end|>", "###"])
    assert (choice.text, choice.raw, choice.finish_reason) == ("a ", "a ### b <|im_end|> c",
                                                               "stop")
