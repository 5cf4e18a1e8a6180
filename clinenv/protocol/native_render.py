"""The native doctor's observation text (AgentClinic / MedAgentSim protocols).

Headings reuse the EGIP view's (``# Task``, ``# Interaction so far``); the MedAgentSim
decision observation is specified in docs/protocols.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from clinenv.protocol.doctor_text import indent_lines, quote_lines
from clinenv.protocol.history import (
    DoctorEvent,
    Event,
    InterfaceEvent,
    MeasurementEvent,
    PatientEvent,
)

if TYPE_CHECKING:
    from clinenv.protocol.native import NativeRuntime

#: Appended to the last reply on the final turn (AgentClinic, lines 630-631; our words).
FINAL_NOTICE = "This is your final turn: state your diagnosis now."
#: The action format of the native doctor (no ``DIAGNOSIS READY: <`` template: that text
#: marks a decision-phase input, e.g. for the offline clinician responder).
NATIVE_ACTION_FORMAT = (
    "Speak to the patient, request tests with REQUEST TEST: followed by the test, or end "
    "the consultation with DIAGNOSIS READY: followed by the diagnosis."
)
#: The decision-phase instruction of MedAgentSim-native (the final turn is replaced by an
#: internal discussion among doctors that ends in a diagnosis).
DISCUSSION_INSTRUCTIONS = (
    "The consultation is over. Discuss the case with your fellow doctors, using only the "
    "transcript above, and agree on the single most likely diagnosis. End with one line: "
    "DIAGNOSIS READY: <diagnosis>"
)
NO_REPLY_YET = "(none yet: you speak first)"


def render_native_event(event: Event) -> str:
    """One event as a ``Speaker: text`` transcript line."""
    if isinstance(event, DoctorEvent):
        return f"Doctor: {quote_lines(event.text) or '(nothing)'}"
    if isinstance(event, PatientEvent):
        return "Patient: " + indent_lines(event.reply, "  ")
    if isinstance(event, MeasurementEvent):
        return "Measurement: " + indent_lines(event.recorded_value or "", "  ")
    if isinstance(event, InterfaceEvent):
        return f"Interface: {event.message}"
    raise TypeError(f"not a history event: {event!r}")


def render_transcript(events: Iterable[Event]) -> str:
    """The consultation transcript, one line per event."""
    return "\n".join(render_native_event(e) for e in events)


def _latest(runtime: NativeRuntime) -> str:
    text = runtime.last_reply if runtime.history else NO_REPLY_YET
    if runtime.final_notice_due:
        text = f"{text}\n{FINAL_NOTICE}"
    return "# Latest response\n" + text


def _footer(runtime: NativeRuntime) -> str:
    return (f"# Your turn\nTurn {runtime.turn + 1} of {runtime.config.max_turns}. "
            f"{NATIVE_ACTION_FORMAT}")


def render_native_view(runtime: NativeRuntime) -> str:
    """The complete native doctor observation for a
    :class:`~clinenv.protocol.native.NativeRuntime` (layouts in docs/protocols.md)."""
    head = f"# Task\n{runtime.objective}"
    if runtime.phase != "acquire":
        return "\n\n".join([
            *([head] if runtime.config.decision_objective else []),
            "# Consultation transcript\n"
            + (render_transcript(runtime.history) or "(nothing was said)"),
            f"# Final discussion\n{DISCUSSION_INSTRUCTIONS}"])
    parts = [head]
    if runtime.history:
        parts.append("# Interaction so far\n" + render_transcript(runtime.history[:-1]
                                                                  if runtime.history else []))
    parts += [_latest(runtime), _footer(runtime)]
    return "\n\n".join(parts)


def render_native_delta(runtime: NativeRuntime) -> str:
    """What is new for the doctor: the latest response and the footer (or, in the
    decision phase, the latest response and the whole decision observation)."""
    if runtime.phase != "acquire":
        return _latest(runtime) + "\n\n" + render_native_view(runtime)
    return _latest(runtime) + "\n\n" + _footer(runtime)
