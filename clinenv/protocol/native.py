"""The native AgentClinic / MedAgentSim runtime: one episode of the published loop.

AgentClinic's script, lines 570-659, over the same cases and history events as
:class:`~clinenv.protocol.runtime.EGIPRuntime`; differences: docs/protocols.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from clinenv.cases import Case
from clinenv.datasets.nejm import final_question
from clinenv.protocol.catalog import CatalogEntry
from clinenv.protocol.doctor_text import echoes_prompt
from clinenv.protocol.evidence import EvidenceBundle, Observation, ObservationLog
from clinenv.protocol.history import (
    DoctorEvent,
    Event,
    InterfaceEvent,
    MeasurementEvent,
    PatientEvent,
)
from clinenv.protocol.measurement_view import MeasurementView, Speaker, exam_information
from clinenv.protocol.native_config import NEJM_NATIVE_QUESTION, NativeConfig
from clinenv.protocol.parser import clean_payload, parse_action, split_reasoning
from clinenv.protocol.prepared import PreparedCase
from clinenv.protocol.turns import TurnCut, cut_turn, speaker_line
from clinenv.protocol.views import FrozenFacts, PatientView

Phase = Literal["acquire", "decide", "done"]
#: ``info["action_kind"]`` of a native doctor utterance.
NativeKind = Literal["question", "test_request", "diagnosis", "empty"]
#: Case-sensitive markers of AgentClinic (strict mode).
DIAGNOSIS_MARKER = "DIAGNOSIS READY"
TEST_MARKER = "REQUEST TEST"
#: One measurement result as a native patient hears it, a note of its own before the
#: doctor's next question (:attr:`~clinenv.protocol.views.PatientView.notes`; AgentClinic
#: appends each result to the patient's history, line 649).
RESULTS_NOTE = "(Examination results reported in the consultation: {results})"
#: The test marker and the rest of its word ("REQUEST TESTS"): the event's exam name
#: starts after it, at a word boundary.
_TEST_NAME_START = re.compile(r"REQUEST TEST\w*", re.IGNORECASE)
#: Interface feedback for an empty utterance (the turn counts).
EMPTY_FEEDBACK = ("No utterance was found. Ask the patient a question, write REQUEST TEST: "
                  "<test>, or DIAGNOSIS READY: <diagnosis>.")


def native_objective(case: Case, question: str = "fixed") -> str:
    """The doctor's whole starting information under the native protocol.

    Args:
        case: the case.
        question: ``"fixed"`` or ``"final"`` (NEJM cases only; see
            :class:`~clinenv.protocol.native_config.NativeConfig.nejm_question`).

    Returns:
        NEJM cases (``metadata["vignette"]`` present): :data:`NEJM_NATIVE_QUESTION`, or
        with ``"final"`` the vignette's last question sentence (the fixed question when
        it has none), rephrased by :func:`without_options` when it points at answer
        options the native doctor never sees. Other cases: ``case.objective``
        (``Objective_for_Doctor``).
    """
    vignette = case.metadata.get("vignette")
    if not isinstance(vignette, str):
        return case.objective
    if question == "final":
        return without_options(final_question(vignette) or NEJM_NATIVE_QUESTION)
    return NEJM_NATIVE_QUESTION


def moderator_answer(utterance: str | None, *, strict_markers: bool = True) -> str | None:
    """The diagnosis AgentClinic's moderator reads in a final doctor utterance.

    Used for offline scoring and for the judge alike: ``<think>`` blocks removed, the
    text cut to the doctor's own turn (:func:`clinenv.protocol.turns.cut_turn`), the
    marker found as the runtime routes it, and the first non-empty line after it
    taken, without markdown, quotes and end stops.

    Args:
        utterance: the doctor's final utterance (``None`` reads as no utterance).
        strict_markers: :attr:`~clinenv.protocol.native_config.NativeConfig.strict_markers`.

    Returns:
        The diagnosis text, or ``None`` when the doctor's own turn holds no diagnosis
        marker or nothing follows it. Never raises.
    """
    if not isinstance(utterance, str):
        return None
    visible, _ = split_reasoning(utterance)
    own = own_turn(visible, strict_markers=strict_markers).text
    action = parse_action(own, strict=strict_markers, speaker_lines=False)
    if action.kind != "diagnosis":
        return None
    return action.payload.strip() or None


def own_turn(visible: str, *, strict_markers: bool = True) -> TurnCut:
    """The native doctor's own turn in ``visible`` (reasoning already removed).

    Cut at chat-template tokens and at a new line opening another speaker's turn
    (:func:`~clinenv.protocol.turns.cut_turn`), except that a speaker line followed by
    the diagnosis marker does not end the turn: AgentClinic reads ``DIAGNOSIS READY``
    anywhere in the utterance, so a final answer that lists ``Patient: ...`` findings
    first stays a diagnosis (the native protocol's rule; EGIP's acquisition phase cuts
    there).
    """
    own = cut_turn(visible, "doctor")
    if own.wrote_past_turn and own.boundary and own.boundary.endswith(":"):
        whole = cut_turn(visible, "doctor", speaker_lines=False)
        # the marker must stand on a line of the doctor's, not in the other speaker's
        lines = [ln for ln in whole.text.splitlines()[1:] if not speaker_line(ln)]
        marked = any(DIAGNOSIS_MARKER in ln if strict_markers else
                     parse_action(ln, speaker_lines=False).kind == "diagnosis"
                     for ln in lines)
        if marked:
            return whole
    return own


_FOLLOWING = re.compile(r"^(which|what)\s+of\s+the\s+following\s+", re.IGNORECASE)
_VERB = re.compile(r"(?:is|are|was|were|would|will|could|should|can|might|may|best|most)\b",
                   re.IGNORECASE)


def without_options(question: str) -> str:
    """``question`` without its reference to answer options (the native doctor sees no
    options): ``"Which of the following is the most likely diagnosis?"`` becomes ``"What
    is the most likely diagnosis?"`` and ``"Which of the following tests ..."`` becomes
    ``"Which tests ..."``; any other question is returned unchanged. (3 of the 15 NEJM
    vignettes end with "Which of the following is the most likely diagnosis?".)"""
    match = _FOLLOWING.match(question)
    if match is None:
        return question
    rest = question[match.end():]
    return ("What " if _VERB.match(rest) else "Which ") + rest


@dataclass(frozen=True, slots=True)
class NativeRouting:
    """Where a native doctor utterance goes.

    Attributes:
        to: ``"patient"``, ``"examiner"`` (the measurement agent), ``"judge"`` (a
            diagnosis: the episode is over, the whole utterance is judged), ``"end"``
            (the episode ended unfinished) or ``"interface"`` (feedback only).
        text: the visible utterance (reasoning removed, clipped).
        kind: the action kind for ``info["action_kind"]``: ``"question"``,
            ``"test_request"``, ``"diagnosis"`` or ``"empty"``.
        reasoning: removed ``<think>`` text, or ``None``.
    """

    to: Literal["patient", "examiner", "judge", "end", "interface"]
    text: str
    kind: NativeKind
    reasoning: str | None = None


class NativeRuntime:
    """One native episode over ``case`` with settings ``config``.

    Attributes read by the environment and :mod:`clinenv.env.doctor_view`: ``case``,
    ``config``, ``catalog``, ``history``, ``requested`` (one entry per measurement
    request), ``turn``, ``phase``, ``invalid_actions``, ``answer`` (the whole final
    utterance, or ``None``), ``stopped_early``, ``end_reason`` (``None``,
    ``"diagnosis"`` or ``"no_diagnosis"``), ``objective`` and ``last_reply``.

    Args:
        case: the case or its :class:`PreparedCase`.
        config: native settings (default AgentClinic's).
    """

    def __init__(self, case: Case | PreparedCase, config: NativeConfig | None = None) -> None:
        self.config = config or NativeConfig()
        if not isinstance(case, PreparedCase):
            case = PreparedCase.build(case)
        self.case = case.case
        self.catalog = case.catalog
        self._facts = (case.patient_facts if self.config.patient_withholds_target
                       else FrozenFacts(self.case.patient))
        self._records_text = exam_information(self.case)
        self.objective = native_objective(self.case, self.config.nejm_question)
        self.history: list[Event] = []
        self.requested: list[str] = []
        self.turn = 0
        self.phase: Phase = "acquire"
        self.invalid_actions = 0
        self.answer: str | None = None
        self.stopped_early = False
        self.end_reason: str | None = None
        self.last_reply = ""
        #: Flags of the latest doctor utterance (``info["action_flags"]``):
        #: ``"wrote_past_turn"`` (cut at a turn boundary), ``"echoes_prompt"``.
        self.action_flags: tuple[str, ...] = ()
        self._dialogue: list[tuple[str, str]] = []
        self._notes: list[tuple[int, str]] = []
        self._measurement_history: list[tuple[Speaker, str]] = []
        self._observation_log = ObservationLog()
        self._enter_decision()

    # ----------------------------------------------------------------- views
    def menu(self) -> list[CatalogEntry]:
        """Always empty: the native doctor gets no menu (weakness W2)."""
        return []

    @property
    def final_notice_due(self) -> bool:
        """The doctor's next turn is the last one and the notice is shown."""
        cfg = self.config
        return (self.phase == "acquire" and cfg.final_turn == "notice" and cfg.final_notice
                and self.turn + 1 == cfg.max_turns)

    def evidence(self) -> EvidenceBundle:
        """The episode's observations in e_T form (objective = the native objective, no
        candidates: the native doctor never sees them). For records and evaluation."""
        return EvidenceBundle(self.objective, None, self.observations())

    def observations(self) -> tuple[Observation, ...]:
        """The observations of the history so far (``O1``, ``O2``... in order, as
        :func:`~clinenv.protocol.evidence.build_evidence` extracts them), each event read
        once per episode."""
        return self._observation_log.read(self.history)

    def patient_view(self, question: str) -> PatientView:
        """The patient's view: its facts, its dialogue, ``question`` (the doctor's own
        words) and, as :attr:`~clinenv.protocol.views.PatientView.notes`, every
        measurement result it heard (``patient_sees_results``, W5), each placed before
        the first question asked after it."""
        return PatientView(self._facts, tuple(self._dialogue), question,
                           self.case.flags.caregiver_voice, tuple(self._notes))

    def measurement_view(self, request: str) -> MeasurementView:
        """The measurement agent's view: all records, ``request``, its history."""
        return MeasurementView(self._records_text, self.case.records, request,
                               tuple(self._measurement_history), self.config.normal_readings,
                               self.catalog)

    # --------------------------------------------------------------- routing
    def route(self, text: str) -> NativeRouting:
        """Route one doctor utterance of the acquisition phase (never raises on text).

        Raises:
            RuntimeError: called outside the acquisition phase (a caller bug).
        """
        turn, visible, reasoning, kind = self._take(text, "acquire", "route")
        if kind == "empty":
            self.history.append(DoctorEvent(turn, "", "empty", "", flags=self.action_flags))
            self.history.append(InterfaceEvent(turn, "empty_action", EMPTY_FEEDBACK))
            self.invalid_actions += 1
            self.last_reply = EMPTY_FEEDBACK
            routing = NativeRouting("interface", "", kind, reasoning)
            self._close_round()
            return routing if self.phase != "done" else NativeRouting("end", "", kind,
                                                                        reasoning)
        if kind == "diagnosis" or turn == self.config.max_turns:
            return self._last_turn(turn, visible, reasoning, kind)
        self.history.append(DoctorEvent(turn, visible, kind, visible, flags=self.action_flags))
        return NativeRouting("examiner" if kind == "test_request" else "patient", visible,
                             kind, reasoning)

    def submit_answer(self, text: str) -> NativeRouting:
        """The decision-phase action (MedAgentSim's discussion outcome): judged whole when
        it carries the diagnosis marker, else the episode ends unfinished.

        Raises:
            RuntimeError: called outside the decision phase (a caller bug).
        """
        return self._last_turn(*self._take(text, "decide", "submit_answer"))

    def _take(self, text: str, phase: Phase,
              caller: str) -> tuple[int, str, str | None, NativeKind]:
        """``(turn, visible, reasoning, kind)`` of the doctor's next utterance; raises
        RuntimeError outside ``phase`` (a caller bug)."""
        if self.phase != phase:
            raise RuntimeError(f"{caller}() called in phase {self.phase!r}")
        return (self.turn + 1, *self._classify(text))

    def _last_turn(self, turn: int, visible: str, reasoning: str | None,
                   kind: NativeKind) -> NativeRouting:
        """An utterance that ends the episode: judged whole with the diagnosis marker,
        else recorded and the episode ends unfinished."""
        if kind == "diagnosis":
            self._end(turn, visible, reasoning)
            return NativeRouting("judge", visible, kind, reasoning)
        self.history.append(DoctorEvent(turn, visible, kind, visible, flags=self.action_flags))
        self._unfinished(turn)
        return NativeRouting("end", visible, kind, reasoning)

    # ------------------------------------------------------------- responses
    def answer_patient(self, routing: NativeRouting, reply: str) -> PatientEvent:
        """Record the patient's reply; the measurement agent hears it too (setting)."""
        event = PatientEvent(self.turn + 1, routing.text, reply)
        self.history.append(event)
        self._dialogue.append((routing.text, reply))
        if self.config.measurement_sees_patient:
            self._measurement_history.append(("patient", reply))
        self.last_reply = reply
        self._close_round()
        return event

    def answer_measurement(self, routing: NativeRouting, reply: str) -> MeasurementEvent:
        """Record the measurement agent's answer (availability ``"generated"``: a model's
        text, not a record lookup); the patient hears it too (setting)."""
        marker = _TEST_NAME_START.search(routing.text)
        name = clean_payload(routing.text[marker.end():].lstrip(" :")) if marker else ""
        event = MeasurementEvent(self.turn + 1, routing.text, None, name or routing.text,
                                 (), reply, "generated")
        self.history.append(event)
        self.requested.append(f"M{len(self.requested) + 1}")
        self._measurement_history += [("doctor", routing.text), ("measurement", reply)]
        if self.config.patient_sees_results:
            self._notes.append((len(self._dialogue), RESULTS_NOTE.format(results=reply)))
        self.last_reply = reply
        self._close_round()
        return event

    # --------------------------------------------------------------- helpers
    def _classify(self, text: str) -> tuple[str, str | None, NativeKind]:
        """``(visible, reasoning, kind)``; the diagnosis marker is checked first."""
        visible, reasoning = split_reasoning(text if isinstance(text, str) else str(text))
        own = own_turn(visible, strict_markers=self.config.strict_markers)
        visible = own.text  # an invented next turn is never the doctor's
        limit = self.config.max_action_chars
        if len(visible) > limit:
            visible = visible[:limit]
        parsed = parse_action(visible, strict=self.config.strict_markers,
                              speaker_lines=False)
        kind: NativeKind = "empty" if not visible.strip() else parsed.kind
        # flagged, not refused: the native loop answers whatever the utterance says
        placeholder = (() if "placeholder" not in parsed.flags else
                       ("placeholder_answer",) if kind == "diagnosis" else
                       ("placeholder_request",))
        self.action_flags = (*own.flags, *(("echoes_prompt",) if echoes_prompt(visible)
                                           else ()), *placeholder)
        if kind == "empty":
            return "", reasoning, "empty"
        return visible, reasoning, kind

    def _end(self, turn: int, visible: str, reasoning: str | None) -> None:
        self.history.append(DoctorEvent(turn, visible, "diagnosis", visible,
                                        flags=self.action_flags))
        self.answer = visible
        self.end_reason = "diagnosis"
        self.stopped_early = turn < self.config.max_turns
        self.turn = turn
        self.phase = "done"

    def _unfinished(self, turn: int) -> None:
        self.history.append(InterfaceEvent(turn, "no_diagnosis", (
            f"The consultation ended after {turn} turns without DIAGNOSIS READY.")))
        self.end_reason = "no_diagnosis"
        self.turn = turn
        self.phase = "done"

    def _close_round(self) -> None:
        self.turn += 1
        if self.phase == "acquire" and self.turn >= self.config.max_turns:
            self._unfinished(self.turn)  # an interface-only last turn
        self._enter_decision()

    def _enter_decision(self) -> None:
        cfg = self.config
        if (self.phase == "acquire" and cfg.final_turn == "discussion"
                and self.turn >= cfg.max_turns - 1):
            self.phase = "decide"
            self.history.append(InterfaceEvent(self.turn, "decision_phase",
                                               "The final discussion begins."))
