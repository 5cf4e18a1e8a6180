"""Rephrasing patient facts into the patient's or a caregiver's voice (words never added)."""

from __future__ import annotations

import pytest

from clinenv.env.patient_voice import as_caregiver, as_patient, finish_sentence


@pytest.mark.parametrize(
    "sentence, patient, caregiver",
    [
        ("The patient reports a 1-month history of diplopia.",
         "I have a 1-month history of diplopia.",
         "My child reports a 1-month history of diplopia."),
        ("You have noticed dark patches.", "I have noticed dark patches.",
         "I have noticed dark patches."),
        ("Denies chest pain.", "I don't have chest pain.", "Denies chest pain."),
        ("The infant has had a cough for two days.",
         "The infant has had a cough for two days.",
         "My child has had a cough for two days."),
    ],
)
def test_voices(sentence, patient, caregiver):
    assert as_patient(sentence) == patient
    assert as_caregiver(sentence) == caregiver


def test_finish_sentence():
    assert finish_sentence(" Fever ") == "Fever."
    assert finish_sentence("Why?") == "Why?"
