"""Patient personas of the retrieval patient (:mod:`clinenv.env.persona`).

Expected replies are written by hand from the facts below (the plain patient's sentences
of ``CHEST_PAIN``, then each persona's rule), not read back from the code.
"""
# issue 34 §2

from __future__ import annotations

import copy
import pickle
import re

import gymnasium as gym
import pytest
from pydantic import ValidationError

import clinenv  # noqa: F401  (registers the ids)
from clinenv.datasets.flags import names_target
from clinenv.env import EnvConfig
from clinenv.env.persona import (
    DEFAULT_P,
    FILLER,
    FORGOT,
    LAY_TERMS,
    PERSONAS,
    PersonaConfig,
    PersonaPatient,
    invert_reply,
    lay,
    vague,
)
from clinenv.env.retrieval_patient import (
    CAREGIVER_PREFIX,
    NOT_SURE,
    RetrievalPatient,
    _routes,
    _say,
)
from clinenv.protocol.views import FrozenFacts, PatientView
from clinenv.testing.data import SHARED_DATA, skip_without_shared_data
from clinenv.testing.patient_facts import CHEST_PAIN

OPENING = "Hello, what brings you in today?"
# the plain patient's sentences of CHEST_PAIN (History, in the first person)
PRIMARY = "I'm here because of crushing chest pain."
STARTED = "I have crushing chest pain that started 2 hours ago while shoveling snow."
RADIATES = "The pain radiates to my left arm."
PRIOR = "I don't have any prior episodes."
SMOKES = "I smoke one pack of cigarettes per day for 30 years."
PAST = "Hypertension and hyperlipidemia."


def _dialogue(patient, questions, facts=CHEST_PAIN):
    dialogue: list[tuple[str, str]] = []
    for question in questions:
        dialogue.append((question, patient.reply(PatientView(facts, tuple(dialogue),
                                                             question))))
    return [reply for _, reply in dialogue]


def _persona(name, seed=7):
    patient = PersonaPatient(name)
    patient.reset(seed=seed)
    return patient


# --- settings -------------------------------------------------------------------------


def test_persona_settings_parse_names_p_and_dicts():
    assert PersonaConfig.model_validate("forgetful:0.5") == PersonaConfig(name="forgetful",
                                                                          p=0.5)
    assert PersonaConfig.model_validate({"name": "lay"}).p == DEFAULT_P
    assert PersonaConfig().name == "cooperative" and not PersonaConfig().active
    assert PersonaConfig(name="forgetful", p=0.5).to_value() == "forgetful:0.5"
    assert PersonaConfig(name="vague").to_value() == "vague"


@pytest.mark.parametrize("bad, words", [("grumpy", "must be one of"),
                                        ("forgetful:2", "probability"),
                                        ("lay:x", "probability"),
                                        ({"name": "lay", "q": 1}, "q")])
def test_a_bad_persona_is_refused_naming_the_field(bad, words):
    with pytest.raises(ValidationError) as err:
        EnvConfig(patient_persona=bad)
    assert "patient_persona" in str(err.value) and words in str(err.value)


def test_persona_goes_into_to_kwargs_and_back():
    config = EnvConfig(patient_persona="forgetful:0.5")
    assert config.to_kwargs() == {"patient_persona": "forgetful:0.5"}
    assert EnvConfig.merge(None, config.to_kwargs(), caller="t") == config
    assert EnvConfig(patient_persona="cooperative").to_kwargs() == {}
    assert EnvConfig().describe()["patient_persona"] == "cooperative"


def test_the_default_is_the_plain_patient():
    for kwargs in ({}, {"patient_persona": "cooperative"}, {"patient_persona": None}):
        env = gym.make("EGIP-Demo-v0", **kwargs).unwrapped
        assert type(env.patient) is RetrievalPatient


@pytest.mark.parametrize("seat", ["llm", "object"])
def test_a_persona_with_another_patient_is_refused(seat):
    class Echo:
        def reply(self, view):
            return view.question

    kwargs = {"patient": Echo()} if seat == "object" else {"patient": "llm"}
    with pytest.raises(ValueError, match="patient_persona='reluctant' works with the "
                                         "retrieval patient only"):
        gym.make("EGIP-Demo-v0", patient_persona="reluctant", **kwargs)


def test_a_persona_with_the_external_patient_seat_is_refused():
    from clinenv.multiagent.aec import EGIPAECEnv

    with pytest.raises(ValueError, match="external patient seat"):
        EGIPAECEnv("demo", patient_persona="lay")
    game = EGIPAECEnv("demo", patient="retrieval", patient_persona="lay")
    assert isinstance(game.patient, PersonaPatient)


# --- the transforms, by hand ----------------------------------------------------------


@pytest.mark.parametrize("plain, coarse", [
    ("I have had a cough for 3 weeks.", "I have had a cough for a few weeks."),
    ("I have a 3-week history of cough.", "I have a few-week history of cough."),
    ("For 2 days I vomited.", "For a couple of days I vomited."),
    ("It began 1 week ago.", "It began about a week ago."),
    ("It began 1 hour ago.", "It began about an hour ago."),
    ("I drink 5 beers 3 times a week.", "I drink several beers a few times a week."),
    ("I smoke 1 pack per day for 20 years.", "I smoke 1 pack per day for decades."),
    ("I lost 10 pounds.", "I lost many pounds."),
    ("An 8-month history of pain.", "A several-month history of pain."),
    ("Over the last 4 days.", "Over the last few days."),
    # kept: ages, ranges, decimals, "one day"
    ("I am a 45-year-old man.", "I am a 45-year-old man."),
    ("It lasts 2 to 3 days.", "It lasts 2 to 3 days."),
    ("I lost 5.4 kg.", "I lost 5.4 kg."),
    ("One day I noticed a lump.", "One day I noticed a lump."),
])
def test_vague_says_counts_coarsely(plain, coarse):
    assert vague(plain) == coarse


@pytest.mark.parametrize("plain, said", [
    ("I have dyspnea.", "I have shortness of breath."),
    ("Hypertension and hyperlipidemia.", "High blood pressure and high cholesterol."),
    ("I have abdominal pain and nausea.", "I have belly pain and queasiness."),
    ("I was treated for anorexia nervosa.", "I was treated for anorexia nervosa."),
    ("I have had anorexia.", "I have had loss of appetite."),
])
def test_lay_says_clinical_terms_in_lay_words(plain, said):
    assert lay(plain) == said


def test_the_lay_table_is_small_lower_case_and_has_no_repeats():
    terms = [term for term, _ in LAY_TERMS]
    assert len(terms) == len(set(terms)) and 40 <= len(terms) <= 120
    assert all(term == term.lower() and words == words.lower() for term, words in LAY_TERMS)


def test_filler_is_never_clinical():
    clinical = {w for pair in LAY_TERMS for part in pair for w in re.findall(r"[a-z]+",
                                                                                part)}
    for sentence in FILLER:
        assert _routes(sentence) == (frozenset(), False), sentence
        assert not re.search(r"\d", sentence)
        words = set(re.findall(r"[a-z]+", sentence.lower()))
        assert not words & (clinical - {"a", "the", "in", "of", "up", "at", "when",
                                        "on", "and", "off", "to", "feeling"}), sentence


# --- the personas, by hand ------------------------------------------------------------


def test_cooperative_replies_are_the_plain_patient_s():
    questions = [OPENING, OPENING, "How long have you had the pain?", "Do you smoke?"]
    assert _dialogue(RetrievalPatient(), questions) == [
        f"{PRIMARY} {STARTED}", f"{RADIATES} {PRIOR}", STARTED, SMOKES]


def test_reluctant_gives_one_fact_and_a_follow_up_the_next():
    replies = _dialogue(_persona("reluctant"), [OPENING, OPENING, OPENING, "Tell me more."])
    assert replies == [PRIMARY, STARTED, RADIATES, PRIOR]


def test_vague_and_lay_keep_the_choice_and_change_the_words():
    questions = [OPENING, "Do you smoke?", "Any medical problems in the past?"]
    assert _dialogue(_persona("vague"), questions) == [
        f"{PRIMARY} I have crushing chest pain that started a couple of hours ago while "
        "shoveling snow.", "I smoke one pack of cigarettes per day for decades.", PAST]
    assert _dialogue(_persona("lay"), questions) == [
        f"{PRIMARY} {STARTED}", SMOKES, "High blood pressure and high cholesterol."]


def test_vague_tells_a_fact_once_it_is_given_in_its_own_words():
    # the second opening goes on with the story, as the plain patient's does: the
    # coarse form of STARTED counts as given
    replies = _dialogue(_persona("vague"), [OPENING, OPENING])
    assert replies[1] == f"{RADIATES} {PRIOR}"


def test_forgetful_withholds_with_p_and_asking_again_reveals():
    questions = [OPENING, "Do you smoke?", "Do you smoke?"]
    assert _dialogue(_persona("forgetful:1"), questions) == [PRIMARY, FORGOT, SMOKES]
    assert _dialogue(_persona("forgetful:0"), questions) == _dialogue(RetrievalPatient(),
                                                                      questions)


def test_tangential_adds_one_filler_sentence_with_p():
    questions = [OPENING, "Do you smoke?"]
    plain = _dialogue(RetrievalPatient(), questions)
    for reply, base in zip(_dialogue(_persona("tangential:1"), questions), plain, strict=True):
        extra = reply.removeprefix(base + " ")
        assert reply.startswith(base + " ") and extra in FILLER
    assert _dialogue(_persona("tangential:0"), questions) == plain


def test_a_caregiver_keeps_its_prefix_under_a_persona():
    view = PatientView(CHEST_PAIN, (), "Any medical problems in the past?",
                       caregiver_voice=True)
    assert _persona("lay").reply(view) == (CAREGIVER_PREFIX + "High blood pressure and "
                                           "high cholesterol.")


# --- draws ----------------------------------------------------------------------------


def test_draws_are_keyed_by_seed_and_fact():
    questions = [OPENING, "Tell me more.", "Do you smoke?", "Do you drink alcohol?",
                 "Any medications?", "Any family history?", "Any allergies?"]
    runs = {seed: _dialogue(_persona("forgetful:0.5", seed), questions)
            for seed in range(8)}
    assert runs[3] == _dialogue(_persona("forgetful:0.5", 3), questions)
    assert len({tuple(r) for r in runs.values()}) > 1  # the seed changes what is withheld
    twin = pickle.loads(pickle.dumps(_persona("forgetful:0.5", 3)))
    assert _dialogue(twin, questions) == runs[3]
    assert _dialogue(copy.deepcopy(_persona("tangential:0.5", 3)), questions) == \
        _dialogue(_persona("tangential:0.5", 3), questions)


@pytest.mark.parametrize("persona", PERSONAS[1:])
def test_an_env_under_a_persona_is_reproducible_and_survives_pickle(persona):
    from clinenv.agents.scripted_doctor import ScriptedDoctor

    def play(env, obs, info, doctor, steps=40):
        out = []
        for _ in range(steps):
            obs, reward, terminated, truncated, info = env.step(doctor.act(obs, info))
            out.append((obs["text"], reward, terminated))
            if terminated or truncated:
                break
        return out

    env = gym.make("EGIP-Demo-v0", patient_persona=f"{persona}:0.5")
    doctor = ScriptedDoctor()
    doctor.reset(seed=3)
    obs, info = env.reset(seed=3, options={"case_id": 1})
    obs, *_, info = env.step(doctor.act(obs, info))
    twin, twin_doctor = pickle.loads(pickle.dumps(env)), copy.deepcopy(doctor)
    expected = play(env, obs, info, doctor)
    assert play(twin, obs, info, twin_doctor) == expected
    again = gym.make("EGIP-Demo-v0", patient_persona=f"{persona}:0.5")
    doctor.reset(seed=3)
    obs, info = again.reset(seed=3, options={"case_id": 1})
    assert play(again, obs, info, doctor, 41)[1:] == expected


# --- truthfulness over every MedQA and NEJM case --------------------------------------

SWEEP = (OPENING, "Tell me more.", "When did it start?", "Do you have any pain?",
         "Do you take any medications?", "Do you smoke or drink alcohol?",
         "Any family history of illness?", "Any past medical history?",
         "Do you take any medications?", "Do you have any allergies?", OPENING)


def _unexplained(text: str, facts, caregiver: bool) -> str:
    """What is left of a plain reply once every spoken fact of P and fixed phrase is
    taken out (empty: every sentence is in P)."""
    index = RetrievalPatient()._index(FrozenFacts(facts))
    voice = 1 if caregiver else 0
    text = text.removeprefix(CAREGIVER_PREFIX) if caregiver else text
    said = {_say(index, f, voice, opening) for f in index.facts for opening in (0, 1)}
    for piece in sorted(said | {NOT_SURE, FORGOT}, key=len, reverse=True):
        text = text.replace(piece, " ")
    return text.strip()


def test_every_reply_of_every_persona_is_true_to_p_and_never_names_y():
    skip_without_shared_data("agentclinic_medqa.jsonl", "agentclinic_nejm.jsonl")
    from clinenv.env.case_pool import CasePool

    checked, changed = 0, dict.fromkeys(PERSONAS, 0)
    for dataset in ("medqa", "nejm"):
        pool = CasePool.get(dataset, data_dir=str(SHARED_DATA))
        for number, case in enumerate(pool.cases):
            prepared = pool.prepared(case, accept=0.9, suggest=0.6)
            facts, caregiver = prepared.patient_facts, case.flags.caregiver_voice
            for name in PERSONAS:
                patient = _persona(f"{name}:0.5", seed=number)
                dialogue: list[tuple[str, str]] = []
                for question in SWEEP:
                    view = PatientView(facts, tuple(dialogue), question, caregiver)
                    reply = patient.reply(view)
                    dialogue.append((question, reply))
                    plain = invert_reply(reply, facts, name, caregiver_voice=caregiver)
                    assert _unexplained(plain, facts, caregiver) == "", (case.case_id,
                                                                          name, reply)
                    assert not names_target(case.target.text, reply), (case.case_id, name)
                    changed[name] += reply != RetrievalPatient().reply(view)
                    checked += 1
    assert checked == (107 + 15) * len(PERSONAS) * len(SWEEP)
    # every persona changes replies (cooperative, through PersonaPatient too, none): the
    # check is not vacuous
    assert changed["cooperative"] == 0
    assert all(changed[name] > 100 for name in PERSONAS[1:]), changed
