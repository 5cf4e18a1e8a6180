"""The scripted doctor without a menu: by-name requests, native views, its own diagnosis.

Episodes run on the bundled demo set. demo-01 (Y "Lobar pneumonia") records vital signs
(PE1) and, under ``Imaging``, a chest X-ray whose findings read "... consistent with
lobar pneumonia ..." (T4); it holds no biopsy and no ultrasound.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv.agents.evidence_reading import last_native_turn, native_evidence
from clinenv.agents.scripted_doctor import (
    EXAM_NAMES,
    HISTORY_QUESTIONS,
    NO_ANSWER_GUESS,
    ScriptedDoctor,
    evidence_text,
)
from clinenv.protocol.native_render import DISCUSSION_INSTRUCTIONS

Q = HISTORY_QUESTIONS
BY_NAME = [f"REQUEST TEST: {name}" for name in EXAM_NAMES]
PROPOSAL = "DIAGNOSIS READY: lobar pneumonia"


def _episode(env_id, doctor, case_id="demo-01", seed=0, **env_kwargs):
    """(actions, final info, env) of one episode."""
    env = gym.make(env_id, **env_kwargs)
    obs, info = env.reset(seed=seed, options={"case_id": case_id})
    doctor.reset(seed=seed)
    actions = []
    while True:
        actions.append(doctor.act(obs, info))
        obs, _reward, terminated, truncated, info = env.step(actions[-1])
        if terminated or truncated:
            return actions, info, env.unwrapped


@pytest.mark.parametrize("env_id", ["AgentClinic-Demo-v0", "MedAgentSim-Demo-v0"])
def test_native_plan_requests_by_name_and_ends_with_its_own_diagnosis(env_id):
    """3 questions, the first 8 names, 2 questions, then the proposal ends the episode
    (turn 14 of 20); the answer is the chest X-ray's "consistent with" phrase."""
    actions, info, env = _episode(env_id, ScriptedDoctor())
    assert actions == [Q[0], Q[1], Q[2], *BY_NAME[:8], Q[3], Q[4], PROPOSAL]
    assert (info["verdict"], info["end_reason"], info["turn"]) == ("correct", "diagnosis", 14)
    measured = [e["recorded_value"] for e in env.episode_record()["events"]
                if e["source"] == "measurement"]
    assert len(measured) == 8
    assert measured[1].startswith("RESULTS: Chest X-Ray: Findings: Dense right lower lobe")
    assert measured[4] == "RESULTS: NORMAL READINGS"  # "Biopsy": not in demo-01's records


def test_native_view_and_delta_give_the_same_actions():
    view, _, _ = _episode("AgentClinic-Demo-v0", ScriptedDoctor())
    delta, info, _ = _episode("AgentClinic-Demo-v0", ScriptedDoctor(),
                              observation_format="delta")
    assert view == delta and info["verdict"] == "correct"


def test_agentclinic_last_turn_carries_the_diagnosis_when_the_plan_is_longer():
    """5 questions + 17 names exceed the 20 turns: turn 20 ("Turn 20 of 20.") is the
    proposal, so the episode never ends unfinished (W10)."""
    doctor = ScriptedDoctor(n_questions=5, exam_budget=len(EXAM_NAMES))
    actions, info, _ = _episode("AgentClinic-Demo-v0", doctor)
    assert actions == [*Q, *BY_NAME[:14], PROPOSAL]
    assert (info["verdict"], info["end_reason"], info["turn"]) == ("correct", "diagnosis", 20)


def test_medagentsim_discussion_turn_is_answered_from_the_transcript():
    """After 19 acquisition turns the decision observation is the transcript plus the
    discussion instruction; the doctor answers from its Patient/Measurement lines."""
    doctor = ScriptedDoctor(n_questions=5, exam_budget=len(EXAM_NAMES))
    actions, info, _ = _episode("MedAgentSim-Demo-v0", doctor)
    assert actions == [*Q, *BY_NAME[:14], PROPOSAL]
    assert (info["verdict"], info["turn"]) == ("correct", 20)


def test_egip_without_menu_validates_the_names_and_decides_from_e_t():
    """EGIP "w/o menu": the names are validated against catalog A (record lookup O);
    unrecorded ones are "not recorded", never normal; proposals during acquisition are
    replaced by clarification questions and the decision step answers from e_T."""
    actions, info, env = _episode("EGIP-Demo-v0", ScriptedDoctor(), preset="egip-no-menu")
    assert actions[:14] == [Q[0], Q[1], Q[2], *BY_NAME[:8], Q[3], Q[4], PROPOSAL]
    assert actions[14:] == [PROPOSAL] * 6 and info["verdict"] == "correct"
    looked_up = [(e["request"], e["exam_id"], e["result_availability"])
                 for e in env.episode_record()["events"] if e["source"] == "measurement"]
    assert looked_up[:3] == [("Vital signs", "PE1", "recorded"), ("Imaging", "T4", "recorded"),
                             ("Complete blood count", "T1", "recorded")]
    assert ("Biopsy", None, "not_recorded") in looked_up  # never "normal" (W1)


def test_menu_mode_is_kept_when_the_menu_runs_out():
    """The mode is fixed at the first acquisition step: an EGIP menu that empties later
    does not switch the doctor to by-name requests."""
    doctor = ScriptedDoctor(n_questions=0, exam_budget=3)
    view = "# Task\nEvaluate.\n\n# Your turn\nRound 1 of 19."
    first = doctor.act({"text": view}, {"phase": "acquire",
                                        "menu": [{"id": "PE1", "name": "Vital Signs"}]})
    second = doctor.act({"text": view}, {"phase": "acquire", "menu": []})
    assert (first, second, doctor.by_name) == ("REQUEST TEST: PE1", Q[0], False)
    fresh = ScriptedDoctor(n_questions=0, exam_budget=1)
    assert fresh.act({"text": view}, {"phase": "acquire", "menu": []}) == BY_NAME[0]
    assert fresh.by_name is True


def test_guidance_names_the_action_without_a_menu():
    doctor = ScriptedDoctor()
    info = {"phase": "acquire", "menu": [], "protocol": "agentclinic",
            "guidance": {"action": {"id": "T9", "name": "Sputum culture"}}}
    assert doctor.act({"text": "# Task\nX"}, info) == "REQUEST TEST: Sputum culture"


def test_exploration_draws_names_reproducibly():
    runs = [_episode("AgentClinic-Demo-v0", ScriptedDoctor(exploration=0.5), seed=s)[0]
            for s in (0, 0, 1, 2, 3)]
    assert runs[0] == runs[1]
    assert len({tuple(r) for r in runs}) > 1
    for actions in runs:
        requests = actions[3:11]
        assert len(set(requests)) == 8 and set(requests) <= set(BY_NAME)


# ------------------------------------------------------------------- evidence reading
NATIVE_VIEW = """# Task
Evaluate the patient with knee swelling.

# Interaction so far
Doctor: Could this be consistent with gout?
Patient: My knee is hot and swollen.
Doctor: REQUEST TEST: Joint aspiration
Measurement: RESULTS: Joint aspiration: rhomboid positively birefringent crystals,
consistent with pseudogout.
Interface: No utterance was found, consistent with silence.
Doctor: REQUEST TEST: X-ray knee

# Latest response
RESULTS: X-ray knee: chondrocalcinosis.
This is your final turn: state your diagnosis now.

# Your turn
Turn 20 of 20. Speak to the patient, request tests with REQUEST TEST: ..."""


def test_native_evidence_keeps_patient_and_measurement_lines_only():
    evidence = native_evidence(NATIVE_VIEW)
    assert evidence == ("Patient: My knee is hot and swollen.\n"
                        "Measurement: RESULTS: Joint aspiration: rhomboid positively "
                        "birefringent crystals,\nconsistent with pseudogout.\n"
                        "RESULTS: X-ray knee: chondrocalcinosis.\n"
                        "This is your final turn: state your diagnosis now.")
    assert evidence_text(NATIVE_VIEW) == evidence
    assert "gout?" not in evidence and "silence" not in evidence
    assert last_native_turn(NATIVE_VIEW)
    assert not last_native_turn(NATIVE_VIEW.replace("Turn 20 of 20", "Turn 19 of 20"))
    doctor = ScriptedDoctor()
    info = {"phase": "acquire", "menu": [], "protocol": "agentclinic", "candidates": None}
    assert doctor.act({"text": NATIVE_VIEW}, info) == "DIAGNOSIS READY: pseudogout"


def test_native_evidence_of_a_decision_observation_and_of_a_fresh_view():
    decision = ("# Task\nX\n\n# Consultation transcript\nDoctor: consistent with flu?\n"
                "Patient: I have a rash, consistent with measles says my mother.\n\n"
                f"# Final discussion\n{DISCUSSION_INSTRUCTIONS}")
    assert native_evidence(decision) == (
        "Patient: I have a rash, consistent with measles says my mother.")
    doctor = ScriptedDoctor()
    info = {"phase": "decide", "protocol": "medagentsim", "candidates": None}
    assert doctor.act({"text": decision}, info) == (
        "DIAGNOSIS READY: measles says my mother")
    fresh = ("# Task\nX\n\n# Latest response\n(none yet: you speak first)\n\n# Your turn\n"
             "Turn 1 of 20. ...")
    assert native_evidence(fresh) == ""
    assert doctor.choose_answer(fresh, {"candidates": None}) == NO_ANSWER_GUESS
