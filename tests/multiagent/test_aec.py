"""The PettingZoo game: turn order, role views, rewards, seeding and the parallel form.

Values are pinned from the demo case file (``demo-01``: a 67-year-old man with lobar
pneumonia; catalog PE1 Vital Signs, PE2 Respiratory, PE3 Cardiovascular, T1 Complete
Blood Count, T2 C-Reactive Protein, T3 Urea, T4 Chest X-Ray, T5 Sputum Culture, T6
Urinary Pneumococcal Antigen) and, for the view rules, from every real MedQA and NEJM
case.
"""

from __future__ import annotations

import re

import gymnasium as gym
import numpy as np
import pytest

import clinenv  # noqa: F401
from clinenv.multiagent import egip_v0, fidelity
from clinenv.multiagent.aec import AGENTS, DOCTOR, EXAMINER, PATIENT
from clinenv.protocol.lookup import NOT_RECORDED_TEXT
from clinenv.protocol.seat_views import NO_REQUEST
from clinenv.testing.data import leaves

pytestmark = pytest.mark.filterwarnings("error")

PNEUMONIA_XRAY = ("Dense right lower lobe consolidation with air bronchograms, consistent "
                  "with lobar pneumonia; no pleural effusion.")


def demo(**kwargs):
    env = egip_v0.raw_env(dataset="demo", **kwargs)
    env.reset(seed=0, options={"case_id": "demo-01"})
    return env


def text_of(env, agent):
    return env.observe(agent)["text"]


# ------------------------------------------------------------------ agents and spaces
def test_agents_and_cached_spaces():
    env = demo()
    assert env.possible_agents == list(AGENTS) == ["doctor_0", "patient_0", "examiner_0"]
    assert env.agents == env.possible_agents and env.agent_selection == DOCTOR
    shared = env.observation_space(DOCTOR)
    assert all(env.observation_space(a) is shared for a in AGENTS)
    assert set(shared.spaces) == {"text", "exam_mask"}  # no observation / action_mask keys
    for agent in AGENTS:
        assert env.action_space(agent) is env.action_space(agent)
        assert env.action_space(agent) == env.action_space(DOCTOR)
    with pytest.raises(KeyError, match="nurse_0"):
        env.observation_space("nurse_0")


def test_builtin_seats_are_not_agents():
    assert demo(patient="retrieval").possible_agents == [DOCTOR, EXAMINER]
    assert demo(examiner="lookup").possible_agents == [DOCTOR, PATIENT]
    both = demo(patient="retrieval", examiner="lookup")
    assert both.possible_agents == [DOCTOR]
    both.step("What brings you in today?")  # the built-in patient answers inside the step
    assert both.agent_selection == DOCTOR
    assert "Patient: I'm here because of cough with rust-coloured sputum." in text_of(both, DOCTOR)


@pytest.mark.parametrize("kwargs, field", [
    ({"examiner": "llm"}, "examiner"),
    ({"patient_model": object()}, "patient_model"),
    ({"max_steps": 1}, "max_steps"),
    ({"fidelity_weight": -1.0}, "fidelity_weight"),
    ({"fidelity_weight": float("nan")}, "fidelity_weight"),
    ({"observation_format": "full"}, "observation_format"),
])
def test_bad_arguments_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        egip_v0.raw_env(dataset="demo", **kwargs)


def test_calls_before_reset_fail_clearly():
    env = egip_v0.raw_env(dataset="demo")
    with pytest.raises(RuntimeError, match="reset"):
        env.observe(DOCTOR)
    with pytest.raises(RuntimeError, match="reset"):
        env.step("hello")


# ---------------------------------------------------------------------- turn order
def test_question_goes_to_the_patient_and_back():
    env = demo()
    before = text_of(env, DOCTOR)
    env.step("Do you take any medications?")
    assert env.agent_selection == PATIENT
    assert text_of(env, DOCTOR) == before  # idle until the round closes
    patient = text_of(env, PATIENT)
    assert patient.endswith("# Doctor's question\nDo you take any medications?")
    assert env.infos[PATIENT]["pending"] is True
    env.step("Metformin and ramipril.")
    assert env.agent_selection == DOCTOR
    assert "Doctor: Do you take any medications?\nPatient: Metformin and ramipril." in \
        text_of(env, DOCTOR)
    assert env.infos[PATIENT]["pending"] is False
    assert env.infos[DOCTOR]["turn"] == 1


def test_exam_request_goes_to_the_examiner_with_only_its_record():
    env = demo()
    env.step("REQUEST TEST: T4")
    assert env.agent_selection == EXAMINER
    view = text_of(env, EXAMINER)
    assert "Examination: T4 Chest X-Ray" in view and PNEUMONIA_XRAY in view
    for other in ("38.9 °C (102 °F)", "186 mg/L", "Metformin", "67-year-old"):
        assert other not in view  # no other record, no P
    env.step("Right lower lobe consolidation.")
    assert env.agent_selection == DOCTOR
    assert "Examiner [T4 Chest X-Ray (Imaging)]:\n  Right lower lobe consolidation." in \
        text_of(env, DOCTOR)
    assert env.observe(DOCTOR)["exam_mask"][6] == 0  # T4 is catalog entry 6, now requested
    assert text_of(env, EXAMINER).endswith(f"# Examination request\n{NO_REQUEST}")
    assert env.infos[EXAMINER]["pending"] is False


def test_unrecorded_test_and_invalid_text_stay_with_the_doctor():
    env = demo()
    env.step("REQUEST TEST: Brain MRI")
    assert env.agent_selection == DOCTOR  # the interface answers "not recorded"
    assert f"Examiner [Brain MRI]: {NOT_RECORDED_TEXT}" in text_of(env, DOCTOR)
    env.step("REQUEST TEST: T99")
    assert env.agent_selection == DOCTOR
    assert "There is no examination with id 'T99'" in text_of(env, DOCTOR)
    assert env.infos[DOCTOR]["invalid_actions"] == 1
    assert env.infos[EXAMINER]["pending"] is False


# field-bug-reports B11
def test_long_seat_views_are_clipped_and_flagged():
    """A P longer than the text limit is clipped to the space and flagged."""
    from clinenv.cases import Case

    base = demo().pool.case("demo-01")
    long_p = base.model_copy(update={"patient": {**base.patient, "History": "ache " * 400}})
    env = egip_v0.raw_env(cases=[Case.model_validate(long_p.model_dump())],
                          max_text_chars=1000)
    env.reset(seed=0)
    assert len(text_of(env, PATIENT)) == 1000 and env.infos[PATIENT]["text_clipped"] is True
    assert env.observation_space(PATIENT).contains(env.observe(PATIENT))
    assert env.infos[EXAMINER]["text_clipped"] is False


def test_seat_reply_is_clipped_and_flagged():
    env = demo(max_action_chars=100)
    env.step("How do you feel?")
    env.step("x" * 150)
    assert env.infos[PATIENT]["reply_clipped"] is True
    assert "Patient: " + "x" * 100 + "\n" in text_of(env, DOCTOR)
    assert "x" * 101 not in text_of(env, DOCTOR)


# ------------------------------------------------------------------- role views
def _distinct(values, *, min_len):
    return {v.strip() for v in values if isinstance(v, str) and len(v.strip()) >= min_len}


@pytest.mark.parametrize("dataset", ["medqa", "nejm"])
def test_patient_never_sees_records_or_target_examiner_only_its_record(dataset,
                                                                       shared_data_dir):
    """Real cases: the patient view holds P and the dialogue, never M or Y; the examiner
    view holds the requested record and nothing of P or of other records."""
    env = egip_v0.raw_env(dataset=dataset)
    checked = 0
    for case in env.pool.cases:
        env.reset(options={"case_id": case.case_id})
        p_text = " ".join(leaves(case.patient, strings_only=True))
        records = {"pe": case.records.physical_exam, "tests": case.records.tests}
        record_only = {v for v in _distinct(leaves(records), min_len=12) if v not in p_text}
        record_text = " ".join(leaves(records, strings_only=True))
        p_only = {v for v in _distinct(leaves(case.patient), min_len=25) if v not in record_text}
        menu = env.infos[DOCTOR]["menu"]
        for entry in menu[:3]:
            env.step(f"REQUEST TEST: {entry['id']}")
            assert env.agent_selection == EXAMINER
            view = text_of(env, EXAMINER)
            assert f"Examination: {entry['id']} " in view
            shown = view.split("# Stored record", 1)[1]
            assert not [v for v in p_only if v in view], case.case_id
            env.step(shown.strip())
            assert env.agent_selection == DOCTOR
        env.step("What brings you in today, and what else should I know?")
        assert env.agent_selection == PATIENT
        view = text_of(env, PATIENT)
        leaked = [v for v in record_only if v in view]
        assert not leaked, (case.case_id, leaked[:3])
        target = case.target.text.lower()
        assert target not in view.lower(), case.case_id
        checked += 1
    assert checked == len(env.pool.cases) == {"medqa": 107, "nejm": 15}[dataset]


def test_examiner_view_of_a_group_request_holds_each_test():
    env = demo()
    env.step("REQUEST TEST: Blood Tests")
    view = text_of(env, EXAMINER)
    for value in ("16.8 × 10⁹/L (neutrophils 86%)", "186 mg/L", "7.9 mmol/L"):
        assert value in view
    assert PNEUMONIA_XRAY not in view


# --------------------------------------------------------------------- rewards
DOCTOR_SCRIPT = ["What brings you in today?", "REQUEST TEST: T1", "REQUEST TEST: T99",
                 "<think>vitals next</think>REQUEST TEST: PE1", "REQUEST TEST: Blood Tests",
                 "Any chest pain?"]


def test_doctor_matches_the_gymnasium_env_with_builtin_seats():
    """Same actions, same case: the doctor's observations, masks, rewards and whole info
    dicts equal the Gymnasium env's at reset and after every step (no key differs with
    built-in seats; the only documented differences, the refresh timing with external
    seats and the max_steps truncation keys, do not arise here). The return is
    1 - 0.1 x 5 tests - 0.5 x 1 invalid = 0."""
    kwargs = dict(dataset="demo", acquisition_rounds=6, exam_cost=0.1,
                  invalid_action_penalty=0.5)
    gym_env = gym.make("EGIP-Demo-v0", **kwargs).unwrapped
    aec = egip_v0.raw_env(patient="retrieval", examiner="lookup", **kwargs)
    obs, info = gym_env.reset(seed=3, options={"case_id": "demo-01"})
    aec.reset(seed=3, options={"case_id": "demo-01"})
    total = 0.0
    for action in [*DOCTOR_SCRIPT, "DIAGNOSIS READY: Lobar pneumonia"]:
        mine = aec.observe(DOCTOR)
        assert mine["text"] == obs["text"]
        np.testing.assert_array_equal(mine["exam_mask"], obs["exam_mask"])
        assert aec.infos[DOCTOR] == info
        obs, reward, terminated, _, info = gym_env.step(action)
        aec.step(action)
        assert aec.rewards[DOCTOR] == pytest.approx(reward)
        total += aec.rewards[DOCTOR]
        assert aec.terminations[DOCTOR] is terminated
    assert aec.infos[DOCTOR] == info
    assert info["verdict"] == "correct" and info["answer"] == "Lobar pneumonia"
    assert "reasoning" not in info  # the last action had none; step 4's had
    # charged tests: T1, PE1, and the Blood Tests group (T1, T2, T3: a group request is
    # charged per returned test, the already requested T1 included)
    assert total == pytest.approx(1.0 - 0.1 * (1 + 1 + 3) - 0.5 * 1)


def test_max_rounds_reset_option_matches_the_gymnasium_env():
    """The curriculum's reset option caps the AEC doctor's rounds as it caps EGIPEnv's:
    with max_rounds=3 the fourth action is the decision, and every observation and info
    equals the Gymnasium env's."""
    gym_env = gym.make("EGIP-Demo-v0").unwrapped
    aec = egip_v0.raw_env(dataset="demo", patient="retrieval", examiner="lookup")
    options = {"case_id": "demo-01", "max_rounds": 3}
    obs, info = gym_env.reset(seed=3, options=options)
    aec.reset(seed=3, options=options)
    assert "Round 1 of 3." in text_of(aec, DOCTOR)
    phases = [aec.infos[DOCTOR]["phase"]]
    for action in [*DOCTOR_SCRIPT[:3], "DIAGNOSIS READY: Lobar pneumonia"]:
        assert aec.observe(DOCTOR)["text"] == obs["text"] and aec.infos[DOCTOR] == info
        obs, _, terminated, _, info = gym_env.step(action)
        aec.step(action)
        phases.append(aec.infos[DOCTOR]["phase"])
    assert phases == ["acquire", "acquire", "acquire", "decide", "done"]
    assert aec.infos[DOCTOR] == info and info["verdict"] == "correct"
    # absent again: T = 19
    aec.reset(seed=3, options={"case_id": "demo-01"})
    assert "Round 1 of 19." in text_of(aec, DOCTOR)


@pytest.mark.parametrize("bad", [0, 20, 2.0, True, "5"])
def test_bad_max_rounds_is_refused_before_the_aec_reset(bad):
    aec = demo()
    runtime = aec.runtime
    with pytest.raises(ValueError, match=r"reset option max_rounds must be an int in "
                                         r"1\.\.19 .*got"):
        aec.reset(seed=4, options={"case_id": "demo-02", "max_rounds": bad})
    assert aec.runtime is runtime and aec.runtime.case.case_id == "demo-01"


def test_a_patient_with_only_areply_is_refused():
    class AsyncOnly:
        async def areply(self, view):
            return "I have a cough."

    with pytest.raises(ValueError, match="sync reply"):
        egip_v0.raw_env(dataset="demo", patient=AsyncOnly())


def test_doctor_info_carries_the_reasoning_like_the_gymnasium_env():
    gym_env = gym.make("EGIP-Demo-v0").unwrapped
    aec = egip_v0.raw_env(patient="retrieval", examiner="lookup", dataset="demo")
    gym_env.reset(seed=0, options={"case_id": "demo-01"})
    aec.reset(seed=0, options={"case_id": "demo-01"})
    *_, info = gym_env.step(DOCTOR_SCRIPT[3])
    aec.step(DOCTOR_SCRIPT[3])
    assert aec.infos[DOCTOR] == info and info["reasoning"] == "vitals next"
    assert info["action_kind"] == "test_request"


class FlaggingPatient:
    """A patient object (not the LLM patient) with ``last_flags``: each reply's flags come
    from ``script``, a list of ``(reply, flags)``; ``None`` flags mean a clean reply."""

    def __init__(self, script):
        self.script = list(script)
        self.last_flags = []
        self.asked = []

    def reply(self, view):
        self.asked.append(view.question)
        text, self.last_flags = self.script[len(self.asked) - 1]
        return text


FLAG_SCRIPT = [("A cough and fever.", ["speaks_as_doctor"]), ("No chest pain.", None),
               ("Nothing else.", ("repeats_own_reply", "empty_reply"))]
FLAG_ACTIONS = ["What brings you in today?", "REQUEST TEST: T1", "Any chest pain?",
                "Anything else?", "DIAGNOSIS READY: Lobar pneumonia"]


# field-bug-reports B16
def test_b16_doctor_info_carries_patient_flags_like_the_gymnasium_env():
    """A built-in patient with ``last_flags`` (here a plain object)
    gets its reply's flags into the doctor's info on the steps it answered, as strings
    (``None`` -> ``[]``, a tuple -> a list), and nowhere else (reset, the test request,
    the answer after T = 4 rounds); the whole info equals the Gymnasium env's at every
    step."""
    gym_env = gym.make("EGIP-Demo-v0", patient=FlaggingPatient(FLAG_SCRIPT),
                       acquisition_rounds=4).unwrapped
    patient = FlaggingPatient(FLAG_SCRIPT)
    aec = egip_v0.raw_env(patient=patient, examiner="lookup", dataset="demo",
                          acquisition_rounds=4)
    _, info = gym_env.reset(seed=0, options={"case_id": "demo-01"})
    aec.reset(seed=0, options={"case_id": "demo-01"})
    seen = [aec.infos[DOCTOR].get("patient_flags", "absent")]
    assert aec.infos[DOCTOR] == info
    for action in FLAG_ACTIONS:
        *_, info = gym_env.step(action)
        aec.step(action)
        assert aec.infos[DOCTOR] == info
        seen.append(aec.infos[DOCTOR].get("patient_flags", "absent"))
    assert seen == ["absent", ["speaks_as_doctor"], "absent", [],
                    ["repeats_own_reply", "empty_reply"], "absent"]
    assert patient.asked == ["What brings you in today?", "Any chest pain?", "Anything else?"]
    assert aec.infos[DOCTOR]["verdict"] == "correct"


# field-bug-reports B16
def test_b16_llm_patient_flags_in_the_aec_doctor_info():
    """The real LLM patient (scripted model) in the PettingZoo game, external
    examiner: the reply that speaks as the doctor is flagged (its own words kept), a
    clean one gives ``[]``; when the doctor's request goes to the examiner seat, the
    doctor's info is refreshed after the seat's reply, without ``patient_flags``."""
    from clinenv.llm.scripted import ScriptedChatModel

    model = ScriptedChatModel(["It started two days ago.",
                               "Doctor: Does it spread?\nPatient: Yes, to my back."])
    env = egip_v0.raw_env(patient="llm", patient_model=model, dataset="demo")
    env.reset(seed=0, options={"case_id": "demo-01"})
    assert env.possible_agents == [DOCTOR, EXAMINER]
    env.step("When did it start?")
    assert env.infos[DOCTOR]["patient_flags"] == []
    env.step("Does it spread?")
    assert env.infos[DOCTOR]["patient_flags"] == ["speaks_as_doctor"]
    assert env.runtime.history[-1].reply == "Yes, to my back."
    env.step("REQUEST TEST: T4")
    assert env.agent_selection == EXAMINER
    env.step(PNEUMONIA_XRAY)
    assert env.infos[DOCTOR]["action_kind"] == "test_request"
    assert "patient_flags" not in env.infos[DOCTOR]


def test_external_examiner_is_charged_when_the_result_comes_back():
    """exam_cost is charged per returned test, in the examiner seat's step: the Blood
    Tests group returns T1, T2, T3 (3 x 0.25), and the doctor sees the charge at its
    next turn."""
    env = demo(exam_cost=0.25)
    env.step("REQUEST TEST: Blood Tests")
    assert env.agent_selection == EXAMINER and env.rewards[DOCTOR] == 0.0
    env.step("WBC 16.8, CRP 186, urea 7.9")
    assert env.rewards[DOCTOR] == pytest.approx(-0.75)
    assert env.agent_selection == DOCTOR and env.last()[1] == pytest.approx(-0.75)


def test_truncation_with_an_exam_pending_charges_nothing():
    """max_steps = 3 ends the episode right after the request of T4, before the examiner
    seat answers: nothing was returned, so the doctor pays nothing (return 0)."""
    env = demo(max_steps=3, exam_cost=0.25)
    env.step("What brings you in today?")
    env.step("A cough.")
    env.step("REQUEST TEST: T4")
    assert env.truncations == dict.fromkeys(AGENTS, True)
    assert env.rewards[DOCTOR] == 0.0 and env._cumulative_rewards[DOCTOR] == 0.0
    assert env.infos[EXAMINER]["pending"] is False
    assert env.infos[DOCTOR]["n_exams_requested"] == 0  # T4 was never answered
    assert env.infos[DOCTOR]["truncated_at_step"] == 3


def test_answer_ends_the_episode_for_all_at_once():
    env = demo(acquisition_rounds=2)
    env.step("What brings you in today?")
    env.step("A cough.")
    env.step("REQUEST TEST: T4")
    env.step(PNEUMONIA_XRAY)
    assert env.infos[DOCTOR]["phase"] == "decide"
    assert "# Acquired observations" in text_of(env, DOCTOR)
    env.step("DIAGNOSIS READY: lobar pneumonia")
    assert env.terminations == dict.fromkeys(AGENTS, True)
    assert env.truncations == dict.fromkeys(AGENTS, False)
    assert env.rewards == {DOCTOR: 1.0, PATIENT: 0.0, EXAMINER: 0.0}
    obs, reward, terminated, truncated, info = env.last()
    assert (reward, terminated, info["verdict"], info["answer"]) == \
        (1.0, True, "correct", "lobar pneumonia")
    for _ in AGENTS:
        env.step(None)
    assert env.agents == []
    with pytest.raises(RuntimeError, match="over"):
        env.step("again")


def test_running_out_of_steps_truncates_all():
    env = demo(max_steps=3)
    env.step("What brings you in today?")
    env.step("A cough.")
    assert not any(env.truncations.values())
    env.step("Any fever?")
    assert env.truncations == dict.fromkeys(AGENTS, True)
    assert env.terminations == dict.fromkeys(AGENTS, False)
    assert env.infos[DOCTOR]["verdict"] == "unscored" and env.rewards[DOCTOR] == 0.0
    assert env.infos[PATIENT]["pending"] is False  # the question is dropped


def test_fidelity_rewards_count_record_values():
    """demo-01: P holds none of M's ten digit-bearing values; PE1 (Vital Signs) has five;
    T5 (Sputum Culture) stores Culture: "Pending"."""
    env = demo(fidelity_weight=0.5)
    env.step("How are things?")
    env.step("My temperature was 38.9 °C (102 °F) and my urea 7.9  MMOL/L.")
    assert env.infos[PATIENT]["fidelity_errors"] == ["leaked: 38.9 °c (102 °f)",
                                                      "leaked: 7.9 mmol/l"]
    assert env.rewards[PATIENT] == -1.0 and env.rewards[DOCTOR] == 0.0
    env.step("How long have you had diabetes?")
    env.step("Type 2 diabetes for 10 years.")  # a value of P, not of M
    assert env.rewards[PATIENT] == 0.0
    env.step("REQUEST TEST: PE1")
    env.step("Temperature 38.9 °C (102 °F); blood pressure 132/78 mmHg; heart rate 110.")
    assert env.infos[EXAMINER]["fidelity_errors"] == [
        "omitted: 108 bpm", "omitted: 24 breaths/min", "omitted: 91% on room air",
        "invented: 110"]
    assert env.rewards[EXAMINER] == -2.0
    env.step("REQUEST TEST: T5")
    env.step("Gram stain: lancet-shaped gram-positive diplococci. Culture: normal flora, "
             "no pathogens.")
    assert env.infos[EXAMINER]["fidelity_errors"] == [
        "invented: result for unavailable culture"]
    assert env.rewards[EXAMINER] == -0.5
    assert demo().infos[PATIENT].get("fidelity_errors") is None  # off by default


@pytest.mark.parametrize("text, value, found", [
    ("improved by 25% since monday", "5%", False),
    ("fever for 3-5 days", "-5", False),
    ("protein 11+ on dipstick", "1+", False),
    ("hba1c 16.7 today", "6.7", False),
    ("hba1c 6.75 today", "6.7", False),
    ("ejection fraction 2.5%", "5%", False),
    ("hba1c was 6.7.", "6.7", True),
    ("protein 1+ on dipstick", "1+", True),
    ("z-score -5 at birth", "-5", True),
    ("ef (5%)", "5%", True),
])
def test_record_values_match_on_token_boundaries(text, value, found):
    assert fidelity.contains(text, value) is found


def test_patient_leak_needs_the_whole_value():
    leakable = ("5%", "6.7 mmol/l")
    assert fidelity.patient_leaks("About 25% better, sugar 16.7 mmol/L", leakable) == []
    assert fidelity.patient_leaks("They said 5% and 6.7 mmol/L.", leakable) == [
        "leaked: 5%", "leaked: 6.7 mmol/l"]


def test_examiner_errors_by_hand():
    """Record {EF 55%, troponin 0.04 ng/mL}; the reply drops the troponin value, gives
    0.4 (not 0.04) and an LVEDD of 52 mm that the record lacks; T2 is the exam id."""
    record = {"Ejection_Fraction": "55%", "Troponin": "0.04 ng/mL"}
    request = ("Echo", "T2", "Echocardiogram")
    reply = "T2: ejection fraction 55%, troponin 0.4 ng/mL, LVEDD 52 mm."
    assert fidelity.examiner_errors(reply, record, request) == [
        "omitted: 0.04 ng/ml", "invented: 0.4", "invented: 52"]
    faithful = "Ejection fraction 55%; troponin 0.04 ng/mL."
    assert fidelity.examiner_errors(faithful, record, request) == []


@pytest.mark.parametrize("reply, errors", [
    ("Normal flora, no pathogens.", ["invented: result for unavailable record"]),
    ("Culture: no growth after 48 h.", ["invented: 48",
                                        "invented: result for unavailable record"]),
    ("The culture is still pending.", []),
    ("Result not available yet.", []),
])
def test_examiner_reporting_a_pending_record(reply, errors):
    """A stored "Pending" is not a result (EGIP 3.2): reporting a finding for it is an
    invention; acknowledging it is faithful."""
    assert fidelity.examiner_errors(reply, "Pending", ("Sputum culture",)) == errors


# --------------------------------------------------------------------- seeding
def test_seed_draws_the_same_case_as_the_gymnasium_env():
    aec = egip_v0.raw_env(dataset="demo")
    gym_env = gym.make("EGIP-Demo-v0").unwrapped
    for seed in (0, 1, 7, 12345):
        aec.reset(seed=seed)
        _, info = gym_env.reset(seed=seed)
        expected = aec.pool.cases[int(np.random.default_rng(seed).integers(len(aec.pool)))]
        assert aec.infos[DOCTOR]["case_id"] == info["case_id"] == expected.case_id


# field-bug-reports B12
def test_reset_continues_the_seeded_stream_and_observations_are_fresh():
    """O1 == o3 and o2 == o4; mutating an observation changes nothing later."""
    env = egip_v0.raw_env(dataset="demo")
    env.reset(seed=123)
    o1 = env.observe(DOCTOR)
    o1_text = o1["text"]
    o1["exam_mask"][:] = 0
    env.reset()
    o2 = env.observe(DOCTOR)["text"]
    env.reset(seed=123)
    o3 = env.observe(DOCTOR)
    env.reset()
    o4 = env.observe(DOCTOR)["text"]
    assert o3["text"] == o1_text and o2 == o4
    assert o3["exam_mask"].sum() > 0


# -------------------------------------------------------------------- parallel
def test_parallel_active_agent_from_reset_and_clean_end():
    par = egip_v0.parallel_env(dataset="demo", acquisition_rounds=2)
    obs, infos = par.reset(seed=0, options={"case_id": "demo-01"})
    assert set(obs) == set(infos) == set(AGENTS)
    assert {i["active_agent"] for i in infos.values()} == {DOCTOR}
    script = ["REQUEST TEST: T4", PNEUMONIA_XRAY, "What brings you in?", "A cough.",
              "DIAGNOSIS READY: lobar pneumonia"]
    for text in script:
        active = infos[DOCTOR]["active_agent"]
        obs, rewards, terms, truncs, infos = par.step(dict.fromkeys(par.agents, text))
    assert set(terms) == set(AGENTS) and all(terms.values())
    assert rewards == {DOCTOR: 1.0, PATIENT: 0.0, EXAMINER: 0.0}
    assert active == DOCTOR and {i["active_agent"] for i in infos.values()} == {None}
    assert par.agents == []
    after = par.step({})
    assert after == ({}, {}, {}, {}, {}) and len(after) == 5


# field-bug-reports B14
def test_parallel_idle_actions_are_no_ops():
    """Actions of agents whose turn it is not change nothing; idle agents'
    observations stay unchanged."""
    runs = []
    for idle in (None, "DIAGNOSIS READY: something absurd \u202e🙂"):
        par = egip_v0.parallel_env(dataset="demo")
        obs, infos = par.reset(seed=5)
        trace = [obs]
        for text in ("What brings you in?", "A cough.", "REQUEST TEST: PE1", "normal"):
            active = infos[DOCTOR]["active_agent"]
            actions = {a: (text if a == active else idle) for a in par.agents}
            before = {a: par.aec_env.observe(a)["text"] for a in par.agents}
            obs, rewards, terms, truncs, infos = par.step(actions)
            trace.append((obs, rewards, infos))
            untouched = set(par.agents) - {active, infos[DOCTOR]["active_agent"]}
            for agent in untouched:
                assert obs[agent]["text"] == before[agent]
        runs.append(trace)
    assert repr(runs[0]) == repr(runs[1])


def test_parallel_missing_active_action_names_the_agent():
    par = egip_v0.parallel_env(dataset="demo")
    with pytest.raises(RuntimeError, match="reset"):
        par.step({})
    par.reset(seed=0)
    with pytest.raises(KeyError, match=re.escape("doctor_0")):
        par.step({PATIENT: "hi"})
