"""The clinician responder's native seats (measurement agent, native doctor, moderator,
MedAgentSim's discussion) over a real :class:`FakeChatServer` on 127.0.0.1.

Expected values come from the bundled demo records: demo-01 (Y "Lobar pneumonia")
records, under ``Imaging``, a chest X-ray whose findings read "Dense right lower lobe
consolidation with air bronchograms, consistent with lobar pneumonia; no pleural
effusion." and holds no bone-marrow biopsy.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.llm_doctor import LLMDoctor
from clinenv.agents.measurement_agent import LLMMeasurementAgent
from clinenv.agents.prompts import (
    AGENTCLINIC_DOCTOR_SYSTEM,
    JUDGE_SYSTEM,
    JUDGE_USER,
    MEASUREMENT_RULE_NORMAL,
    MEASUREMENT_SYSTEM,
)
from clinenv.agents.scripted_doctor import EXAM_NAMES
from clinenv.agents.terminal_discussion import SUMMARY_ASK, TEAM_SYSTEM
from clinenv.env.case_pool import CasePool
from clinenv.llm.openai_backend import OpenAIChatModel
from clinenv.protocol.measurement_view import MeasurementView, exam_information
from clinenv.testing.fake_native import OPENING_QUESTION, measurement_reply
from clinenv.testing.fake_responders import clinician_responder, role_of
from clinenv.testing.fake_server import FakeChatServer

CXR = ("Chest X-Ray: Findings: Dense right lower lobe consolidation with air "
       "bronchograms, consistent with lobar pneumonia; no pleural effusion.")


@pytest.fixture
def clinician():
    """``(server, model)``: the clinician responder behind a real local server."""
    with FakeChatServer("clinician") as server:
        with OpenAIChatModel("fake-model", base_url=server.base_url, max_retries=0) as model:
            yield server, model


def _body(system: str, user: str) -> dict:
    return {"messages": [{"role": "system", "content": system},
                         {"role": "user", "content": user}]}


def test_role_of_knows_the_measurement_agent_and_the_discussion_team():
    system = MEASUREMENT_SYSTEM.format(missing_rule=MEASUREMENT_RULE_NORMAL, records="{}")
    assert role_of(_body(system, "x")) == "measurement"
    assert role_of(_body(TEAM_SYSTEM, "x")) == "discussion"


@pytest.mark.parametrize(("request_text", "normal", "reply"), [
    ("REQUEST TEST: Chest X-Ray, please", True, f"RESULTS: {CXR}"),
    ("REQUEST TEST: Bone marrow biopsy", True, "RESULTS: NORMAL READINGS"),
    ("REQUEST TEST: Bone marrow biopsy", False, "RESULTS: NOT RECORDED"),
])
def test_measurement_agent_answers_from_the_records_in_its_prompt(clinician, request_text,
                                                                  normal, reply):
    """The LLM measurement agent's exact messages go over HTTP; the reply names the
    requested record, else the prompt's rule for missing data (W1)."""
    server, model = clinician
    case = CasePool.get("demo").case("demo-01")
    view = MeasurementView(exam_information(case), case.records, request_text,
                           normal_readings=normal)
    assert LLMMeasurementAgent(model).measure(view) == reply
    (body,) = server.requests
    assert exam_information(case) in body["messages"][0]["content"]


def test_measurement_agent_on_free_text_records():
    """NEJM-style free text: the items sharing a 4+-letter word with the request."""
    records = ("Laboratory testing results: - Peripheral eosinophilia present - Tests for "
               "cryptococcus: Negative\nImaging: 1. CT scan of the neck: cervical "
               "lymphadenopathy 2. Chest radiograph: clear")
    system = MEASUREMENT_SYSTEM.format(missing_rule=MEASUREMENT_RULE_NORMAL, records=records)
    ask = "What you have heard so far:\nDoctor: hi\n\nThe doctor's request: "
    assert measurement_reply(system, ask + "REQUEST TEST: neck CT scan") == (
        "RESULTS: CT scan of the neck: cervical lymphadenopathy")
    assert measurement_reply(system, ask + "REQUEST TEST: cryptococcus antigen") == (
        "RESULTS: Tests for cryptococcus: Negative")
    assert measurement_reply(system, ask + "REQUEST TEST: Urine test") == (
        "RESULTS: NORMAL READINGS")


@pytest.mark.parametrize(("answer", "verdict"), [
    ("Given the X-ray, DIAGNOSIS READY: Lobar pneumonia", "Yes"),
    ("DIAGNOSIS READY: lobar pneumonia.\nI am confident.", "Yes"),
    ("DIAGNOSIS READY: Pneumonia", "No"),
])
def test_native_moderator_reads_the_diagnosis_in_the_whole_utterance(answer, verdict):
    body = _body(JUDGE_SYSTEM, JUDGE_USER.format(target="Lobar pneumonia", answer=answer))
    assert clinician_responder(body, 0) == verdict


def test_native_doctor_on_the_last_turn_diagnoses_at_once():
    view = ("# Task\nX\n\n# Interaction so far\nDoctor: Hi\nMeasurement: RESULTS: a "
            "rash consistent with measles.\n\n# Latest response\nok\nThis is your final "
            "turn: state your diagnosis now.\n\n# Your turn\nTurn 20 of 20. Speak ...")
    system = AGENTCLINIC_DOCTOR_SYSTEM.format(budget="at most 20")
    assert clinician_responder(_body(system, view), 0) == "DIAGNOSIS READY: measles"


@pytest.mark.parametrize("observation_format", ["view", "delta"])
def test_agentclinic_episode_with_every_seat_played_by_the_clinician(clinician,
                                                                     observation_format):
    """Doctor (agentclinic prompt), patient, measurement agent and moderator over one
    server: the opening question, the first 8 exam names, then the diagnosis the chest
    X-ray names, judged correct on the whole utterance."""
    server, model = clinician
    env = gym.make("AgentClinic-Demo-v0", observation_format=observation_format,
                   patient="llm", patient_model=model, examiner="llm", examiner_model=model,
                   judge="llm", judge_model=model)
    doctor = LLMDoctor(model, prompt="agentclinic", max_questions=20,
                       observation_format=observation_format)
    obs, info = env.reset(seed=0, options={"case_id": "demo-01"})
    doctor.reset(seed=0)
    actions = []
    while True:
        actions.append(doctor.act(obs, info))
        obs, _, terminated, truncated, info = env.step(actions[-1])
        if terminated or truncated:
            break
    assert actions == [OPENING_QUESTION, *(f"REQUEST TEST: {n}" for n in EXAM_NAMES[:8]),
                       "DIAGNOSIS READY: lobar pneumonia"]
    assert (info["verdict"], info["judge_verdict"], info["end_reason"]) == (
        "correct", "correct", "diagnosis")
    events = env.unwrapped.episode_record()["events"]
    measured = [e["recorded_value"] for e in events if e["source"] == "measurement"]
    assert measured[1] == f"RESULTS: {CXR}"  # "Imaging": the group's one record
    assert measured[4] == "RESULTS: NORMAL READINGS"  # "Biopsy": not recorded (W1)
    replies = [e["reply"] for e in events if e["source"] == "patient"]
    assert replies and replies[0] != OPENING_QUESTION
    roles = {role_of(b) for b in server.requests}
    assert roles == {"doctor", "patient", "measurement", "judge"}


def test_medagentsim_discussion_team_and_summary(clinician):
    """The "discussion" strategy on MedAgentSim's decision observation: each opinion
    names the diagnosis in the transcript's measurement lines; the summary follows the
    proposals by count."""
    _, model = clinician
    env = gym.make("MedAgentSim-Demo-v0")
    obs, info = env.reset(seed=0, options={"case_id": "demo-01"})
    for action in ["REQUEST TEST: Chest X-Ray"] + ["Anything else?"] * 18:
        obs, _, _, _, info = env.step(action)
    assert info["phase"] == "decide"
    doctor = LLMDoctor(model, strategy="discussion", prompt="agentclinic")
    action = doctor.act(obs, info)
    assert action == "DIAGNOSIS READY: lobar pneumonia"
    detail = doctor.last_decision.detail
    assert [o["answer"] for o in detail["opinions"][0]] == ["lobar pneumonia"] * 5
    summary = SUMMARY_ASK.format(opinions="Doctor 1: x", counts="Gout (3), Pseudogout (2)")
    assert clinician_responder(_body(TEAM_SYSTEM, summary), 0) == "DIAGNOSIS READY: Gout"
