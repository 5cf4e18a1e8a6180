"""Native protocol options and edge cases: scoring without unseen candidate labels, answer
coverage, the patient's results notes, the record reader's groups, and
native settings that had no test. Expected values come from the raw JSON lines of the
shared AgentClinic files or are written by hand.
"""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.env import EGIPEnv
from clinenv.env.case_pool import CasePool
from clinenv.env.record_reader import NativeRecordReader
from clinenv.env.retrieval_patient import RetrievalPatient
from clinenv.evaluation.metrics import coverage
from clinenv.evaluation.summary import summarize
from clinenv.multiagent.aec import EGIPAECEnv
from clinenv.protocol.native import RESULTS_NOTE
from clinenv.protocol.native_render import FINAL_NOTICE
from clinenv.protocol.views import PatientView
from clinenv.scoring import score_answer
from clinenv.testing.data import MEDQA_FILE, NEJM_FILE, skip_without_shared_data


def raw(file_name: str, index: int) -> dict:
    folder = skip_without_shared_data(MEDQA_FILE, NEJM_FILE)
    with open(folder / file_name, encoding="utf-8") as fh:
        return json.loads(fh.read().splitlines()[index])


def correct_letter(record: dict) -> str:
    return "ABCDE"[[a["correct"] for a in record["answers"]].index(True)]


class Recorder:
    """A patient and examiner that record the views they get."""

    def __init__(self) -> None:
        self.patient_views: list[PatientView] = []
        self.measurement_views: list = []

    def reply(self, view: PatientView) -> str:
        self.patient_views.append(view)
        return "I feel tired."

    def measure(self, view) -> str:
        self.measurement_views.append(view)
        return "RESULTS: recorded by the test"


# ------------------------------------------------------------ item 1: option letters
def test_native_option_letter_is_a_free_answer(shared_data_dir):
    """nejm-0001's correct option is C (Exogenous ochronosis, from the raw answers); the
    native doctor never saw the options, so "DIAGNOSIS READY: C" is wrong there, while
    EGIP, which shows K, reads the letter as option C."""
    record = raw(NEJM_FILE, 0)
    letter = correct_letter(record)
    assert letter == "C"
    env = gym.make("AgentClinic-NEJM-v0")
    env.reset(seed=0, options={"case_id": 0})
    *_, info = env.step(f"DIAGNOSIS READY: {letter}")
    assert (info["verdict"], info["answer"]) == ("wrong", "DIAGNOSIS READY: C")
    egip = EGIPEnv("nejm", acquisition_rounds=1)
    egip.reset(seed=0, options={"case_id": 0})
    egip.step("Any pain?")
    *_, info = egip.step(f"DIAGNOSIS READY: {letter}")
    assert info["verdict"] == "correct"
    case = egip.runtime.case
    assert score_answer("C", case).verdict == "correct"
    assert score_answer("C", case, use_candidates=False).verdict == "wrong"
    assert score_answer("Exogenous ochronosis", case, use_candidates=False).correct


# ----------------------------------------------------------------- item 2: coverage
def native_unfinished_record() -> dict:
    env = EGIPEnv("demo", protocol="agentclinic", max_turns=2)
    env.reset(seed=0, options={"case_id": "demo-01"})
    env.step("Any cough?")
    env.step("Any fever?")
    return env.episode_record()


def abstained_record() -> dict:
    env = EGIPEnv("demo", acquisition_rounds=1)
    env.reset(seed=0, options={"case_id": "demo-01"})
    env.step("Any cough?")
    env.step("DIAGNOSIS READY: I am not sure")
    return env.episode_record()


def test_coverage_counts_no_unfinished_or_abstained_episode():
    """EGIP 4.1: coverage is the share of outputs with an identifiable final answer. An
    unfinished native episode (answer None, verdict "wrong") and an abstention are not;
    the run summary and the evaluation report give the same figure."""
    unfinished, abstained = native_unfinished_record(), abstained_record()
    assert (unfinished["answer"], unfinished["verdict"]) == (None, "wrong")
    assert (abstained["abstained"], abstained["verdict"]) == (True, "unscored")
    answered = {**abstained, "answer": "Lobar pneumonia", "verdict": "correct",
                "abstained": False, "answer_status": "answer"}
    for records, expected in (([unfinished], 0.0), ([abstained], 0.0),
                              ([unfinished, abstained, answered], 100 / 3)):
        assert coverage(records) == pytest.approx(expected)
        assert summarize(records)["coverage"] == pytest.approx(expected)
    assert summarize([unfinished])["repetitions"][0]["coverage"] == 0.0


# ------------------------------------------------------------ item 4: results notes
def test_results_do_not_change_the_retrieval_patients_answer(shared_data_dir):
    """The probe of the review: on medqa case 0, "Do you smoke?" after a test request
    gets the same retrieval reply whether or not the patient heard the results (W5);
    the results reach the view as a note, never as part of the question."""
    replies = []
    for sees in (True, False):
        env = gym.make("AgentClinic-MedQA-v0", patient_sees_results=sees)
        env.reset(seed=0, options={"case_id": 0})
        env.step("REQUEST TEST: chest x-ray, complete blood count, vital signs")
        obs, *_ = env.step("Do you smoke?")
        replies.append(obs["text"].split("# Latest response\n")[1].split("\n\n# Your")[0])
    assert replies[0] == replies[1]
    recorder = Recorder()
    env = EGIPEnv("demo", protocol="agentclinic", patient=recorder)
    env.reset(seed=0, options={"case_id": "demo-01"})
    env.step("REQUEST TEST: Chest X-Ray")
    env.step("Do you smoke?")
    env.step("Any fever?")
    first, second = recorder.patient_views
    result = env.runtime.history[1].recorded_value
    note = RESULTS_NOTE.format(results=result)
    assert (first.question, first.notes) == ("Do you smoke?", ((0, note),))
    assert first.heard_questions() == [f"{note}\nDo you smoke?"]
    assert second.dialogue == (("Do you smoke?", "I feel tired."),)
    assert second.heard_questions() == [f"{note}\nDo you smoke?", "Any fever?"]
    patient = RetrievalPatient()
    assert patient.reply(first) == patient.reply(
        PatientView(first.facts, first.dialogue, first.question, first.caregiver_voice))


# ------------------------------------------------------------- item 9: the reader
def test_reader_returns_a_group_only_when_it_is_named_whole(shared_data_dir):
    """medqa case 47 holds "X_Rays" > "Hip_and_Knee_X_Rays" (raw Test_Results); "ECG and
    chest x-ray" names neither, so the reader answers normal readings instead of the
    hip and knee films; "X-rays" names the whole group."""
    tests = raw(MEDQA_FILE, 47)["OSCE_Examination"]["Test_Results"]
    films = tests["X_Rays"]["Hip_and_Knee_X_Rays"]["Findings"]
    env = gym.make("AgentClinic-MedQA-v0")
    env.reset(seed=0, options={"case_id": 47})
    obs, *_ = env.step("REQUEST TEST: ECG and chest x-ray")
    assert films not in obs["text"] and "RESULTS: NORMAL READINGS" in obs["text"]
    obs, *_ = env.step("REQUEST TEST: X-rays")
    assert f"RESULTS: Hip and Knee X Rays: Findings: {films}" in obs["text"]
    assert isinstance(env.unwrapped.examiner, NativeRecordReader)


# ------------------------------------------------- item 8: settings without a test
def test_nejm_final_question_is_the_vignettes_own(shared_data_dir):
    """nejm_question="final": the doctor starts with the vignette's last question
    sentence (raw ``question``), rephrased without options it never sees."""
    env = EGIPEnv("nejm", protocol="agentclinic", nejm_question="final")
    for index, expected in ((0, "What is the most likely diagnosis?"),
                            (2, "What is the most likely diagnosis?"),
                            (5, "What is the diagnosis?")):
        vignette = raw(NEJM_FILE, index)["question"]
        obs, _ = env.reset(seed=0, options={"case_id": index})
        assert obs["text"].startswith(f"# Task\n{expected}\n")
        if index == 2:
            assert vignette.rstrip().endswith("Which of the following is the most likely "
                                              "diagnosis?")
        else:
            assert vignette.rstrip().endswith(expected)
        assert vignette[:60] not in obs["text"]


def test_nejm_measurement_input_is_the_raw_physical_exams_text(shared_data_dir):
    """The NEJM measurement agent holds the record's raw ``physical_exams`` text, the
    LLM refusal of index 7 included (it has no test data at all)."""
    for index in (0, 7):
        recorder = Recorder()
        env = EGIPEnv("nejm", protocol="agentclinic", examiner=recorder)
        env.reset(seed=0, options={"case_id": index})
        env.step("REQUEST TEST: complete blood count")
        (view,) = recorder.measurement_views
        assert view.records_text == raw(NEJM_FILE, index)["physical_exams"].strip()
        assert view.request == "REQUEST TEST: complete blood count"
    assert view.records_text.startswith("The provided text does not include specific")


def test_patient_withholds_target_and_measurement_sees_patient():
    """patient_withholds_target=True removes the sentences naming Y ("Lobar pneumonia",
    demo-01) from the patient's facts; measurement_sees_patient=False keeps patient
    replies out of the measurement agent's history (True puts them in)."""
    demo = CasePool.get("demo").case("demo-01")
    told = "My last doctor said it was lobar pneumonia."
    case = demo.model_copy(update={"patient": {**demo.patient, "Told": f"{told} I rested."}})
    for withhold in (False, True):
        recorder = Recorder()
        env = EGIPEnv(cases=[case], protocol="agentclinic", patient=recorder,
                      patient_withholds_target=withhold)
        env.reset(seed=0, options={"case_id": "demo-01"})
        env.step("Hello")
        facts = dict(recorder.patient_views[0].facts)
        assert facts["Told"] == ("I rested." if withhold else f"{told} I rested.")
    for sees in (True, False):
        recorder = Recorder()
        env = EGIPEnv("demo", protocol="agentclinic", patient=recorder, examiner=recorder,
                      measurement_sees_patient=sees)
        env.reset(seed=0, options={"case_id": "demo-01"})
        env.step("Any cough?")
        env.step("REQUEST TEST: Chest X-Ray")
        history = recorder.measurement_views[0].history
        assert history == ((("patient", "I feel tired."),) if sees else ())


def test_final_notice_and_max_action_chars():
    """final_notice=False drops the notice from the last turn; max_action_chars cuts the
    visible utterance (reasoning removed first) before it is routed."""
    for notice in (True, False):
        env = EGIPEnv("demo", protocol="agentclinic", max_turns=2, final_notice=notice)
        env.reset(seed=0, options={"case_id": "demo-01"})
        obs, *_ = env.step("Any cough?")
        assert (FINAL_NOTICE in obs["text"]) is notice
    recorder = Recorder()
    env = EGIPEnv("demo", protocol="agentclinic", patient=recorder, max_action_chars=16)
    env.reset(seed=0, options={"case_id": "demo-01"})
    env.step("<think>" + "x" * 50 + "</think>Do you have a cough or a fever?")
    assert recorder.patient_views[0].question == "Do you have a co"
    assert env.runtime.history[0].text == "Do you have a co"


# ------------------------------------------------------------------------- nits
def test_plural_marker_names_the_exam_after_the_word():
    env = EGIPEnv("demo", protocol="agentclinic")
    env.reset(seed=0, options={"case_id": "demo-01"})
    env.step("REQUEST TESTS: Chest X-Ray")
    assert env.runtime.history[-1].name == "Chest X-Ray"


def test_multiagent_env_refuses_native_protocols_clearly():
    for kwargs in ({"protocol": "agentclinic"}, {"preset": "medagentsim"}):
        with pytest.raises(ValueError, match="Gymnasium env only"):
            EGIPAECEnv("demo", **kwargs)

