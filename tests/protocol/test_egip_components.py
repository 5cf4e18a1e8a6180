"""EGIP components on a hand-built case: catalog A, menu B, lookup O, matching, E, runtime."""

from __future__ import annotations

import pytest

from clinenv.cases import Case, Records, Target
from clinenv.protocol import config as cfg
from clinenv.protocol.catalog import Catalog
from clinenv.protocol.evidence import build_evidence, render_evidence
from clinenv.protocol.exam_matching import ExamMatcher
from clinenv.protocol.history import DoctorEvent, InterfaceEvent
from clinenv.protocol.lookup import NOT_RECORDED_TEXT, lookup, render_record
from clinenv.protocol.menu import build_menu, menu_order
from clinenv.protocol.runtime import EGIPRuntime

RECORDS = Records(
    physical_exam={
        "Neurological_Examination": {"Reflexes": "Absent ankle reflexes"},
        "Vital_Signs": {"Temperature": "37.2 °C", "Heart_Rate": "88 bpm"},
    },
    tests={
        "Imaging": {
            "MRI_Brain": {"Findings": "Normal"},
            "MRI_Spine": {"Findings": "Nerve root enhancement"},
        },
        "Complete_Blood_Count": {"WBC": "7,000/mm3", "Hemoglobin": "13 g/dL"},
        "Lumbar_Puncture": {"Protein": "Elevated", "Cells": "Pending"},
        "Nerve_Conduction_Studies": "Pending",
        "Special_Tests": {},
        "ESR": "12 mm/h",
    },
)
CASE = Case(
    case_id="t-1", dataset="test", objective="Evaluate the patient with leg weakness.",
    patient={"Demographics": "40-year-old man",
             "History": "Weakness began in my feet. I was told it may be Guillain-Barre "
                        "syndrome. It is getting worse."},
    records=RECORDS, target=Target(text="Guillain-Barre syndrome"),
)


def test_catalog_ids_names_and_groups():
    catalog = Catalog(RECORDS)
    rows = [(e.exam_id, e.name, e.group, e.source_path) for e in catalog]
    assert rows == [
        ("PE1", "Neurological Examination", None, ("physical_exam", "Neurological_Examination")),
        ("PE2", "Vital Signs", None, ("physical_exam", "Vital_Signs")),
        ("T1", "MRI Brain", "Imaging", ("tests", "Imaging", "MRI_Brain")),
        ("T2", "MRI Spine", "Imaging", ("tests", "Imaging", "MRI_Spine")),
        ("T3", "Complete Blood Count", None, ("tests", "Complete_Blood_Count")),
        ("T4", "Lumbar Puncture", None, ("tests", "Lumbar_Puncture")),
        ("T5", "Nerve Conduction Studies", None, ("tests", "Nerve_Conduction_Studies")),
        ("T6", "ESR", None, ("tests", "ESR")),
    ]
    assert [e.index for e in catalog] == list(range(8))
    assert catalog.get("t3").name == "Complete Blood Count"


def test_menu_priority_exclusion_and_limit():
    catalog = Catalog(RECORDS)
    order = menu_order(catalog)
    ids = [e.exam_id for e in build_menu(order, requested=[], limit=None)]
    # vital signs first, other exam sections, basic labs, other labs, imaging, procedures
    assert ids == ["PE2", "PE1", "T3", "T6", "T1", "T2", "T4", "T5"]
    assert [e.exam_id for e in build_menu(order, ["PE2", "T3"], limit=3)] == ["PE1", "T6", "T1"]
    with pytest.raises(ValueError):
        build_menu(order, [], limit=-1)
    rt = EGIPRuntime(CASE, cfg.ProtocolConfig(menu_limit=2))
    assert [e.exam_id for e in rt.menu()] == ["PE2", "PE1"]  # the runtime's menu is B


def test_lookup_returns_stored_values_and_availability():
    catalog = Catalog(RECORDS)
    text, availability = lookup(RECORDS, catalog.get("T3"))
    assert availability == "recorded"
    assert text == "WBC: 7,000/mm3\nHemoglobin: 13 g/dL"
    text, availability = lookup(RECORDS, catalog.get("T5"))
    assert availability == "unavailable"
    assert "Pending" in text
    text, availability = lookup(RECORDS, catalog.get("T4"))
    assert availability == "recorded"  # one leaf is a result
    assert "Cells: result not available (Pending)" in text
    assert lookup(RECORDS, None) == (None, "not_recorded")
    assert render_record(True) == "yes"


@pytest.mark.parametrize(
    "request_text, status, exam_id",
    [
        ("T4", "matched", "T4"),
        ("lumbar_puncture", "matched", "T4"),
        ("CBC", "matched", "T3"),
        ("hemoglobin", "matched", "T3"),  # a component name resolves to its panel
        ("Lumbar punctur", "matched", "T4"),  # a typo
        ("MRI", "ambiguous", None),
        ("Serum potassium", "miss", None),
        ("", "miss", None),
        ("T99", "invalid_id", None),
        ("Nerve study", "unclear", None),
    ],
)
def test_exam_matching(request_text, status, exam_id):
    matcher = ExamMatcher.for_records(Catalog(RECORDS), RECORDS)
    match = matcher.match(request_text)
    assert match.status == status
    assert (match.entry.exam_id if match.entry else None) == exam_id


def test_group_name_returns_every_test_of_the_group():
    matcher = ExamMatcher.for_records(Catalog(RECORDS), RECORDS)
    for request in ("Imaging", "imaging studies"):
        match = matcher.match(request)
        assert match.status == "matched" and match.group == "Imaging"
        assert [e.exam_id for e in match.entries] == ["T1", "T2"]
    rt = EGIPRuntime(CASE)
    _play(rt, "REQUEST TEST: Imaging")
    event = rt.history[-1]
    assert (event.exam_id, event.name, event.result_availability) == (
        "T1,T2", "Imaging", "recorded")
    assert event.source_paths == (("tests", "Imaging", "MRI_Brain"),
                                  ("tests", "Imaging", "MRI_Spine"))
    assert event.recorded_value == ("MRI Brain:\n  Findings: Normal\n"
                                    "MRI Spine:\n  Findings: Nerve root enhancement")
    assert rt.requested == ["T1", "T2"]
    _play(rt, "REQUEST TEST: MRI Spine")  # already returned with the group: a repeat
    assert rt.history[-2].kind == "repeated_request"


def test_invalid_and_unclear_requests_are_feedback_not_observations():
    rt = EGIPRuntime(CASE)
    _play(rt, "REQUEST TEST: T99")
    _play(rt, "REQUEST TEST: Nerve study")
    assert [e.kind for e in rt.history if e.source == "interface"] == [
        "invalid_request", "unclear_request"]
    assert "T5 Nerve Conduction Studies" in rt.history[-1].message
    assert rt.evidence().observations == ()
    assert rt.invalid_actions == 2


def test_without_menu_no_ids_and_no_names_are_revealed():
    rt = EGIPRuntime(CASE, cfg.ProtocolConfig(show_menu=False))
    assert rt.menu() == []
    _play(rt, "REQUEST TEST: T4")
    assert rt.history[-1].kind == "invalid_request"
    _play(rt, "REQUEST TEST: Nerve study")  # unclear -> not recorded, no names listed
    assert rt.history[-1].result_availability == "not_recorded"
    _play(rt, "REQUEST TEST: MRI")  # ambiguous -> feedback without names
    assert "MRI Brain" not in rt.history[-1].message
    _play(rt, "REQUEST TEST: lumbar puncture")  # validation is unchanged
    assert rt.history[-1].exam_id == "T4"


def test_reasoning_is_removed_before_the_utterance_is_clipped():
    rt = EGIPRuntime(CASE)
    long_reasoning = "<think>" + "Let me weigh the options. " * 400 + "</think>\n\n"
    routing = rt.route(long_reasoning + "REQUEST TEST: ESR")
    assert routing.to == "examiner" and routing.entries[0].exam_id == "T6"
    assert len(routing.action.reasoning) <= 16_384
    rt.answer_exam(routing)
    routing = rt.route("Q" * 5000)
    assert len(routing.action.text) == 4096
    assert [e.kind for e in rt.history if e.source == "interface"] == ["clipped_action"]


def test_ambiguous_lists_candidates():
    match = ExamMatcher.for_records(Catalog(RECORDS), RECORDS).match("MRI")
    assert {e.exam_id for e in match.candidates} == {"T1", "T2"}


def _play(runtime: EGIPRuntime, text: str, reply: str = "ok") -> None:
    routing = runtime.route(text)
    if routing.to == "patient":
        runtime.answer_patient(routing, reply)
    elif routing.to == "examiner":
        runtime.answer_exam(routing)


def test_runtime_routes_clarifies_and_enters_decision_phase():
    rt = EGIPRuntime(CASE, cfg.ProtocolConfig(acquisition_rounds=6))
    _play(rt, "When did it start?", "Two weeks ago.")
    _play(rt, "REQUEST TEST: CBC")
    _play(rt, "REQUEST TEST: T3")  # repeat -> clarification question to the patient
    _play(rt, "DIAGNOSIS READY: GBS")  # premature -> clarification question
    _play(rt, "REQUEST TEST: Serum potassium")  # absent -> not recorded
    assert rt.phase == "acquire"
    _play(rt, "")  # empty -> interface feedback, counts as a round
    assert rt.phase == "decide" and rt.turn == 6
    assert rt.requested == ["T3"]
    assert rt.invalid_actions == 1
    kinds = [getattr(e, "kind", None) for e in rt.history if isinstance(e, InterfaceEvent)]
    assert kinds == ["repeated_request", "premature_diagnosis", "empty_action",
                     "decision_phase"]
    questions = [e.question_context for e in rt.history if e.source == "patient"]
    assert questions == ["When did it start?", cfg.REPEAT_CLARIFICATION,
                         cfg.PREMATURE_CLARIFICATION]
    evidence = rt.evidence()
    assert [(o.source, o.availability) for o in evidence.observations] == [
        ("Patient", "stated"), ("Measurement", "recorded"), ("Patient", "stated"),
        ("Patient", "stated"), ("Measurement", "not_recorded")]
    text = render_evidence(evidence)
    assert "not recorded (unknown)" in text and "unknown, not normal" in text
    assert "GBS" not in text  # doctor utterances are not observations
    rt.submit_answer("DIAGNOSIS READY: Guillain-Barre syndrome")
    assert rt.phase == "done" and rt.answer == "Guillain-Barre syndrome"


def test_evidence_keeps_only_patient_and_measurement_events():
    events = [DoctorEvent(1, "hi", "question", "hi"), InterfaceEvent(1, "x", "y")]
    assert build_evidence("s0", ("A", "B"), events).observations == ()


def test_premature_diagnosis_can_stop_early():
    rt = EGIPRuntime(CASE, cfg.ProtocolConfig(premature_diagnosis="decide"))
    _play(rt, "DIAGNOSIS READY: GBS")
    assert rt.phase == "decide" and rt.stopped_early and rt.turn == 1


def test_repeats_without_clarification_give_feedback():
    rt = EGIPRuntime(CASE, cfg.ProtocolConfig(clarify_repeats=False))
    _play(rt, "T6")
    _play(rt, "T6")
    assert rt.invalid_actions == 1
    assert rt.history[-1].kind == "repeated_request"


def test_patient_view_withholds_target_and_holds_no_records():
    rt = EGIPRuntime(CASE)
    view = rt.patient_view("What happened?")
    assert "guillain" not in str(view.facts).lower()
    assert "It is getting worse." in view.facts["History"]
    assert "Nerve root" not in str(view)
    # the main noun phrase counts too, as in CaseFlags.target_in_patient_facts
    case = CASE.model_copy(update={
        "patient": {"History": "Interstitial nephritis in 2019. My back hurts."},
        "target": Target(text="Acute interstitial nephritis")})
    facts = EGIPRuntime(case).patient_view("?").facts
    assert dict(facts) == {"History": "My back hurts."}


def test_examiner_view_holds_only_the_matching_record():
    rt = EGIPRuntime(CASE)
    routing = rt.route("REQUEST TEST: ESR")
    view = rt.examiner_view(routing)
    assert (view.exam_id, view.name, view.record) == ("T6", "ESR", "12 mm/h")
    rt.answer_exam(routing)
    routing = rt.route("REQUEST TEST: Troponin")
    assert rt.examiner_view(routing).record is None
    rt.answer_exam(routing)
    view = rt.examiner_view(rt.route("REQUEST TEST: Imaging"))
    assert view.exam_id == "T1,T2" and set(view.record) == {"MRI Brain", "MRI Spine"}


def test_decision_answers_without_marker():
    rt = EGIPRuntime(CASE, cfg.ProtocolConfig(acquisition_rounds=1))
    _play(rt, "Hello")
    rt.submit_answer("Guillain-Barre syndrome.")
    assert rt.answer == "Guillain-Barre syndrome"
    rt = EGIPRuntime(CASE, cfg.ProtocolConfig(acquisition_rounds=1))
    _play(rt, "Hello")
    rt.submit_answer("It could be many things.\nI am not sure which one it is.")
    assert rt.answer is None
    assert NOT_RECORDED_TEXT.startswith("Not recorded")
