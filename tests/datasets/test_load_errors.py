"""Malformed and edge-case files, built in tmp_path: errors name file, line and field."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from clinenv.cases import iter_json_lines, read_cases, scan_json_lines
from clinenv.datasets import load_cases, load_cases_with_report
from clinenv.datasets.nejm import case_from_nejm
from clinenv.datasets.osce import case_from_osce
from clinenv.errors import CaseFormatError


def osce(diagnosis: str = "Sepsis", **overrides) -> dict:
    exam = {
        "Objective_for_Doctor": "Evaluate the febrile patient.",
        "Patient_Actor": {"Demographics": "60-year-old man", "History": "Fever for 2 days."},
        "Physical_Examination_Findings": {"Vital_Signs": {"Temperature": "39.2°C"}},
        "Test_Results": {"Blood_Tests": {"Lactate": "4.1 mmol/L"}},
        "Correct_Diagnosis": diagnosis,
    }
    exam.update(overrides)
    return {"OSCE_Examination": {k: v for k, v in exam.items() if v is not ...}}


def nejm(**overrides) -> dict:
    record = {
        "question": "A 40-year-old man presented with fever. A blood smear showed ring forms. "
                    "Which pathogen is the most likely cause?",
        "patient_info": "You are a 40-year-old man with fever for a week.",
        "physical_exams": "Blood smear: Ring forms in erythrocytes",
        "answers": [{"text": t, "correct": t == "Plasmodium falciparum"} for t in
                    ("Babesia microti", "Plasmodium falciparum", "Plasmodium vivax",
                     "Trypanosoma cruzi", "Leishmania donovani")],
    }
    record.update(overrides)
    return {k: v for k, v in record.items() if v is not ...}


def write_lines(path: Path, lines: list) -> Path:
    text = "\n".join(x if isinstance(x, str) else json.dumps(x, ensure_ascii=False)
                     for x in lines)
    path.write_text(text + "\n", encoding="utf-8")
    return path


def test_bom_tolerated(tmp_path):
    path = tmp_path / "one.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(osce()).encode("utf-8"))  # no final newline
    (case,) = load_cases(path)
    assert case.case_id == "one-0001"
    assert case.records.physical_exam["Vital_Signs"]["Temperature"] == "39.2°C"


def test_invalid_byte_on_line_5(tmp_path):
    lines = [json.dumps(osce(f"Dx {i}")).encode("utf-8") for i in range(1, 7)]
    lines[4] = lines[4].replace(b"Dx 5", b"Dx \xff5")
    path = tmp_path / "bad_byte.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(CaseFormatError) as info:
        load_cases(path)
    assert (info.value.path, info.value.line, info.value.field) == (str(path), 5, None)
    assert "0xff" in info.value.reason and str(path) in str(info.value)
    cases, report = load_cases_with_report(path, strict=False)
    assert [c.case_id for c in cases] == [f"bad_byte-000{i}" for i in (1, 2, 3, 4, 6)]
    assert [line for line, _ in report.skipped] == [5]


def test_bad_json_line(tmp_path):
    path = write_lines(tmp_path / "x.jsonl", [osce(), '{"OSCE_Examination": {'])
    with pytest.raises(CaseFormatError) as info:
        load_cases(path)
    assert (info.value.path, info.value.line, info.value.field) == (str(path), 2, None)
    assert info.value.reason.startswith("invalid JSON")


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("Test_Results", ["CBC normal"], "expected an object, got array"),
        ("Physical_Examination_Findings", "normal", "expected an object, got string"),
        ("Correct_Diagnosis", 42, "expected a string, got number"),
        ("Correct_Diagnosis", "  ", "must be a non-empty string"),
        ("Objective_for_Doctor", None, "expected a string, got null"),
        ("Patient_Actor", ["a", "b"], "expected an object or a string, got array"),
    ],
)
def test_wrong_types(tmp_path, key, value, expected):
    path = write_lines(tmp_path / "x.jsonl", [osce(), osce(), osce(**{key: value})])
    with pytest.raises(CaseFormatError) as info:
        load_cases(path)
    err = info.value
    assert (err.path, err.line, err.field) == (str(path), 3, f"OSCE_Examination.{key}")
    assert err.reason == expected


@pytest.mark.parametrize("key", ["Objective_for_Doctor", "Patient_Actor", "Correct_Diagnosis"])
def test_missing_required_key(tmp_path, key):
    path = write_lines(tmp_path / "x.jsonl", [osce(**{key: ...})])
    with pytest.raises(CaseFormatError) as info:
        load_cases(path)
    assert (info.value.line, info.value.field) == (1, f"OSCE_Examination.{key}")
    assert info.value.reason == "missing required key"


def test_missing_root_key(tmp_path):
    path = write_lines(tmp_path / "x.jsonl", [osce(), {"Objective_for_Doctor": "x"}])
    with pytest.raises(CaseFormatError) as info:
        load_cases(path)
    assert (info.value.line, info.value.field) == (2, "OSCE_Examination")


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_empty_file(tmp_path, content):
    path = tmp_path / "empty.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(CaseFormatError) as info:
        load_cases(path)
    assert info.value.reason == "the file holds no cases"
    assert (info.value.path, info.value.line, info.value.field) == (str(path), None, None)


def test_missing_tree_keys_are_lenient_and_recorded(tmp_path):
    record = osce(Test_Results=..., Physical_Examination_Findings=None)
    path = write_lines(tmp_path / "x.jsonl", [record])
    (case,) = load_cases(path)  # strict mode too
    assert case.records.tests == {} and case.records.physical_exam == {}
    assert case.metadata["missing_keys"] == ["Physical_Examination_Findings", "Test_Results"]
    assert case.flags.no_recorded_tests


def test_unknown_keys_kept(tmp_path):
    record = osce(Management_and_Follow_Up={"Plan": "Antibiotics"})
    record["annotator"] = "x"
    path = write_lines(tmp_path / "x.jsonl", [record, osce()])
    cases = load_cases(path)
    assert cases[0].metadata["extra"] == {"Management_and_Follow_Up": {"Plan": "Antibiotics"}}
    assert cases[0].metadata["extra_top_level"] == {"annotator": "x"}
    assert "extra" not in cases[1].metadata
    nejm_record = nejm(source="NEJM Image Challenge")
    case = case_from_nejm(nejm_record, dataset="n", index=1)
    assert case.metadata["extra"] == {"source": "NEJM Image Challenge"}


def test_string_patient_actor_is_wrapped():
    case = case_from_osce(osce(Patient_Actor="I have a fever."), dataset="u", index=3)
    assert case.patient == {"Patient_Actor": "I have a fever."}
    assert case.case_id == "u-0003"
    assert case.metadata == {"source_file": None, "source_line": None}


def test_source_dicts_not_mutated():
    record = osce(Management_and_Follow_Up={"Plan": ["a"]})
    before = copy.deepcopy(record)
    case = case_from_osce(record, dataset="u", index=1)
    assert record == before
    case.records.tests["Blood_Tests"]["Lactate"] = "changed"  # case trees are copies
    assert record == before
    record2 = nejm(type=["Diagnosis"])
    before2 = copy.deepcopy(record2)
    case_from_nejm(record2, dataset="n", index=1, disclosure="vignette")
    assert record2 == before2


# field-bug-reports B19
def test_b19_strict_and_lenient(tmp_path):
    """Valid, trailing comma, markdown fence, valid without Test_Results."""
    path = tmp_path / "agentclinic_mimiciv.jsonl"
    path.write_text(
        json.dumps(osce()) + "\n"
        '{"OSCE_Examination": {"Objective_for_Doctor": "Evaluate the febrile patient.", '
        '"Correct_Diagnosis": "Sepsis",}}\n'
        "```json\n"
        + json.dumps(osce("Pneumonia", Test_Results=...)),
        encoding="utf-8",
    )
    with pytest.raises(CaseFormatError) as info:
        load_cases("MIMIC-IV", tmp_path)
    assert (info.value.path, info.value.line) == (str(path), 2)
    cases, report = load_cases_with_report("mimiciv", tmp_path, strict=False)
    assert [c.case_id for c in cases] == ["mimiciv-0001", "mimiciv-0004"]
    assert report.n_loaded == 2 and report.n_skipped == 2
    assert [line for line, _ in report.skipped] == [2, 3]
    assert all(reason.startswith("invalid JSON") for _, reason in report.skipped)
    assert cases[1].records.tests == {}
    assert cases[1].metadata["missing_keys"] == ["Test_Results"]
    assert cases[1].flags.no_recorded_tests


def test_lenient_skips_wrong_types_with_field_in_reason(tmp_path):
    path = write_lines(tmp_path / "x.jsonl", [osce(), osce(Test_Results=[1])])
    cases, report = load_cases_with_report(path, strict=False)
    assert len(cases) == 1
    assert report.skipped == [
        (2, "field 'OSCE_Examination.Test_Results': expected an object, got array")]


def test_lenient_with_no_valid_line_still_fails(tmp_path):
    path = write_lines(tmp_path / "x.jsonl", ["```json", "```"])
    with pytest.raises(CaseFormatError, match="holds no cases"):
        load_cases(path, strict=False)


# ----------------------------------------------------------------------------- NEJM
@pytest.mark.parametrize("n_correct", [0, 2])
def test_nejm_needs_exactly_one_correct_answer(tmp_path, n_correct):
    answers = [{"text": f"Option {i}", "correct": i < n_correct} for i in range(5)]
    path = write_lines(tmp_path / "n.jsonl", [nejm(), nejm(answers=answers)])
    with pytest.raises(CaseFormatError) as info:
        load_cases(path)
    assert (info.value.line, info.value.field) == (2, "answers")
    assert info.value.reason == f"expected exactly one correct answer, found {n_correct}"


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"question": ...}, "question"),
        ({"patient_info": 3}, "patient_info"),
        ({"physical_exams": ["a"]}, "physical_exams"),
        ({"answers": [{"text": "", "correct": True}]}, "answers[0].text"),
        ({"answers": [{"text": "A", "correct": "yes"}]}, "answers[0].correct"),
        ({"type": [1]}, "type"),
    ],
)
def test_nejm_field_errors(tmp_path, overrides, field):
    path = write_lines(tmp_path / "n.jsonl", [nejm(**overrides)])
    with pytest.raises(CaseFormatError) as info:
        load_cases(path)
    assert (info.value.path, info.value.line, info.value.field) == (str(path), 1, field)


def test_nejm_synthetic_record(tmp_path):
    path = write_lines(tmp_path / "n.jsonl", [nejm(type=["Diagnosis", "Pathogen"])])
    (case,) = load_cases(path, disclosure="question")
    assert case.objective == "Which pathogen is the most likely cause?"
    assert case.flags.non_diagnostic_target
    assert case.target.text == "Plasmodium falciparum" and case.target.option_index == 1
    assert case.records.tests == {"Blood smear": "Ring forms in erythrocytes"}
    assert case.metadata["question_type"] == ["Diagnosis", "Pathogen"]
    (case,) = load_cases(path)
    assert case.objective == ("A 40-year-old man presented with fever. "
                              "Which pathogen is the most likely cause?")


def test_nejm_missing_exam_text_means_no_tests(tmp_path):
    path = write_lines(tmp_path / "n.jsonl", [nejm(physical_exams=...)])
    (case,) = load_cases(path)
    assert case.records.tests == {} and case.flags.no_recorded_tests
    assert case.metadata["missing_keys"] == ["physical_exams"]


def test_unknown_disclosure_rejected(tmp_path):
    path = write_lines(tmp_path / "n.jsonl", [nejm()])
    with pytest.raises(ValueError, match="disclosure"):
        load_cases(path, disclosure="everything")


def test_unrecognized_schema_reports_line(tmp_path):
    path = write_lines(tmp_path / "x.jsonl", [{"foo": 1}])
    with pytest.raises(CaseFormatError) as info:
        load_cases(path)
    assert (info.value.line, info.value.field) == (1, "OSCE_Examination")


def test_near_duplicate_within_a_file(tmp_path):
    base = osce()
    twin = osce("Septic shock", Objective_for_Doctor="Evaluate the febrile patient!")
    other = osce(Objective_for_Doctor="Assess the patient with a swollen knee after a fall.",
                 Patient_Actor={"Demographics": "20-year-old woman",
                                "History": "Knee swelling since a ski fall yesterday."})
    path = write_lines(tmp_path / "d.jsonl", [base, other, twin, copy.deepcopy(twin)])
    cases = load_cases(path)
    assert [c.flags.near_duplicate_of for c in cases] == [None, None, "d-0001", "d-0001"]


# ------------------------------------------------------------ Test_Results absent (B19)
def test_record_without_test_results_is_not_recorded(tmp_path):
    """No ``Test_Results`` key: no tests at all, so the examiner answers "not recorded"
    (the record holds no such test), never "unavailable" and never normal."""
    path = write_lines(tmp_path / "x.jsonl", [osce(Test_Results=...)])
    (case,) = load_cases(path)  # strict mode
    assert case.records.tests == {}
    assert case.flags.no_recorded_tests
    assert case.metadata["missing_keys"] == ["Test_Results"]
    assert case.records.physical_exam == {"Vital_Signs": {"Temperature": "39.2°C"}}


# ------------------------------------------------------------ the one JSON Lines reader
def test_scan_json_lines_yields_errors_and_strict_reader_raises_them(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\n\n  \n{"b": \n"caf\xe9"\n[1, 2]')
    scanned = list(scan_json_lines(path))
    assert [line for line, _ in scanned] == [1, 4, 5, 6]
    assert scanned[0][1] == {"a": 1} and scanned[3][1] == [1, 2]
    errors = [obj for _, obj in scanned if isinstance(obj, CaseFormatError)]
    assert [(e.path, e.line, e.field) for e in errors] == [(str(path), 4, None),
                                                           (str(path), 5, None)]
    assert errors[0].reason.startswith("invalid JSON: ")
    assert errors[1].reason == "invalid UTF-8 byte 0xe9 at column 5"
    lines = iter_json_lines(path)
    assert next(lines) == (1, {"a": 1})
    with pytest.raises(CaseFormatError) as info:
        next(lines)
    assert info.value.line == 4 and info.value.reason == errors[0].reason


def _canonical_line(case_id: str) -> dict:
    return {"case_id": case_id, "dataset": "mine", "objective": "Diagnose.",
            "target": {"text": "Sepsis"}}


def test_canonical_duplicate_ids_strict_and_lenient(tmp_path):
    path = write_lines(tmp_path / "mine.jsonl", [
        _canonical_line("a"), _canonical_line("b"), _canonical_line("a"), "{bad",
        _canonical_line("c")])
    for read in (read_cases, load_cases):
        with pytest.raises(CaseFormatError) as info:
            read(path)
        assert (info.value.line, info.value.field) == (3, "case_id")
        assert info.value.reason == "duplicate case_id 'a' (first on line 1)"
    cases, report = load_cases_with_report(path, strict=False)
    assert [c.case_id for c in cases] == ["a", "b", "c"]
    assert report.schema == "canonical"
    assert [line for line, _ in report.skipped] == [3, 4]
    assert report.skipped[0][1] == "field 'case_id': duplicate case_id 'a' (first on line 1)"
    skipped: list[CaseFormatError] = []
    assert [c.case_id for c in read_cases(path, on_error=skipped.append)] == ["a", "b", "c"]
    assert [e.line for e in skipped] == [3, 4]


def test_canonical_file_with_only_bad_lines(tmp_path):
    path = write_lines(tmp_path / "mine.jsonl", [_canonical_line("a"), _canonical_line("a")])
    path.write_text(path.read_text(encoding="utf-8").replace('"Sepsis"', '""'),
                    encoding="utf-8")
    with pytest.raises(CaseFormatError) as info:
        read_cases(path, on_error=lambda err: None)
    assert info.value.reason == "the file holds no cases (2 bad lines skipped)"
    with pytest.raises(CaseFormatError, match=r"holds no cases \(2 bad lines skipped\)"):
        load_cases(path, strict=False)
