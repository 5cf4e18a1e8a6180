"""Record lookup O against the raw AgentClinic files: every catalog entry returns exactly
the source record's value, and a request for an absent test is "not recorded"."""

from __future__ import annotations

import json
import re

import pytest

from clinenv.datasets import load_cases
from clinenv.protocol.catalog import Catalog
from clinenv.protocol.lookup import lookup, render_record
from clinenv.protocol.runtime import EGIPRuntime
from clinenv.testing.data import leaves

SECTIONS = {"physical_exam": "Physical_Examination_Findings", "tests": "Test_Results"}


def _raw_osce(path):
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line)["OSCE_Examination"] for line in fh if line.strip()]




def test_every_medqa_catalog_entry_returns_the_source_value(shared_data_dir):
    raw = _raw_osce(shared_data_dir / "agentclinic_medqa.jsonl")
    cases = load_cases("medqa")
    assert len(cases) == len(raw) == 107
    n_entries = 0
    for case, source in zip(cases, raw, strict=True):
        for entry in Catalog(case.records):
            node = source[SECTIONS[entry.source_path[0]]]
            for key in entry.source_path[1:]:
                node = node[key]
            text, availability = lookup(case.records, entry)
            assert text == render_record(node), (case.case_id, entry.exam_id)
            for leaf in leaves(node):
                if isinstance(leaf, str) and availability == "recorded" and leaf.strip():
                    assert leaf.strip() in text, (case.case_id, entry.exam_id, leaf)
            n_entries += 1
    assert n_entries > 500


def test_every_nejm_test_record_comes_from_the_source_text(shared_data_dir):
    with (shared_data_dir / "agentclinic_nejm.jsonl").open(encoding="utf-8") as fh:
        raw = [json.loads(line) for line in fh if line.strip()]
    cases = load_cases("nejm")

    def words(text: str) -> str:
        return " ".join(re.findall(r"[a-z0-9]+", text.lower()))

    n_records = 0
    for case, source in zip(cases, raw, strict=True):
        text = words(source["physical_exams"])
        for entry in Catalog(case.records):
            value, availability = lookup(case.records, entry)
            assert availability == "recorded"
            node = case.records.tests
            for key in entry.source_path[1:]:
                node = node[key]
            # each piece of each stored leaf is a passage of the source free text
            # (the splitter joins plain sub-bullets with "; ")
            for leaf in leaves(node):
                for piece in leaf.split("; "):
                    assert words(piece) in text, (case.case_id, entry.name, piece)
            n_records += 1
    assert n_records >= 20


@pytest.mark.parametrize("request_text",
                         ["Serum ceruloplasmin level", "Cardiac MRI with gadolinium"])
def test_absent_tests_are_not_recorded_never_normal(request_text, shared_data_dir):
    case = load_cases("medqa")[0]
    rt = EGIPRuntime(case)
    routing = rt.route(f"REQUEST TEST: {request_text}")
    assert routing.to == "examiner" and routing.entries == ()
    event = rt.answer_exam(routing)
    assert event.result_availability == "not_recorded"
    assert event.recorded_value is None
    evidence = rt.evidence()
    assert evidence.observations[-1].availability == "not_recorded"
    assert "normal" not in (evidence.observations[-1].content or "").lower()
