"""The evidence E: which events become observations."""

from __future__ import annotations

from clinenv.protocol.evidence import build_evidence
from clinenv.protocol.history import DoctorEvent, InterfaceEvent


def test_evidence_keeps_only_patient_and_measurement_events():
    events = [DoctorEvent(1, "hi", "question", "hi"), InterfaceEvent(1, "x", "y")]
    assert build_evidence("s0", ("A", "B"), events).observations == ()
