"""The interaction history h_t: an ordered list of typed events (EGIP Eq. 3).

``h_{t+1} = h_t || [(a_t, r_t)]``; of the four event types only Patient and Measurement
events are observations (EGIP section 3.3).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

Availability = Literal["recorded", "unavailable", "not_recorded", "generated"]


@dataclass(frozen=True, slots=True)
class DoctorEvent:
    """The doctor's utterance in round ``turn`` and the action it was routed as.

    ``routed_as`` is one of ``question``, ``test_request``, ``diagnosis``, ``empty``,
    ``clarification`` (the action was replaced by a fixed clarification question),
    ``knowledge_query`` (CDEG's knowledge retrieval, :mod:`clinenv.protocol.extra_actions`),
    ``placeholder`` (a request or answer that is a template placeholder, answered by
    interface feedback or taken as no answer; ``payload`` is then the utterance).
    ``flags`` are the action's flags (``info["action_flags"]``: ``"wrote_past_turn"``,
    ``"echoes_prompt"``, ``"placeholder_request"``, ``"placeholder_answer"``...).
    """

    turn: int
    text: str
    routed_as: str
    payload: str
    source: Literal["doctor"] = "doctor"
    flags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PatientEvent:
    """A patient reply; ``question_context`` is the effective question it answers."""

    turn: int
    question_context: str
    reply: str
    source: Literal["patient"] = "patient"


@dataclass(frozen=True, slots=True)
class MeasurementEvent:
    """A record lookup O.

    Attributes:
        request: the requested name as the doctor wrote it.
        exam_id: public id of the matched entry, ``None`` when not recorded.
        name: readable name of the entry (the request for a miss).
        source_paths: keys from the root of M to each returned record.
        recorded_value: the stored record rendered as text; ``None`` when not recorded.
        result_availability: ``recorded``, ``unavailable`` (placeholder only),
            ``not_recorded`` (no such record — never to be read as normal) or
            ``generated`` (the text of a measurement agent that holds every record, not a
            record lookup: the native protocols and the "native measurement access"
            ablation, EGIP Table 3A).
        noise: the examiner noise changed this result (:mod:`clinenv.protocol.exam_noise`):
            a recorded result shown ``unavailable``, or a delayed one; ``False``
            (default) is left out of :func:`event_to_dict`.
        delayed_from: a delayed result: the round of its request (``None``, left out of
            :func:`event_to_dict`, otherwise).
    """

    turn: int
    request: str
    exam_id: str | None
    name: str
    source_paths: tuple[tuple[str, ...], ...]
    recorded_value: str | None
    result_availability: Availability
    source: Literal["measurement"] = "measurement"
    noise: bool = False
    delayed_from: int | None = None


@dataclass(frozen=True, slots=True)
class InterfaceEvent:
    """Interface feedback; ``kind`` names the situation (e.g. ``ambiguous_request``)."""

    turn: int
    kind: str
    message: str
    source: Literal["interface"] = "interface"


Event = DoctorEvent | PatientEvent | MeasurementEvent | InterfaceEvent


#: Field names of each event type, in declaration order (the keys of its dict).
_FIELD_NAMES = {cls: tuple(f.name for f in fields(cls))
                for cls in (DoctorEvent, PatientEvent, MeasurementEvent, InterfaceEvent)}


def event_to_dict(event: Event) -> dict[str, Any]:
    """JSON-ready dict of one event: its fields in declaration order, tuples as lists
    (``flags``, ``source_paths``); the same dict as :func:`dataclasses.asdict` with those
    conversions, less a measurement's ``noise`` / ``delayed_from`` at their defaults (so
    records without examiner noise are unchanged)."""
    names = _FIELD_NAMES.get(type(event))
    if names is None:  # not one of the four event types: the generic conversion
        data = asdict(event)
    else:
        data = {name: getattr(event, name) for name in names}
    if "flags" in data:
        data["flags"] = list(data["flags"])
    if "source_paths" in data:
        data["source_paths"] = [list(p) for p in data["source_paths"]]
    if "noise" in data:  # a measurement event: its noise keys only when set
        if not data["noise"]:
            del data["noise"]
        if data.get("delayed_from") is None:
            data.pop("delayed_from", None)
    return data
