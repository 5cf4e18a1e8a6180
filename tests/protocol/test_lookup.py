"""The lookup O on a hand-built case: stored values and their availability."""

from __future__ import annotations

from clinenv.protocol.catalog import Catalog
from clinenv.protocol.lookup import lookup, render_record


def test_lookup_returns_stored_values_and_availability(gbs_records):
    catalog = Catalog(gbs_records)
    text, availability = lookup(gbs_records, catalog.get("T3"))
    assert availability == "recorded"
    assert text == "WBC: 7,000/mm3\nHemoglobin: 13 g/dL"
    text, availability = lookup(gbs_records, catalog.get("T5"))
    assert availability == "unavailable"
    assert "Pending" in text
    text, availability = lookup(gbs_records, catalog.get("T4"))
    assert availability == "recorded"  # one leaf is a result
    assert "Cells: result not available (Pending)" in text
    assert lookup(gbs_records, None) == (None, "not_recorded")
    assert render_record(True) == "yes"
