"""The record reader: a deterministic, offline stand-in for the native measurement agent.

Answers a request with the records whose names occur in it (groups only by their whole
name), else ``RESULTS: NORMAL READINGS``; it never sees P or Y.
"""

from __future__ import annotations

import re
from typing import Any

from rapidfuzz import fuzz

from clinenv.protocol.catalog import Catalog, normalize_name
from clinenv.protocol.lookup import record_at, render_record
from clinenv.protocol.measurement_view import MeasurementView

#: The reader's answer when no record matches, under the normal-readings rule.
NORMAL_READINGS = "RESULTS: NORMAL READINGS"
#: The reader's answer when no record matches, without the rule.
NOT_RECORDED = "RESULTS: NOT RECORDED"
__all__ = ["NORMAL_READINGS", "NOT_RECORDED", "NativeRecordReader", "check_view"]


def check_view(view: Any) -> MeasurementView:
    """``view`` itself.

    Raises:
        TypeError: ``view`` is not a MeasurementView.
    """
    if not isinstance(view, MeasurementView):
        raise TypeError(f"view must be a MeasurementView, got {type(view).__name__}")
    return view


class NativeRecordReader:
    """Deterministic offline stand-in for the native measurement agent.

    Args:
        threshold: ``partial_ratio`` (0-100) at which a name counts as requested.

    Raises:
        ValueError: a threshold outside 0-100.
    """

    name = "record_reader"

    def __init__(self, threshold: float = 90.0) -> None:
        if not 0 <= threshold <= 100:
            raise ValueError(f"threshold must be in 0..100, got {threshold!r}")
        self.threshold = float(threshold)

    @property
    def config(self) -> dict[str, Any]:
        """JSON-ready description for run logs."""
        return {"agent": self.name, "threshold": self.threshold}

    def measure(self, view: MeasurementView) -> str:
        """``RESULTS: <name>: <result>; ...`` for every matching record, in catalog
        order, else :data:`NORMAL_READINGS` / :data:`NOT_RECORDED`.

        Raises:
            TypeError: ``view`` is not a MeasurementView.
        """
        view = check_view(view)
        request = normalize_name(view.request)
        words = set(request.split())
        found = []
        for entry in view.catalog if view.catalog is not None else Catalog(view.records):
            if self._names(entry.name, request, words) or (
                    entry.group and _names_whole(entry.group, request)):
                value = render_record(record_at(view.records, entry.source_path))
                found.append(f"{entry.name}: " + re.sub(r"\s*\n\s*", "; ", value.strip()))
        if found:
            return "RESULTS: " + "; ".join(found)
        return NORMAL_READINGS if view.normal_readings else NOT_RECORDED

    def _names(self, name: str, request: str, words: set[str]) -> bool:
        """Whether the request names one examination (fuzzily; short names as words)."""
        key = normalize_name(name)
        if not key:
            return False
        if len(key) <= 4:
            return all(word in words for word in key.split())
        return fuzz.partial_ratio(key, request) >= self.threshold


def _names_whole(group: str, request: str) -> bool:
    """Whether the normalized ``request`` holds the whole normalized ``group`` name as a
    run of whole words."""
    key = normalize_name(group)
    return bool(key) and f" {key} " in f" {request} "
