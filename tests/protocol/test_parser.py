"""The doctor-action parser: markers, markdown, reasoning blocks, menu ids."""

from __future__ import annotations

import pytest

from clinenv.protocol.parser import parse_action, split_reasoning


@pytest.mark.parametrize(
    "raw, kind, payload",
    [
        ("DIAGNOSIS READY: Sarcoidosis", "diagnosis", "Sarcoidosis"),
        ("**DIAGNOSIS READY:** **Acute pancreatitis**", "diagnosis", "Acute pancreatitis"),
        ("DIAGNOSIS READY: *Acute pancreatitis*.", "diagnosis", "Acute pancreatitis"),
        ("### Diagnosis ready: acute pancreatitis", "diagnosis", "acute pancreatitis"),
        ("diagnosis ready: gout\nBecause the joint fluid shows crystals.", "diagnosis", "gout"),
        ("REQUEST TEST: Chest_X-Ray", "test_request", "Chest_X-Ray"),
        ("request test: complete blood count.", "test_request", "complete blood count"),
        ("I would like to REQUEST TEST: [T3]", "test_request", "T3"),
        ("T3", "test_request", "T3"),
        ("[pe2]", "test_request", "PE2"),
        ("Do you have a fever?", "question", "Do you have a fever?"),
        ("DIAGNOSIS READY: Type 2 diabetes mellitus (T2DM).", "diagnosis",
         "Type 2 diabetes mellitus (T2DM)"),
        ("DIAGNOSIS READY: (Gout", "diagnosis", "Gout"),
        ("DIAGNOSIS READY: [Gout]", "diagnosis", "Gout"),
        ("DIAGNOSIS READY: (Gout) and (SLE)", "diagnosis", "(Gout) and (SLE)"),
        ("DIAGNOSIS READY: Apical lung tumor REQUEST TEST: T1", "diagnosis", "Apical lung tumor"),
        ("   ", "empty", ""),
        ("", "empty", ""),
    ],
)
def test_lenient_forms(raw, kind, payload):
    action = parse_action(raw)
    assert (action.kind, action.payload) == (kind, payload)


def test_reasoning_block_is_removed_and_its_markers_ignored():
    # B01 (a): the REQUEST TEST inside the think block must not be acted on.
    raw = ("<think>\nFever, hilar nodes, erythema nodosum. Lymphoma? Maybe REQUEST TEST: "
           "Biopsy. No, enough.\n</think>\n\nDIAGNOSIS READY: Sarcoidosis")
    action = parse_action(raw)
    assert action.kind == "diagnosis"
    assert action.payload == "Sarcoidosis"
    assert action.test_payload is None
    assert "Biopsy" in action.reasoning
    assert "<think>" not in action.text and "Biopsy" not in action.text


def test_empty_think_pairs_leave_no_tags():
    # B01 (b)
    action = parse_action("<think>\n\n</think>\n\n<think>\n</think>\n\nREQUEST TEST: Chest_X-Ray")
    assert (action.kind, action.payload) == ("test_request", "Chest_X-Ray")
    assert "think" not in action.text


def test_unterminated_reasoning_is_an_empty_action():
    # B04 (a): a reply cut off inside its reasoning has no action.
    action = parse_action("<think>Weighing Addison disease against DIAGNOSIS READY: X")
    assert action.kind == "empty"
    assert "Addison" in action.reasoning


def test_dangling_close_tag_treats_prefix_as_reasoning():
    visible, reasoning = split_reasoning("thinking about gout</think>DIAGNOSIS READY: Gout")
    assert visible == "DIAGNOSIS READY: Gout"
    assert reasoning == "thinking about gout"


def test_plain_reply_without_tags_is_not_unfinished():
    # B04 (c)
    action = parse_action("DIAGNOSIS READY: Addison disease")
    assert (action.kind, action.payload, action.reasoning) == (
        "diagnosis", "Addison disease", None)


def test_bare_diagnosis_only_when_allowed():
    # B05 (d): lenient decision-phase parsing accepts "Diagnosis: X"; acquisition does not.
    assert parse_action("**Diagnosis:** Acute pancreatitis").kind == "question"
    action = parse_action("**Diagnosis:** Acute pancreatitis", accept_bare_diagnosis=True)
    assert (action.kind, action.payload) == ("diagnosis", "Acute pancreatitis")


def test_strict_mode_is_case_sensitive_and_flags_format_misses():
    assert parse_action("DIAGNOSIS READY: Gout", strict=True).kind == "diagnosis"
    lower = parse_action("Diagnosis ready: gout", strict=True)
    assert lower.kind == "question"
    assert lower.format_miss
    assert parse_action("request test: CBC", strict=True).kind == "question"


def test_both_markers_keep_the_test_beside_the_diagnosis():
    action = parse_action("REQUEST TEST: ECG\nDIAGNOSIS READY: Angina")
    assert action.kind == "diagnosis"
    assert action.test_payload == "ECG"


@pytest.mark.parametrize("raw", [None, 17, "\x00\x01", "é" * 10_000, "<think>" * 50])
def test_never_raises(raw):
    parse_action(raw)


@pytest.mark.parametrize("raw, kind", [
    ("REQUEST TEST:", "test_request"), ("DIAGNOSIS READY:", "diagnosis"),
    ("DIAGNOSIS READY: **", "diagnosis"), ("DIAGNOSIS READY: (", "diagnosis"),
    ("DIAGNOSIS READY: [", "diagnosis"), ("REQUEST TEST: {", "test_request"),
])
def test_markers_with_empty_or_bracket_only_payloads_parse_to_empty(raw, kind):
    """A marker whose payload cleans down to nothing used to raise IndexError."""
    action = parse_action(raw)
    assert (action.kind, action.payload) == (kind, "")
