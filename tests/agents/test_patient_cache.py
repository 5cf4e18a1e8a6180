"""The LLM patient's reply cache (clinenv.agents.patient_cache) in real environments.

The model is a ScriptedChatModel whose replies change from call to call (a counter) or
follow the messages and the call's seed; so a reply served twice without a model call
can only come from the cache, and a replay that differed from the model's reply would
show.
"""

from __future__ import annotations

import hashlib
import json
import threading

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.llm_patient import LLMPatient
from clinenv.agents.patient_cache import CachedPatient, PatientReplyCache
from clinenv.llm import GenerationConfig, ScriptedChatModel
from clinenv.protocol.views import PatientView

QUESTIONS = ["What brings you in today?", "Any fever at night?", "Do you smoke?"]


def counting_model():
    """Each call a new reply: 'Reply <n>.' (n counts the model's calls)."""
    return ScriptedChatModel(lambda messages, config, index: f"Reply {index}.")


def messages_model():
    """A reply fixed by the messages and the seed, with accents, and a Doctor: line
    on every second question (the patient flags it)."""
    def respond(messages, config, index):
        digest = hashlib.sha256(json.dumps(messages).encode()).hexdigest()[:8]
        text = f"Fièvre à 39 °C depuis {digest} (seed {config.seed})."
        if len(messages) % 4 == 0:
            text += "\nDoctor: And the cough?"
        return text
    return ScriptedChatModel(respond)


def env_with(patient):
    return gym.make("EGIP-Demo-v0", patient=patient).unwrapped


def play(env, questions=QUESTIONS, *, case_id="demo-01", seed=3):
    """Observations and patient flags of one episode that asks ``questions``."""
    obs, _ = env.reset(seed=seed, options={"case_id": case_id})
    seen = [obs["text"]]
    flags = []
    for question in questions:
        obs, _, _, _, info = env.step(question)
        seen.append(obs["text"])
        flags.append(info["patient_flags"])
    return seen, flags


def test_same_case_seed_and_actions_call_the_model_once():
    model, cache = counting_model(), PatientReplyCache()
    env = env_with(CachedPatient(LLMPatient(model), cache))
    first, flags1 = play(env)
    calls1 = env.drain_llm_calls()
    second, flags2 = play(env)
    calls2 = env.drain_llm_calls()
    assert len(model.calls) == 3  # one per question, in the first episode only
    assert first == second and flags1 == flags2
    assert "Patient: Reply 0." in first[1] and "Patient: Reply 2." in first[3]
    assert [c["question_index"] for c in calls1] == [0, 1, 2]
    assert all(len(c["cache_key"]) == 64 for c in calls1)
    assert calls2 == []  # a hit is no model call: no record
    assert (cache.hits, cache.misses, len(cache)) == (3, 3, 3)


def test_another_question_case_or_seed_misses():
    model, cache = counting_model(), PatientReplyCache()
    play(env_with(CachedPatient(LLMPatient(model), cache)))
    assert len(model.calls) == 3
    # same first two questions, another third: two hits, one call
    seen, _ = play(env_with(CachedPatient(LLMPatient(model), cache)),
                   QUESTIONS[:2] + ["Any weight loss?"])
    assert len(model.calls) == 4 and "Patient: Reply 3." in seen[3]
    assert "Patient: Reply 1." in seen[2]
    # another case (other facts), another seed (other per-call seeds): all miss
    play(env_with(CachedPatient(LLMPatient(model), cache)), case_id="demo-05")
    assert len(model.calls) == 7
    play(env_with(CachedPatient(LLMPatient(model), cache)), seed=4)
    assert len(model.calls) == 10
    # another generation setting misses too
    play(env_with(CachedPatient(LLMPatient(model, config=GenerationConfig(temperature=0.7)),
                                cache)))
    assert len(model.calls) == 13
    assert (cache.hits, len(cache)) == (2, 13)


def test_threads_sharing_a_cache_get_identical_replies():
    model, cache = counting_model(), PatientReplyCache()
    n = 8
    barrier = threading.Barrier(n)
    results: list = [None] * n

    def worker(i):
        env = env_with(CachedPatient(LLMPatient(model), cache))
        barrier.wait()
        results[i] = play(env)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == results[0] for r in results)
    assert len(cache) == 3 and cache.hits + cache.misses == 3 * n
    assert 3 <= len(model.calls) <= 3 * n  # racing misses may each call; one reply wins


def test_cached_reply_equals_the_uncached_one_byte_for_byte():
    plain_env = env_with(LLMPatient(messages_model()))
    cached_env = env_with(CachedPatient(LLMPatient(messages_model())))
    plain = play(plain_env)
    filled = play(cached_env)
    replayed = play(cached_env)
    assert plain == filled == replayed
    assert any("speaks_as_doctor" in f for f in plain[1])  # flags replayed, not recomputed
    # and at the seat: the same PatientView, the same bytes and flags
    view = PatientView(facts={"chief complaint": "fever"}, dialogue=(("Hi?", "Hello."),),
                       question="Since when?")
    bare = LLMPatient(messages_model())
    wrapped = CachedPatient(LLMPatient(messages_model()))
    for seat in (bare, wrapped):
        seat.reset(seed=11)
    expected = bare.reply(view).encode()
    assert wrapped.reply(view).encode() == expected
    assert wrapped.reply(view).encode() == expected and wrapped.cache.hits == 1
    assert wrapped.last_flags == bare.last_flags == ["speaks_as_doctor", "wrote_past_turn"]


def test_cache_file_persists_and_reloads(tmp_path):
    path = tmp_path / "patient.jsonl"
    model = counting_model()
    first, _ = play(env_with(CachedPatient(LLMPatient(model), PatientReplyCache(path))))
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [line["reply"] for line in lines] == ["Reply 0.", "Reply 1.", "Reply 2."]
    reloaded = PatientReplyCache(path)
    second, _ = play(env_with(CachedPatient(LLMPatient(model), reloaded)))
    assert second == first and len(model.calls) == 3 and reloaded.hits == 3
    path.write_text(path.read_text() + '{"key": "k", "reply": 3, "flags": []}\n')
    with pytest.raises(ValueError, match=r"patient\.jsonl:4: field 'reply' must be a str"):
        PatientReplyCache(path)


def test_wrapper_refuses_what_it_cannot_wrap():
    with pytest.raises(TypeError, match="patient must be an LLMPatient"):
        CachedPatient(object())
    with pytest.raises(TypeError, match="cache must be a PatientReplyCache"):
        CachedPatient(LLMPatient(counting_model()), cache={})


def test_astep_uses_the_async_patient_and_the_same_cache():
    import asyncio

    model, cache = counting_model(), PatientReplyCache()

    async def episode():
        env = env_with(CachedPatient(LLMPatient(model), cache))
        env.reset(seed=3, options={"case_id": "demo-02"})
        texts = []
        for question in QUESTIONS[:2]:
            obs, *_ = await env.astep(question)
            texts.append(obs["text"])
        return texts

    first = asyncio.run(episode())
    second = asyncio.run(episode())
    assert first == second and len(model.calls) == 2 and cache.hits == 2
    assert "Patient: Reply 0." in first[0] and "Patient: Reply 1." in first[1]
    # the sync path shares the keys: the same dialogue hits
    sync, _ = play(env_with(CachedPatient(LLMPatient(model), cache)), QUESTIONS[:2],
                   case_id="demo-02")
    assert sync[1:] == first and len(model.calls) == 2
