"""The EGIP runtime: one episode of the protocol over one case.

Validates and routes each doctor action (EGIP section 3.2), keeps h_t and switches to
the decision phase on e_T (section 3.3); it simulates no one (:class:`Routing`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from clinenv.cases import Case
from clinenv.protocol import config as cfg
from clinenv.protocol.catalog import CatalogEntry
from clinenv.protocol.evidence import EvidenceBundle, Observation, ObservationLog
from clinenv.protocol.exam_matching import ID_PATTERN
from clinenv.protocol.exam_noise import DELAYED_TEXT, ExamNoise
from clinenv.protocol.extra_actions import HISTORY_RECORD, ExtraAction, KnowledgeSource
from clinenv.protocol.history import (
    Availability,
    DoctorEvent,
    Event,
    InterfaceEvent,
    MeasurementEvent,
    PatientEvent,
)
from clinenv.protocol.lookup import UNAVAILABLE_TEXT, lookup, record_at
from clinenv.protocol.measurement_view import MeasurementView, Speaker, exam_information
from clinenv.protocol.menu import MenuState
from clinenv.protocol.parser import DoctorAction, parse_action
from clinenv.protocol.placeholders import has_placeholder, is_placeholder
from clinenv.protocol.prepared import PreparedCase
from clinenv.protocol.request_reading import read_request
from clinenv.protocol.views import ExaminerView, PatientView

Phase = Literal["acquire", "decide", "done"]

#: Reasoning text kept per action (``info["reasoning"]``); the rest is cut.
MAX_REASONING_CHARS = 16_384
#: The interface feedback that names the doctor's action forms, in the wording of
#: ``ProtocolConfig.action_format``: the text protocol's markers, or the tool view's
#: tools (:mod:`clinenv.integrations.tools`). Every other feedback names no form.
FEEDBACK: dict[str, dict[str, str]] = {
    "text": {
        "empty_action": "No question or request was found. Ask the patient a question, "
                        "or write REQUEST TEST: <examination>.",
        "empty_request": "REQUEST TEST needs an examination name.",
        "unclear_request": "Write only the examination's id or name after REQUEST TEST:, "
                           "one examination at a time.",
        "format_miss": "The answer is not in the form 'DIAGNOSIS READY: <diagnosis>' that "
                       "strict mode requires.",
    },
    "tools": {
        "empty_action": "No question or request was found. Call `ask_patient` with a "
                        "question, or `order_exam` with an examination.",
        "empty_request": "`order_exam` needs an examination name.",
        "unclear_request": "Give `order_exam` only the examination's id or name, one "
                           "examination at a time.",
        "format_miss": "The answer was not given with `submit_diagnosis`, as strict mode "
                       "requires.",
    },
}


@dataclass(frozen=True, slots=True)
class Routing:
    """Where a doctor action goes next.

    Attributes:
        to: ``"patient"`` (a question), ``"examiner"`` (a validated exam request or an
            absent test) or ``"interface"`` (feedback only; the round is over).
        action: the parsed action.
        question: the effective question for the patient (a fixed clarification when the
            action was replaced).
        request: the requested test as written (examiner routing).
        entries: the matched catalog entries (one test, or a whole group); empty for an
            absent test (not recorded).
        group: the requested group's readable name, when a whole group was requested.
    """

    to: Literal["patient", "examiner", "interface"]
    action: DoctorAction
    question: str | None = None
    request: str | None = None
    entries: tuple[CatalogEntry, ...] = ()
    group: str | None = None


def _as_placeholder(action: DoctorAction) -> DoctorAction:
    """``action`` as what it is, a template placeholder: kind ``"placeholder"``, its
    payload the utterance (reasoning and flags kept)."""
    return DoctorAction("placeholder", action.text, action.text, action.reasoning,
                        flags=action.flags).with_flags("placeholder")


def _visible_flags(flags: tuple[str, ...]) -> tuple[str, ...]:
    """The action flags shown in ``info["action_flags"]``: all but ``"placeholder"``."""
    return tuple(f for f in flags if f != "placeholder") if flags else ()


def bare_answer(action: DoctorAction, *, strict: bool = False) -> str | None:
    """The answer a decision-phase reply without a marker gives (lenient mode only): a
    single line of at most 120 characters, end stops removed; ``None`` otherwise, and
    for what is left of a reply cut at a turn boundary (flag ``"wrote_past_turn"``).
    ``action`` is parsed as :meth:`EGIPRuntime.submit_answer` parses it."""
    if action.kind != "question" or strict or "wrote_past_turn" in action.flags:
        return None
    lines = [ln for ln in action.text.splitlines() if ln.strip()]
    return action.payload.strip(" .") if len(lines) == 1 and len(lines[0]) <= 120 else None


def reads_as_placeholder(action: DoctorAction, phase: Literal["acquire", "decide"], *,
                         strict: bool = False) -> bool:
    """Whether the runtime answers ``action`` in ``phase`` as a template placeholder
    (:mod:`clinenv.protocol.placeholders`): interface feedback during acquisition, no
    answer at the decision step. The one rule of :meth:`EGIPRuntime.route`,
    :meth:`EGIPRuntime.submit_answer` and the tool view
    (:func:`clinenv.integrations.tools.action_to_tool`).

    ``action`` is parsed as the runtime parses it in that phase (``strict`` its
    ``strict_markers``). During acquisition a reply with both markers is its exam
    request, a placeholder when that request is one
    (:func:`~clinenv.protocol.request_reading.read_request`); a request
    or a diagnosis is one when the parser flagged its payload (``"placeholder"``) or a
    request's payload holds a template span. At the decision step a flagged reply and a
    bare answer (:func:`bare_answer`) that is a placeholder are. A question never is.
    """
    if phase == "decide":
        return "placeholder" in action.flags or is_placeholder(bare_answer(action,
                                                                           strict=strict))
    if action.kind == "diagnosis" and action.test_payload:  # routed as its exam request
        return has_placeholder(action.test_payload.strip())
    if action.kind == "test_request":
        return "placeholder" in action.flags or has_placeholder(action.payload.strip())
    return action.kind == "diagnosis" and "placeholder" in action.flags


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
        self._results = case.results
        self.history: list[Event] = []
        self.requested: list[str] = []
        self.dialogue: list[tuple[str, str]] = []
        self.turn = 0
        self.phase: Phase = "acquire"
        self.invalid_actions = 0
        self.answer: str | None = None
        self.stopped_early = False
        self._clipped = False
        #: Flags of the latest doctor action (``info["action_flags"]``).
        self.action_flags: tuple[str, ...] = ()
        self._measurement_history: list[tuple[Speaker, str]] = []
        self._records_text: str | None = None
        # derived from the state above, rebuilt when it changes (menu_state, observations)
        self._menu_state: MenuState | None = None
        self._observation_log = ObservationLog()
        #: Examiner noise of this episode (:mod:`clinenv.protocol.exam_noise`), set by
        #: the environment at reset; ``None``: none (record lookup as is).
        self.noise: ExamNoise | None = None
        self._delayed: list[MeasurementEvent] = []  # results due next round

    # ----------------------------------------------------------------- views
    def menu(self) -> list[CatalogEntry]:
        """B(A, h_t): unrequested entries in priority order, cut to the display limit."""
        if not self.config.show_menu:
            return []
        return list(self.menu_state().entries)

    def menu_state(self) -> MenuState:
        """The :class:`~clinenv.protocol.menu.MenuState` of the current requests (built
        when :attr:`requested` changes, else the same object); its ``entries`` are B even
        when ``show_menu`` is off (:meth:`menu` is then empty)."""
        state = self._menu_state
        requested = tuple(self.requested)
        if state is None or state.requested != requested:
            state = self._menu_state = MenuState.build(
                self.catalog, self._menu_order, requested, self.config.menu_limit)
        return state

    def patient_view(self, question: str) -> PatientView:
        """The patient's view for one question: P (target withheld) and the dialogue."""
        return PatientView(self._patient_facts, tuple(self.dialogue), question,
                           self.case.flags.caregiver_voice)

    def examiner_view(self, routing: Routing) -> ExaminerView:
        """The examiner's view: the validated request and only the matching record(s).

        ``record`` is the stored subtree of a single test, ``{test name: subtree}`` for a
        group, or ``None`` for an absent test.
        """
        request = routing.request or ""
        if not routing.entries:
            return ExaminerView(request, None, request, None)
        records = self.case.records
        if len(routing.entries) == 1:
            entry = routing.entries[0]
            return ExaminerView(request, entry.exam_id, entry.name,
                                record_at(records, entry.source_path))
        return ExaminerView(request, ",".join(e.exam_id for e in routing.entries),
                            routing.group or request,
                            {e.name: record_at(records, e.source_path) for e in routing.entries})

    def measurement_view(self, routing: Routing) -> MeasurementView:
        """The measurement agent's view of an ``examiner`` routing, for the "native
        measurement access" ablation (EGIP Table 3A, appendix C): every PE and test
        record of the case (:func:`~clinenv.protocol.measurement_view.exam_information`),
        the validated request -- a group's name, the matched entries' names, or the text
        of a miss -- and the agent's earlier requests and answers in this episode."""
        request = (routing.group or ", ".join(e.name for e in routing.entries)
                   or routing.request or "")
        if self._records_text is None:  # built once per episode, on the first request
            self._records_text = exam_information(self.case)
        return MeasurementView(self._records_text, self.case.records, request,
                               tuple(self._measurement_history), catalog=self.catalog)

    def answer_measurement(self, routing: Routing, view: MeasurementView,
                           result: str) -> MeasurementEvent:
        """Record a measurement agent's ``result`` for ``routing`` (asked with ``view``,
        from :meth:`measurement_view`) with availability ``"generated"`` (a model's
        text, not a record), add both to the agent's history and close the round."""
        self._measurement_history += [("doctor", view.request), ("measurement", result)]
        return self.answer_exam(routing, result, availability="generated")

    def evidence(self) -> EvidenceBundle:
        """e_T = E(s0, K, h_t) over the history so far."""
        return EvidenceBundle(self.case.objective, self.case.candidates, self.observations())

    def observations(self) -> tuple[Observation, ...]:
        """The observations of e_T so far (``O1``, ``O2``... in order), as
        :func:`~clinenv.protocol.evidence.build_evidence` extracts them from h_t; each
        event is read once per episode (:class:`~clinenv.protocol.evidence.ObservationLog`)."""
        return self._observation_log.read(self.history)

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
        turn = self.turn + 1
        action = self._parse(text, turn, strict=self.config.strict_markers)
        if action.kind == "diagnosis" and action.test_payload:
            action = DoctorAction("test_request", action.text, action.test_payload,
                                  action.reasoning,
                                  flags=tuple(f for f in action.flags if f != "placeholder"))
        if action.kind == "empty":
            return self._feedback(turn, action, "empty", "empty_action",
                                  self._wording("empty_action"))
        if reads_as_placeholder(action, "acquire"):
            return self._route_placeholder(turn, action)
        if action.kind == "diagnosis":
            if self.config.premature_diagnosis == "decide":
                self._doctor(turn, action, "diagnosis")
                self.stopped_early = True
                self._note(turn, "early_stop", "Acquisition ended early at your request; "
                           "give your final answer on the acquired evidence.")
                self._deliver(turn, every=True)
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

    def route_extra(self, text: str, extra: ExtraAction,
                    knowledge: KnowledgeSource | None) -> Routing:
        """Route one of CDEG's extra actions (acquisition phase;
        :mod:`clinenv.protocol.extra_actions`): a history review is the record request
        of :data:`~clinenv.protocol.extra_actions.HISTORY_RECORD` (the doctor's words kept
        in the history); a knowledge query is answered from ``knowledge`` (never from
        the case) as an interface event of kind ``"knowledge"`` and closes the round."""
        turn = self.turn + 1
        action = self._parse(text, turn)
        if extra.kind == "history_review":
            return self._route_test(turn, DoctorAction(
                "test_request", action.text, HISTORY_RECORD, action.reasoning,
                flags=action.flags))
        asked = DoctorAction("knowledge_query", action.text, extra.payload,
                             action.reasoning, flags=action.flags)
        self._doctor(turn, asked, "knowledge_query")
        self._note(turn, "knowledge", knowledge.answer(extra.payload) if knowledge else
                   "Knowledge retrieval is not available in this setting.")
        self._finish()
        return Routing("interface", asked)

    def _route_test(self, turn: int, action: DoctorAction) -> Routing:
        menu_shown = self.config.show_menu
        if not action.payload:
            return self._feedback(turn, action, "test_request", "empty_request",
                                  self._wording("empty_request"))
        reading = read_request(action.payload, self.matcher)
        if reading.reading == "placeholder":
            action = action.with_flags("placeholder")
            return self._route_placeholder(turn, action)
        if reading.reading == "multiple":
            return self._feedback(turn, action, "test_request", "multiple_request",
                                  f"'{action.payload}' names several examinations; request "
                                  "one examination at a time.")
        if reading.reading == "invalid_id":
            return self._feedback(turn, action, "test_request", "invalid_request",
                                  f"'{action.payload}' is not an examination id. Use an id "
                                  "from the list (such as PE1 or T3), or a name.")
        if reading.reading == "not_a_name":
            return self._feedback(turn, action, "test_request", "unclear_request",
                                  self._wording("unclear_request"))
        if reading.payload != action.payload:  # an id followed by words: that id
            action = DoctorAction(action.kind, action.text, reading.payload,
                                  action.reasoning, action.test_payload,
                                  action.format_miss, action.flags)
        if not menu_shown and ID_PATTERN.match(action.payload.strip()):
            return self._feedback(turn, action, "test_request", "invalid_request",
                                  "Examination ids are not offered in this setting; "
                                  "request an examination by its name.")
        match = reading.match or self.matcher.match(action.payload)
        if match.status == "invalid_id":
            return self._feedback(turn, action, "test_request", "invalid_request",
                                  f"There is no examination with id '{action.payload}'. "
                                  "Use an id from the list, or a name.")
        if match.status == "ambiguous" or (match.status == "unclear" and menu_shown):
            listed = ", ".join(f"{e.exam_id} {e.label}" for e in match.candidates)
            message = (f"'{action.payload}' could mean several examinations: {listed}. "
                       "Request one by its id or full name." if menu_shown else
                       f"'{action.payload}' could mean several recorded examinations; "
                       "name the one you want more precisely.")
            if match.status == "unclear":
                message = (f"No examination is called '{action.payload}'. Closest "
                           f"names: {listed}. Request one by its id or full name, or "
                           "another examination.")
            return self._feedback(turn, action, "test_request", f"{match.status}_request",
                                  message)
        if match.status != "matched":  # a miss (or unclear without a menu): not recorded
            self._doctor(turn, action, "test_request")
            return Routing("examiner", action, request=action.payload)
        new = [e for e in match.entries if e.exam_id not in self.requested]
        if not new:
            label = match.group or match.entries[0].label
            ids = ",".join(e.exam_id for e in match.entries)
            if self.config.clarify_repeats:
                self._doctor(turn, action, "clarification")
                self._note(turn, "repeated_request",
                           f"{label} ({ids}) was already requested; your message was "
                           "replaced by a fixed clarification question.")
                return Routing("patient", action, question=cfg.REPEAT_CLARIFICATION)
            return self._feedback(turn, action, "test_request", "repeated_request",
                                  f"{label} ({ids}) was already requested; see its result "
                                  "above.")
        self._doctor(turn, action, "test_request")
        return Routing("examiner", action, request=action.payload, entries=match.entries,
                       group=match.group)

    # ------------------------------------------------------------- responses
    def answer_patient(self, routing: Routing, reply: str) -> PatientEvent:
        """Record the patient's reply to ``routing.question`` and close the round."""
        event = PatientEvent(self.turn + 1, routing.question or "", reply)
        self.history.append(event)
        self.dialogue.append((event.question_context, reply))
        self._finish()
        return event

    def answer_exam(self, routing: Routing, result_text: str | None = None, *,
                    availability: Availability | None = None) -> MeasurementEvent:
        """Record the examiner's answer and close the round.

        Args:
            routing: an ``examiner`` routing from :meth:`route`.
            result_text: ``None`` (default) uses record lookup O; a string replaces the
                result text (an external examiner policy) with the same availability.
            availability: replaces the lookup's availability (``"generated"`` for a
                measurement agent's answer, the native measurement access ablation).

        With :attr:`noise` set (and neither argument given) a recorded result may come
        back unavailable, or be delayed to the next round (then the returned event is
        the one delivered later, with its request's round; this round holds the
        interface note ``result_delayed``); :mod:`clinenv.protocol.exam_noise`.
        """
        entries = routing.entries
        request = routing.request or ""
        found: Availability
        noise = self.noise if result_text is None and availability is None else None
        noised = False
        if not entries:
            value, found = lookup(self.case.records, None)
            exam_id, name, paths = None, request, ()
        elif len(entries) == 1:
            value, found = self._lookup(entries[0])
            if noise is not None and found == "recorded" and noise.unavailable(
                    entries[0].exam_id):
                value, found, noised = UNAVAILABLE_TEXT, "unavailable", True
            exam_id, name, paths = entries[0].exam_id, entries[0].label, (entries[0].source_path,)
        else:
            parts = [(e, *self._lookup(e)) for e in entries]
            if noise is not None:
                hit = [found == "recorded" and noise.unavailable(e.exam_id)
                       for e, _, found in parts]
                parts = [(part[0], UNAVAILABLE_TEXT, "unavailable") if h else part
                         for part, h in zip(parts, hit, strict=True)]
                noised = any(hit)
            value = "\n".join(f"{e.name}:\n  " + text.replace("\n", "\n  ")
                              for e, text, _ in parts)
            found = ("recorded" if any(a == "recorded" for _, _, a in parts)
                     else "unavailable")
            exam_id = ",".join(e.exam_id for e in entries)
            name, paths = routing.group or request, tuple(e.source_path for e in entries)
        if result_text is not None:
            value = result_text
        if availability is not None:
            found = availability
        self.requested.extend(e.exam_id for e in entries if e.exam_id not in self.requested)
        turn = self.turn + 1
        event = MeasurementEvent(turn, request, exam_id, name, paths, value, found,
                                 noise=noised)
        if noise is not None and exam_id is not None and noise.delayed(exam_id):
            event = replace(event, noise=True, delayed_from=turn)
            self._delayed.append(event)
            self._note(turn, "result_delayed", DELAYED_TEXT.format(name))
        else:
            self.history.append(event)
        self._finish()
        return event

    def submit_answer(self, text: str) -> DoctorAction:
        """The terminal answer (decision phase): parse it, record it, end the episode.

        A bare short line without a marker is taken as the answer (lenient mode); a long
        reply without a marker is no answer (scored "unscored"), and so is, in strict
        mode, any answer without AgentClinic's exact ``DIAGNOSIS READY`` marker (logged as
        a format miss). Never raises on any text.

        Raises:
            RuntimeError: called outside the decision phase (a caller bug).
        """
        if self.phase != "decide":
            raise RuntimeError(f"submit_answer() called in phase {self.phase!r}")
        turn = self.turn + 1
        strict = self.config.strict_markers
        action = self._parse(text, turn, strict=strict, accept_bare_diagnosis=not strict,
                             speaker_lines=False)
        answer = (action.payload if action.kind == "diagnosis"
                  else bare_answer(action, strict=strict))
        if reads_as_placeholder(action, "decide", strict=strict):
            action = action.with_flags("placeholder")
        if "placeholder" in action.flags:
            answer = None
            action = self._flag(action, "placeholder_answer")
            self._note(turn, "placeholder_answer", "The answer is the template's "
                       "placeholder, not a diagnosis: no answer was given.")
        self.answer = answer or None
        if self.answer is None and action.kind != "empty" and "placeholder" not in action.flags:
            lenient = parse_action(action.text, accept_bare_diagnosis=True)
            if strict and lenient.kind == "diagnosis":
                self._note(turn, "format_miss", self._wording("format_miss"))
            else:
                self._note(turn, "no_answer", "No final answer could be identified.")
        if "placeholder" in action.flags:
            self._doctor(turn, _as_placeholder(action), "placeholder")
        else:
            self._doctor(turn, action, "diagnosis" if self.answer else "empty")
        self.phase = "done"
        return action

    # --------------------------------------------------------------- helpers
    def _wording(self, key: str) -> str:
        """:data:`FEEDBACK` ``key`` in the configuration's ``action_format``."""
        return FEEDBACK[getattr(self.config, "action_format", "text")][key]

    def _lookup(self, entry: CatalogEntry) -> tuple[str | None, Availability]:
        """Record lookup O of ``entry``: the prepared case's result for an entry of this
        catalog, else looked up in the records."""
        entries = self.catalog.entries
        if entry.index < len(entries) and entries[entry.index] is entry:
            return self._results[entry.exam_id]
        return lookup(self.case.records, entry)

    def _route_placeholder(self, turn: int, action: DoctorAction) -> Routing:
        """A placeholder request or diagnosis: logged as kind ``"placeholder"``, the
        utterance as its payload (never the template's inner words), and answered by
        interface feedback."""
        action = self._flag(_as_placeholder(action), "placeholder_request")
        return self._feedback(turn, action, "placeholder", "placeholder_request",
                              "That is the template's placeholder, not a request. Ask the "
                              "patient a question, or request one examination by its id "
                              "or name.")

    def _flag(self, action: DoctorAction, flag: str) -> DoctorAction:
        """``action`` with ``flag`` added; the runtime's :attr:`action_flags` follow."""
        action = action.with_flags(flag)
        self.action_flags = _visible_flags(action.flags)
        return action

    def _parse(self, text: str, turn: int, **kwargs) -> DoctorAction:
        """Parse ``text``; reasoning is removed *before* the visible text is clipped."""
        action = parse_action(text if isinstance(text, str) else str(text), **kwargs)
        self.action_flags = _visible_flags(action.flags)
        limit = self.config.max_action_chars
        reasoning = action.reasoning
        if reasoning and len(reasoning) > MAX_REASONING_CHARS:
            reasoning = reasoning[:MAX_REASONING_CHARS]
        if len(action.text) > limit:
            self._clipped = True  # noted right after the doctor event
            return DoctorAction(action.kind, action.text[:limit], action.payload[:limit],
                                reasoning, action.test_payload, action.format_miss,
                                action.flags)
        if reasoning is not action.reasoning:
            return DoctorAction(action.kind, action.text, action.payload, reasoning,
                                action.test_payload, action.format_miss, action.flags)
        return action

    def _feedback(self, turn: int, action: DoctorAction, routed_as: str, kind: str,
                  message: str) -> Routing:
        """An invalid action: record it, give interface feedback, close the round."""
        self._doctor(turn, action, routed_as)
        self.invalid_actions += 1
        self._note(turn, kind, message)
        self._finish()
        return Routing("interface", action)

    def _doctor(self, turn: int, action: DoctorAction, routed_as: str) -> None:
        self.history.append(DoctorEvent(turn, action.text, routed_as, action.payload,
                                        flags=self.action_flags))
        if self._clipped:
            self._clipped = False
            self._note(turn, "clipped_action", "Your message was cut to "
                       f"{self.config.max_action_chars} characters.")

    def _note(self, turn: int, kind: str, message: str) -> None:
        self.history.append(InterfaceEvent(turn, kind, message))

    def _deliver(self, turn: int, *, every: bool = False) -> None:
        """Append the delayed results due by round ``turn`` (``every``: all of them, as
        acquisition ends) as events of round ``turn``."""
        due = [e for e in self._delayed if every or e.delayed_from < turn]
        self._delayed = [e for e in self._delayed if not (every or e.delayed_from < turn)]
        self.history.extend(replace(e, turn=turn) for e in due)

    def _finish(self) -> None:
        self.turn += 1
        if self._delayed:
            self._deliver(self.turn, every=self.turn >= self.config.acquisition_rounds)
        if self.phase == "acquire" and self.turn >= self.config.acquisition_rounds:
            self.phase = "decide"
            self._note(self.turn, "decision_phase",
                       "Evidence acquisition is over. Give your final answer.")
