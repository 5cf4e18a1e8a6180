"""MIMIC-IDx-style user-supplied cases (clinenv.datasets.mimic_idx) on synthetic
admissions written here: the mapping onto (s0, P, M, Y), errors that name file, line
and field, the patient-level split, and an EGIP episode whose clinical-history review
and laboratory request are answered from the stored records.
"""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv.datasets import load_cases, load_cases_with_report
from clinenv.datasets.case_split import split_cases
from clinenv.errors import CaseFormatError
from clinenv.runs.episode import run_episode

PE = {
    "hadm_id": 20001, "subject_id": "10001",
    "initial_presentation": "A 64-year-old woman presents to the emergency department "
                            "with shortness of breath.",
    "patient": {"History": "I got breathless two days ago, and my right calf is sore.",
                "Symptoms": ["Shortness of breath", "Right calf pain"]},
    "clinical_history": {"Past_Medical_History": "Breast cancer on tamoxifen.",
                         "Medications": "Tamoxifen 20 mg daily."},
    "physical_exam": {"Vital_Signs": {"Heart_Rate": "118 bpm", "SpO2": "89% on air"}},
    "labs": {"D_Dimer": "4.2 mg/L FEU", "Troponin_T": "0.03 ng/mL"},
    "imaging": {"CT_Pulmonary_Angiogram": "Filling defects in the right lower lobe "
                                          "segmental arteries."},
    "diagnosis": "Pulmonary embolism", "icd_code": "i26.99", "icd_version": 10,
    "note_id": "n-1",
}
PNA = {
    "hadm_id": "20002", "subject_id": "10002",
    "initial_presentation": "A 71-year-old man presents with fever and cough.",
    "patient": "I have had a cough with yellow sputum and fevers for three days.",
    "labs": {"WBC": "16.1 K/uL"}, "microbiology": {"Sputum_Culture": "Pending"},
    "imaging": {"Chest_Xray": "Right lower lobe consolidation."},
    "diagnosis": "Community-acquired pneumonia",
}


WORDS = ("fever", "rash", "cough", "syncope", "jaundice", "dysuria", "vertigo", "edema",
         "hematuria", "tremor", "dyspnea", "palpitations", "ascites", "seizure")


def admission(hadm_id, subject_id, diagnosis="Asthma exacerbation"):
    """A small record; its words differ from every other admission's (no near-duplicate
    groups)."""
    word = WORDS[hadm_id % len(WORDS)]
    return {"hadm_id": hadm_id, "subject_id": subject_id,
            "initial_presentation": f"Presents with {word}.", "patient": f"My {word} began.",
            "labs": {"Eosinophils": "0.6 K/uL"}, "diagnosis": diagnosis}


def write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_each_key_lands_in_its_case_field(tmp_path):
    path = write(tmp_path / "mimic_idx.jsonl", [PE, PNA])
    cases, report = load_cases_with_report(path)
    assert report.schema == "mimic_idx" and report.dataset == "mimic_idx"
    pe, pna = cases
    assert (pe.case_id, pna.case_id) == ("mimic_idx-20001", "mimic_idx-20002")
    assert pe.objective == PE["initial_presentation"]
    assert pe.patient == PE["patient"]
    assert pna.patient == {"History": PNA["patient"]}
    assert pe.records.physical_exam == PE["physical_exam"]
    assert pe.records.tests == {"Clinical_History": PE["clinical_history"],
                                "Laboratory": PE["labs"],
                                "Imaging": PE["imaging"]}
    assert pna.records.tests == {"Laboratory": PNA["labs"],
                                 "Microbiology": PNA["microbiology"],
                                 "Imaging": PNA["imaging"]}
    assert (pe.target.text, pe.target.option_index, pe.candidates) == (
        "Pulmonary embolism", None, None)
    assert pe.metadata == {"source_file": "mimic_idx.jsonl", "source_line": 1,
                           "format": "clinenv.mimic_idx/1", "hadm_id": "20001",
                           "patient_id": "10001", "icd_code": "I2699", "icd_version": 10,
                           "extra": {"note_id": "n-1"}}
    assert "icd_code" not in pna.metadata
    assert PE["labs"] == {"D_Dimer": "4.2 mg/L FEU", "Troponin_T": "0.03 ng/mL"}  # intact


def test_flags_are_those_of_the_other_loaders(tmp_path):
    leaky = {**PNA, "hadm_id": 3, "imaging": {"Chest_Xray": "Findings of pneumonia."},
             "diagnosis": "Pneumonia"}
    child = {**admission(4, "s4"), "initial_presentation": "A 3-year-old boy with wheeze."}
    bare = {k: v for k, v in admission(5, "s5").items() if k != "labs"}
    # a laboratory test named after the target (word order and underscores differ):
    # the menu shows "Embolism Pulmonary Panel" before any request
    named = {**admission(6, "s6", "Pulmonary embolism"),
             "labs": {"Embolism_Pulmonary_Panel": "Negative"}}
    cases = load_cases(write(tmp_path / "f.jsonl", [PE, leaky, child, bare, named]))
    flags = [(c.flags.target_in_records, c.flags.caregiver_voice,
              c.flags.no_recorded_tests, c.flags.target_in_menu) for c in cases]
    assert flags == [(False, False, False, False), (True, False, False, False),
                     (False, True, False, False), (False, False, True, False),
                     (False, False, False, True)]


@pytest.mark.parametrize(("line2", "field", "reason"), [
    ({k: v for k, v in PE.items() if k != "diagnosis"}, "diagnosis", "missing required key"),
    ({**PE, "hadm_id": True}, "hadm_id", "expected a non-empty string or an integer"),
    ({**PE, "subject_id": " "}, "subject_id", "expected a non-empty string"),
    ({**PE, "diagnosis": "  "}, "diagnosis", "must be a non-empty string"),
    ({**PE, "initial_presentation": ["x"]}, "initial_presentation",
     "expected a string, got array"),
    ({**PE, "patient": 3}, "patient", "expected an object or a string, got number"),
    ({**PE, "labs": "D-dimer high"}, "labs", "expected an object, got string"),
    ({**PE, "icd_code": "PE"}, "icd_code", "'PE' is not an ICD code"),
    ({**PE, "icd_code": 486}, "icd_code", "expected a string, got number"),
    ({**PE, "icd_version": 11}, "icd_version", "expected 9 or 10, got 11"),
    ({**PNA, "hadm_id": 20001}, "hadm_id", "hadm_id '20001' is already on line 1"),
])
def test_a_bad_record_names_file_line_and_field(tmp_path, line2, field, reason):
    path = write(tmp_path / "bad.jsonl", [PE, line2])
    with pytest.raises(CaseFormatError) as err:
        load_cases(path)
    assert (err.value.path, err.value.line, err.value.field) == (str(path), 2, field)
    assert reason in err.value.reason
    cases, report = load_cases_with_report(path, strict=False)  # lenient: skip, read on
    assert [c.case_id for c in cases] == ["bad-20001"]  # the dataset is the file's stem
    assert report.n_skipped == 1


def test_the_split_keeps_each_patients_admissions_on_one_side(tmp_path):
    # 12 admissions of 5 patients: p1 x4, p2 x3, p3 x2, p4 x2, p5 x1
    owners = ["p1", "p2", "p1", "p3", "p2", "p4", "p1", "p5", "p3", "p2", "p4", "p1"]
    records = [admission(100 + i, p) for i, p in enumerate(owners)]
    cases = load_cases(write(tmp_path / "adm.jsonl", records))
    by_patient = {}
    for case in cases:
        by_patient.setdefault(case.metadata["patient_id"], set()).add(case.case_id)
    for seed in range(6):
        split = split_cases(cases, 0.5, seed=seed)
        construction = set(split.construction)
        for ids in by_patient.values():
            assert ids <= construction or not ids & construction
        # whole groups only, so at most round(0.5 x 12) = 6 construction cases
        assert 1 <= len(construction) <= 6
        assert sorted(len(ids) for ids in by_patient.values()
                      if ids <= construction) in _subset_sums(6)
        assert split.n_duplicate_groups == 0  # patient groups are not near-duplicates
    # without patient ids every admission is its own group: exactly 6
    plain = [c.model_copy(update={"metadata": {}}) for c in cases]
    assert len(split_cases(plain, 0.5, seed=0).construction) == 6


def expected_split(cases, fraction, seed):
    """The documented rule, written out here: one group per patient, named by its first
    admission; groups in sha256("clinenv.split/<seed>/<name>") order; a group joins the
    construction side while it stays within floor(fraction x n + 0.5) cases."""
    import hashlib
    import math

    groups = {}
    for case in cases:
        groups.setdefault(case.metadata["patient_id"], []).append(case.case_id)
    named = sorted(groups.values(), key=lambda ids: hashlib.sha256(
        f"clinenv.split/{seed}/{ids[0]}".encode()).hexdigest())
    limit, taken = math.floor(fraction * len(cases) + 0.5), []
    for ids in named:
        if len(taken) + len(ids) <= limit:
            taken += ids
    return [c.case_id for c in cases if c.case_id in taken]


@pytest.mark.parametrize("fraction", [0.3, 0.5, 0.7])
def test_the_patient_groups_follow_the_documented_order(tmp_path, fraction):
    owners = ["p1", "p2", "p1", "p3", "p2", "p4", "p1", "p5", "p3", "p2", "p4", "p1"]
    cases = load_cases(write(tmp_path / "adm.jsonl",
                             [admission(100 + i, p) for i, p in enumerate(owners)]))
    for seed in range(8):
        split = split_cases(cases, fraction, seed=seed)
        assert list(split.construction) == expected_split(cases, fraction, seed)
        assert list(split.evaluation) == [c.case_id for c in cases
                                          if c.case_id not in split.construction]


def _subset_sums(limit):
    sizes = [4, 3, 2, 2, 1]
    out = []
    for mask in range(1, 1 << len(sizes)):
        chosen = sorted(s for i, s in enumerate(sizes) if mask >> i & 1)
        if sum(chosen) <= limit:
            out.append(chosen)
    return out


def test_an_episode_reviews_the_clinical_history_and_reads_the_labs(tmp_path):
    path = write(tmp_path / "mimic_idx.jsonl", [PE, PNA])
    env = gym.make("EGIP-MedQA-v0", dataset=str(path), premature_diagnosis="decide")
    obs, info = env.reset(seed=0, options={"case_id": "mimic_idx-20001"})
    assert "Pulmonary embolism" not in obs["text"]
    # the whole clinical history is one requestable record: the history-review tool
    assert {"id": "T1", "name": "Clinical History"} in info["menu"]
    assert "tamoxifen" not in obs["text"]
    text = env.step("REQUEST TEST: Clinical History")[0]["text"]
    assert "Breast cancer on tamoxifen." in text and "Tamoxifen 20 mg daily." in text
    text = env.step("REQUEST TEST: D Dimer")[0]["text"]
    assert "4.2 mg/L FEU" in text
    env.step("DIAGNOSIS READY: Pulmonary embolism")
    _, reward, terminated, _, info = env.step("DIAGNOSIS READY: Pulmonary embolism")
    assert terminated and info["verdict"] == "correct"


class _Fixed:
    name = "fixed"

    def __init__(self, *actions):
        self.actions = actions

    def reset(self, *, seed=None):
        self.queue = list(self.actions)

    def act(self, observation, info):
        return self.queue.pop(0)


def test_run_episode_logs_the_case_with_its_dataset(tmp_path):
    path = write(tmp_path / "mimic_idx.jsonl", [PE, PNA])
    env = gym.make("EGIP-MedQA-v0", dataset=str(path), premature_diagnosis="decide")
    doctor = _Fixed("REQUEST TEST: Chest Xray", "DIAGNOSIS READY: pneumonia",
                    "DIAGNOSIS READY: Community-acquired pneumonia")
    record = run_episode(env, doctor, case_id="mimic_idx-20002", seed=0)
    assert (record["dataset"], record["verdict"]) == ("mimic_idx", "correct")
    assert [o["content"] for o in record["evidence"]["observations"]] == [
        "Right lower lobe consolidation."]


def test_clinenv_run_dataset_file(tmp_path, monkeypatch, capsys):
    from clinenv.cli import main
    from clinenv.runlog import read_run_log

    monkeypatch.chdir(tmp_path)
    write(tmp_path / "mimic_idx.jsonl", [PE, PNA])
    assert main(["run", "--quiet", "--env", "EGIP-MedQA-v0", "--dataset", "mimic_idx.jsonl",
                 "--preset", "cdeg-30", "--out", "r.jsonl"]) == 0
    lines = read_run_log(tmp_path / "r.jsonl").lines
    # the log names the pool by the file given; the case ids by the file's stem
    assert [(x["dataset"], x["case_id"], x["target"]) for x in lines] == [
        ("mimic_idx.jsonl", "mimic_idx-20001", "Pulmonary embolism"),
        ("mimic_idx.jsonl", "mimic_idx-20002", "Community-acquired pneumonia")]
    assert main(["run", "--quiet", "--env", "EGIP-MedQA-v0", "--dataset", "none.jsonl",
                 "--out", "s.jsonl"]) == 2
    assert "--dataset none.jsonl: no such file" in capsys.readouterr().err
