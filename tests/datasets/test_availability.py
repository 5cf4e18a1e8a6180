"""Recorded negatives are findings; only values that say no result exists are unavailable.

The rule (:mod:`clinenv.datasets.availability`): a value that reports a finding is a
finding ("None", "Negative", "Not detected"...); a value that says no result exists is
unavailable ("Pending", "Not provided", "Unknown"...). The list below is every MedQA
and NEJM leaf (records M and patient facts P) the rule makes unavailable, read through
by hand; each entry is checked against the raw file at the same path.
"""

from __future__ import annotations

import json

import pytest

from clinenv.datasets import load_cases
from clinenv.datasets.availability import is_unavailable
from clinenv.protocol.catalog import Catalog
from clinenv.protocol.lookup import lookup
from clinenv.testing.data import MEDQA_FILE, NEJM_FILE

PARTS = {"physical_exam": "Physical_Examination_Findings", "tests": "Test_Results",
         "patient": "Patient_Actor"}

#: (case_id, part, path, value) of every unavailable leaf of agentclinic_medqa.jsonl.
MEDQA_UNAVAILABLE = [
    ("medqa-0002", "patient", "Social_History", 'Information not provided.'),
    ("medqa-0010", "tests", "Complete_Blood_Count/WBC", 'Pending'),
    ("medqa-0010", "tests", "Complete_Blood_Count/Hemoglobin", 'Pending'),
    ("medqa-0010", "tests", "Complete_Blood_Count/Platelets", 'Pending'),
    ("medqa-0010", "tests", "Urinalysis/Appearance", 'Pending'),
    ("medqa-0010", "tests", "Urinalysis/WBC", 'Pending'),
    ("medqa-0010", "tests", "Urinalysis/RBC", 'Pending'),
    ("medqa-0010", "tests", "Urinalysis/Nitrites", 'Pending'),
    ("medqa-0010", "tests", "Urinalysis/Leukocyte_Esterase", 'Pending'),
    ("medqa-0011", "patient", "Social_History", 'Information not specified.'),
    ("medqa-0014", "physical_exam", "Vital_Signs/Blood_Pressure", 'Not applicable for age'),
    ("medqa-0017", "tests", "Stool_Test/WBC_in_Stool", 'Not specified'),
    ("medqa-0017", "tests", "Stool_Test/Culture", 'Pending'),
    ("medqa-0017", "tests", "Stool_Test/Clostridium_difficile_Toxin", 'Not specified'),
    ("medqa-0021", "patient", "Social_History", 'No additional information provided'),
    ("medqa-0030", "tests", "Blood_Cultures/Findings", 'Pending at the time of examination'),
    ("medqa-0031", "physical_exam", "Vital_Signs/Blood_Pressure", 'Not applicable for age'),
    ("medqa-0031", "physical_exam", "Respiratory_Examination/Palpation", 'N/A'),
    ("medqa-0031", "physical_exam", "Respiratory_Examination/Percussion", 'N/A'),
    ("medqa-0031", "patient", "Social_History", 'N/A'),
    ("medqa-0039", "patient", "Social_History", 'NA'),
    ("medqa-0044", "physical_exam", "Vital_Signs/Respiratory_Rate", 'Not provided'),
    ("medqa-0044", "tests", "CBC_with_Differentiation/WBC", 'Not provided'),
    ("medqa-0044", "tests", "CBC_with_Differentiation/Hemoglobin", 'Not provided'),
    ("medqa-0044", "tests", "CBC_with_Differentiation/Platelets", 'Not provided'),
    ("medqa-0044", "tests", "Metabolic_Panel/Creatinine", 'Not provided'),
    ("medqa-0044", "tests", "Metabolic_Panel/BUN", 'Not provided'),
    ("medqa-0044", "tests", "Metabolic_Panel/Glucose", 'Not provided'),
    ("medqa-0046", "physical_exam", "Vital_Signs/Blood_Pressure",
     'Not applicable for age in this scenario'),
    ("medqa-0046", "tests", "Laboratory_Tests/Liver_Function_Tests",
     'Not indicated in the scenario provided'),
    ("medqa-0046", "tests", "Imaging_And_Other_Tests/Brain_Imaging",
     'Not indicated in the scenario provided'),
    ("medqa-0046", "tests", "Imaging_And_Other_Tests/Electroencephalogram",
     'Not indicated in the scenario provided'),
    ("medqa-0046", "patient", "Social_History", "Not applicable due to patient's age."),
    ("medqa-0060", "physical_exam", "Pelvic_Examination/Uterine_Tenderness", 'Not mentioned'),
    ("medqa-0060", "physical_exam", "Pelvic_Examination/Adnexal_Tenderness", 'Not assessed'),
    ("medqa-0060", "tests", "Imaging_Results/Pelvic_Ultrasound", 'Not provided'),
    ("medqa-0060", "tests", "Other_Tests/Pregnancy_Test", 'Not mentioned'),
    ("medqa-0062", "physical_exam", "Vital_Signs/Blood_Pressure", 'Not applicable for age'),
    ("medqa-0070", "patient", "Social_History", 'Not provided.'),
    ("medqa-0071", "physical_exam", "Vital_Signs/Blood_Pressure", 'Not applicable for age'),
    ("medqa-0076", "patient", "Social_History", 'Not applicable given age'),
    ("medqa-0083", "patient", "Social_History", 'Not applicable for age.'),
    ("medqa-0084", "physical_exam", "Vital_Signs/Respiratory_Rate", 'Data not provided'),
    ("medqa-0084", "physical_exam", "Neurological_Examination/Cranial_Nerves", 'Data not provided'),
    ("medqa-0084", "physical_exam", "Neurological_Examination/Sensory_Exam", 'Data not provided'),
    ("medqa-0085", "tests", "Polysomnography/Findings",
     'Not indicated at this stage based on history and normal physical examination.'),
    ("medqa-0094", "physical_exam", "Chest_Examination/Percussion", 'Not specified'),
    ("medqa-0094", "tests", "Blood_Tests/Complete_Blood_Count", 'Not specified'),
    ("medqa-0094", "tests", "Blood_Tests/Arterial_Blood_Gases", 'Not specified'),
    ("medqa-0094", "tests", "Blood_Tests/Serum_Electrolytes", 'Not specified'),
    ("medqa-0097", "patient", "Social_History", 'Not applicable'),
    ("medqa-0099", "physical_exam", "Neurological_Examination/Sensory", 'Information not provided'),
    ("medqa-0099", "physical_exam", "Neurological_Examination/Reflexes",
     'Information not provided'),
    ("medqa-0099", "patient", "Social_History", 'Information not provided'),
    ("medqa-0106", "patient", "Social_History", 'N/A for the newborn.'),
]


def walk(tree, path=()):
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from walk(value, (*path, key))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            yield from walk(value, (*path, str(i)))
    else:
        yield path, tree


def unavailable_leaves(cases):
    found = []
    for case in cases:
        for part, tree in (("physical_exam", case.records.physical_exam),
                           ("tests", case.records.tests), ("patient", case.patient)):
            found += [(case.case_id, part, "/".join(path), value)
                      for path, value in walk(tree) if is_unavailable(value)]
    return found


def test_medqa_unavailable_leaves_are_exactly_the_placeholders(shared_data_dir):
    assert unavailable_leaves(load_cases("medqa")) == MEDQA_UNAVAILABLE
    with (shared_data_dir / MEDQA_FILE).open(encoding="utf-8") as fh:
        raw = [json.loads(line)["OSCE_Examination"] for line in fh if line.strip()]
    for case_id, part, path, value in MEDQA_UNAVAILABLE:
        node = raw[int(case_id.split("-")[1]) - 1][PARTS[part]]
        for key in path.split("/"):
            node = node[key]
        assert node == value, (case_id, path)


def test_nejm_has_no_unavailable_leaf(shared_data_dir):
    cases = load_cases("nejm")
    assert len(cases) == 15 and (shared_data_dir / NEJM_FILE).is_file()
    assert unavailable_leaves(cases) == []


def test_medqa_0027_bacteria_none_is_a_recorded_negative(shared_data_dir):
    """Urinalysis of medqa-0027 records "Bacteria: None": a finding, shown as recorded."""
    with (shared_data_dir / MEDQA_FILE).open(encoding="utf-8") as fh:
        raw = [json.loads(line) for line in fh if line.strip()][26]
    assert raw["OSCE_Examination"]["Test_Results"]["Urinalysis"]["Bacteria"] == "None"
    case = load_cases("medqa")[26]
    (entry,) = [e for e in Catalog(case.records) if e.source_path == ("tests", "Urinalysis")]
    text, availability = lookup(case.records, entry)
    assert availability == "recorded"
    assert "Bacteria: None" in text.splitlines()
    assert "not available" not in text


FINDINGS = [
    "None", "none", "NONE.", "None detected", "none seen", "Negative", "negative.",
    "Not detected", "Absent", "Nil", "No growth", "Not palpable", "Not visualized",
    "Not tender", "Not elevated", "Not oriented to time", "Indeterminate", "Normal",
    "Unremarkable", "No abnormalities", "No findings of note", "Negative for malignancy",
    "Impending herniation", "Not performed, chest X-ray clear",
    "Not specified in this scenario, but imagine findings of anemia", "0", "False",
]
UNAVAILABLE = [
    "N/A", "n/a", "NA", "N/A for the newborn", "Pending", "(pending)", "Result pending",
    "Results pending", "Culture pending", "Blood culture results pending",
    "Results are still pending", "Awaiting results", "Awaiting culture results",
    "Pending at the time of examination", "Not performed", "Not done", "Not yet done",
    "Not provided", "Not provided in this case", "Not specified", "Unspecified",
    "Unknown", "unknown at this time", "Not available", "Unavailable",
    "Not available at this time", "Not measured", "Not obtained", "Not tested",
    "Not assessed due to sedation", "Not applicable", "Not applicable for age",
    "Data not provided", "Information not specified", "Results unavailable",
    "Details are not provided", "No data", "No data available", "No results",
    "No information", "No additional information provided", "None provided", "null",
    "TBD", "", "   ", "Would show a consolidation",
]


@pytest.mark.parametrize("value", FINDINGS)
def test_findings_on_records_not_seen(value):
    assert not is_unavailable(value)


@pytest.mark.parametrize("value", UNAVAILABLE)
def test_placeholders_on_records_not_seen(value):
    assert is_unavailable(value)


def test_containers_and_non_strings():
    assert is_unavailable(None) and is_unavailable({}) and is_unavailable([])
    assert is_unavailable({"WBC": "Pending", "Hb": ["Not provided", None]})
    assert not is_unavailable({"WBC": "Pending", "Bacteria": "None"})
    assert not is_unavailable(False) and not is_unavailable(0) and not is_unavailable(1.5)
