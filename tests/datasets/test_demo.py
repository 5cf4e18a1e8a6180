"""The demo case set shipped inside the package (``clinenv/datasets/data/demo.jsonl``).

The demo set is a small collection of original cases written for this project (no text
is taken from AgentClinic or any other source), so that every environment, agent and
example runs offline. Each line is one ``Case.model_dump(mode="json")`` object with
``dataset == "demo"`` and ``case_id`` ``demo-01``, ``demo-02``, ...

What it covers, and what these tests hold it to:

- OSCE-style cases without candidates (objective "Evaluate the patient presenting with
  ...") whose patient facts P follow AgentClinic's ``Patient_Actor`` layout
  (Demographics, History, Symptoms, Past_Medical_History, Social_History,
  Review_of_Systems, sometimes Current_Medications and Family_History);
- NEJM-style cases with five candidate labels K, ``target.option_index`` set and an
  objective ending "What is the most likely diagnosis?";
- test results nested under grouping keys (``Imaging``, ``Blood_Tests``) and panels such
  as ``Complete_Blood_Count`` with several analytes;
- unavailable results ("Pending", "Not provided", ...), including tests whose every leaf
  is a placeholder;
- a case with no recorded tests (``flags.no_recorded_tests``), and a caregiver-voiced
  infant (``flags.caregiver_voice``);
- Unicode in the records (°, µ, β, ’, –);
- ``flags.target_in_records`` set exactly when some record leaf names the target.
"""

from __future__ import annotations

import configparser
import json
import re
from importlib.resources import files
from pathlib import Path

import pytest

from clinenv.cases import Case, read_cases
from clinenv.datasets.availability import is_unavailable
from clinenv.testing.data import leaves

REPO = Path(__file__).resolve().parents[2]
OSCE_KEYS = {
    "Demographics",
    "History",
    "Symptoms",
    "Past_Medical_History",
    "Social_History",
    "Review_of_Systems",
}


def _demo_path() -> Path:
    return Path(str(files("clinenv.datasets") / "data" / "demo.jsonl"))


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    return read_cases(_demo_path())




def _names_target(tree, target: str) -> bool:
    needle = target.lower()
    return any(isinstance(leaf, str) and needle in leaf.lower() for leaf in leaves(tree))


def _tests_at_any_depth(tree: dict):
    """Yield (name, subtree) for every dict-valued entry of a tests tree, at any depth."""
    for name, value in tree.items():
        if isinstance(value, dict):
            yield name, value
            yield from _tests_at_any_depth(value)


def test_file_is_utf8_jsonl_one_case_per_line():
    raw = _demo_path().read_bytes()
    text = raw.decode("utf-8")
    lines = [line for line in text.splitlines() if line.strip()]
    assert all(isinstance(json.loads(line), dict) for line in lines)
    assert len(lines) == len(read_cases(_demo_path()))


def test_count_ids_and_dataset(cases):
    assert len(cases) >= 12
    ids = [c.case_id for c in cases]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"demo-\d{2}", i) for i in ids)
    assert ids == sorted(ids)
    assert {c.dataset for c in cases} == {"demo"}


def test_round_trip(cases):
    for c in cases:
        assert Case.model_validate_json(c.to_json_line()) == c
        assert Case.model_validate(json.loads(c.to_json_line())) == c


def test_metadata(cases):
    for c in cases:
        assert c.metadata["source"] == "clinenv demo set, written for this project"
        assert isinstance(c.metadata["specialty"], str) and c.metadata["specialty"]
    specialties = {c.metadata["specialty"] for c in cases}
    assert len(specialties) >= 8


def test_targets_and_options(cases):
    for c in cases:
        assert c.target.text.strip()
        if c.candidates is None:
            assert c.target.option_index is None
        else:
            assert c.target.option_index is not None
            assert c.candidates[c.target.option_index] == c.target.text
            assert c.candidates.count(c.target.text) == 1


def test_candidate_and_open_cases(cases):
    with_k = [c for c in cases if c.candidates is not None]
    without_k = [c for c in cases if c.candidates is None]
    assert len(with_k) >= 4
    assert len(without_k) >= 1
    for c in with_k:
        assert len(c.candidates) == 5
        assert len(set(c.candidates)) == 5
        assert c.objective.endswith("What is the most likely diagnosis?")
    # the correct option is not always in the same slot
    assert len({c.target.option_index for c in with_k}) > 1
    assert any(c.objective.startswith("Evaluate the patient presenting with") for c in without_k)


def test_patient_facts_follow_patient_actor_layout(cases):
    for c in cases:
        assert OSCE_KEYS <= set(c.patient), c.case_id
        symptoms = c.patient["Symptoms"]
        assert isinstance(symptoms["Primary_Symptom"], str)
        assert isinstance(symptoms["Secondary_Symptoms"], list) and symptoms["Secondary_Symptoms"]
    assert any("Current_Medications" in c.patient for c in cases)
    assert any("Family_History" in c.patient for c in cases)


def test_physical_exam_sections(cases):
    for c in cases:
        assert c.records.physical_exam, c.case_id
        vitals = c.records.physical_exam.get("Vital_Signs")
        assert isinstance(vitals, dict) and vitals, c.case_id
        assert all(isinstance(v, str) for v in vitals.values())
    # some sections hold sub-fields, others a single text
    sections = [v for c in cases for v in c.records.physical_exam.values()]
    assert any(isinstance(v, dict) for v in sections)
    assert any(isinstance(v, str) for v in sections)


def test_nested_test_groups(cases):
    nested = [
        c
        for c in cases
        if isinstance(c.records.tests.get("Imaging"), dict)
        and any(isinstance(v, dict) for v in c.records.tests["Imaging"].values())
    ]
    assert len(nested) >= 3
    chest = [c for c in cases if "Chest_X-Ray" in (c.records.tests.get("Imaging") or {})]
    assert chest and "Findings" in chest[0].records.tests["Imaging"]["Chest_X-Ray"]
    blood = [c for c in cases if isinstance(c.records.tests.get("Blood_Tests"), dict)]
    assert len(blood) >= 3
    panels = [
        panel
        for c in cases
        for name, panel in _tests_at_any_depth(c.records.tests)
        if name == "Complete_Blood_Count"
    ]
    assert len(panels) >= 3
    assert all(len(p) >= 3 for p in panels)
    # a panel sits inside a group (Blood_Tests -> Complete_Blood_Count -> analytes)
    assert any(
        isinstance((c.records.tests.get("Blood_Tests") or {}).get("Complete_Blood_Count"), dict)
        for c in cases
    )


def test_unavailable_results(cases):
    with_placeholder = [
        c for c in cases if any(is_unavailable(leaf) for leaf in leaves(c.records.tests))
    ]
    assert len(with_placeholder) >= 2
    all_leaves = {leaf for c in cases for leaf in leaves(c.records.tests) if isinstance(leaf, str)}
    assert "Pending" in all_leaves
    assert "Not provided" in all_leaves
    # a test whose every stored leaf is a placeholder (more than one leaf, all missing)
    all_missing = [
        (c.case_id, name)
        for c in cases
        for name, sub in _tests_at_any_depth(c.records.tests)
        if len(list(leaves(sub))) >= 2 and is_unavailable(sub)
    ]
    assert all_missing
    # results such as "Not detected" are findings, never placeholders
    assert "Not detected" in all_leaves and not is_unavailable("Not detected")
    # every case still has at least one real result or no tests at all
    for c in cases:
        if c.records.tests:
            assert not is_unavailable(c.records.tests), c.case_id


def test_tests_free_case(cases):
    free = [c for c in cases if c.records.tests == {}]
    assert free
    for c in cases:
        assert c.flags.no_recorded_tests == (c.records.tests == {}), c.case_id
    for c in free:
        assert c.records.physical_exam


def test_caregiver_case(cases):
    caregivers = [c for c in cases if c.flags.caregiver_voice]
    assert caregivers
    for c in caregivers:
        demo = c.patient["Demographics"].lower()
        assert re.search(r"\d+-(month|week|day)-old", demo)
        assert "mother" in demo or "father" in demo or "parent" in demo
    for c in cases:
        if not c.flags.caregiver_voice:
            assert "month-old" not in c.patient["Demographics"]


def test_target_in_records_flag_matches_independent_check(cases):
    for c in cases:
        records = {"physical_exam": c.records.physical_exam, "tests": c.records.tests}
        assert c.flags.target_in_records == _names_target(records, c.target.text), c.case_id
    flagged = [c for c in cases if c.flags.target_in_records]
    assert flagged, "some cases should name the target in a record"
    assert len(flagged) < len(cases) / 2, "most cases should not give the answer away"


def test_target_not_in_patient_facts(cases):
    for c in cases:
        assert c.flags.target_in_patient_facts == _names_target(c.patient, c.target.text)
        assert not c.flags.target_in_patient_facts, c.case_id
        assert not c.flags.patient_facts_contain_findings
        assert c.flags.near_duplicate_of is None
        assert not c.flags.non_diagnostic_target


def test_unicode_is_present(cases):
    text = "\n".join(c.to_json_line() for c in cases)
    for ch in "°µβ’–":
        assert ch in text, ch
    raw = _demo_path().read_text(encoding="utf-8")
    assert "°" in raw  # stored as UTF-8, not as \\u escapes


def test_package_data_declared():
    parser = configparser.ConfigParser()
    parser.read(REPO / "setup.cfg", encoding="utf-8")
    assert parser.has_section("options.package_data")
    value = parser.get("options.package_data", "clinenv.datasets")
    assert "data/*.jsonl" in value.split()
