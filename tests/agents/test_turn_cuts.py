"""Model replies cut to their own turn: client-side stop strings in the OpenAI-compatible
backend (a real server on 127.0.0.1 that ignores ``stop``), and every LLM seat (patient,
examiner, judge, doctor, terminal strategies) cutting its reply at the first turn
boundary of ChatML, Llama 3, Gemma and Mistral templates and at other speakers' labels.

Expected texts are written out by hand from the raw replies, never computed with
:func:`clinenv.protocol.turns.cut_turn`.
"""

from __future__ import annotations

import pytest

from clinenv.agents.judge import LLMJudge
from clinenv.agents.llm_doctor import LLMDoctor
from clinenv.agents.llm_patient import LLMPatient
from clinenv.agents.measurement_agent import NO_REPLY, LLMMeasurementAgent
from clinenv.agents.terminal import make_strategy
from clinenv.agents.terminal_base import cut_result
from clinenv.agents.terminal_direct import Direct
from clinenv.llm import ChatResult, Choice, GenerationConfig, ScriptedChatModel
from clinenv.llm.base import enforce_stop
from clinenv.protocol.measurement_view import MeasurementView
from clinenv.protocol.views import PatientView
from clinenv.testing.fake_server import FakeChatServer

pytest.importorskip("openai")
from clinenv.llm.openai_backend import OpenAIChatModel  # noqa: E402

DOCTOR_STOPS = ("\nPatient:", "\nExaminer [", "<|im_end|>", "<|eot_id|>", "<end_of_turn>",
                "\nUser:")
PATIENT_STOPS_SENT = ["\nDoctor:", "<|im_end|>", "<|eot_id|>", "<end_of_turn>"]
FACTS = {"Symptoms": {"Primary_Symptom": "Cough"}}
EVIDENCE = ("# Objective (S0)\nName the diagnosis.\n\n# Candidates\nA. Gout\nB. Lupus\n\n"
            "# Observations\n[O1] Patient: My big toe is swollen.")


def served(replies):
    """A fake server whose n-th choice overall is ``replies[n]`` (it ignores ``stop``)."""
    count = [0]

    def respond(body, index):
        reply = replies[count[0] % len(replies)]
        count[0] += 1
        return reply

    return FakeChatServer(respond)


def openai_model(server, **kwargs):
    return OpenAIChatModel("fake", base_url=server.base_url, timeout_s=5.0, max_retries=0,
                           **kwargs)


# ------------------------------------------------------------- backend: client-side stop
@pytest.mark.parametrize(("raw", "kept"), [
    # ChatML: <|im_end|> is among the 4 stops sent; the server ignores it
    ("Any fever?<|im_end|>\n<|im_start|>user\nPatient: No.", "Any fever?"),
    # Llama 3: the 4th stop sent
    ("How long?<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nTwo days.",
     "How long?"),
    # Gemma: the 5th stop, never sent, enforced on the client only
    ("Any rash?<end_of_turn>\n<start_of_turn>user\nNo rash.", "Any rash?"),
    # a speaker line: the 1st stop
    ("Where is the pain?\nPatient: In my chest.", "Where is the pain?"),
    # the 6th stop (not sent), after a token that is no stop string at all
    ("Any cough? [/INST]\nUser: yes", "Any cough? [/INST]"),
])
def test_server_that_ignores_stop_is_cut_on_the_client(raw, kept):
    with served([raw]) as server:
        result = openai_model(server).generate([{"role": "user", "content": "hi"}],
                                               stop=DOCTOR_STOPS)
    assert server.requests[0]["stop"] == list(DOCTOR_STOPS[:4])
    (choice,) = result.choices
    assert (choice.text, choice.raw_text, choice.finish_reason) == (kept, raw, "stop")
    assert choice.stop_enforced and choice.wrote_past_turn
    record = result.to_log(flags=["unparsed"])
    assert record["flags"] == ["unparsed", "wrote_past_turn"]
    assert record["stop_enforced"] is True
    assert any("stop string" in w for w in record["warnings"])


def test_a_reply_cut_by_max_tokens_past_a_stop_string_ends_with_stop():
    with served([{"content": "Fine.\nDoctor: and then", "finish_reason": "length"}]) as server:
        result = openai_model(server).generate([{"role": "user", "content": "hi"}],
                                               stop=["\nDoctor"])
    assert (result.text, result.choices[0].finish_reason) == ("Fine.", "stop")
    assert not result.choices[0].truncated


def test_a_reply_within_its_turn_is_untouched():
    with served(["Does it hurt when you breathe?"]) as server:
        result = openai_model(server).generate([{"role": "user", "content": "hi"}],
                                               stop=DOCTOR_STOPS)
    (choice,) = result.choices
    assert (choice.text, choice.raw_text, choice.stop_enforced) == (
        "Does it hurt when you breathe?", None, False)
    record = result.to_log()
    assert "flags" not in record and record["stop_enforced"] is False


def test_every_choice_of_n_is_cut_on_its_own():
    with served(["A<|im_end|>x", "B", "C\nUser: y"]) as server:
        result = openai_model(server).generate([{"role": "user", "content": "hi"}], n=3,
                                               stop=DOCTOR_STOPS)
    assert result.texts == ["A", "B", "C"]
    assert [c.stop_enforced for c in result.choices] == [True, False, True]


def test_enforce_stop_keeps_the_earliest_stop():
    choice = enforce_stop(Choice("a ### b <|im_end|> c", finish_reason="length"),
                          ["<|im_end|>", "###"])
    assert (choice.text, choice.raw, choice.finish_reason) == ("a ", "a ### b <|im_end|> c",
                                                               "stop")


# ------------------------------------------------------------------------- patient
def patient_view(question="Since when do you cough?"):
    return PatientView(FACTS, (), question, False)


@pytest.mark.parametrize(("raw", "reply", "flags"), [
    ("It started last week.<|im_end|>\n<|im_start|>user\nDoctor: Any fever?",
     "It started last week.", ["speaks_as_doctor", "wrote_past_turn"]),
    ("Only at night.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
     "Physician: Any cough?", "Only at night.", ["wrote_past_turn"]),
    ("Mostly mornings.<end_of_turn>\n<start_of_turn>user\nAnything else?",
     "Mostly mornings.", ["wrote_past_turn"]),
    ("Since Monday. [INST] Any nausea? [/INST]", "Since Monday.", ["wrote_past_turn"]),
    ("Yes, twice.\nUser: And the pain?", "Yes, twice.", ["wrote_past_turn"]),
    ("Parent: He coughs at night.\n**Doctor:** Since when?", "He coughs at night.",
     ["speaks_as_doctor", "wrote_past_turn"]),
    ("Patient: About three weeks.", "About three weeks.", []),
])
def test_llm_patient_cuts_its_reply_to_its_turn(raw, reply, flags):
    model = ScriptedChatModel([raw])
    patient = LLMPatient(model)
    assert patient.reply(patient_view()) == reply
    assert patient.last_flags == flags
    (record,) = patient.drain_calls()
    assert record["flags"] == flags
    assert model.calls[0][1].stop == tuple(PATIENT_STOPS_SENT)


def test_llm_patient_keeps_its_flags_when_the_backend_cut_at_a_stop_string():
    raw = "It burns.\nDoctor: Where?\nPatient: Here."
    with served([raw]) as server:
        patient = LLMPatient(openai_model(server))
        assert patient.reply(patient_view()) == "It burns."
    assert server.requests[0]["stop"] == PATIENT_STOPS_SENT
    assert patient.last_flags == ["speaks_as_doctor", "wrote_past_turn"]
    (record,) = patient.drain_calls()
    assert record["flags"] == ["speaks_as_doctor", "wrote_past_turn"]
    assert record["stop_enforced"] is True


def test_configured_stops_come_first_and_the_seat_adds_its_own():
    model = ScriptedChatModel(["Fine."])
    LLMPatient(model, config=GenerationConfig(stop=("###", "<|im_end|>"))).reply(
        patient_view())
    assert model.calls[0][1].stop == ("###", "<|im_end|>", "\nDoctor:", "<|eot_id|>",
                                      "<end_of_turn>")


# ------------------------------------------------------------------------ examiner
def measurement_view():
    return MeasurementView(records_text="Hemoglobin: 9.1 g/dL", records={},
                           request="REQUEST TEST: CBC")


@pytest.mark.parametrize(("raw", "answer", "flags"), [
    ("RESULTS: Hemoglobin 9.1 g/dL<|im_end|>\n<|im_start|>user\nDoctor: And the CRP?",
     "RESULTS: Hemoglobin 9.1 g/dL", ["wrote_past_turn"]),
    ("Examiner: RESULTS: Hemoglobin 9.1 g/dL\nPatient: I feel faint.",
     "RESULTS: Hemoglobin 9.1 g/dL", ["wrote_past_turn"]),
    ("RESULTS: NORMAL READINGS<|eot_id|><|start_header_id|>user<|end_header_id|>",
     "RESULTS: NORMAL READINGS", ["wrote_past_turn"]),
    ("<|im_end|>Doctor: anything?", NO_REPLY, ["wrote_past_turn"]),
    ("RESULTS: Hemoglobin 9.1 g/dL", "RESULTS: Hemoglobin 9.1 g/dL", []),
])
def test_llm_measurement_agent_cuts_its_reply_to_its_turn(raw, answer, flags):
    model = ScriptedChatModel([raw])
    agent = LLMMeasurementAgent(model)
    assert agent.measure(measurement_view()) == answer
    (record,) = agent.drain_calls()
    assert record["flags"] == flags
    assert model.calls[0][1].stop == ("\nDoctor:", "\nPatient:", "<|im_end|>", "<|eot_id|>")


# --------------------------------------------------------------------------- judge
@pytest.mark.parametrize(("raw", "verdict", "kept"), [
    # uncut, "Yes<|im_end|>...No" holds both words and would be unparsed
    ("Yes<|im_end|>\n<|im_start|>user\nDoctor: No", "correct", "Yes"),
    ("No.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nYes", "wrong", "No."),
    ("Yes, the same disease.<end_of_turn>\n<start_of_turn>user\nNo?", "correct",
     "Yes, the same disease."),
])
def test_llm_judge_reads_only_its_own_turn(raw, verdict, kept):
    model = ScriptedChatModel([raw])
    judge = LLMJudge(model, retries=0)
    result = judge.judge("DIAGNOSIS READY: Gout", "Gout")
    assert (result.verdict, result.reply, result.n_attempts) == (verdict, kept, 1)
    (record,) = judge.drain_calls()
    assert record["flags"] == ["wrote_past_turn"]
    assert model.calls[0][1].stop == ("\nDoctor:", "\nPatient:", "<|im_end|>", "<|eot_id|>")


def test_strict_judge_reads_an_uncut_reply_as_sent_and_a_cut_one_cut():
    strict = LLMJudge(ScriptedChatModel([" yes", "yes<end_of_turn>\nno"]), strict=True)
    assert strict.judge("Gout", "Gout").verdict == "wrong"  # AgentClinic's exact rule
    assert strict.judge("Gout", "Gout").verdict == "correct"
    assert [r["flags"] for r in strict.drain_calls()] == [[], ["wrote_past_turn"]]


# -------------------------------------------------------------------------- doctor
@pytest.mark.parametrize(("raw", "own", "cut"), [
    ("Any fever?<|im_end|>\n<|im_start|>user\nPatient: No fever.", "Any fever?", True),
    ("How long has it lasted?<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
     "Two weeks.", "How long has it lasted?", True),
    ("REQUEST TEST: CBC<end_of_turn>\n<start_of_turn>user\nExaminer [CBC]: normal",
     "REQUEST TEST: CBC", True),
    ("Any weight loss? [INST] No. [/INST]", "Any weight loss?", True),
    ("Doctor: Where does it hurt?\n**Patient:** In my knee.", "Where does it hurt?", True),
    # a label inside a line is text, not a turn
    ("I asked the Caregiver: is he eating?", "I asked the Caregiver: is he eating?", False),
])
def test_delta_doctor_history_holds_only_its_own_turn(raw, own, cut):
    model = ScriptedChatModel([raw, "Any cough?"])
    doctor = LLMDoctor(model, observation_format="delta")
    doctor.reset(seed=3)
    first = doctor.act({"text": "A 40-year-old presents."}, {"phase": "acquire", "turn": 0})
    assert first == raw  # the environment's parser cuts the action itself
    doctor.act({"text": "Patient: Since yesterday."}, {"phase": "acquire", "turn": 1})
    sent = model.calls[1][0]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[2]["content"] == own
    records = doctor.drain_calls()
    assert records[0]["flags"] == (["wrote_past_turn"] if cut else [])
    assert records[1]["flags"] == []
    assert model.calls[0][1].stop == DOCTOR_STOPS[:4]


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
