"""The TRL adapter's opt-in LLM-patient reply cache (``make_env_factory(patient_cache=)``).

Making the adapter's class needs no TRL, so this runs in the core environment. The
patient model is a ScriptedChatModel whose reply counts its calls (``Reply <n>.``): a
second episode can hear ``Reply 0.`` again only from the cache, and ``model.calls``
counts the patient's model calls.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.llm_patient import LLMPatient
from clinenv.agents.patient_cache import CachedPatient, PatientReplyCache
from clinenv.env.retrieval_patient import RetrievalPatient
from clinenv.integrations.tools import ToolEpisode
from clinenv.integrations.trl import make_env_factory
from clinenv.llm import ScriptedChatModel

ENV_ID = "EGIP-Demo-v0"
QUESTIONS = ["What brings you in today?", "Any fever at night?", "Do you smoke?"]
ROW = {"prompt": [], "case_id": "demo-01", "seed": 11, "env_id": ENV_ID}


def counting_model():
    """Each call a new reply: 'Reply <n>.' (n counts the model's calls, from 0)."""
    return ScriptedChatModel(lambda messages, config, index: f"Reply {index}.")


def episode(env, row=ROW, questions=QUESTIONS):
    """The reset text and each ask_patient result of one rollout."""
    return [env.reset(**row)] + [env.ask_patient(q) for q in questions]


def test_a_repeated_row_replays_the_patient_without_a_model_call():
    model = counting_model()
    factory = make_env_factory(ENV_ID, patient="llm", patient_model=model,
                               patient_cache=True)
    first_env, second_env = factory(), factory()
    first = episode(first_env)
    assert len(model.calls) == 3
    assert [t.splitlines()[0] for t in first[1:]] == [
        "Patient: Reply 0.", "Patient: Reply 1.", "Patient: Reply 2."]
    second = episode(second_env)
    assert len(model.calls) == 3  # the second rollout made no patient model call
    assert second == first
    assert isinstance(factory.patient_cache, PatientReplyCache)
    assert (factory.patient_cache.hits, factory.patient_cache.misses) == (3, 3)
    # the instance's own environment holds the wrapped patient, over the shared cache
    patient = second_env._episode.env.patient
    assert isinstance(patient, CachedPatient) and patient.cache is factory.patient_cache
    # another seed is another patient seed: a miss, a new model call
    other = episode(first_env, {**ROW, "seed": 12}, QUESTIONS[:1])
    assert other[1].startswith("Patient: Reply 3.") and len(model.calls) == 4


def test_without_the_cache_each_rollout_calls_the_model():
    model = counting_model()
    factory = make_env_factory(ENV_ID, patient="llm", patient_model=model)
    assert factory.patient_cache is None
    first, second = episode(factory()), episode(factory())
    assert len(model.calls) == 6
    assert second[1].startswith("Patient: Reply 3.") and second != first


def test_a_given_cache_is_shared_and_a_path_persists(tmp_path):
    model = counting_model()
    cache = PatientReplyCache()
    factory = make_env_factory(ENV_ID, patient="llm", patient_model=model,
                               patient_cache=cache)
    assert factory.patient_cache is cache
    episode(factory())
    assert len(cache) == 3
    # a cache file: the replies of one trainer process replay in the next one
    path = tmp_path / "patient.jsonl"
    filled = episode(make_env_factory(ENV_ID, patient="llm", patient_model=model,
                                      patient_cache=path)())
    assert len(model.calls) == 6 and len(path.read_text().splitlines()) == 3
    fresh = counting_model()
    replayed = episode(make_env_factory(ENV_ID, patient="llm", patient_model=fresh,
                                        patient_cache=str(path))())
    assert replayed == filled and fresh.calls == []


def test_other_patients_are_left_alone_and_bad_values_refused():
    factory = make_env_factory(ENV_ID, patient_cache=True)  # the retrieval patient
    assert type(factory()._episode.env.patient) is RetrievalPatient
    with pytest.raises(TypeError, match="patient_cache must be None, a bool, a "
                                        "PatientReplyCache or a path, got int"):
        make_env_factory(ENV_ID, patient_cache=3)
    with pytest.raises(TypeError, match="patient_cache must be a PatientReplyCache"):
        ToolEpisode(ENV_ID, patient_cache={})
    assert type(ToolEpisode(ENV_ID, patient="llm", patient_model=counting_model())
                .env.patient) is LLMPatient  # no cache, no wrapper


def test_concurrent_rollouts_from_a_thread_pool_stay_consistent():
    """TRL's async trainer runs reset and the tools in thread pools: 16 rollouts of two
    rows on 8 threads, each its own instance (TRL's pool), one shared cache."""
    model = counting_model()
    factory = make_env_factory(ENV_ID, patient="llm", patient_model=model,
                               patient_cache=True)
    rows = [ROW, {**ROW, "case_id": "demo-05", "seed": 4}]
    barrier = threading.Barrier(8, timeout=60)

    def rollout(i):
        env = factory()
        barrier.wait()  # start the 8 rollouts of a wave together
        return i % 2, episode(env, rows[i % 2])

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(rollout, range(16)))
    by_row = {0: [], 1: []}
    for which, texts in results:
        by_row[which].append(texts)
    cache = factory.patient_cache
    for which, runs in by_row.items():
        assert len(runs) == 8 and all(texts == runs[0] for texts in runs)
        # the opening text is the row's, as a lone episode gives it
        assert runs[0][0] == ToolEpisode(ENV_ID).reset(rows[which]["case_id"],
                                                       rows[which]["seed"])
    assert by_row[0][0] != by_row[1][0]
    assert len(cache) == 6 and cache.hits + cache.misses == 16 * 3
    assert 6 <= len(model.calls) <= 16 * 3  # racing misses may each call; one reply wins
