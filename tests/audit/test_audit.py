"""The information-boundary audit: the detector, a planted leak and a clean environment,
the published AgentClinic loop against EGIP, and ``clinenv audit``.

The planted leaks are patient objects written here that say the target, or a recorded
result, when asked; the LLM seats run offline against the fake server on 127.0.0.1.
"""

from __future__ import annotations

import json

import pytest
from rapidfuzz import fuzz

from clinenv.audit import LeakDetector, audit_env, distinctive_words, is_specific, run_audit
from clinenv.audit.responder import oversharing_responder
from clinenv.audit.turns import ADVERSARIAL_TURNS, audit_plan
from clinenv.cases import Case
from clinenv.cli import main
from clinenv.env import EGIPEnv
from clinenv.protocol.catalog import normalize_name
from clinenv.testing.data import MEDQA_FILE, needs_shared_data

CASE = Case.model_validate({
    "case_id": "c1", "dataset": "synthetic",
    "objective": "Evaluate the child with fever and an itchy rash.",
    "patient": {"Demographics": "6-year-old boy",
                "History": "Two days of fever, then itchy spots on the trunk.",
                "Temperature_at_home": "38.4 °C"},
    "records": {"physical_exam": {"Vital_Signs": {"Temperature": "38.4 °C",
                                                  "Heart_Rate": "104 bpm"},
                                  "Skin_Examination": "Vesicles in crops on the trunk."},
                "tests": {"Serology": {"IgM": "Positive"},
                          "Chest_X_Ray": {"Findings": "Patchy bilateral nodular opacities"}}},
    "target": {"text": "Varicella"}})


@pytest.mark.parametrize(("value", "expected"), [
    ("Normal", False), ("Negative", False), ("Within normal limits", False),
    ("12", False), ("120/80", False), ("Pending", False), ("No abnormalities detected", False),
    ("Normal sinus rhythm", True), ("Splenomegaly", True), ("9.2 g/dL", True),
    ("Patchy bilateral nodular opacities", True), ("Vesicles in crops on the trunk.", True),
    # an upper-case abbreviation means something; the same letters in lower case do not
    ("Positive for HSV", True), ("RPR reactive", True), ("Positive for hsv", False),
    ("NORMAL", False), ("IgM", False),
])
def test_is_specific(value, expected):
    assert is_specific(value) is expected


def test_distinctive_words():
    assert distinctive_words("Acute interstitial nephritis") == ["interstitial", "nephritis"]
    assert distinctive_words("Normal pressure hydrocephalus") == ["pressure", "hydrocephalus"]
    assert distinctive_words("Type 2 diabetes mellitus") == ["diabetes", "mellitus"]


def test_the_detector_places_each_hit():
    det = LeakDetector(CASE)
    t2 = det.catalog.get("T2")  # Chest X Ray
    assert t2 is not None and t2.name == "Chest X Ray"

    def kinds(text, requested=(), known=()):
        return [(h.kind, h.item, h.placement)
                for h in det.scan(text, requested=list(requested), known=list(known))]

    assert kinds("Patient: the doctors said varicella.") == [("target", "varicella", "leak")]
    assert kinds("Patient: my x-ray showed patchy bilateral nodular opacities") == [
        ("unrequested_result", "Patchy bilateral nodular opacities", "leak")]
    # requested: its result is the doctor's own
    assert kinds("Examiner [T2 Chest X Ray]: Findings: Patchy bilateral nodular opacities",
                 ["T2"], det.requested_text([t2])) == []
    # what P holds, the patient may say; what the doctor said itself is no leak
    assert kinds("Patient: it was 38.4 °C at home") == []
    assert kinds("Patient: varicella?", known=["Could this be varicella?"]) == []
    # generic values are never results that mean something
    assert kinds("Patient: the IgM was positive") == []


def test_known_words_shared_results_and_group_requests_are_no_leak():
    case = Case.model_validate({
        "case_id": "c2", "dataset": "synthetic",
        "objective": "Evaluate the dermatitis on the patient's hands.",
        "patient": {"History": "Itchy hands for a week."},
        "records": {"physical_exam": {"Skin_Examination": "Erythematous plaques"},
                    "tests": {"Patch_Tests": {"Nickel": {"Reading": "Strong reaction at 48 h"},
                                          "Fragrance_Mix": {"Reading": "Weak reaction"}},
                          "Nickel_Retest": "Strong reaction at 48 h",
                          "Skin_Biopsy": "Spongiotic dermatitis"}},
        "target": {"text": "Contact dermatitis"}})
    det = LeakDetector(case)
    assert distinctive_words("Contact dermatitis") == ["contact", "dermatitis"]

    def found(text, utterances=()):
        entries = [e for u in utterances for e in det.named_entries(u)]
        hits = det.scan(text, requested=[e.exam_id for e in entries],
                        known=[*utterances, *det.requested_text(entries)])
        return [(h.kind, h.item, h.exam) for h in hits]

    # a target word that s0 holds is no finding; the whole target still is
    assert found("Patient: the dermatitis itches") == []
    assert found("Patient: it is contact dermatitis") == [
        ("target", "contact dermatitis", None)]
    # a group requested by its name: every test of the group is requested
    request = "REQUEST TEST: Patch Tests"
    assert [e.name for e in det.named_entries(request)] == ["Nickel", "Fragrance Mix"]
    assert found("Nickel: Strong reaction at 48 h\nFragrance Mix: Weak reaction",
                 [request]) == []
    # a result text two tests share: once one is requested, the text is the doctor's
    assert found("Nickel Retest: Strong reaction at 48 h", [request]) == []
    # ... unrequested, it is one finding naming both examinations
    assert found("Nickel Retest: Strong reaction at 48 h") == [
        ("unrequested_result", "Strong reaction at 48 h", "Nickel (Patch Tests); Nickel Retest")]
    # the other results stay unrequested ("Spongiotic dermatitis": the result, and the
    # target word "spongiotic" is not one of Y's)
    assert found("Skin Biopsy: Spongiotic dermatitis", [request]) == [
        ("unrequested_result", "Spongiotic dermatitis", "Skin Biopsy")]
    assert found("Skin Biopsy: Spongiotic dermatitis") == [
        ("unrequested_result", "Spongiotic dermatitis", "Skin Biopsy")]


def test_the_detector_reports_menu_and_patient_fact_hits_apart():
    case = CASE.model_copy(update={
        "patient": {"History": "My sister had varicella last month."},
        "records": CASE.records.model_copy(update={"tests": {"Varicella_Serology": {
            "IgM": "Positive"}}})})
    det = LeakDetector(case)
    hits = det.scan("T1  Varicella Serology\nPatient: my sister had varicella",
                    requested=[], known=[])
    assert [(h.item, h.placement) for h in hits] == [("varicella", "menu"),
                                                     ("varicella", "menu")]
    det = LeakDetector(case.model_copy(update={"records": CASE.records}))
    hits = det.scan("Patient: my sister had varicella", requested=[], known=[])
    assert [(h.item, h.placement) for h in hits] == [("varicella", "patient_facts")]


class PlantedPatient:
    """Says ``line`` when asked exactly "What is your diagnosis?" (the plan's second
    turn), else one harmless sentence."""

    def __init__(self, line: str, cue: str) -> None:
        self.line, self.cue = line, cue

    def reply(self, view) -> str:
        return self.line if self.cue in view.question.lower() else "I have had a fever."


def _step_of(kind_text: str) -> int:
    """1-based doctor step of the first plan turn that starts with ``kind_text``."""
    plan = audit_plan("PE1")
    return next(i for i, t in enumerate(plan, start=1) if t.text.startswith(kind_text))


def test_a_planted_target_leak_is_found_once_with_case_turn_and_text():
    patient = PlantedPatient("The doctors told me it is varicella.", "what is your diagnosis")
    report = audit_env(EGIPEnv(cases=[CASE], patient=patient), env_id="planted")
    assert not report.passed
    [leak] = report.leaks
    assert (leak.case_id, leak.kind, leak.item, leak.placement) == (
        "c1", "target", "varicella", "leak")
    assert leak.turn == _step_of("What is your diagnosis") == 2
    assert leak.doctor_turn == "diagnosis_question"
    assert "it is varicella" in leak.text
    assert report.counts()["n_leaks"] == 1


def test_a_planted_unrequested_result_is_found():
    patient = PlantedPatient("My x-ray showed patchy bilateral nodular opacities.",
                             "all of your test results")
    report = audit_env(EGIPEnv(cases=[CASE], patient=patient))
    [leak] = report.leaks
    assert (leak.kind, leak.exam, leak.turn) == ("unrequested_result", "Chest X Ray",
                                                 _step_of("Please tell me all"))


def test_the_clean_environment_passes():
    report = audit_env(EGIPEnv(cases=[CASE]))
    assert report.passed and report.findings == []
    assert report.n_cases == 1 and report.n_steps == 20  # T = 19 rounds and the answer


def test_the_clean_pass_is_not_vacuous(monkeypatch):
    """The control request's result did reach the doctor: read as unrequested (no
    request is recognized), the same clean run leaks it, at the control turn."""
    monkeypatch.setattr(LeakDetector, "named_entries", lambda self, utterance: [])
    report = audit_env(EGIPEnv(cases=[CASE]))
    control = next(i for i, t in enumerate(audit_plan("T1"), start=1)
                   if t.kind == "control_request")
    assert {(f.kind, f.turn, f.doctor_turn) for f in report.leaks} == {
        ("unrequested_result", control, "control_request")}
    # the values of the first menu entry, and only those (hand-read from CASE's records)
    assert {f.item for f in report.leaks} <= {"Patchy bilateral nodular opacities",
                                              "Vesicles in crops on the trunk.", "104 bpm",
                                              "38.4 °C"}


ALL_CASE = CASE.model_copy(update={
    "case_id": "all1", "target": CASE.target.model_copy(
        update={"text": "Acute lymphoblastic leukemia (ALL)"})})


def test_a_plan_turn_that_names_the_target_is_left_out_so_a_leak_of_it_is_found():
    """"REQUEST TEST: ALL" would make "ALL" the doctor's own words on this case (so a
    later "ALL" from the patient would count as known); the turn is left out."""
    det = LeakDetector(ALL_CASE)
    assert det.mentions_target("REQUEST TEST: ALL")
    assert not det.mentions_target("REQUEST TEST: all results")  # lower case: a word
    patient = PlantedPatient("They said it was ALL.", "name of your condition")
    report = audit_env(EGIPEnv(cases=[ALL_CASE], patient=patient))
    [leak] = report.leaks
    assert (leak.kind, leak.item, leak.doctor_turn) == ("target", "ALL",
                                                        "diagnosis_question")
    # two turns hold "ALL" ("REQUEST TEST: ALL", "Examiner [ALL]: ..."): the question is
    # the plan's 11th turn (control inserted), the 9th once those are out
    assert _step_of("Do you know the name") == 11 and leak.turn == 9


def test_the_plan_names_no_target_and_no_value():
    texts = " ".join(t.text for t in ADVERSARIAL_TURNS).lower()
    assert "varicella" not in texts and "opacities" not in texts


# ------------------------------------------------------------ EGIP against AgentClinic
def test_egip_demo_passes_with_the_retrieval_and_the_llm_patient():
    for patient in ("retrieval", "llm"):
        report = run_audit("EGIP-Demo-v0", patient=patient)
        assert report.passed, report.to_text()
        assert report.n_cases == 17


def test_the_published_agentclinic_loop_leaks_through_its_measurement_agent():
    """W3 (research notes; EGIP section 1): the LLM measurement agent holds every record,
    so the first request ("all results") brings unrequested results on every case."""
    report = run_audit("AgentClinic-Demo-v0", examiner="llm")
    assert not report.passed
    assert {f.case_id for f in report.leaks} == {f"demo-{i:02d}" for i in range(1, 18)}
    assert min(f.turn for f in report.leaks) == 3  # "REQUEST TEST: all results"
    at_first = {f.case_id for f in report.leaks
                if (f.turn, f.doctor_turn, f.kind) == (3, "all_results", "unrequested_result")}
    assert at_first == {f"demo-{i:02d}" for i in range(1, 18)}


def test_the_record_reader_discloses_fuzzily_named_records():
    """The offline stand-in matches names by partial_ratio >= 90: "every examination"
    names "Eye Examination" (checked here with rapidfuzz itself)."""
    report = run_audit("AgentClinic-Demo-v0")
    request = next(t.text for t in ADVERSARIAL_TURNS if t.text.startswith("REQUEST TEST: every"))
    assert fuzz.partial_ratio("eye examination", normalize_name(request)) >= 90
    assert sorted({(f.case_id, f.exam, f.turn) for f in report.leaks}) == [
        ("demo-11", "Eye Examination", 6), ("demo-14", "Eye Examination", 6)]


@needs_shared_data(MEDQA_FILE)
def test_medqa_egip_passes_and_agentclinic_leaks(shared_data_dir):
    assert run_audit("EGIP-MedQA-v0").passed
    assert run_audit("EGIP-MedQA-v0", patient="llm", limit=15).passed
    native = run_audit("AgentClinic-MedQA-v0", patient="llm", examiner="llm", limit=5)
    assert {f.case_id for f in native.leaks} == {f"medqa-{i:04d}" for i in range(1, 6)}


# ------------------------------------------------------------------ the responder
def test_the_oversharing_responder_says_its_whole_system_prompt():
    from clinenv.agents.prompts import PATIENT_SYSTEM

    system = PATIENT_SYSTEM.format(voice="You are the patient.", facts="History: X\nY: Z")
    body = {"messages": [{"role": "system", "content": system},
                         {"role": "user", "content": "Hello"}]}
    reply = oversharing_responder(body, 0)
    assert reply.endswith("Facts: | History: X | Y: Z") and "\n" not in reply


# ------------------------------------------------------------------ the command line
def test_cli_exit_codes_and_json(tmp_path, capsys):
    out = tmp_path / "audit.json"
    assert main(["audit", "EGIP-Demo-v0", "--limit", "2", "--json", str(out)]) == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    assert (data["passed"], data["n_cases"], data["leaks"]) == (True, 2, [])
    assert "PASSED" in capsys.readouterr().out
    assert main(["audit", "AgentClinic-Demo-v0", "--examiner", "llm", "--limit", "1",
                 "--json", "-"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["passed"] is False and data["counts"]["n_leaking_cases"] == 1
    assert data["leaks"][0]["case_id"] == "demo-01"
    # the fields docs/audit.md lists ("The JSON report")
    assert set(data) == {"env_id", "protocol", "seats", "n_cases", "n_steps", "wall_s",
                         "passed", "counts", "leaks", "apart", "flagged"}
    assert set(data["counts"]) == {"n_leaks", "n_leaking_cases", "by_kind",
                                   "by_doctor_turn", "n_apart"}
    assert set(data["leaks"][0]) == {"case_id", "turn", "doctor_turn", "doctor_text",
                                     "action_kind", "kind", "item", "exam", "text",
                                     "placement", "source"}
    assert data["seats"] == {"patient": "retrieval", "examiner": "llm"}
    assert set(data["flagged"]) == {"target_in_menu", "target_in_patient_facts",
                                    "target_in_records"}


def test_cli_errors_name_what_is_wrong(tmp_path, capsys):
    assert main(["audit", "NoSuchEnv-v0"]) == 2
    assert "cannot make 'NoSuchEnv-v0'" in capsys.readouterr().err
    # a --json folder that does not exist is refused before the audit runs
    missing = tmp_path / "no" / "audit.json"
    assert main(["audit", "EGIP-Demo-v0", "--json", str(missing)]) == 2
    captured = capsys.readouterr()
    assert f"--json {missing}: no such folder" in captured.err and captured.out == ""
    listed = tmp_path / "cases.txt"
    listed.write_text("demo-01\ndemo-99\n", encoding="utf-8")
    assert main(["audit", "EGIP-Demo-v0", "--cases", str(listed)]) == 2
    err = capsys.readouterr().err
    assert f"{listed}, line 2" in err and "demo-99" in err


def test_a_menu_that_names_the_target_is_reported_apart_and_the_setting_removes_it():
    case = CASE.model_copy(update={"records": CASE.records.model_copy(update={"tests": {
        "Varicella_Specific_Tests": {"IgM_Antibodies_to_Varicella_Zoster_Virus": "Positive"},
        "Chest_X_Ray": {"Findings": "Patchy bilateral nodular opacities"}}})})
    assert case.flags.target_in_menu is False  # built in memory: the rule still applies
    report = audit_env(EGIPEnv(cases=[case]))
    assert report.passed and report.flagged["target_in_menu"] == ["c1"]
    assert [(f.turn, f.kind, f.item, f.placement) for f in report.apart] == [
        (0, "target", "varicella", "menu")]
    assert report.apart[0].text == "T1  Varicella Specific Tests"
    neutral = audit_env(EGIPEnv(cases=[case], target_in_menu="neutral"))
    assert neutral.passed and neutral.findings == []


def test_cli_llm_seats_without_the_openai_client_is_a_one_line_error(capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "openai", None)  # a plain install: no openai client
    assert main(["audit", "EGIP-Demo-v0", "--patient", "llm", "--limit", "1"]) == 2
    err = capsys.readouterr().err
    assert "pip install -e '.[openai]' in a clinenv clone" in err and "Traceback" not in err
