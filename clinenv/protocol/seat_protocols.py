"""The seats that answer the doctor, typed: what a patient, an examiner and a judge are.

Each environment seat is any object with the method below (duck typing; these
:class:`typing.Protocol` classes are for type checkers and for reading). The views are
:mod:`clinenv.protocol.views` and :mod:`clinenv.protocol.measurement_view`; a seat never
sees more than its view (EGIP section 3.2: the patient sees P and the dialogue, never M
or Y; the examiner one request and its records, never P). Optional methods: ``async``
twins (``areply``, ``ameasure``, ``ajudge``) for :meth:`clinenv.env.EGIPEnv.astep`,
``reset(seed=...)`` and ``drain_calls()`` (model call records for the run log).
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
