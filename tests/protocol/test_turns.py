"""Turn cuts: a reply cut at the first chat-template token or other speaker's line,
own labels and leading own-turn headers stripped, the stop strings of each seat."""

from __future__ import annotations

import pytest

from clinenv.protocol.parser import parse_action
from clinenv.protocol.turns import cut_turn, stop_strings

#: (reply, the doctor's own turn): one per chat template, plus speaker lines.
PAST_TURN = [
    ("How long have you had the cough?<|im_end|>\n<|im_start|>user\nPatient: About three "
     "weeks.<|im_end|>\n<|im_start|>assistant\nDIAGNOSIS READY: Tuberculosis",
     "How long have you had the cough?"),
    ("Any chest pain?<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nNo.<|eot_id|>"
     "DIAGNOSIS READY: Angina", "Any chest pain?"),
    ("REQUEST TEST: T3<end_of_turn>\n<start_of_turn>user\nResult: normal", "REQUEST TEST: T3"),
    ("Do you smoke?</s>[INST] Patient: yes [/INST] DIAGNOSIS READY: COPD", "Do you smoke?"),
    ("Where is the pain?<|end|><|user|>In my belly", "Where is the pain?"),
    ("Where is the pain?\nPatient: In my belly.\nDoctor: DIAGNOSIS READY: Appendicitis",
     "Where is the pain?"),
    ("Any fever?\n**Patient:** Yes, since Monday.", "Any fever?"),
    ("Any fever?\n  User: yes", "Any fever?"),
    ("REQUEST TEST: PE1\nExaminer [PE1 Vital Signs]:\n  BP 120/80", "REQUEST TEST: PE1"),
    ("Any rash?\nInterface: Evidence acquisition is over.", "Any rash?"),
    ("Any rash?\nMeasurement agent [- CBC]: normal", "Any rash?"),
]


@pytest.mark.parametrize(("reply", "own"), PAST_TURN)
def test_a_reply_is_cut_at_the_first_turn_boundary(reply, own):
    cut = cut_turn(reply, "doctor")
    assert cut.text == own
    assert cut.wrote_past_turn and cut.flags == ["wrote_past_turn"]
    action = parse_action(reply)
    assert action.text == own and "wrote_past_turn" in action.flags
    assert action.kind != "diagnosis" or "DIAGNOSIS" in own


def test_own_labels_and_leading_self_labels():
    assert cut_turn("Doctor: Any fever?", "doctor") == cut_turn("Any fever?", "doctor").__class__(
        "Any fever?", False, None, True)
    # the doctor's own label later on is not another speaker's turn
    assert not cut_turn("Any fever?\nDoctor: and chills?", "doctor").wrote_past_turn
    assert cut_turn("Patient: It hurts.\nDoctor: Where?", "patient").text == "It hurts."
    assert cut_turn("Assistant: Yes.", "judge").label_stripped
    assert cut_turn("Correct.\nPatient: thanks", "judge").text == "Correct."
    # a label that is not at a line start is text
    assert cut_turn("I asked the Patient: no reply", "doctor").text.endswith("no reply")
    assert cut_turn(None, "doctor").text == ""


def test_stop_strings_match_the_rendered_speaker_lines():
    assert stop_strings("doctor", limit=4) == ("\nPatient:", "\nExaminer [", "<|im_end|>",
                                               "<|eot_id|>")
    assert "\nDoctor:" in stop_strings("patient")
    for seat in ("doctor", "patient", "examiner", "judge"):
        for stop in stop_strings(seat):
            assert cut_turn("Some text." + stop + " invented]:", seat).wrote_past_turn


@pytest.mark.parametrize("reply", [
    "Any pain?<｜end▁of▁sentence｜><｜User｜>Patient says yes",
    "Any pain?<|eom_id|>yes", "Any pain?<|end_of_text|>", "Any pain?<eos>yes",
    "Any pain?<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>yes",
    "Any pain?<|start_of_role|>user<|end_of_role|>yes", "Any pain?<|return|>",
    "Any pain?<|start|>user<|message|>yes",
])
def test_other_chat_templates_end_the_turn(reply):
    cut = cut_turn(reply, "doctor")
    assert cut.text == "Any pain?" and cut.wrote_past_turn


@pytest.mark.parametrize("reply", [
    "<|im_start|>assistant\nAny pain?",
    "<|start_header_id|>assistant<|end_header_id|>\n\nAny pain?",
    "<start_of_turn>model\nAny pain?", "[/INST] Any pain?", "<s> Any pain?",
    "<|assistant|>Any pain?", "<|start_of_role|>assistant<|end_of_role|>Any pain?",
])
def test_a_leading_own_turn_header_is_stripped_not_cut(reply):
    cut = cut_turn(reply, "doctor")
    assert (cut.text, cut.wrote_past_turn, cut.label_stripped) == ("Any pain?", False, True)
