"""Tests for the deterministic retrieval patient :mod:`clinenv.env.retrieval_patient`."""

from __future__ import annotations

import inspect
import json
import re

import pytest

import clinenv.env.retrieval_patient as patient_module
from clinenv.cases import Case
from clinenv.env.retrieval_patient import (
    CAREGIVER_PREFIX,
    FIXED_PHRASES,
    NOT_SURE,
    REPHRASE_WORDS,
    RetrievalPatient,
)
from clinenv.protocol.views import PatientView
from clinenv.testing.data import skip_without_shared_data
from clinenv.testing.patient_facts import CHEST_PAIN

INFANT = {
    "Demographics": "6-month-old girl",
    "History": (
        "The infant has had a fever and fussiness for 3 days. Her mother reports that she "
        "has been pulling at her right ear."
    ),
    "Symptoms": {"Primary_Symptom": "Fever", "Secondary_Symptoms": ["Ear pulling", "Poor feeding"]},
    "Past_Medical_History": "Born at term without complications. Vaccinations are up to date.",
    "Social_History": "Attends daycare. Parents do not smoke.",
    "Family_History": "No family history of hearing problems.",
}

NEJM_STYLE = {
    "Patient_Info": (
        "For your role as a patient, here's what you need to know: - You are a 45-year-old "
        "man. - You have had a painless lump in your neck for 2 months. - You smoke a pack of "
        "cigarettes a day. - You take no medications. - Your brother had thyroid cancer. "
        "Remember, you are not aware of your diagnosis."
    )
}


def ask(facts, question, dialogue=(), caregiver=False, patient=None) -> str:
    view = PatientView(
        facts=facts, dialogue=tuple(dialogue), question=question, caregiver_voice=caregiver
    )
    return (patient or RetrievalPatient()).reply(view)


# --- pinned replies -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        (
            "Hello!",
            "I'm here because of crushing chest pain. I have crushing chest pain that started "
            "2 hours ago while shoveling snow.",
        ),
        (
            "What brings you in today?",
            "I'm here because of crushing chest pain. I have crushing chest pain that started "
            "2 hours ago while shoveling snow.",
        ),
        (
            "When did the pain start?",
            "I have crushing chest pain that started 2 hours ago while shoveling snow.",
        ),
        ("What medications do you take?", "Lisinopril 10 mg daily. Atorvastatin 40 mg nightly."),
        ("Do you smoke?", "I smoke one pack of cigarettes per day for 30 years."),
        ("Do you drink alcohol?", "I drink two beers on weekends."),
        (
            "Does anyone in your family have heart problems?",
            "My father had a heart attack at age 55.",
        ),
        ("Any family history?", "My father had a heart attack at age 55."),
        ("Do you have any allergies?", "Penicillin causes a rash."),
        ("How old are you?", "58-year-old man."),
        ("What is your favourite colour?", NOT_SURE),
        (
            "Where does the pain go?",
            "I have crushing chest pain that started 2 hours ago while shoveling snow. "
            "The pain radiates to my left arm.",
        ),
    ],
)
def test_chest_pain_adult(question: str, expected: str) -> None:
    assert ask(CHEST_PAIN, question) == expected


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        (
            "Hi, what brings you in today?",
            "We're here because of fever. My child has had a fever and fussiness for 3 days.",
        ),
        ("When did the fever start?", "My child has had a fever and fussiness for 3 days."),
        ("What medications is she taking?", NOT_SURE),
        ("Does anyone smoke at home?", "Parents do not smoke."),
        ("Any family history of ear problems?", "No family history of hearing problems."),
        ("How old is she?", "6-month-old girl."),
        ("What is your favourite colour?", NOT_SURE),
    ],
)
def test_infant_caregiver_voice(question: str, expected: str) -> None:
    assert ask(INFANT, question, caregiver=True) == CAREGIVER_PREFIX + expected


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        (
            "Good morning. Tell me about your symptoms.",
            "I am a 45-year-old man. I have had a painless lump in my neck for 2 months.",
        ),
        ("How long have you had the lump?", "I have had a painless lump in my neck for 2 months."),
        ("Do you take any medications?", "I take no medications."),
        ("Do you smoke?", "I smoke a pack of cigarettes a day."),
        ("Any family history of cancer?", "My brother had thyroid cancer."),
        ("What is your favourite colour?", NOT_SURE),
    ],
)
def test_nejm_single_string(question: str, expected: str) -> None:
    assert ask(NEJM_STYLE, question) == expected


def test_role_card_instructions_are_never_spoken() -> None:
    questions = ["Hello", "Tell me more", "Anything else?", "What do you know?", "Remember?"]
    for question in questions:
        reply = ask(NEJM_STYLE, question).lower()
        assert "here's what you need" not in reply
        assert "remember" not in reply


# --- dialogue -----------------------------------------------------------------------


def test_deterministic() -> None:
    view = PatientView(facts=CHEST_PAIN, dialogue=(), question="Do you smoke?")
    patient = RetrievalPatient()
    assert patient.reply(view) == patient.reply(view) == RetrievalPatient().reply(view)
    assert RetrievalPatient.for_facts(CHEST_PAIN).reply(view) == patient.reply(view)


def test_prefers_facts_not_yet_given() -> None:
    opening = ask(CHEST_PAIN, "What brings you in?")
    dialogue = [("What brings you in?", opening)]
    assert ask(CHEST_PAIN, "Any other symptoms?", dialogue) == "Sweating. Nausea."
    # a second open question continues the story instead of repeating it
    follow_up = ask(CHEST_PAIN, "Hello", dialogue)
    assert follow_up == "The pain radiates to my left arm. I don't have any prior episodes."
    assert ask(CHEST_PAIN, "Tell me more", dialogue) == follow_up


def test_same_question_may_repeat_the_answer() -> None:
    question = "Do you smoke?"
    first = ask(CHEST_PAIN, question)
    assert ask(CHEST_PAIN, question, [(question, first)]) == first


def test_different_question_does_not_repeat_when_another_fact_fits() -> None:
    first = ask(CHEST_PAIN, "What medications do you take?")
    assert first == "Lisinopril 10 mg daily. Atorvastatin 40 mg nightly."
    # "any pills?" routes to medications again; both drug facts were just given, and no
    # other fact qualifies, so the same facts come back rather than an invented answer
    again = ask(CHEST_PAIN, "Any pills?", [("What medications do you take?", first)])
    assert again == first
    # "pain" matches several facts: the ones just given are passed over
    dialogue = [("When did the pain start?", ask(CHEST_PAIN, "When did the pain start?"))]
    assert ask(CHEST_PAIN, "Tell me about the pain", dialogue) != dialogue[0][1]


def test_placeholder_leaves_are_not_facts() -> None:
    facts = {"History": "Cough for 3 days.", "Social_History": "Information not provided."}
    assert ask(facts, "Do you smoke?") == NOT_SURE
    assert ask({}, "Hello") == NOT_SURE


def test_one_patient_serves_many_fact_trees() -> None:
    patient = RetrievalPatient()
    for _ in range(2):
        assert ask(CHEST_PAIN, "Do you smoke?", patient=patient).startswith("I smoke one pack")
        assert ask(NEJM_STYLE, "Do you smoke?", patient=patient).startswith("I smoke a pack")
    # an equal tree built separately gets the same answers
    copy = json.loads(json.dumps(CHEST_PAIN))
    assert ask(copy, "Do you smoke?", patient=patient) == ask(CHEST_PAIN, "Do you smoke?")


# --- the patient sees the view only (no M, no Y) --------------------------------------


def test_public_api_takes_only_a_patient_view() -> None:
    public = {name for name in vars(RetrievalPatient) if not name.startswith("_")}
    assert public == {"reply", "for_facts"}
    assert list(inspect.signature(RetrievalPatient).parameters) == []
    reply = inspect.signature(RetrievalPatient.reply)
    assert list(reply.parameters) == ["self", "view"]
    assert reply.parameters["view"].annotation in (PatientView, "PatientView")
    assert list(inspect.signature(RetrievalPatient.for_facts).parameters) == ["facts"]
    # the module holds no path to a Case (records M, target Y)
    assert not any(value is Case for value in vars(patient_module).values())
    assert "clinenv.cases" not in inspect.getsource(patient_module)


_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def _words(text: str) -> set[str]:
    text = text.lower().replace("\u2019", "'")
    return {re.sub(r"'s$", "", w) for w in _WORD.findall(text)}


def _strings(tree):
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield key
            yield from _strings(value)
    elif isinstance(tree, list):
        for value in tree:
            yield from _strings(value)
    else:
        yield str(tree)


def _allowed(word: str, vocabulary: set[str]) -> bool:
    """The word is in P (or the fixed phrases) or is a base form of a verb there."""
    forms = {word, word + "s", word + "es"}
    if word.endswith("y"):
        forms.add(word[:-1] + "ies")
    return bool(forms & vocabulary)


LEAK_QUESTIONS = (
    "Hello, what brings you in today?",
    "When did this start?",
    "Where exactly is the pain?",
    "Do you take any medications?",
    "Do you smoke or drink alcohol?",
    "Any family history of similar problems?",
    "Do you have any allergies?",
    "Any past medical problems or surgeries?",
    "How old are you?",
    "Tell me more",
)


def test_replies_use_only_words_of_p_on_real_medqa_cases() -> None:
    path = skip_without_shared_data("agentclinic_medqa.jsonl") / "agentclinic_medqa.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    trees = [json.loads(line)["OSCE_Examination"]["Patient_Actor"] for line in lines if line]
    assert len(trees) == 107
    fixed = set().union(*(_words(phrase) for phrase in FIXED_PHRASES)) | REPHRASE_WORDS
    patient = RetrievalPatient()
    for facts in trees:
        vocabulary = set().union(*(_words(s) for s in _strings(facts))) | fixed
        for caregiver in (False, True):
            dialogue: tuple[tuple[str, str], ...] = ()
            for question in LEAK_QUESTIONS:
                view = PatientView(facts, dialogue, question, caregiver)
                reply = patient.reply(view)
                extra = {w for w in _words(reply) if not _allowed(w, vocabulary)}
                assert not extra, (question, reply, extra)
                dialogue += ((question, reply),)
