"""The privileged teacher: its rule, its settings, and that its own actions
never hold a word of Y that the opening does not.

Expected values are written by hand from the demo records (``clinenv/datasets/demo``) or
computed here independently of :mod:`clinenv.agents.teacher_doctor`: which questions the
patient answers is asked of a fresh environment, and the leak check is a plain token
comparison written in this file.
"""
# issue 29 §2

from __future__ import annotations

import re

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.scripted_doctor import HISTORY_QUESTIONS, ScriptedDoctor
from clinenv.agents.teacher_doctor import (
    TEACHER_ENV_SETTINGS,
    TeacherDoctor,
    leaked_words,
    shares_content,
)
from clinenv.cases import Case, Records, Target
from clinenv.runlog import RunContext, policy_is_privileged
from clinenv.runs.episode import run_episode
from clinenv.testing.data import MEDQA_FILE, NEJM_FILE, SHARED_DATA, needs_shared_data
from clinenv.wrappers.reask import BeforeAnswerWrapper

TOOL_VIEW = dict(TEACHER_ENV_SETTINGS)
NOT_SURE_LINE = "Patient: I'm not sure."


def teacher_env(env_id: str, **kwargs):
    data = {} if env_id == "EGIP-Demo-v0" else {"data_dir": str(SHARED_DATA)}
    return gym.make(env_id, **TOOL_VIEW, **data, **kwargs)


def play(env, doctor, case_id):
    """``(opening text, doctor actions, record)`` of one episode."""
    opening = env.reset(seed=0, options={"case_id": case_id})[0]["text"]
    record = run_episode(env, doctor, case_id=case_id, seed=0)
    actions = [e["text"] for e in record["events"] if e["source"] == "doctor"]
    return opening, actions, record


# ------------------------------------------------------------------ the rule, by hand
def test_pinned_demo_plans():
    """demo-01 (Y "Lobar pneumonia"): P has no family history, so the family question is
    not asked; the chest X-ray (T4) reads "consistent with lobar pneumonia", so it comes
    first, then the other recorded exams in menu order (the sputum culture's Gram stain
    is recorded though its culture is pending). demo-02 (Y "Acute inferior ST-elevation
    myocardial infarction"): the ECG (T1: "ST-segment elevation") and the echocardiogram
    (T7: "inferior wall") first, in menu order; the lipid panel (T5) is "Pending", not
    recorded, so never ordered; all five questions have an answer in P."""
    env = teacher_env("EGIP-Demo-v0")
    teacher = TeacherDoctor(env.unwrapped.pool)
    _, actions, record = play(env, teacher, "demo-01")
    assert actions == [*HISTORY_QUESTIONS[:4], *(f"REQUEST TEST: {x}" for x in (
        "T4", "PE1", "PE2", "PE3", "T1", "T2", "T3", "T5", "T6")),
        "DIAGNOSIS READY: Lobar pneumonia", "DIAGNOSIS READY: Lobar pneumonia"]
    # 13 acquisition actions, and the early diagnosis uses a round of its own
    assert record["correct"] and record["turns"] == 14 and record["stopped_early"]
    _, actions, record = play(env, teacher, "demo-02")
    y = "Acute inferior ST-elevation myocardial infarction"
    assert actions == [*HISTORY_QUESTIONS, *(f"REQUEST TEST: {x}" for x in (
        "T1", "T7", "PE1", "PE2", "PE3", "PE4", "T2", "T3", "T4", "T6")),
        f"DIAGNOSIS READY: {y}", f"DIAGNOSIS READY: {y}"]
    assert record["correct"] and record["n_exams_requested"] == 10


def test_round_budget_and_question_cap():
    """T = 6 on demo-02: five questions and one exam (the ECG, first by the rule) use the
    six rounds, then the decision phase comes by itself and Y is given once; k = 2 leaves
    four rounds to exams."""
    env = teacher_env("EGIP-Demo-v0", acquisition_rounds=6)
    _, actions, record = play(env, TeacherDoctor(env.unwrapped.pool), "demo-02")
    assert actions[:6] == [*HISTORY_QUESTIONS, "REQUEST TEST: T1"]
    assert len(actions) == 7 and actions[6].startswith("DIAGNOSIS READY: Acute inferior")
    assert record["turns"] == 6 and not record["stopped_early"] and record["correct"]
    _, actions, _ = play(env, TeacherDoctor(env.unwrapped.pool, max_questions=2), "demo-02")
    assert actions[:6] == [*HISTORY_QUESTIONS[:2], *(f"REQUEST TEST: {x}" for x in (
        "T1", "T7", "PE1", "PE2"))]


def answered_questions(env_id: str, case_id: str) -> list[str]:
    """The default questions a fresh environment's patient answers with a fact (each asked
    alone at the first round)."""
    env = teacher_env(env_id)
    kept = []
    for question in HISTORY_QUESTIONS:
        env.reset(seed=0, options={"case_id": case_id})
        text = env.step(question)[0]["text"]
        if not text.startswith(NOT_SURE_LINE) and not text.startswith(
                "Patient: As the parent: I'm not sure."):
            kept.append(question)
    return kept


def recorded_exams(env_id: str, case_id: str, opening: str) -> list[str]:
    """The menu ids of the opening whose result a fresh environment (with rounds to
    spare) gives as recorded."""
    env = teacher_env(env_id, acquisition_rounds=200)
    env.reset(seed=0, options={"case_id": case_id})
    found = []
    for exam in re.findall(r"^((?:PE|T)\d+)  ", opening, re.MULTILINE):
        info = env.step(f"REQUEST TEST: {exam}")[4]
        if [o.get("availability") for o in info["new_observations"]] == ["recorded"]:
            found.append(exam)
    return found


@pytest.mark.parametrize("env_id", [
    "EGIP-Demo-v0",
    pytest.param("EGIP-MedQA-v0", marks=needs_shared_data(MEDQA_FILE)),
    pytest.param("EGIP-NEJM-v0", marks=needs_shared_data(NEJM_FILE)),
])
def test_every_case_follows_the_rule(env_id):
    """On every case: the questions are those the patient answers (asked of a fresh
    environment), each exam result is recorded and ordered once, every recorded exam is
    ordered when the rounds allow, and Y is the scored answer."""
    env = teacher_env(env_id)
    teacher = TeacherDoctor(env.unwrapped.pool)
    rounds = env.unwrapped.config.acquisition_rounds
    n_correct = 0
    for case in env.unwrapped.pool.cases:
        opening, actions, record = play(env, teacher, case.case_id)
        asked = [a for a in actions if not a.startswith(("REQUEST TEST:", "DIAGNOSIS"))]
        assert asked == answered_questions(env_id, case.case_id), case.case_id
        results = [e for e in record["events"] if e["source"] == "measurement"]
        assert all(e["result_availability"] == "recorded" for e in results), case.case_id
        ids = [e["exam_id"] for e in results]
        assert len(ids) == len(set(ids))
        recorded = recorded_exams(env_id, case.case_id, opening)
        assert set(ids) <= set(recorded)
        assert len(ids) == min(len(recorded), rounds - len(asked)), case.case_id
        n_correct += record["correct"]
    assert n_correct == len(env.unwrapped.pool.cases)


# ------------------------------------------------------------------ no word of Y leaks
_PLAIN_SKIP = {"the", "and", "for", "with", "from"}


def plain_leaks(action: str, target: str, opening: str) -> set[str]:
    """Words of Y (tokens of three letters or more) in the action and not in the opening:
    a plain token comparison, written here independently of the teacher's check."""
    def tokens(text):
        return set(re.findall(r"[a-z0-9]+", text.lower()))
    words = {w for w in tokens(target) if len(w) >= 3 and w not in _PLAIN_SKIP}
    return (words & tokens(action)) - tokens(opening)


@pytest.mark.parametrize("env_id", [
    "EGIP-Demo-v0",
    pytest.param("EGIP-MedQA-v0", marks=needs_shared_data(MEDQA_FILE)),
    pytest.param("EGIP-NEJM-v0", marks=needs_shared_data(NEJM_FILE)),
])
def test_no_action_holds_a_word_of_y_the_opening_lacks(env_id):
    """Every question and exam request of every case; on NEJM the opening lists the
    candidates K (Y among them), so the check is also made against the opening without
    its candidate block, which Y's words then are not in."""
    env = teacher_env(env_id)
    teacher = TeacherDoctor(env.unwrapped.pool)
    n_actions = 0
    for case in env.unwrapped.pool.cases:
        opening, actions, _ = play(env, teacher, case.case_id)
        own = [a for a in actions if not a.startswith("DIAGNOSIS READY:")]
        n_actions += len(own)
        target = case.target.text
        openings = [opening]
        if case.candidates:
            assert all(c in opening for c in case.candidates)
            without = re.sub(r"# Candidate.*?(?=\n# )", "", opening, flags=re.DOTALL)
            assert case.candidates[0] not in without  # the block was removed
            openings.append(without)
        for text in openings:
            for action in own:
                assert not plain_leaks(action, target, text), (case.case_id, action)
    assert n_actions > 2 * len(env.unwrapped.pool.cases)


def synthetic_case(target: str, *, objective: str = "Evaluate the patient with tremor.",
                   tests: dict | None = None) -> Case:
    return Case(case_id="syn-1", dataset="demo", objective=objective,
                patient={"History": "Shaking hands since yesterday.",
                         "Social_History": "Drinks a bottle of wine a day; stopped two "
                                           "days ago."},
                records=Records(physical_exam={"Vital_Signs": "Heart rate 118 bpm."},
                                tests=tests or {"Liver_Function_Tests": "GGT 240 U/L."}),
                target=Target(text=target))


def test_a_question_or_request_that_would_leak_is_dropped():
    """Y "Alcohol withdrawal": the social-history question names alcohol, which the
    opening does not, so it is left out (and listed in ``dropped``); with "alcohol" in
    the opening it is asked. A Y naming an exam's id (``T1``) drops that request."""
    case = synthetic_case("Alcohol withdrawal")
    teacher = TeacherDoctor([case])
    opening = "# Task\nEvaluate the patient with tremor.\n\nRound 1 of 19. ..."
    plan = teacher.plan(case, opening)
    social = HISTORY_QUESTIONS[3]
    assert "alcohol" in social.lower() and social not in plan.questions
    assert social in plan.dropped
    assert plan.questions[0] == HISTORY_QUESTIONS[0]
    told = teacher.plan(case, opening.replace("tremor", "tremor after stopping alcohol"))
    assert social in told.questions and not told.dropped
    t1 = synthetic_case("T1 toxicosis", tests={"Free_T3": "Raised.", "TSH": "Suppressed."})
    plan = TeacherDoctor([t1]).plan(t1, opening)
    assert "REQUEST TEST: T1" in plan.dropped and "T1" not in plan.exams
    assert "T2" in plan.exams


def test_the_leak_and_overlap_checks():
    assert leaked_words("Do you drink alcohol?", "Alcoholic hepatitis", "Jaundice.") == [
        "alcoholic"]
    assert leaked_words("Do you drink alcohol?", "Alcoholic hepatitis", "alcoholic") == []
    assert leaked_words("REQUEST TEST: PE1", "Lobar pneumonia", "") == []
    assert leaked_words("Any pain of the chest?", "Disease of the chest wall",
                        "Evaluate.") == ["chest"]
    assert shares_content("consistent with lobar pneumonia", "Lobar pneumonia")
    assert shares_content("Hypokinesis of the inferior wall", "Acute inferior MI")
    assert not shares_content("No acute disease on the left.", "Acute left disease")


# ------------------------------------------------------------------ settings, errors
def test_other_settings_are_refused_as_soon_as_they_show():
    plain = gym.make("EGIP-Demo-v0")
    with pytest.raises(ValueError, match="observation_format"):
        TeacherDoctor.check_env(plain)
    with pytest.raises(ValueError, match="observation_format='view'"):
        run_episode(plain, TeacherDoctor(plain.unwrapped.pool), case_id="demo-01", seed=0)
    clarify = gym.make("EGIP-Demo-v0", observation_format="delta")
    with pytest.raises(ValueError, match="premature_diagnosis"):
        TeacherDoctor.check_env(clarify)
    with pytest.raises(ValueError, match="premature_diagnosis='clarify'"):
        run_episode(clarify, TeacherDoctor(clarify.unwrapped.pool, max_questions=0),
                    case_id="demo-01", seed=0)
    TeacherDoctor.check_env(teacher_env("EGIP-Demo-v0"))
    env = teacher_env("EGIP-Demo-v0")
    with pytest.raises(ValueError, match="'demo-02' is not among the 1 cases"):
        run_episode(env, TeacherDoctor([env.unwrapped.pool.case("demo-01")]),
                    case_id="demo-02", seed=0)
    with pytest.raises(TypeError):
        TeacherDoctor("demo")
    with pytest.raises(ValueError):
        TeacherDoctor([], max_questions=-1)


def test_the_patient_check_changes_nothing_in_the_episode():
    """The same actions played by a doctor that only repeats them give the same events
    (the teacher's own retrieval patient leaves the episode's patient untouched)."""
    env = teacher_env("EGIP-Demo-v0")
    _, actions, record = play(env, TeacherDoctor(env.unwrapped.pool), "demo-03")

    class Repeat:
        name = "repeat"

        def reset(self, *, seed=None):
            self.left = list(actions)

        def act(self, observation, info):
            return self.left.pop(0)

    again = run_episode(teacher_env("EGIP-Demo-v0"), Repeat(), case_id="demo-03", seed=0)
    assert again["events"] == record["events"]


def test_privileged_in_the_doctor_config_and_in_every_line():
    env = teacher_env("EGIP-Demo-v0")
    teacher = TeacherDoctor(env.unwrapped.pool)
    context = RunContext.from_env(env, teacher, seed=0)
    line = context.line(run_episode(env, teacher, case_id="demo-01", seed=0),
                        case_index=0, repetition=0, seed=0)
    assert line["privileged"] is True
    assert line["doctor"]["name"] == "privileged-teacher"
    assert line["doctor"]["config"]["privileged"] is True
    assert policy_is_privileged(BeforeAnswerWrapper(teacher))  # a wrapped teacher too
    plain = RunContext.from_env(env, ScriptedDoctor(), seed=0)
    assert not plain.privileged
    assert "privileged" not in plain.line({"case_id": "demo-01"}, case_index=0,
                                          repetition=0, seed=0)
