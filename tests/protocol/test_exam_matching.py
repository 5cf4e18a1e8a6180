"""Exam matching on a hand-built case: ids, names, typos, groups, ambiguity, misses."""

from __future__ import annotations

import pytest

from clinenv.protocol.catalog import Catalog
from clinenv.protocol.exam_matching import ExamMatcher
from clinenv.protocol.runtime import EGIPRuntime


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
def test_exam_matching(request_text, status, exam_id, gbs_records):
    matcher = ExamMatcher.for_records(Catalog(gbs_records), gbs_records)
    match = matcher.match(request_text)
    assert match.status == status
    assert (match.entry.exam_id if match.entry else None) == exam_id


def test_group_name_returns_every_test_of_the_group(gbs_records, gbs_case, play):
    matcher = ExamMatcher.for_records(Catalog(gbs_records), gbs_records)
    for request in ("Imaging", "imaging studies"):
        match = matcher.match(request)
        assert match.status == "matched" and match.group == "Imaging"
        assert [e.exam_id for e in match.entries] == ["T1", "T2"]
    rt = EGIPRuntime(gbs_case)
    play(rt, "REQUEST TEST: Imaging")
    event = rt.history[-1]
    assert (event.exam_id, event.name, event.result_availability) == (
        "T1,T2", "Imaging", "recorded")
    assert event.source_paths == (("tests", "Imaging", "MRI_Brain"),
                                  ("tests", "Imaging", "MRI_Spine"))
    assert event.recorded_value == ("MRI Brain:\n  Findings: Normal\n"
                                    "MRI Spine:\n  Findings: Nerve root enhancement")
    assert rt.requested == ["T1", "T2"]
    play(rt, "REQUEST TEST: MRI Spine")  # already returned with the group: a repeat
    assert rt.history[-2].kind == "repeated_request"


def test_ambiguous_lists_candidates(gbs_records):
    match = ExamMatcher.for_records(Catalog(gbs_records), gbs_records).match("MRI")
    assert {e.exam_id for e in match.candidates} == {"T1", "T2"}
