"""The LLM patient simulator: its exact messages, its reply
cleanup and flags, its seeds, and — on real MedQA cases — that nothing of the records M
or the target Y ever reaches it."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv.agents.llm_doctor import LLMDoctor
from clinenv.agents.llm_patient import LLMPatient, clean_reply, render_facts
from clinenv.agents.prompts import (
    DIRECT_SYSTEM,
    PATIENT_OPENING,
    PATIENT_SYSTEM,
    PATIENT_VOICE_CAREGIVER,
    PATIENT_VOICE_SELF,
)
from clinenv.agents.scripted_doctor import ScriptedDoctor
from clinenv.env import EGIPEnv
from clinenv.env.retrieval_patient import NOT_SURE
from clinenv.llm import GenerationConfig, ScriptedChatModel
from clinenv.protocol.views import PatientView
from clinenv.seeding import call_seed
from clinenv.testing.data import MEDQA_FILE, leaves
from clinenv.testing.fake_responders import cycling_responder

FACTS = {"Demographics": "58-year-old man",
         "Symptoms": {"Primary_Symptom": "Chest pain",
                      "Secondary_Symptoms": ["Sweating", "Nausea"]},
         "Allergies": {}}
FACTS_TEXT = ("Demographics: 58-year-old man\n"
              "Symptoms:\n"
              "  Primary Symptom: Chest pain\n"
              "  Secondary Symptoms:\n"
              "    - Sweating\n"
              "    - Nausea")
OPENING = "I've had chest pain since this morning."


def view(dialogue=(), question="Does it spread to your arm?", caregiver=False):
    return PatientView(FACTS, tuple(dialogue), question, caregiver)


# ---------------------------------------------------------------------- messages
def test_render_facts_as_indented_lines():
    assert render_facts(FACTS) == FACTS_TEXT


# field-bug-reports B16
def test_b16_messages_keep_the_opening_and_every_turn():
    """System, a user turn before the patient's first words, earlier pairs as
    user/assistant, the current question last; nothing dropped."""
    patient = LLMPatient(ScriptedChatModel(["x"]))
    dialogue = [("What brings you in?", OPENING), ("How bad is it?", "Seven out of ten.")]
    assert patient.messages_for(view(dialogue)) == [
        {"role": "system", "content": PATIENT_SYSTEM.format(voice=PATIENT_VOICE_SELF,
                                                             facts=FACTS_TEXT)},
        {"role": "user", "content": f"{PATIENT_OPENING}\nWhat brings you in?"},
        {"role": "assistant", "content": OPENING},
        {"role": "user", "content": "How bad is it?"},
        {"role": "assistant", "content": "Seven out of ten."},
        {"role": "user", "content": "Does it spread to your arm?"},
    ]
    first = patient.messages_for(view(question="What brings you in?"))
    assert [m["role"] for m in first] == ["system", "user"]
    assert first[1]["content"] == f"{PATIENT_OPENING}\nWhat brings you in?"


def test_caregiver_voice_changes_the_system_prompt():
    system = LLMPatient(ScriptedChatModel(["x"])).messages_for(view(caregiver=True))[0]
    assert system["content"] == PATIENT_SYSTEM.format(voice=PATIENT_VOICE_CAREGIVER,
                                                      facts=FACTS_TEXT)


# field-bug-reports B16
def test_b16_restarting_simulator_does_not_restart_with_full_context():
    """A fake LLM that re-sends its opening whenever its own earlier line is
    missing from the context, and speaks as the doctor on some seeds."""
    def respond(messages, config, index):
        own = [m["content"] for m in messages if m["role"] == "assistant"]
        if OPENING not in own:  # its own opening is missing from the context: restart
            return OPENING
        if config.seed % 2 == 0:
            return "Doctor: Does anything make it better?"
        return f"Patient: Answer {len(own)}."

    patient = LLMPatient(ScriptedChatModel(respond))
    patient.reset(seed=11)
    dialogue: list[tuple[str, str]] = []
    for question in ("What brings you in?", "Does it spread?", "Since when?", "Any fever?",
                     "Any cough?", "Any nausea?"):
        dialogue.append((question, patient.reply(view(dialogue, question))))
    replies = [reply for _, reply in dialogue]
    assert replies[0] == OPENING and OPENING not in replies[1:]
    records = patient.drain_calls()
    for i, (record, reply) in enumerate(zip(records, replies, strict=True)):
        doctor_turn = i > 0 and call_seed(11, i, "patient") % 2 == 0
        assert ("speaks_as_doctor" in record["flags"]) == doctor_turn
        assert reply == (NOT_SURE if doctor_turn else OPENING if i == 0 else f"Answer {i}.")
    assert not any("repeats_own_reply" in r["flags"] for r in records)
    assert any("speaks_as_doctor" in r["flags"] for r in records)  # the case did occur


@pytest.mark.parametrize(("raw", "reply", "flags"), [
    ("Patient: It hurts when I breathe in.", "It hurts when I breathe in.", []),
    ("**Patient:** It hurts.\nDoctor: Where exactly?\nPatient: Here.", "It hurts.",
     ["speaks_as_doctor"]),
    ("Doctor: Does it spread?\nPatient: Yes, to my left arm.", "Yes, to my left arm.",
     ["speaks_as_doctor"]),
    ("Doctor: Does it spread to your arm?", NOT_SURE, ["speaks_as_doctor", "empty_reply"]),
    ("", NOT_SURE, ["empty_reply"]),
    ("<think>I should not say the diagnosis.</think>", NOT_SURE, ["empty_reply"]),
    ("My doctor told me: rest more.", "My doctor told me: rest more.", []),
    (f"  {OPENING.upper()} ", OPENING.upper(), ["repeats_own_reply"]),
])
def test_clean_reply_strips_labels_and_flags(raw, reply, flags):
    assert clean_reply(raw, [OPENING]) == (reply, flags)


# -------------------------------------------------------------------- seeds, API
def test_per_call_seed_from_reset_seed_and_question_count():
    model = ScriptedChatModel(["Fine."])
    patient = LLMPatient(model, config=GenerationConfig(temperature=0.4))
    patient.reset(seed=5)
    patient.reply(view([("Q1", "A1"), ("Q2", "A2")]))
    assert model.calls[0][1] == GenerationConfig(
        temperature=0.4, seed=call_seed(5, 2, "patient"),
        stop=("\nDoctor:", "<|im_end|>", "<|eot_id|>", "<end_of_turn>"))
    patient.reset()
    patient.reply(view())
    assert model.calls[1][1].seed is None
    [first, second] = patient.drain_calls()
    assert (first["purpose"], first["agent"], first["question_index"]) == ("patient",
                                                                          "patient", 2)
    assert patient.drain_calls() == []


def test_async_reply_and_arguments():
    model = ScriptedChatModel(["Patient: Since Monday."])
    patient = LLMPatient(model)
    assert asyncio.run(patient.areply(view())) == "Since Monday."
    with pytest.raises(TypeError, match="view"):
        patient.reply({"facts": FACTS})
    with pytest.raises(TypeError, match="model"):
        LLMPatient("model")
    with pytest.raises(ValueError, match="seed"):
        patient.reset(seed=-3)
    assert json.loads(json.dumps(patient.config))["backend"] == "scripted"



# field-bug-reports B16
def test_last_flags_are_the_flags_of_the_latest_reply():
    """The flags the environment copies into ``info["patient_flags"]``; a failed
    call or a reset leaves none from an earlier reply."""
    from clinenv.llm.base import BackendError

    def responder(messages, config, index):
        if index == 2:
            raise BackendError("server gone", backend="scripted", detail="connection")
        return "Doctor: Anything else?\nPatient: No." if index else OPENING

    patient = LLMPatient(ScriptedChatModel(responder))
    assert patient.last_flags == []
    assert patient.reply(view()) == OPENING and patient.last_flags == []
    assert patient.reply(view([("Q", OPENING)])) == "No."
    assert patient.last_flags == ["speaks_as_doctor"]
    with pytest.raises(BackendError):
        patient.reply(view([("Q", OPENING)]))
    assert patient.last_flags == []
    patient.last_flags = ["stale"]
    patient.reset(seed=1)
    assert patient.last_flags == []


# -------------------------------------------------------------- through the env
def test_episode_with_llm_patient_and_llm_doctor():
    """The env sends the patient exactly its view; replies land in e_T."""
    patient_model = ScriptedChatModel(["Patient: Three days of fever and a cough.",
                                       "Yes, rusty sputum."])
    doctor_model = ScriptedChatModel(
        lambda messages, config, index: "DIAGNOSIS READY: Lobar pneumonia"
        if messages[0]["content"] == DIRECT_SYSTEM
        else ["What brings you in today?", "Any sputum?"][min(index, 1)])
    env = gym.make("EGIP-Demo-v0", acquisition_rounds=2, patient=LLMPatient(patient_model))
    obs, info = env.reset(seed=2, options={"case_id": "demo-01"})
    doctor = LLMDoctor(doctor_model)
    doctor.reset(seed=2)
    while True:
        obs, _r, terminated, _t, info = env.step(doctor.act(obs, info))
        if terminated:
            break
    evidence = env.unwrapped.episode_record()["evidence"]["observations"]
    assert [(o["context"], o["content"]) for o in evidence] == [
        ("What brings you in today?", "Three days of fever and a cough."),
        ("Any sputum?", "Yes, rusty sputum.")]
    second = patient_model.calls[1][0]
    assert second[2:] == [
        {"role": "assistant", "content": "Three days of fever and a cough."},
        {"role": "user", "content": "Any sputum?"}]
    assert info["verdict"] == "correct"


def test_caregiver_case_through_the_env():
    model = ScriptedChatModel(["My baby has been wheezing."])
    env = gym.make("EGIP-Demo-v0", acquisition_rounds=1, patient=LLMPatient(model))
    env.reset(seed=0, options={"case_id": "demo-07"})  # caregiver_voice case
    env.step("What brings you in today?")
    assert PATIENT_VOICE_CAREGIVER in model.calls[0][0][0]["content"]


def _raw_medqa(shared_data_dir):
    path = shared_data_dir / MEDQA_FILE
    return [json.loads(line)["OSCE_Examination"]
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_llm_patient_messages_never_hold_records_or_target(shared_data_dir):
    """EGIP 3.2: the patient sees P and the dialogue, never M or Y. Checked on the exact
    messages of full episodes of real MedQA cases where a scripted doctor asks every
    history question and requests examinations; M and Y are read from the raw file."""
    raw = _raw_medqa(shared_data_dir)
    for index in range(4):
        osce = raw[index]
        patient_text = json.dumps(osce["Patient_Actor"], ensure_ascii=False).lower()
        records = [osce["Physical_Examination_Findings"], osce["Test_Results"]]
        secret = [leaf for tree in records for leaf in leaves(tree, strings_only=True)
                  if len(leaf) >= 12 and leaf.lower() not in patient_text]
        target = osce["Correct_Diagnosis"]
        assert target.lower() not in patient_text  # chosen cases: P does not name Y

        model = ScriptedChatModel(["I'm not sure about that."])
        env = EGIPEnv("medqa", data_dir=str(shared_data_dir), patient=LLMPatient(model))
        obs, info = env.reset(seed=index, options={"case_id": index})
        doctor = ScriptedDoctor(n_questions=2, exam_budget=6)
        doctor.reset(seed=index)
        while True:
            obs, _r, terminated, _t, info = env.step(doctor.act(obs, info))
            if terminated:
                break
        acquired = [e["recorded_value"] for e in env.episode_record()["events"]
                    if e.get("source") == "measurement" and e.get("recorded_value")]
        # non-vacuous: record values did reach the doctor in this episode
        assert any(s in value for value in acquired for s in secret), index
        sent = "\n".join(m["content"] for messages, _ in model.calls for m in messages)
        assert len(model.calls) >= 5
        assert not [s for s in secret if s in sent], index
        assert not re.search(re.escape(target), sent, re.IGNORECASE), index


# ------------------------------------------------- the reply cut to the patient's turn
#: The patient's stop strings sent to the server (written out by hand).
PATIENT_STOPS_SENT = ["\nDoctor:", "<|im_end|>", "<|eot_id|>", "<end_of_turn>"]


def served(replies):
    """A fake server whose n-th choice overall is ``replies[n]`` (it ignores ``stop``)."""
    from clinenv.testing.fake_server import FakeChatServer

    return FakeChatServer(cycling_responder(replies))


def openai_model(server, **kwargs):
    from clinenv.llm.openai_backend import OpenAIChatModel

    return OpenAIChatModel("fake", base_url=server.base_url, timeout_s=5.0, max_retries=0,
                           **kwargs)


def patient_view(question="Since when do you cough?"):
    return PatientView({"Symptoms": {"Primary_Symptom": "Cough"}}, (), question, False)


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


@pytest.mark.skipif(importlib.util.find_spec("openai") is None,
                    reason="the openai client is not installed (extra 'openai')")
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
