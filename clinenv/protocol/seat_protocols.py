"""The seats that answer the doctor, typed: what a patient, an examiner and a judge are.

:class:`typing.Protocol` classes for type checkers; any object with the method will do.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from clinenv.protocol.measurement_view import MeasurementView
from clinenv.protocol.views import PatientView

__all__ = ["Examiner", "Judge", "Patient"]


@runtime_checkable
class Patient(Protocol):
    """The patient simulator: one reply (plain text) to the doctor's pending question."""

    def reply(self, view: PatientView) -> str: ...


@runtime_checkable
class Examiner(Protocol):
    """A measurement agent: the result text of one examination request."""

    def measure(self, view: MeasurementView) -> str: ...


@runtime_checkable
class Judge(Protocol):
    """A judge: its ruling on ``answer`` against the reference ``target`` — an object whose
    ``verdict`` is ``"correct"``, ``"wrong"`` or ``"unparsed"`` (or that label)."""

    def judge(self, answer: str, target: str, **kwargs: Any) -> Any: ...
