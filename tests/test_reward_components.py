"""Reward components (:mod:`clinenv.reward_components`) computed by hand on pinned cases.

Catalogs pinned by hand:

- demo ``demo-01`` (target "Lobar pneumonia"): PE1 Vital Signs (tier vital_signs), PE2
  Respiratory Examination, PE3 Cardiovascular Examination (physical_exam), T1 Complete
  Blood Count (basic_labs), T2 C-Reactive Protein, T3 Urea (blood_urine; T1-T3 are the
  group "Blood Tests"), T4 Chest X-Ray (ecg_imaging, group "Imaging"), T5 Sputum Culture,
  T6 Urinary Pneumococcal Antigen (microbiology): |A| = 9;
- MedQA ``medqa-0001`` (target "Myasthenia gravis"): PE1 Vital Signs, PE2 Neurological
  Examination, T1 Acetylcholine Receptor Antibodies (Blood Tests; blood_urine), T2
  Electromyography (other), T3 Chest CT (Imaging; ecg_imaging): |A| = 5.

Default costs: vital_signs 0.1, physical_exam 0.2, basic_labs 1, blood_urine 1,
ecg_imaging 3, microbiology 2, specialized 5, other 2.
"""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.scripted_doctor import ScriptedDoctor
from clinenv.cases import Records
from clinenv.env import EGIPEnv
from clinenv.multiagent.aec import DOCTOR, EGIPAECEnv
from clinenv.reward_components import (
    COMPONENTS,
    DEFAULT_EXAM_COSTS,
    TIERS,
    RewardComponents,
    reward_components,
)
from clinenv.testing.data import needs_shared_data


def play(env, actions, case_id, seed=0):
    """Reset on ``case_id`` and step ``actions``; ``(rewards, last info)``."""
    env.reset(seed=seed, options={"case_id": case_id})
    rewards, info = [], {}
    for action in actions:
        _, reward, terminated, truncated, info = env.step(action)
        rewards.append(reward)
        if terminated or truncated:
            break
    return rewards, info


#: demo-01 with the menu: 7 rounds, then the answer.
DEMO_ACTIONS = [
    "REQUEST TEST: PE1",                    # PE1, recorded
    "REQUEST TEST: Blood Tests",            # the group: T1, T2, T3 (three orders)
    "REQUEST TEST: T1",                     # a repeat: a clarification, no order
    "REQUEST TEST: Electroencephalogram",   # not recorded: an order M cannot answer
    "REQUEST TEST: T99",                    # invalid id: an invalid action only
    "REQUEST TEST: Examination",            # ambiguous: an invalid action only
    "REQUEST TEST: Chest imaging",          # T4 by name
    "DIAGNOSIS READY: Lobar pneumonia",
]


def test_demo_menu_picks_a_group_and_an_unrecorded_exam_by_hand():
    env = gym.make("EGIP-Demo-v0", acquisition_rounds=7).unwrapped
    _, info = play(env, DEMO_ACTIONS, "demo-01")
    assert info["verdict"] == "correct"
    # orders: PE1, T1, T2, T3, T4 recorded (5 of |A| = 9) + 1 not recorded
    expected = {"diagnosis": 1.0, "workup_recall": 5 / 9, "workup_precision": 5 / 6,
                "workup_f1": 2 * (5 / 6) * (5 / 9) / (5 / 6 + 5 / 9),  # = 2/3
                "exam_spend": 0.1 + 1.0 + 1.0 + 1.0 + 3.0, "turns": 7,
                "invalid_actions": 2, "format": 1}
    got = info["reward_components"]
    assert list(got) == list(COMPONENTS)
    assert got == pytest.approx(expected)
    assert got["workup_f1"] == pytest.approx(2 / 3)
    # the same from the episode record and from its JSON round trip
    record = json.loads(json.dumps(env.episode_record()))
    assert record["reward_components"] == got
    case = env.pool.case("demo-01")
    assert reward_components(record, case).to_dict() == got
    del record["reward_components"]
    assert reward_components(record, case).to_dict() == got


def test_invalid_and_ambiguous_requests_are_not_orders():
    env = gym.make("EGIP-Demo-v0", acquisition_rounds=3).unwrapped
    _, info = play(env, ["REQUEST TEST: T99", "REQUEST TEST: Examination", "",
                         "DIAGNOSIS READY: Lobar pneumonia"], "demo-01")
    got = info["reward_components"]
    # nothing ordered, M records 9: recall 0, precision undefined, F1 0
    assert got == {"diagnosis": 1.0, "workup_recall": 0.0, "workup_precision": None,
                   "workup_f1": 0.0, "exam_spend": 0.0, "turns": 3,
                   "invalid_actions": 3, "format": 1}


def test_a_wrong_and_an_unscored_answer():
    env = gym.make("EGIP-Demo-v0", acquisition_rounds=1).unwrapped
    _, info = play(env, ["REQUEST TEST: T4", "DIAGNOSIS READY: Asthma"], "demo-01")
    assert info["verdict"] == "wrong"
    assert info["reward_components"] == pytest.approx({
        "diagnosis": 0.0, "workup_recall": 1 / 9, "workup_precision": 1.0,
        "workup_f1": 2 * (1 / 9) / (1 + 1 / 9), "exam_spend": 3.0, "turns": 1,
        "invalid_actions": 0, "format": 1})
    _, info = play(env, ["REQUEST TEST: T4", "I am not sure what this is, more tests "
                         "would be needed before I can say anything.\nSecond line."],
                   "demo-01")
    assert info["verdict"] == "unscored"
    assert (info["reward_components"]["diagnosis"], info["reward_components"]["format"]) \
        == (0.0, 0)


@needs_shared_data()
def test_medqa_named_exams_without_a_menu_by_hand(shared_data_dir):
    env = gym.make("EGIP-MedQA-v0", preset="egip-no-menu", acquisition_rounds=6).unwrapped
    _, info = play(env, [
        "REQUEST TEST: Electromyography",   # T2, recorded (other: 2.0)
        "REQUEST TEST: Lumbar puncture",    # not recorded
        "REQUEST TEST: Blood Tests",        # the group: T1 alone (blood_urine: 1.0)
        "REQUEST TEST: lumbar  puncture",   # the same unrecorded name: counted once
        "REQUEST TEST: T2",                 # ids are not offered without a menu: invalid
        "What brings you in today?",
        "DIAGNOSIS READY: Myasthenia gravis",
    ], "medqa-0001")
    assert info["verdict"] == "correct"
    # recorded T2, T1 of |A| = 5; orders 2 recorded + 1 not recorded
    assert info["reward_components"] == pytest.approx({
        "diagnosis": 1.0, "workup_recall": 2 / 5, "workup_precision": 2 / 3,
        "workup_f1": 0.5, "exam_spend": 3.0, "turns": 6, "invalid_actions": 1,
        "format": 1})


def test_native_protocols_have_no_workup():
    env = gym.make("AgentClinic-Demo-v0")
    doctor = ScriptedDoctor()
    obs, info = env.reset(seed=4, options={"case_id": "demo-01"})
    doctor.reset(seed=4)
    done = False
    while not done:
        obs, _, terminated, truncated, info = env.step(doctor.act(obs, info))
        done = terminated or truncated
    got = info["reward_components"]
    assert got["workup_recall"] is got["workup_precision"] is got["workup_f1"] is None
    assert got["exam_spend"] is None
    record = env.unwrapped.episode_record()
    assert record["protocol"] == "agentclinic"
    assert got["turns"] == record["turns"] and got["format"] == int(
        record["answer_status"] == "answer" and record["verdict"] in ("correct", "wrong"))
    assert got["diagnosis"] == float(record["verdict"] == "correct")


def test_an_unfinished_episode_gets_diagnosis_0_format_0_and_the_workup_so_far():
    env = gym.make("EGIP-Demo-v0").unwrapped
    play(env, ["REQUEST TEST: PE1", "REQUEST TEST: T4", "REQUEST TEST: T99"], "demo-01")
    cut = env.reward_components()
    assert cut.to_dict() == pytest.approx({
        "diagnosis": 0.0, "workup_recall": 2 / 9, "workup_precision": 1.0,
        "workup_f1": 2 * (2 / 9) / (1 + 2 / 9), "exam_spend": 3.1, "turns": 3,
        "invalid_actions": 1, "format": 0})
    record = env.episode_record()
    assert "reward_components" not in record and record["phase"] == "acquire"
    assert reward_components(record, env.pool.case("demo-01")) == cut
    # a backend error line (verdict forced unscored) is unfinished too
    play(env, ["REQUEST TEST: PE1"] + ["Where does it hurt?"] * 18
                   + ["DIAGNOSIS READY: Lobar pneumonia"], "demo-01")
    record = env.episode_record()
    assert record["verdict"] == "correct"
    record.update(error={"type": "BackendError"}, verdict="unscored", correct=False)
    assert reward_components(record, env.pool.case("demo-01")).diagnosis == 0.0


def test_the_aec_truncation_uses_the_unfinished_rule():
    env = EGIPAECEnv("demo", patient="retrieval", examiner="lookup", max_steps=2,
                     reward_spec={"weights": {"workup_recall": 9.0, "turns": -1.0}})
    env.reset(seed=0, options={"case_id": "demo-01"})
    env.step("REQUEST TEST: PE1")
    env.step("REQUEST TEST: T4")
    assert env.truncations[DOCTOR]
    info = env.infos[DOCTOR]
    assert info["reward_components"]["diagnosis"] == 0.0
    assert info["reward_components"]["format"] == 0
    assert env.rewards[DOCTOR] == pytest.approx(9.0 * 2 / 9 - 2.0)


def test_records_nothing_gives_none_not_0():
    base = gym.make("EGIP-Demo-v0").unwrapped.pool.case("demo-01")
    empty = base.model_copy(update={"records": Records(physical_exam={}, tests={})})
    env = EGIPEnv(cases=[empty], acquisition_rounds=2)
    _, info = play(env, ["REQUEST TEST: Chest X-Ray", "Any cough?",
                         "DIAGNOSIS READY: Lobar pneumonia"], "demo-01")
    got = info["reward_components"]
    assert got["workup_recall"] is got["workup_precision"] is got["workup_f1"] is None
    assert got["exam_spend"] == 0.0 and got["diagnosis"] == 1.0


def test_exam_costs_follow_the_table_and_fill_missing_tiers():
    env = gym.make("EGIP-Demo-v0", acquisition_rounds=7).unwrapped
    play(env, DEMO_ACTIONS, "demo-01")
    record, case = env.episode_record(), env.pool.case("demo-01")
    assert reward_components(record, case, exam_costs={"ecg_imaging": 10.0}).exam_spend \
        == pytest.approx(0.1 + 3.0 + 10.0)
    zero = dict.fromkeys(TIERS, 0.0)
    assert reward_components(record, case, exam_costs=zero).exam_spend == 0.0
    assert set(DEFAULT_EXAM_COSTS) == set(TIERS) and len(TIERS) == 8


def test_a_record_of_another_case_or_catalog_is_refused():
    env = gym.make("EGIP-Demo-v0", acquisition_rounds=7).unwrapped
    play(env, DEMO_ACTIONS, "demo-01")
    record = env.episode_record()
    with pytest.raises(ValueError, match=r"the record is of case 'demo-01', not 'demo-02'"):
        reward_components(record, env.pool.case("demo-02"))
    other = env.pool.case("demo-02")
    record["case_id"] = "demo-02"
    with pytest.raises(ValueError, match=r"orders exam 'T\d'.*pass the case the episode"):
        reward_components(record, other.model_copy(update={
            "records": Records(physical_exam={"Vital_Signs": "normal"}, tests={})}))
    with pytest.raises(ValueError, match=r"field 'events' is missing"):
        reward_components({"turns": 1}, other)


def test_components_round_trip_and_index_by_name():
    components = RewardComponents(1.0, 0.5, None, 0.0, 2.5, 4, 1, 1)
    data = components.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert RewardComponents.from_dict(data) == components
    assert components["workup_precision"] is None and components["turns"] == 4
    with pytest.raises(KeyError):
        components["reward"]
    with pytest.raises(ValueError, match=r"missing \['format'\]"):
        RewardComponents.from_dict({k: v for k, v in data.items() if k != "format"})


# ------------------------------------------------------ history reviews (cdeg-30)
@needs_shared_data()
def test_a_history_review_is_no_order_on_medqa(shared_data_dir):
    """medqa-0003 (|A| = 7, no clinical-history record) under cdeg-30: REVIEW HISTORY is
    answered "not recorded" but is no order, so PE1 alone gives precision 1."""
    env = gym.make("EGIP-MedQA-v0", preset="cdeg-30").unwrapped
    play(env, ["REVIEW HISTORY", "REQUEST TEST: PE1"], "medqa-0003")
    (review,) = [e for e in env.episode_record()["events"]
                 if e["source"] == "measurement" and e["request"] == "Clinical History"]
    assert review["result_availability"] == "not_recorded"
    assert env.reward_components().to_dict() == pytest.approx({
        "diagnosis": 0.0, "workup_recall": 1 / 7, "workup_precision": 1.0,
        "workup_f1": 0.25, "exam_spend": 0.1, "turns": 2, "invalid_actions": 0,
        "format": 0})


def test_a_history_review_is_no_order_on_the_demo():
    env = gym.make("EGIP-Demo-v0", preset="cdeg-30").unwrapped
    play(env, ["REVIEW HISTORY", "REQUEST TEST: PE1", "review the clinical history."],
         "demo-01")
    got = env.reward_components()
    assert (got.workup_recall, got.workup_precision, got.exam_spend) == pytest.approx(
        (1 / 9, 1.0, 0.1))


def test_a_recorded_history_record_is_not_workup(tmp_path):
    """A MIMIC-IDx-style case whose records hold a clinical history (T1, the record
    REVIEW HISTORY reads) and one test (T2): A is {T2}, and neither the review nor a
    request of T1 is an order or costs anything; a knowledge query is no order either."""
    from clinenv.protocol.catalog import Catalog
    from clinenv.reward_components import exam_tier, is_history

    cases = tmp_path / "mimic_idx.jsonl"
    cases.write_text(json.dumps({
        "hadm_id": 1, "subject_id": "p1",
        "initial_presentation": "A 72-year-old woman with a painful rash on the chest.",
        "patient": "It burns and there are small blisters.",
        "clinical_history": {"Past_Medical_History": "Polymyalgia rheumatica."},
        "labs": {"Vesicle_Swab_PCR": "Varicella-zoster virus DNA detected."},
        "diagnosis": "Herpes zoster"}) + "\n", encoding="utf-8")
    knowledge = tmp_path / "knowledge.jsonl"
    knowledge.write_text(json.dumps({"title": "Herpes zoster", "text": "Dermatomal "
                                     "vesicular rash."}) + "\n", encoding="utf-8")
    env = gym.make("EGIP-MedQA-v0", dataset=str(cases), preset="cdeg-30",
                   knowledge_source=str(knowledge)).unwrapped
    case = env.pool.case("mimic_idx-1")
    catalog = {e.exam_id: e for e in Catalog(case.records)}
    assert is_history(catalog["T1"]) and not is_history(catalog["T2"])
    play(env, ["REVIEW HISTORY", "RETRIEVE KNOWLEDGE: vesicular rash"], "mimic_idx-1")
    events = env.episode_record()["events"]
    assert [e["exam_id"] for e in events if e["source"] == "measurement"] == ["T1"]
    got = env.reward_components()
    assert (got.workup_recall, got.workup_precision, got.workup_f1, got.exam_spend) == (
        0.0, None, 0.0, 0.0)
    play(env, ["REQUEST TEST: T1", "REQUEST TEST: T2"], "mimic_idx-1")
    got = env.reward_components()
    assert (got.workup_recall, got.workup_precision, got.workup_f1) == (1.0, 1.0, 1.0)
    assert got.exam_spend == DEFAULT_EXAM_COSTS[exam_tier(catalog["T2"])]
