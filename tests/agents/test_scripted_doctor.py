"""The scripted doctor: its plan, its answer choice, its seeding and its arguments."""

from __future__ import annotations

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv.agents.scripted_doctor import (
    HISTORY_QUESTIONS,
    NO_ANSWER_GUESS,
    ScriptedDoctor,
    evidence_text,
    history_section,
)

Q = HISTORY_QUESTIONS
CANDIDATE_CASES = ["demo-11", "demo-12", "demo-13", "demo-14", "demo-15"]


def _episode(doctor, case_id, seed=0, **env_kwargs):
    """(actions, final info, last observation) of one demo episode."""
    env = gym.make("EGIP-Demo-v0", **env_kwargs)
    obs, info = env.reset(seed=seed, options={"case_id": case_id})
    doctor.reset(seed=seed)
    actions = []
    while True:
        actions.append(doctor.act(obs, info))
        obs, _reward, terminated, truncated, info = env.step(actions[-1])
        if terminated or truncated:
            return actions, info, obs


# ------------------------------------------------------------------------------ plan
def test_demo_01_action_sequence_is_pinned():
    actions, info, _ = _episode(ScriptedDoctor(), "demo-01")
    proposal = "DIAGNOSIS READY: lobar pneumonia"
    assert actions == [
        Q[0], Q[1], Q[2],
        *(f"REQUEST TEST: {x}" for x in ("PE1", "PE2", "PE3", "T1", "T2", "T3", "T4", "T5")),
        Q[3], Q[4],
        *[proposal] * 6,  # rounds 14..19: replaced by the clarification question
        proposal,  # the decision step
    ]
    assert info["phase"] == "done" and info["verdict"] == "correct"


def test_first_proposal_ends_acquisition_when_premature_diagnosis_decides():
    actions, info, _ = _episode(ScriptedDoctor(), "demo-01", premature_diagnosis="decide")
    assert actions[:13] == _episode(ScriptedDoctor(), "demo-01")[0][:13]
    assert actions[13:] == ["DIAGNOSIS READY: lobar pneumonia"] * 2
    assert info["verdict"] == "correct"


def test_plan_without_env_menu_shorter_than_budget():
    """Questions, exams until the menu is empty, the other questions, then a proposal."""
    doctor = ScriptedDoctor(n_questions=2, exam_budget=5)
    menu = [{"id": "PE1", "name": "Vital Signs"}, {"id": "T1", "name": "Blood Count"}]
    view = "# Task\nEvaluate.\n\n# Your turn\nRound 1 of 19."
    actions = []
    for _ in range(9):
        actions.append(doctor.act({"text": view}, {"phase": "acquire", "menu": menu}))
        menu = [m for m in menu if f"REQUEST TEST: {m['id']}" != actions[-1]]
    assert actions == [Q[0], Q[1], "REQUEST TEST: PE1", "REQUEST TEST: T1", Q[2], Q[3], Q[4],
                       f"DIAGNOSIS READY: {NO_ANSWER_GUESS}",
                       f"DIAGNOSIS READY: {NO_ANSWER_GUESS}"]


# --------------------------------------------------------------------- answer choice
EVIDENCE = """# Objective (S0)
Evaluate the patient with a painful rash.

# Candidate labels (hypotheses, not findings)
A. Allergic contact dermatitis
B. Herpes zoster
C. Bullous impetigo

# Acquired observations
[O1] Patient, asked "What brings you in today?": A burning band of pain on my left side.
[O2] Measurement Skin Examination (PE1):
    Grouped vesicles on an erythematous base in a left T6 dermatome; no impetigo crusts.
[O3] Measurement Tzanck Smear (T1):
    Multinucleated giant cells; PCR positive for varicella zoster virus (herpes).

# Instructions
Base your answer only on the acquired evidence above.
You may answer with a candidate's letter or its text."""
CANDIDATES = ["Allergic contact dermatitis", "Herpes zoster", "Bullous impetigo"]


def test_candidate_choice_on_hand_written_evidence():
    doctor = ScriptedDoctor()
    info = {"phase": "decide", "candidates": CANDIDATES}
    assert doctor.choose_answer(EVIDENCE, info) == "Herpes zoster"
    assert doctor.act({"text": EVIDENCE}, info) == "DIAGNOSIS READY: Herpes zoster"
    # plain evidence text without headers works too; ties go to the earlier candidate
    assert doctor.choose_answer("bullous lesions, impetigo", info) == "Bullous impetigo"
    assert doctor.choose_answer("no findings", info) == CANDIDATES[0]
    # without candidates: the diagnosis a recorded result names
    named = "[O1] Measurement Chest X-Ray (T4):\n    Consolidation consistent with lobar " \
            "pneumonia; no effusion."
    assert doctor.choose_answer(named, {"candidates": None}) == "lobar pneumonia"
    assert doctor.choose_answer("fever", {"candidates": None}) == NO_ANSWER_GUESS


VIEW = """# Task
Evaluate the patient with a painful rash.

# Candidate labels (hypotheses, not findings)
A. Systemic lupus erythematosus
B. Herpes zoster

# Interaction so far
[round 1]
Doctor: What brings you in today?
Patient: A burning band of pain on my left side.
[round 2]
Doctor: REQUEST TEST: T1
Examiner [T1 Tzanck Smear]:
  PCR positive for varicella zoster virus; herpes confirmed.

# Available examinations (results hidden until requested)
T2  Antinuclear antibodies (lupus, systemic erythematosus panel)

# Your turn
Round 3 of 19."""


def test_candidate_named_only_in_candidate_list_or_menu_does_not_win():
    # "Systemic lupus erythematosus" occurs in full in the candidate list and the menu,
    # never in the observations: only "Herpes zoster" is supported by the history.
    assert "lupus" not in history_section(VIEW) and "zoster" in history_section(VIEW)
    assert "Candidate" not in evidence_text(VIEW) and "Available" not in evidence_text(VIEW)
    info = {"phase": "acquire", "menu": [], "candidates": ["Systemic lupus erythematosus",
                                                           "Herpes zoster"]}
    doctor = ScriptedDoctor(n_questions=len(Q), exam_budget=0)
    actions = [doctor.act({"text": VIEW}, info) for _ in range(len(Q) + 1)]
    assert actions[-1] == "DIAGNOSIS READY: Herpes zoster"
    assert doctor.choose_answer(VIEW, info) == "Herpes zoster"
    # a view with no history yet holds no evidence at all
    start = VIEW.split("\n# Interaction so far")[0] + VIEW[VIEW.index("\n\n# Available"):]
    assert history_section(start) == evidence_text(start) == ""
    assert doctor.choose_answer(start, info) == "Systemic lupus erythematosus"  # tie: first


def test_history_section_of_a_real_view_holds_only_the_interaction():
    env = gym.make("EGIP-Demo-v0")
    obs, info = env.reset(seed=0, options={"case_id": "demo-11"})
    doctor = ScriptedDoctor()
    for _ in range(13):  # questions and exams: the next action is the proposal
        obs, _r, _term, _trunc, info = env.step(doctor.act(obs, info))
    section = history_section(obs["text"])
    assert section.strip().startswith("[round 1]\nDoctor: " + Q[0])
    assert "Patient: " in section and "Examiner [" in section
    for label in info["candidates"]:
        assert f". {label}" in obs["text"] and f". {label}" not in section
    assert info["menu"] and "# Available examinations" in obs["text"]
    for entry in info["menu"]:
        assert f"{entry['id']}  {entry['name']}" not in section
    assert "# " not in section  # no other section header inside


@pytest.mark.parametrize("case_id", CANDIDATE_CASES)
def test_proposal_is_the_same_in_view_and_delta_format(case_id):
    view, _, _ = _episode(ScriptedDoctor(), case_id)
    delta, _, _ = _episode(ScriptedDoctor(), case_id, observation_format="delta")
    assert view == delta
    assert view[13].startswith("DIAGNOSIS READY: ")


# ------------------------------------------------------------------------- seeding
def test_exploration_is_reproducible_per_seed_and_differs_across_seeds():
    runs = {seed: _episode(ScriptedDoctor(exploration=0.5), "demo-13", seed=seed)[0]
            for seed in range(6)}
    for seed in (0, 3):
        assert _episode(ScriptedDoctor(exploration=0.5), "demo-13", seed=seed)[0] == runs[seed]
    assert len({tuple(a) for a in runs.values()}) > 1
    for actions in runs.values():  # the plan's shape does not depend on the draws
        assert actions[:3] == list(Q[:3]) and actions[11:13] == list(Q[3:])
        assert all(a.startswith("REQUEST TEST: ") for a in actions[3:11])
    # reset(seed) pins the draws of one doctor object reused across episodes
    doctor = ScriptedDoctor(exploration=0.5)
    assert _episode(doctor, "demo-13", seed=4)[0] == runs[4]
    assert _episode(doctor, "demo-13", seed=4)[0] == runs[4]


def test_exploration_zero_is_deterministic_and_named():
    assert ScriptedDoctor().name == "scripted"
    assert ScriptedDoctor(exploration=0.25).name == "scripted-explore0.25"
    seeds = {tuple(_episode(ScriptedDoctor(), "demo-13", seed=s)[0]) for s in (0, 1, 2)}
    assert len(seeds) == 1


# ----------------------------------------------------------------------- arguments
@pytest.mark.parametrize("kwargs, message", [
    ({"n_questions": -1}, "n_questions must be in 0..5"),
    ({"n_questions": len(Q) + 1}, "n_questions must be in 0..5"),
    ({"n_questions": 2.5}, "n_questions must be an integer"),
    ({"exam_budget": -1}, "exam_budget must be >= 0"),
    ({"exam_budget": True}, "exam_budget must be an integer"),
    ({"exploration": -0.1}, r"exploration must be in \[0, 1\]"),
    ({"exploration": 1.5}, r"exploration must be in \[0, 1\]"),
    ({"exploration": float("nan")}, r"exploration must be in \[0, 1\]"),
    ({"exploration": "0.5"}, "exploration must be a number"),
])
def test_argument_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ScriptedDoctor(**kwargs)


def test_argument_bounds_are_accepted():
    for kwargs in ({"n_questions": 0}, {"n_questions": len(Q)}, {"exam_budget": 0},
                   {"exploration": 0}, {"exploration": 1}):
        ScriptedDoctor(**kwargs)
