"""Terminal decision calls cut to the doctor's turn
(:func:`clinenv.agents.terminal_base.cut_result`): the doctor's stop strings sent, the
direct strategy's reply and each vote sample cut before they are read, summaries cut at
chat-template tokens only.

Expected texts are written out by hand from the raw replies, never computed with
:func:`clinenv.protocol.turns.cut_turn`.
"""

from __future__ import annotations

from clinenv.agents.llm_doctor import LLMDoctor
from clinenv.agents.terminal import make_strategy
from clinenv.agents.terminal_base import cut_result
from clinenv.agents.terminal_direct import Direct
from clinenv.llm import ChatResult, Choice, ScriptedChatModel

#: The doctor's stop strings (written out by hand); the first four are sent.
DOCTOR_STOPS = ("\nPatient:", "\nExaminer [", "<|im_end|>", "<|eot_id|>", "<end_of_turn>",
                "\nUser:")
EVIDENCE = ("# Objective (S0)\nName the diagnosis.\n\n# Candidates\nA. Gout\nB. Lupus\n\n"
            "# Observations\n[O1] Patient: My big toe is swollen.")


def test_decision_calls_send_the_doctor_stops_and_read_the_cut_reply():
    raw = "DIAGNOSIS READY: Gout<|im_end|>\n<|im_start|>user\nPatient: DIAGNOSIS READY: Lupus"
    model = ScriptedChatModel([raw])
    doctor = LLMDoctor(model, strategy="direct")
    action = doctor.act({"text": EVIDENCE}, {"phase": "decide", "turn": 5,
                                            "candidates": ["Gout", "Lupus"]})
    assert action == "DIAGNOSIS READY: Gout"
    assert doctor.last_decision.answer == "Gout"
    assert model.calls[0][1].stop == DOCTOR_STOPS[:4]
    (record,) = doctor.drain_calls()
    assert "wrote_past_turn" in record["flags"] and record["answers"] == ["Gout"]


def test_direct_decide_cuts_without_adding_stops():
    model = ScriptedChatModel(["Lupus\nExaminer: anti-dsDNA positive\nDIAGNOSIS READY: Gout"])
    decision = Direct().decide(model, EVIDENCE, seed=2)
    assert model.calls[0][1].stop == ()
    assert (decision.action, decision.answer) == ("Lupus", "Lupus")
    assert decision.calls[0]["flags"] == ["wrote_past_turn"]


def test_vote_samples_are_each_cut_before_the_tally():
    """Three samples; cut, they read Gout, Gout, Lupus (uncut, the second would name
    Lupus in its invented continuation)."""
    model = ScriptedChatModel([
        "DIAGNOSIS READY: Gout",
        "DIAGNOSIS READY: Gout<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
        "DIAGNOSIS READY: Lupus",
        "DIAGNOSIS READY: Lupus"])
    doctor = LLMDoctor(model, strategy=make_strategy("vote", n_samples=3))
    action = doctor.act({"text": EVIDENCE}, {"phase": "decide", "turn": 5,
                                            "candidates": None})
    assert action == "DIAGNOSIS READY: Gout"
    first, more = doctor.drain_calls()
    assert "wrote_past_turn" not in first.get("flags", [])
    assert "wrote_past_turn" in more["flags"]
    assert [c[1].stop for c in model.calls] == [DOCTOR_STOPS[:4]] * 2


def test_cut_result_keeps_raw_text_and_cuts_summaries_at_tokens_only():
    result = ChatResult(choices=(Choice("Gout is likely.\nPatient: statements O1."
                                        "<|im_end|>junk"), Choice("clean")),
                        model="m", backend="scripted")
    tokens_only = cut_result(result, "doctor", turn=False)
    assert tokens_only.texts == ["Gout is likely.\nPatient: statements O1.", "clean"]
    assert tokens_only.choices[0].raw == result.choices[0].text
    assert tokens_only.choices[1] is result.choices[1]
    in_turn = cut_result(result, "doctor")
    assert in_turn.texts == ["Gout is likely.", "clean"]
    assert in_turn.to_log()["flags"] == ["wrote_past_turn"]
    untouched = ChatResult(choices=(Choice("clean"),), model="m", backend="scripted")
    assert cut_result(untouched, "doctor") is untouched
