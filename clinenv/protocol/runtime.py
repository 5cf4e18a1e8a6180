"""The EGIP runtime: one episode of the protocol over one case.

It validates and routes each doctor action (EGIP section 3.2), keeps the history h_t,
builds the role views R, resolves exams by record lookup O, and after T rounds (or an
allowed early stop) switches to the decision phase, whose input is e_T (section 3.3).

The runtime does not simulate anyone: it says *who answers* (:class:`Routing`) and takes
the answer back (:meth:`EGIPRuntime.answer_patient`, :meth:`EGIPRuntime.answer_exam`),
so the Gymnasium environment can fill the seats with built-in simulators and the
PettingZoo environment can hand them to external policies.

Phases: ``"acquire"`` -> ``"decide"`` -> ``"done"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from clinenv.cases import Case
from clinenv.protocol import config as cfg
from clinenv.protocol.catalog import CatalogEntry
from clinenv.protocol.evidence import EvidenceBundle, build_evidence
from clinenv.protocol.exam_matching import ExamMatch
from clinenv.protocol.history import (
    DoctorEvent,
    Event,
    InterfaceEvent,
    MeasurementEvent,
    PatientEvent,
)
from clinenv.protocol.lookup import lookup, record_at
from clinenv.protocol.parser import DoctorAction, parse_action
from clinenv.protocol.prepared import PreparedCase
from clinenv.protocol.views import ExaminerView, PatientView

Phase = Literal["acquire", "decide", "done"]


@dataclass(frozen=True, slots=True)
class Routing:
    """Where a doctor action goes next.

    Attributes:
        to: ``"patient"`` (a question), ``"examiner"`` (a validated exam request or a
            miss), ``"interface"`` (feedback only; the round is over) or ``"end"`` (the
            terminal answer was given; the episode is over).
        action: the parsed action.
        question: the effective question for the patient (a fixed clarification when the
            action was replaced).
        request: the requested test as written (examiner routing).
        entry: the matched catalog entry, ``None`` for a miss (not recorded).
    """

    to: Literal["patient", "examiner", "interface", "end"]
    action: DoctorAction
    question: str | None = None
    request: str | None = None
    entry: CatalogEntry | None = None


class EGIPRuntime:
    """One EGIP episode over ``case`` with settings ``config``.

    Args:
        case: the case, or a :class:`PreparedCase` (shared per-case artifacts, built
            with this config's exam-matching thresholds). Its target Y is used only to
            withhold target-naming sentences from the patient view; scoring is the
            caller's.
        config: protocol settings; defaults are the paper's.
    """

    def __init__(self, case: Case | PreparedCase,
                 config: cfg.ProtocolConfig | None = None) -> None:
        self.config = config or cfg.ProtocolConfig()
        if not isinstance(case, PreparedCase):
            case = PreparedCase.build(case, accept=self.config.exam_accept,
                                      suggest=self.config.exam_suggest)
        self.case = case.case
        self.catalog = case.catalog
        self.matcher = case.matcher
        self._menu_order = case.menu_order
        self._patient_facts = case.patient_facts
        self.history: list[Event] = []
        self.requested: list[str] = []
        self.dialogue: list[tuple[str, str]] = []
        self.turn = 0
        self.phase: Phase = "acquire"
        self.invalid_actions = 0
        self.answer: str | None = None
        self.stopped_early = False

    # ----------------------------------------------------------------- views
    def menu(self) -> list[CatalogEntry]:
        """B(A, h_t): unrequested entries in priority order, cut to the display limit."""
        if not self.config.show_menu:
            return []
        done = set(self.requested)
        items = [e for e in self._menu_order if e.exam_id not in done]
        limit = self.config.menu_limit
        return items if limit is None else items[:limit]

    def patient_view(self, question: str) -> PatientView:
        """The patient's view for one question: P (target withheld) and the dialogue."""
        return PatientView(self._patient_facts, tuple(self.dialogue), question,
                           self.case.flags.caregiver_voice)

    def examiner_view(self, routing: Routing) -> ExaminerView:
        """The examiner's view: the validated request and only the matching record."""
        entry = routing.entry
        record = None if entry is None else record_at(self.case.records, entry.source_path)
        return ExaminerView(routing.request or "", None if entry is None else entry.exam_id,
                            routing.request or "" if entry is None else entry.name, record)

    def evidence(self) -> EvidenceBundle:
        """e_T = E(s0, K, h_t) over the history so far."""
        return build_evidence(self.case.objective, self.case.candidates, self.history)

    # --------------------------------------------------------------- routing
    def route(self, text: str) -> Routing:
        """Parse, validate and route one doctor utterance (acquisition phase).

        Never raises on any text. Appends the DoctorEvent (and any InterfaceEvent) to the
        history. For ``to == "interface"`` the round is already complete.

        Raises:
            RuntimeError: called outside the acquisition phase (a caller bug).
        """
        if self.phase != "acquire":
            raise RuntimeError(f"route() called in phase {self.phase!r}")
        text = text if isinstance(text, str) else str(text)
        clipped = len(text) > self.config.max_action_chars
        action = parse_action(text[: self.config.max_action_chars],
                              strict=self.config.strict_markers)
        turn = self.turn + 1
        if clipped:
            self._note(turn, "clipped_action",
                       f"Your message was cut to {self.config.max_action_chars} characters.")
        if action.kind == "diagnosis" and action.test_payload:
            action = DoctorAction("test_request", action.text, action.test_payload,
                                  action.reasoning)
        if action.kind == "empty":
            self._doctor(turn, action, "empty")
            self.invalid_actions += 1
            self._note(turn, "empty_action",
                       "No question or request was found. Ask the patient a question, or "
                       "write REQUEST TEST: <id or name>.")
            return self._finish(Routing("interface", action))
        if action.kind == "diagnosis":
            if self.config.premature_diagnosis == "decide":
                self._doctor(turn, action, "diagnosis")
                self.stopped_early = True
                self._note(turn, "early_stop", "Acquisition ended early at your request.")
                self.phase = "decide"
                self.turn = turn
                return Routing("interface", action)
            self._doctor(turn, action, "clarification")
            self._note(turn, "premature_diagnosis",
                       "A diagnosis is given only in the decision phase; your message was "
                       "replaced by a fixed clarification question.")
            return Routing("patient", action, question=cfg.PREMATURE_CLARIFICATION)
        if action.kind == "test_request":
            return self._route_test(turn, action)
        if action.format_miss:
            self._note(turn, "format_miss", action.format_miss)
        self._doctor(turn, action, "question")
        return Routing("patient", action, question=action.payload)

    def _route_test(self, turn: int, action: DoctorAction) -> Routing:
        match: ExamMatch = self.matcher.match(action.payload)
        if match.status == "matched" and match.entry is not None:
            if match.entry.exam_id in self.requested:
                if self.config.clarify_repeats:
                    self._doctor(turn, action, "clarification")
                    self._note(turn, "repeated_request",
                               f"{match.entry.label} ({match.entry.exam_id}) was already "
                               "requested; your message was replaced by a fixed "
                               "clarification question.")
                    return Routing("patient", action, question=cfg.REPEAT_CLARIFICATION)
                self._doctor(turn, action, "test_request")
                self.invalid_actions += 1
                self._note(turn, "repeated_request",
                           f"{match.entry.label} ({match.entry.exam_id}) was already "
                           "requested; see its result above.")
                return self._finish(Routing("interface", action))
            self._doctor(turn, action, "test_request")
            return Routing("examiner", action, request=action.payload, entry=match.entry)
        if match.status == "ambiguous":
            self._doctor(turn, action, "test_request")
            self.invalid_actions += 1
            options = ", ".join(f"{e.exam_id} {e.label}" for e in match.candidates)
            self._note(turn, "ambiguous_request",
                       f"'{action.payload}' matches several examinations: {options}. "
                       "Request one by its id.")
            return self._finish(Routing("interface", action))
        if not action.payload:
            self._doctor(turn, action, "test_request")
            self.invalid_actions += 1
            self._note(turn, "empty_request", "REQUEST TEST needs an examination id or name.")
            return self._finish(Routing("interface", action))
        self._doctor(turn, action, "test_request")
        if match.candidates:
            options = ", ".join(f"{e.exam_id} {e.label}" for e in match.candidates[:3])
            self._note(turn, "suggestion", f"Closest recorded examinations: {options}.")
        return Routing("examiner", action, request=action.payload, entry=None)

    # ------------------------------------------------------------- responses
    def answer_patient(self, routing: Routing, reply: str) -> PatientEvent:
        """Record the patient's reply to ``routing.question`` and close the round."""
        event = PatientEvent(self.turn + 1, routing.question or "", reply)
        self.history.append(event)
        self.dialogue.append((event.question_context, reply))
        self._finish(routing)
        return event

    def answer_exam(self, routing: Routing, result_text: str | None = None) -> MeasurementEvent:
        """Record the examiner's answer and close the round.

        Args:
            routing: an ``examiner`` routing from :meth:`route`.
            result_text: ``None`` (default) uses record lookup O; a string replaces the
                result text (an external examiner policy) with the same availability.
        """
        entry = routing.entry
        value, availability = lookup(self.case.records, entry)
        if result_text is not None:
            value = result_text
        if entry is not None:
            self.requested.append(entry.exam_id)
        event = MeasurementEvent(
            self.turn + 1, routing.request or "", None if entry is None else entry.exam_id,
            routing.request or "" if entry is None else entry.label,
            () if entry is None else (entry.source_path,), value, availability)
        self.history.append(event)
        self._finish(routing)
        return event

    def submit_answer(self, text: str) -> DoctorAction:
        """The terminal answer (decision phase): parse it, record it, end the episode.

        A bare short line without a marker is taken as the answer; a long reply without a
        marker is no answer (scored "unscored"). Never raises on any text.

        Raises:
            RuntimeError: called outside the decision phase (a caller bug).
        """
        if self.phase != "decide":
            raise RuntimeError(f"submit_answer() called in phase {self.phase!r}")
        text = text if isinstance(text, str) else str(text)
        action = parse_action(text[: self.config.max_action_chars],
                              strict=self.config.strict_markers,
                              accept_bare_diagnosis=not self.config.strict_markers)
        answer = action.payload if action.kind == "diagnosis" else None
        if answer is None and action.kind == "question" and not self.config.strict_markers:
            lines = [ln for ln in action.text.splitlines() if ln.strip()]
            if len(lines) == 1 and len(lines[0]) <= 120:
                answer = action.payload.strip(" .")
        self.answer = answer or None
        self._doctor(self.turn + 1, action, "diagnosis" if self.answer else "empty")
        self.phase = "done"
        return action

    # --------------------------------------------------------------- helpers
    def _doctor(self, turn: int, action: DoctorAction, routed_as: str) -> None:
        self.history.append(DoctorEvent(turn, action.text, routed_as, action.payload))

    def _note(self, turn: int, kind: str, message: str) -> None:
        self.history.append(InterfaceEvent(turn, kind, message))

    def _finish(self, routing: Routing) -> Routing:
        self.turn += 1
        if self.phase == "acquire" and self.turn >= self.config.acquisition_rounds:
            self.phase = "decide"
            self._note(self.turn, "decision_phase",
                       "Evidence acquisition is over. Give your final answer.")
        return routing
