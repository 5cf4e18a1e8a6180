"""MedAgentSim's final-turn discussion as a terminal strategy, against a real local server.

Replies come from a responder that reads the request (persona asked, summary, repair),
so every test asserts on the requests the server received.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from clinenv.agents.llm_doctor import LLMDoctor
from clinenv.agents.terminal import make_strategy
from clinenv.agents.terminal_base import ABSTENTION_ACTION, NO_ANSWER_ACTION
from clinenv.agents.terminal_discussion import (
    OPINION_ASK,
    REPAIR_ASK,
    TEAM_SYSTEM,
    Discussion,
)
from clinenv.cli import build_parser
from clinenv.llm.base import GenerationConfig
from clinenv.llm.openai_backend import OpenAIChatModel
from clinenv.protocol.evidence import EvidenceBundle, Observation, render_evidence
from clinenv.seeding import call_seed

#: A hand-written native (MedAgentSim-style) transcript plus its final instruction.
TRANSCRIPT = (
    "Doctor: What brings you in today?\n"
    "Patient: I have had a cough with rusty sputum and chills for three days.\n"
    "Doctor: REQUEST TEST: Chest_X-Ray\n"
    "Measurement: RESULTS: Right lower lobe consolidation.\n"
    "This is the final question. Please provide a diagnosis."
)
EVIDENCE = render_evidence(EvidenceBundle(
    "A 70-year-old woman with a painful band-like rash. What is the diagnosis?",
    ("Allergic contact dermatitis", "Herpes zoster", "Bullous pemphigoid"),
    (Observation("O1", "Patient", 1, "Where is the rash?", "Along my left ribs.", "stated"),)))
#: Opinions by persona: three say pneumonia (Doctor 2 inside a think block first, B01),
#: two bronchitis.
OPINIONS = {
    "Doctor 1": "Consolidation and rusty sputum point to it.\nDIAGNOSIS READY: Pneumonia",
    "Doctor 2": "<think>Could this be lupus pleuritis?</think>\nFever and consolidation.\n"
                "**DIAGNOSIS READY:** **Lobar pneumonia**",
    "Doctor 3": "The X-ray settles it.\nDIAGNOSIS READY: pneumonia.",
    "Doctor 4": "Cough for days, maybe only bronchial.\nDIAGNOSIS READY: Acute bronchitis",
    "Doctor 5": "Mild course.\nDIAGNOSIS READY: Acute bronchitis",
}
PERSONA = re.compile(r"(Doctor \d|Cardiologist|Internist), (?:give|weigh)")


def responder(summary_replies: list[str]):
    """Persona opinions from :data:`OPINIONS`; the summary and repair replies in order."""
    def reply(body: dict, index: int) -> str:
        text = body["messages"][-1]["content"]
        if text == REPAIR_ASK or text.startswith("The team's discussion"):
            done = sum(1 for m in body["messages"] if m["role"] == "assistant")
            return summary_replies[done]
        return OPINIONS.get(PERSONA.search(text).group(1), "DIAGNOSIS READY: Pneumonia")

    return reply


@pytest.fixture
def model(fake_server):  # noqa: F811 - the fixture imported above
    chat = OpenAIChatModel("fake-model", base_url=fake_server.base_url, max_retries=0,
                           config=GenerationConfig(temperature=0.2, seed=7))
    yield chat
    chat.close()


# field-bug-reports B08, B01, B05
def test_call_sequence_personas_then_summary(fake_server, model):  # noqa: F811
    """Five doctors (MedAgentSim's num_doctors) see the case and their own ask, in order,
    each with its own seed; the summary sees every opinion without think blocks
    and the proposals by count, not the case; a bold marker parses."""
    fake_server.responder = responder(["**DIAGNOSIS READY:** Lobar pneumonia"])
    decision = Discussion().decide(model, TRANSCRIPT, seed=11)
    bodies = fake_server.requests
    assert len(bodies) == 6
    for i, body in enumerate(bodies[:5], start=1):
        assert body["messages"] == [
            {"role": "system", "content": TEAM_SYSTEM},
            {"role": "user", "content": "# Case record\n" + TRANSCRIPT + "\n\n"
                                        + OPINION_ASK.format(persona=f"Doctor {i}")}]
        assert body["seed"] == call_seed(11, "discussion", 1, i)
        assert body["temperature"] == 0.2 and body["n"] == 1
    summary = bodies[5]["messages"][1]["content"]
    assert bodies[5]["seed"] == call_seed(11, "summary")
    assert len({b["seed"] for b in bodies}) == 6
    assert "lupus" not in summary and "<think>" not in summary and TRANSCRIPT not in summary
    assert ("Doctor 2: Fever and consolidation.\n**DIAGNOSIS READY:** **Lobar pneumonia**"
            in summary)
    assert "Proposals by count: Pneumonia (2), Acute bronchitis (2), Lobar pneumonia (1)" \
        in summary
    assert (decision.action, decision.answer, decision.abstained) == (
        "DIAGNOSIS READY: Lobar pneumonia", "Lobar pneumonia", False)
    assert [c["purpose"] for c in decision.calls] == ["discussion"] * 5 + ["summary"]
    assert [o["answer"] for o in decision.detail["opinions"][0]] == [
        "Pneumonia", "Lobar pneumonia", "pneumonia", "Acute bronchitis", "Acute bronchitis"]
    assert decision.detail["majority"] == "Pneumonia"


def test_rounds_show_previous_opinions(fake_server, model):  # noqa: F811
    """From round 2 each persona sees the previous round's opinions; 2 rounds of 2
    personas make 4 discussion calls and one summary."""
    fake_server.responder = responder(["DIAGNOSIS READY: Pneumonia"])
    strategy = Discussion(personas=["Cardiologist", "Internist"], rounds=2)
    decision = strategy.decide(model, TRANSCRIPT, seed=3)
    bodies = fake_server.requests
    assert [c["purpose"] for c in decision.calls] == ["discussion"] * 4 + ["summary"]
    assert [b["seed"] for b in bodies[:4]] == [call_seed(3, "discussion", r, i)
                                               for r in (1, 2) for i in (1, 2)]
    first = bodies[0]["messages"][1]["content"]
    assert "previous round" not in first and "Cardiologist, give your opinion" in first
    second = bodies[3]["messages"][1]["content"]
    assert second.startswith("# Case record\n" + TRANSCRIPT)
    assert "Opinions of the previous round:\nCardiologist: DIAGNOSIS READY: Pneumonia\n\n" \
           "Internist: DIAGNOSIS READY: Pneumonia\n\nInternist, weigh" in second


def test_candidate_letters_count_as_their_labels(fake_server, model):  # noqa: F811
    """On the EGIP evidence interface with K, a letter counts as its label."""
    def reply(body: dict, index: int) -> str:
        text = body["messages"][-1]["content"]
        if text.startswith("The team's discussion"):
            return "DIAGNOSIS READY: B"
        return "DIAGNOSIS READY: Herpes zoster" if "Doctor 1," in text else "DIAGNOSIS READY: B"

    fake_server.responder = reply
    decision = Discussion(n_doctors=3).decide(model, EVIDENCE, candidates=[
        "Allergic contact dermatitis", "Herpes zoster", "Bullous pemphigoid"])
    summary = fake_server.requests[-1]["messages"][1]["content"]
    assert "Proposals by count: Herpes zoster (3)" in summary
    assert EVIDENCE in fake_server.requests[0]["messages"][1]["content"]
    assert decision.action == "DIAGNOSIS READY: B"  # the environment's scorer reads letters


# field-bug-reports B04
def test_unreadable_summary_is_repaired_once(fake_server, model):  # noqa: F811
    """An empty summary gets one repair call holding the exchange so far."""
    fake_server.responder = responder(["", "DIAGNOSIS READY: Community-acquired pneumonia"])
    decision = Discussion(n_doctors=2).decide(model, TRANSCRIPT, seed=5)
    repair = fake_server.requests[-1]
    assert repair["messages"][-2:] == [{"role": "assistant", "content": ""},
                                       {"role": "user", "content": REPAIR_ASK}]
    assert repair["seed"] == call_seed(5, "repair")
    assert decision.answer == "Community-acquired pneumonia" and not decision.abstained
    assert [c["purpose"] for c in decision.calls][-2:] == ["summary", "repair"]
    assert decision.calls[-2]["flags"] == ["unparsed"]


def test_no_answer_when_the_repair_is_unreadable_too(fake_server, model):  # noqa: F811
    """Two unreadable replies (no marker, several lines) end with no answer: no usable
    answer came back, and the model never declined (not an abstention)."""
    vague = "The team weighed several options.\nNo single diagnosis was agreed."
    fake_server.responder = responder([vague, vague])
    decision = Discussion(n_doctors=2).decide(model, TRANSCRIPT)
    assert (decision.action, decision.answer, decision.abstained) == (
        NO_ANSWER_ACTION, None, False)
    assert decision.detail["outcome"] == "unparsed"
    assert len(fake_server.requests) == 4


def test_llm_doctor_runs_it_sync_and_async(fake_server, model):  # noqa: F811
    """Registered as "discussion": the LLM doctor's decision step runs it on a native
    transcript; sync and async give the same action and the same requests."""
    fake_server.responder = responder(["DIAGNOSIS READY: Pneumonia"] * 2)
    doctor = LLMDoctor(model, strategy="discussion")
    doctor.reset(seed=9)
    info = {"phase": "decide", "turn": 19, "candidates": None}
    action = doctor.act({"text": TRANSCRIPT}, info)
    sync_requests = list(fake_server.requests)
    doctor.reset(seed=9)
    assert asyncio.run(doctor.aact({"text": TRANSCRIPT}, info)) == action
    assert fake_server.requests[6:] == sync_requests
    assert action == "DIAGNOSIS READY: Pneumonia"
    assert [c["purpose"] for c in doctor.drain_calls()] == (["discussion"] * 5
                                                            + ["summary"]) * 2
    assert doctor.name == "llm-discussion"
    assert isinstance(make_strategy("Discussion"), Discussion)
    assert build_parser().parse_args(["run", "--strategy", "discussion"]).strategy == \
        "discussion"


@pytest.mark.parametrize("kwargs", [{"n_doctors": 0}, {"rounds": 6}, {"rounds": True},
                                    {"personas": ["A", "A"]}, {"personas": []},
                                    {"personas": "Doctor"}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        Discussion(**kwargs)


def test_medagentsim_native_decision_phase(fake_server, model):  # noqa: F811
    """On MedAgentSim-native's decision observation (transcript plus the discussion
    instruction) the doctor's last turn is the discussion, and its line is what the
    environment judges."""
    gym = pytest.importorskip("gymnasium")
    assert "MedAgentSim-Demo-v0" in gym.registry  # a broken registration fails here
    from clinenv.runs.episode import run_episode

    def reply(body: dict, index: int) -> str:
        if body["messages"][0]["content"] == TEAM_SYSTEM:
            return "Rusty sputum and consolidation.\nDIAGNOSIS READY: Lobar pneumonia"
        return "What else have you noticed?"  # the doctor's questions; the patient's words

    fake_server.responder = reply
    record = run_episode(gym.make("MedAgentSim-Demo-v0"),
                         LLMDoctor(model, strategy="discussion"), case_id="demo-01", seed=1)
    team = [b for b in fake_server.requests if b["messages"][0]["content"] == TEAM_SYSTEM]
    assert len(team) == 6
    first = team[0]["messages"][1]["content"]
    assert "# Consultation transcript\nDoctor: What else have you noticed?" in first
    assert "# Final discussion" in first and first.endswith(
        OPINION_ASK.format(persona="Doctor 1"))
    assert "DIAGNOSIS READY: Lobar pneumonia" in record["answer"]
    assert record["verdict"] == "correct"



@pytest.mark.parametrize(("summary", "action", "abstained"), [
    ("DIAGNOSIS READY: Undetermined", ABSTENTION_ACTION, True),  # an explicit decline
    ("DIAGNOSIS READY: <single diagnosis>", NO_ANSWER_ACTION, False),  # a placeholder
])
def test_summary_abstention_and_placeholder(fake_server, model, summary,  # noqa: F811
                                            action, abstained):
    """A summary that declines abstains; a placeholder summary is repaired once, then
    gives no answer (never an abstention, never a vote)."""
    fake_server.responder = responder([summary, summary])
    decision = Discussion(n_doctors=2).decide(model, TRANSCRIPT)
    assert (decision.action, decision.answer, decision.abstained) == (action, None, abstained)
    purposes = [c["purpose"] for c in decision.calls]
    assert purposes == ["discussion", "discussion", "summary"] + (
        [] if abstained else ["repair"])
