"""``target_in_records`` and a target's bracketed abbreviation (clinenv.datasets.flags).

A record names "Benign paroxysmal positional vertigo (BPPV)" when it says BPPV, with its
capitals (so "(ALL)" is not found in "all"); a record that spells out a target given in
brackets was found before and still is. Hand-made cases, then the real MedQA case
medqa-0054, whose records say "suggestive of BPPV" and "consistent with BPPV" (skipped
without the shared AgentClinic files).
"""

from __future__ import annotations

import json

import pytest

from clinenv.datasets import load_cases
from clinenv.datasets.flags import names_target, target_abbreviations
from clinenv.protocol.views import withhold_target
from clinenv.testing.data import MEDQA_FILE, SHARED_DATA, needs_shared_data

BPPV = "Benign Paroxysmal Positional Vertigo (BPPV)"
ALL = "Acute lymphoblastic leukemia (ALL)"


@pytest.mark.parametrize("target, expected", [
    (BPPV, ["BPPV"]),
    (ALL, ["ALL"]),
    ("Legg-Calvé-Perthes disease (LCPD)", ["LCPD"]),
    ("IgA nephropathy (IgAN)", ["IgAN"]),
    ("Coronavirus disease 2019 (COVID-19)", ["COVID-19"]),
    ("Pneumonia (right lower lobe)", []),  # a qualifier, not an abbreviation
    ("Diabetes mellitus (Type 2)", []),
    ("Respiratory acidosis (pH)", []),  # one capital
    ("Benign paroxysmal positional vertigo", []),
])
def test_target_abbreviations(target, expected):
    assert target_abbreviations(target) == expected


@pytest.mark.parametrize("target, record, named", [
    # the abbreviation of the target, as a whole word with its capitals
    (BPPV, "Positive Dix-Hallpike test, suggestive of BPPV.", True),
    (BPPV, "BPPV-like nystagmus on the right", True),
    (BPPV, "No BPPV.", True),  # negated mentions count (the record names it)
    (BPPV, "Normal (nystagmus absent); bppv unlikely", False),  # capitals kept
    (BPPV, "XBPPV score 3", False),
    # the spelled-out target, with or without the abbreviation (found before too)
    (BPPV, "Findings of benign paroxysmal positional vertigo.", True),
    ("BPPV", "Consistent with benign paroxysmal positional vertigo (BPPV).", True),
    # the reverse without the abbreviation is not found: no expansion list is kept
    ("BPPV", "Consistent with benign paroxysmal positional vertigo.", False),
    (ALL, "All cell lines within normal limits.", False),
    (ALL, "Flow cytometry consistent with ALL.", True),
    ("Pneumonia (right lower lobe)", "Right lower lobe consolidation.", False),
])
def test_a_record_names_the_target(target, record, named):
    assert names_target(target, {"Exam": {"Finding": record}}) is named


def test_the_patient_view_withholds_the_abbreviation_too():
    """The patient facts P use the same rule (clinenv.protocol.views.withhold_target)."""
    facts = {"History": "Dizzy when turning in bed. My neighbour said it is BPPV."}
    kept = withhold_target(facts, BPPV)
    assert dict(kept) == {"History": "Dizzy when turning in bed."}


@needs_shared_data(MEDQA_FILE)
def test_medqa_0054_is_flagged(tmp_path, monkeypatch):
    monkeypatch.setattr("clinenv.datasets.resolve.cache_dir", lambda: tmp_path / "cache")
    line = (SHARED_DATA / MEDQA_FILE).read_text(encoding="utf-8").splitlines()[53]
    osce = json.loads(line)["OSCE_Examination"]
    assert osce["Correct_Diagnosis"] == BPPV
    assert "suggestive of BPPV" in osce["Physical_Examination_Findings"][
        "Positional_Testing"]["Dix-Hallpike_Manoeuvre"]
    case = {c.case_id: c for c in load_cases("medqa", SHARED_DATA)}["medqa-0054"]
    assert case.target.text == BPPV
    assert case.flags.target_in_records
    assert not case.flags.target_in_patient_facts
