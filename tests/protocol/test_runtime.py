"""The EGIP runtime on a hand-built case: routing, feedback, clarification, the decision
phase, the patient's and the examiner's views, the answer."""

from __future__ import annotations

from clinenv.cases import Target
from clinenv.protocol import config as cfg
from clinenv.protocol.evidence import render_evidence
from clinenv.protocol.history import InterfaceEvent
from clinenv.protocol.lookup import NOT_RECORDED_TEXT
from clinenv.protocol.runtime import EGIPRuntime


def test_invalid_and_unclear_requests_are_feedback_not_observations(gbs_case, play):
    rt = EGIPRuntime(gbs_case)
    play(rt, "REQUEST TEST: T99")
    play(rt, "REQUEST TEST: Nerve study")
    assert [e.kind for e in rt.history if e.source == "interface"] == [
        "invalid_request", "unclear_request"]
    assert "T5 Nerve Conduction Studies" in rt.history[-1].message
    assert rt.evidence().observations == ()
    assert rt.invalid_actions == 2


def test_without_menu_no_ids_and_no_names_are_revealed(gbs_case, play):
    rt = EGIPRuntime(gbs_case, cfg.ProtocolConfig(show_menu=False))
    assert rt.menu() == []
    play(rt, "REQUEST TEST: T4")
    assert rt.history[-1].kind == "invalid_request"
    play(rt, "REQUEST TEST: Nerve study")  # unclear -> not recorded, no names listed
    assert rt.history[-1].result_availability == "not_recorded"
    play(rt, "REQUEST TEST: MRI")  # ambiguous -> feedback without names
    assert "MRI Brain" not in rt.history[-1].message
    play(rt, "REQUEST TEST: lumbar puncture")  # validation is unchanged
    assert rt.history[-1].exam_id == "T4"


def test_reasoning_is_removed_before_the_utterance_is_clipped(gbs_case):
    rt = EGIPRuntime(gbs_case)
    long_reasoning = "<think>" + "Let me weigh the options. " * 400 + "</think>\n\n"
    routing = rt.route(long_reasoning + "REQUEST TEST: ESR")
    assert routing.to == "examiner" and routing.entries[0].exam_id == "T6"
    assert len(routing.action.reasoning) <= 16_384
    rt.answer_exam(routing)
    routing = rt.route("Q" * 5000)
    assert len(routing.action.text) == 4096
    assert [e.kind for e in rt.history if e.source == "interface"] == ["clipped_action"]


def test_runtime_routes_clarifies_and_enters_decision_phase(gbs_case, play):
    rt = EGIPRuntime(gbs_case, cfg.ProtocolConfig(acquisition_rounds=6))
    play(rt, "When did it start?", "Two weeks ago.")
    play(rt, "REQUEST TEST: CBC")
    play(rt, "REQUEST TEST: T3")  # repeat -> clarification question to the patient
    play(rt, "DIAGNOSIS READY: GBS")  # premature -> clarification question
    play(rt, "REQUEST TEST: Serum potassium")  # absent -> not recorded
    assert rt.phase == "acquire"
    play(rt, "")  # empty -> interface feedback, counts as a round
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


def test_premature_diagnosis_can_stop_early(gbs_case, play):
    rt = EGIPRuntime(gbs_case, cfg.ProtocolConfig(premature_diagnosis="decide"))
    play(rt, "DIAGNOSIS READY: GBS")
    assert rt.phase == "decide" and rt.stopped_early and rt.turn == 1


def test_repeats_without_clarification_give_feedback(gbs_case, play):
    rt = EGIPRuntime(gbs_case, cfg.ProtocolConfig(clarify_repeats=False))
    play(rt, "T6")
    play(rt, "T6")
    assert rt.invalid_actions == 1
    assert rt.history[-1].kind == "repeated_request"


def test_patient_view_withholds_target_and_holds_no_records(gbs_case):
    rt = EGIPRuntime(gbs_case)
    view = rt.patient_view("What happened?")
    assert "guillain" not in str(view.facts).lower()
    assert "It is getting worse." in view.facts["History"]
    assert "Nerve root" not in str(view)
    # the main noun phrase counts too, as in CaseFlags.target_in_patient_facts
    case = gbs_case.model_copy(update={
        "patient": {"History": "Interstitial nephritis in 2019. My back hurts."},
        "target": Target(text="Acute interstitial nephritis")})
    facts = EGIPRuntime(case).patient_view("?").facts
    assert dict(facts) == {"History": "My back hurts."}


def test_examiner_view_holds_only_the_matching_record(gbs_case):
    rt = EGIPRuntime(gbs_case)
    routing = rt.route("REQUEST TEST: ESR")
    view = rt.examiner_view(routing)
    assert (view.exam_id, view.name, view.record) == ("T6", "ESR", "12 mm/h")
    rt.answer_exam(routing)
    routing = rt.route("REQUEST TEST: Troponin")
    assert rt.examiner_view(routing).record is None
    rt.answer_exam(routing)
    view = rt.examiner_view(rt.route("REQUEST TEST: Imaging"))
    assert view.exam_id == "T1,T2" and set(view.record) == {"MRI Brain", "MRI Spine"}


def test_decision_answers_without_marker(gbs_case, play):
    rt = EGIPRuntime(gbs_case, cfg.ProtocolConfig(acquisition_rounds=1))
    play(rt, "Hello")
    rt.submit_answer("Guillain-Barre syndrome.")
    assert rt.answer == "Guillain-Barre syndrome"
    rt = EGIPRuntime(gbs_case, cfg.ProtocolConfig(acquisition_rounds=1))
    play(rt, "Hello")
    rt.submit_answer("It could be many things.\nI am not sure which one it is.")
    assert rt.answer is None
    assert NOT_RECORDED_TEXT.startswith("Not recorded")
