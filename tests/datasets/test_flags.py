"""The per-case flag rules of clinenv.datasets.flags, on hand-written inputs."""

from __future__ import annotations

import pytest

from clinenv.datasets.flags import (
    caregiver_voice,
    main_noun_phrase,
    names_target,
    near_duplicates,
    no_recorded_tests,
    patient_facts_contain_findings,
)
from clinenv.datasets.nejm import final_question, objective_for, split_sentences


@pytest.mark.parametrize(
    ("demographics", "expected"),
    [
        ("2-year-old female", True),
        ("18-month-old boy", True),
        ("3-week-old infant", True),
        ("5-day-old male newborn", True),
        ("Newborn, born at 33 weeks of gestation", True),
        ("A neonate with seizures", True),
        ("4.5-year-old girl", True),
        ("5-year-old boy", False),
        ("a 6 year old child", False),
        ("32-year-old woman, gravida 2, para 1, at 38 weeks' gestation", False),
        ("Mother of an infant; 34-year-old female", False),
        ("70-year-old man accompanied by his wife", False),
        ("aged 3 years", True),
        ("", False),
    ],
)
def test_caregiver_voice(demographics, expected):
    assert caregiver_voice(demographics) is expected


def test_main_noun_phrase():
    assert main_noun_phrase("Acute interstitial nephritis") == "interstitial nephritis"
    assert main_noun_phrase("Progressive multifocal encephalopathy (PML)") == (
        "progressive multifocal encephalopathy")
    assert main_noun_phrase("Pneumonia due to Streptococcus pneumoniae") == "pneumonia"
    assert main_noun_phrase("Chronic Venous Insufficiency") == "venous insufficiency"


def test_names_target():
    tree = {"Imaging": {"CT": "Findings consistent with interstitial nephritis."},
            "List": ["Hirschsprung’s disease suspected"], "Flag": True}
    assert names_target("Acute interstitial nephritis", tree)  # main noun phrase
    assert names_target("Hirschsprung's disease", tree)  # curly apostrophe folded
    assert not names_target("nephritis syndrome", tree)
    assert not names_target("Nephri", tree)  # whole words only
    assert names_target("Legg-Calvé-Perthes disease", {"X": "legg calve perthes disease"})
    assert not names_target("Gout", {})


def test_patient_facts_contain_findings():
    assert patient_facts_contain_findings(
        "During a physical examination, it was noted that there were fine crackles.")
    assert patient_facts_contain_findings(
        "You are aware that your thyroid tests came back normal, but you don't know more.")
    assert not patient_facts_contain_findings(
        "You've had some blood tests done, but you don't know the details.")
    assert not patient_facts_contain_findings(
        "You are not aware of any test results showing abnormal findings.")
    assert not patient_facts_contain_findings("You have had a cough for 6 months.")


def test_no_recorded_tests():
    assert no_recorded_tests({})
    assert no_recorded_tests({"Blood_Tests": {"CBC": "Pending"}, "Imaging": {}})
    assert not no_recorded_tests({"Blood_Tests": {"CBC": "Pending", "CRP": "12 mg/L"}})


def test_near_duplicates_point_at_the_group_root():
    texts = [
        "Evaluate the patient with fever and cough for three days and chest pain",
        "Assess the child with a limp and hip pain after a fall",
        "Evaluate the patient with fever and cough for three days and chest pain.",
        "evaluate THE patient with fever, and cough for three days and chest pain",
        "",
    ]
    ids = ["c-1", "c-2", "c-3", "c-4", "c-5"]
    assert near_duplicates(ids, texts) == [None, None, "c-1", "c-1", None]


def test_sentences_and_questions():
    text = ("A 58-year-old man with C. difficile colitis saw Dr. Smith. Stool tests were "
            "positive (e.g. toxin B). Which pathogen is responsible?")
    assert split_sentences(text) == [
        "A 58-year-old man with C. difficile colitis saw Dr. Smith.",
        "Stool tests were positive (e.g. toxin B).",
        "Which pathogen is responsible?",
    ]
    assert final_question(text) == "Which pathogen is responsible?"
    assert final_question("No question here.") is None
    assert objective_for("A man has a rash.", "question") == "What is the most likely diagnosis?"
    assert objective_for("What is the diagnosis?", "presentation") == "What is the diagnosis?"
