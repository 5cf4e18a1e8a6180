"""Loading the real AgentClinic files (MedQA 107, NEJM 15) from ``clinenv.testing.data.SHARED_DATA``
(``$CLINENV_TEST_DATA``, else ../shared/datasets/agentclinic).

The files are never copied into the repository; these tests skip when they are absent.
Values pinned here were checked by reading the records by hand.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from clinenv.cases import read_cases, write_cases
from clinenv.datasets import load_cases, verify_dataset
from clinenv.datasets.nejm import case_from_nejm
from clinenv.datasets.nejm_split import FALLBACK_NAME
from clinenv.datasets.osce import case_from_osce
from clinenv.testing.data import SHARED_DATA, needs_shared_data

DATA = SHARED_DATA
MEDQA = DATA / "agentclinic_medqa.jsonl"
NEJM = DATA / "agentclinic_nejm.jsonl"

pytestmark = needs_shared_data(MEDQA.name, NEJM.name)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    monkeypatch.delenv("CLINENV_DATA_DIR", raising=False)
    monkeypatch.setattr("clinenv.datasets.resolve.cache_dir", lambda: tmp_path / "cache")


def _raw(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def _flag_counts(cases) -> Counter:
    counts: Counter = Counter()
    for case in cases:
        for name, value in case.flags.model_dump().items():
            counts[name] += bool(value)
    return counts


def test_counts_ids_and_sources():
    medqa, nejm = load_cases("medqa", DATA), load_cases("NEJM", DATA)
    assert len(medqa) == 107 and len(nejm) == 15
    assert [c.case_id for c in medqa[:2]] == ["medqa-0001", "medqa-0002"]
    assert nejm[-1].case_id == "nejm-0015"
    assert medqa[-1].metadata["source_file"] == "agentclinic_medqa.jsonl"
    assert medqa[-1].metadata["source_line"] == 107
    assert all(c.candidates is None and c.target.option_index is None for c in medqa)
    assert all(len(c.candidates) == 5 for c in nejm)


def test_verify_dataset_real_files():
    result = verify_dataset("medqa", DATA)
    assert result["ok"] is True
    assert result["n_records"] == 107
    assert result["sha256"] == result["expected"]
    assert verify_dataset("nejm", DATA)["n_records"] == 15


def test_osce_mapping_of_first_record():
    case = load_cases("medqa", DATA)[0]
    assert case.objective.startswith("Assess and diagnose the patient presenting with double")
    assert case.patient["Demographics"] == "35-year-old female"
    assert case.target.text == "Myasthenia gravis"
    assert case.records.physical_exam["Vital_Signs"]["Temperature"] == "36.6°C (97.9°F)"


def test_nested_groups_kept_as_trees():
    cases = {c.case_id: c for c in load_cases("medqa", DATA)}
    tests = cases["medqa-0001"].records.tests
    ct = tests["Imaging"]["Chest_CT"]
    assert ct["Findings"] == "Normal, no thymoma or other masses detected."
    assert tests["Blood_Tests"] == {"Acetylcholine_Receptor_Antibodies": "Present (elevated)"}
    # the one bool leaf (line 77) and an empty sub-dict (line 28) survive as they are
    vitals = cases["medqa-0077"].records.physical_exam["Vital_Signs"]
    assert vitals == {"Within_Normal_Limits": True}
    shoulder = cases["medqa-0028"].records.physical_exam["Shoulder_Examination"]
    assert shoulder["Special_Tests"] == {}
    assert shoulder["Range_of_Motion"]["Abduction"] == "75° with pain"
    assert cases["medqa-0074"].records.tests["Imaging"] == {}
    assert cases["medqa-0069"].records.tests == {}


def test_source_records_not_mutated():
    for index, record in enumerate(_raw(MEDQA), start=1):
        before = copy.deepcopy(record)
        case = case_from_osce(record, dataset="medqa", index=index, path=MEDQA, line=index)
        assert record == before
        assert case.records.tests is not record["OSCE_Examination"]["Test_Results"]
    for index, record in enumerate(_raw(NEJM), start=1):
        before = copy.deepcopy(record)
        case_from_nejm(record, dataset="nejm", index=index, path=NEJM, line=index)
        assert record == before


def test_canonical_round_trip_of_every_real_case(tmp_path):
    for name in ("medqa", "nejm"):
        cases = load_cases(name, DATA)
        path = write_cases(tmp_path / f"{name}.jsonl", cases)
        assert read_cases(path) == cases
        assert load_cases(path) == cases  # canonical schema detected from the first record


# field-bug-reports B18
def test_strings_identical_under_c_locale():
    """ASCII default encoding must not change a single string."""
    code = (
        "import hashlib, json, locale, sys\n"
        "from clinenv.datasets import load_cases\n"
        "cases = load_cases('medqa', sys.argv[1]) + load_cases('nejm', sys.argv[1])\n"
        "blob = json.dumps([c.model_dump(mode='json') for c in cases], ensure_ascii=True)\n"
        "print(locale.getpreferredencoding(False))\n"
        "print(hashlib.sha256(blob.encode('ascii')).hexdigest())\n"
    )
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0",
           "PYTHONUTF8": "0"}
    env.pop("PYTHONIOENCODING", None)
    out = subprocess.run([sys.executable, "-X", "utf8=0", "-c", code, str(DATA)], env=env,
                         capture_output=True, text=True, check=True).stdout.split()
    cases = load_cases("medqa", DATA) + load_cases("nejm", DATA)
    blob = json.dumps([c.model_dump(mode="json") for c in cases], ensure_ascii=True)
    if sys.platform.startswith("linux"):
        assert out[0].lower().replace("-", "") not in ("utf8",), out[0]
    assert out[1] == hashlib.sha256(blob.encode("ascii")).hexdigest()
    assert "°" in cases[0].records.physical_exam["Vital_Signs"]["Temperature"]


def test_bom_on_a_real_record(tmp_path):
    first = MEDQA.read_bytes().splitlines()[0]
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + first + b"\n")
    (case,) = load_cases(path)
    assert case.target.text == "Myasthenia gravis"
    assert case.case_id == "bom-0001"


def test_explicit_path_with_registry_file_name_uses_registry_name():
    cases = load_cases(NEJM)
    assert cases[0].case_id == "nejm-0001" and len(cases) == 15


# --------------------------------------------------------------------------- flags
def test_flag_counts_medqa():
    counts = _flag_counts(load_cases("medqa", DATA))
    assert counts["target_in_records"] == 17
    assert counts["caregiver_voice"] == 19
    assert counts["no_recorded_tests"] == 2  # Test_Results is {} on lines 69 and 106
    assert counts["near_duplicate_of"] == 0
    assert counts["target_in_patient_facts"] == 0
    assert counts["non_diagnostic_target"] == 0


def test_flags_on_chosen_medqa_cases():
    cases = {c.case_id: c for c in load_cases("medqa", DATA)}
    # "...consistent with Hirschsprung's disease." in the biopsy result
    assert cases["medqa-0014"].flags.target_in_records
    # accents and hyphens folded: "Legg-Calvé-Perthes disease"
    assert cases["medqa-0104"].flags.target_in_records
    assert not cases["medqa-0001"].flags.target_in_records
    assert cases["medqa-0081"].flags.caregiver_voice  # 18-month-old boy
    assert cases["medqa-0008"].flags.caregiver_voice  # "Newborn, female"
    assert not cases["medqa-0034"].flags.caregiver_voice  # 5-year-old boy
    # "32-year-old woman ... at 38 weeks' gestation" is not a baby
    assert not cases["medqa-0019"].flags.caregiver_voice
    assert cases["medqa-0069"].flags.no_recorded_tests


def test_flag_counts_nejm():
    cases = load_cases("nejm", DATA)
    counts = _flag_counts(cases)
    assert counts["no_recorded_tests"] == 3  # three refusal records
    assert [c.case_id for c in cases if c.flags.no_recorded_tests] == [
        "nejm-0008", "nejm-0009", "nejm-0011"]
    assert [c.case_id for c in cases if c.flags.caregiver_voice] == ["nejm-0012"]
    assert [c.case_id for c in cases if c.flags.patient_facts_contain_findings] == [
        "nejm-0003", "nejm-0004", "nejm-0007", "nejm-0012", "nejm-0013", "nejm-0014"]
    assert counts["near_duplicate_of"] == 0
    assert counts["non_diagnostic_target"] == 0
    assert counts["target_in_records"] == 0


# ----------------------------------------------------------------------------- NEJM
def test_nejm_targets_and_candidates():
    case = load_cases("nejm", DATA)[1]
    assert case.candidates[case.target.option_index] == case.target.text == "Paracoccidiomycosis"
    assert case.target.option_index == 4
    assert case.patient == {"Patient_Info": _raw(NEJM)[1]["patient_info"]}
    assert case.records.physical_exam == {}
    assert case.metadata["image_url"].endswith("id=IC20240118&width=1500&height=4000")


def test_nejm_refusals_give_no_tests():
    cases = load_cases("nejm", DATA)
    for i in (7, 8, 10):
        assert cases[i].records.tests == {}
        assert cases[i].metadata["physical_exams_text"].startswith("The ")


def test_nejm_split_of_real_records():
    cases = load_cases("nejm", DATA)
    assert cases[0].records.tests == {
        "Dermoscopy findings": "Hyperchromic, pinpoint macules observed in the affected areas",
        "Skin biopsy results": "Extracellular deposition of yellow-brown, banana-shaped bodies "
                               "in the dermis, as revealed by hematoxylin and eosin stain",
    }
    # header with one unnamed and three named bullets, then a header with one named bullet
    assert cases[1].records.tests == {
        "Laboratory testing results": {
            FALLBACK_NAME: "Peripheral eosinophilia present",
            "Tests for cryptococcus": "Negative",
            "Tests for histoplasmosis": "Negative",
            "Tests for human immunodeficiency virus (HIV)": "Negative",
        },
        "Imaging results": {
            "CT scan of the neck": "Hyperattenuating cervical lymphadenopathy on both sides",
        },
    }
    assert cases[4].records.tests == {
        "Laboratory studies": {
            "Lactate dehydrogenase level": "35664 U per liter (reference range, 120 to 250)",
        },
        "Biopsy findings": {
            FALLBACK_NAME: "Deep skin biopsy specimen from the abdomen showed intravascular "
                           "aggregation of round, atypical lymphocytes",
            "Immunohistochemical staining results": "Positive for CD20, PAX-5, and MUM-1 in "
                                                    "the neoplastic cells",
        },
    }
    assert cases[11].records.tests == {
        "Laboratory studies": "New anemia; Findings consistent with hemolysis; Direct "
                              "antiglobulin test positive for C3d; Direct antiglobulin test "
                              "weakly positive for IgG",
    }
    # "Urinalysis: - Hematuria: Present - Pyuria: Present ...": findings stay inside one
    # nested record and never become test names
    assert cases[12].records.tests == {
        "Laboratory studies": {
            "Kidney function": "Normal",
            "Absolute eosinophil count": "2660 per cubic millimeter (reference range, 40-200)",
        },
        "Urinalysis": {"Hematuria": "Present", "Pyuria": "Present", "Urine culture": "Negative"},
    }
    assert cases[13].records.tests == {
        "Fiberoptic laryngoscopy": "White plaques on both vocal cords",
        "Biopsy": "Hyperkeratinized stratified squamous epithelium and threadlike filaments",
        "Grocott-Gomori methenamine silver stain": "Positive staining of threadlike filaments",
    }
    assert cases[14].records.tests["HIV viral load"] == (
        "450 copies per milliliter (Reference range: <20)")
    assert list(cases[14].records.tests) == [
        "CD4 cell count", "HIV viral load", "Biopsy findings of the lesions"]


def test_disclosure_settings_on_a_real_record():
    vignette = _raw(NEJM)[11]["question"]
    question = "What is the most likely diagnosis?"
    first = ("A 3-year-old girl presented to the emergency department with a 1-day history of "
             "dark urine and jaundice after the development of an upper respiratory tract "
             "infection 1 week earlier.")
    by = {d: load_cases("nejm", DATA, disclosure=d)[11] for d in
          ("question", "presentation", "vignette")}
    assert by["question"].objective == question
    assert by["presentation"].objective == f"{first} {question}"
    assert load_cases("nejm", DATA)[11].objective == f"{first} {question}"  # the default
    assert by["vignette"].objective == vignette
    assert all(c.metadata["vignette"] == vignette for c in by.values())
    # the question sentence of record 3 is phrased "Which of the following..."
    assert load_cases("nejm", DATA, disclosure="question")[2].objective == (
        "Which of the following is the most likely diagnosis?")
