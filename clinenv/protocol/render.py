"""Rendering of the doctor's view x_t = R(s0, K, h_t, menu) as text (EGIP Eq. 2).

:func:`render_doctor_view` (the whole view) and :func:`render_delta` (only what is new);
:class:`DoctorViewRenderer` renders each part once per episode.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from clinenv.protocol.catalog import CatalogEntry
from clinenv.protocol.doctor_text import indent_lines, one_line, quote_lines
from clinenv.protocol.evidence import render_candidates, render_evidence
from clinenv.protocol.extra_actions import extra_actions_hint
from clinenv.protocol.history import (
    DoctorEvent,
    Event,
    InterfaceEvent,
    MeasurementEvent,
    PatientEvent,
)
from clinenv.protocol.lookup import NOT_RECORDED_TEXT

ACTION_FORMAT = (
    "Each round, do exactly one of: ask the patient one question (plain text); request one "
    "examination with REQUEST TEST: <id or name>{example}. "
    "Results are shown only after you request them."
)
#: The action format without a menu (the "w/o menu" ablation): no ids to refer to.
ACTION_FORMAT_NO_MENU = (
    "Each round, do exactly one of: ask the patient one question (plain text); request one "
    "examination with REQUEST TEST: <examination name>. Results are shown only after you "
    "request them; an examination the records do not hold is answered as not recorded."
)


#: The tool view's action format (``ProtocolConfig.action_format="tools"``): the same
#: actions, named as the tools that map to them (:mod:`clinenv.integrations.tools`).
TOOL_ACTION_FORMAT = (
    "Each round, call exactly one tool: call `ask_patient` with one question, or call "
    "`order_exam` with an id or name{example}; `list_exams` shows the examinations. "
    "Results are shown only after you request them. When you are ready, call "
    "`submit_diagnosis` with your final answer."
)
#: The tool view's action format without a menu.
TOOL_ACTION_FORMAT_NO_MENU = (
    "Each round, call exactly one tool: call `ask_patient` with one question, or call "
    "`order_exam` with an examination name. Results are shown only after you request "
    "them; an examination the records do not hold is answered as not recorded. When you "
    "are ready, call `submit_diagnosis` with your final answer."
)


def _formats(cfg) -> tuple[str, str, str]:
    """``(action format, its no-menu form, the example's template)`` for the wording of
    ``cfg.action_format``."""
    if getattr(cfg, "action_format", "text") == "tools":
        return TOOL_ACTION_FORMAT, TOOL_ACTION_FORMAT_NO_MENU, ' (for example "{}")'
    return ACTION_FORMAT, ACTION_FORMAT_NO_MENU, " (for example REQUEST TEST: {})"


def _compact(cfg) -> bool:
    return getattr(cfg, "tool_results", "full") == "compact"


def render_event(event: Event, asked: str | None = None) -> str:
    """One history event as the doctor sees it.

    Args:
        event: the event.
        asked: the doctor's own question in this round; a patient reply shows its
            question context only when it differs (a fixed clarification question).
    """
    if isinstance(event, DoctorEvent):  # quoted: the doctor's lines cannot forge ours
        return f"Doctor: {quote_lines(event.text)}"
    if isinstance(event, PatientEvent):
        if event.question_context != asked:
            return (f"Patient (asked \"{one_line(event.question_context)}\"): "
                    + indent_lines(event.reply, "  "))
        return "Patient: " + indent_lines(event.reply, "  ")
    if isinstance(event, MeasurementEvent):
        if event.result_availability == "not_recorded":
            return f"Examiner [{one_line(event.request)}]: {NOT_RECORDED_TEXT}"
        if event.result_availability == "generated":  # a measurement agent answered
            head = f"Measurement agent [{event.exam_id or '-'} {one_line(event.name)}]"
            return f"{head}:\n  " + (event.recorded_value or "").replace("\n", "\n  ")
        head = f"Examiner [{event.exam_id} {event.name}]"
        if event.result_availability == "unavailable":
            head += " (result not available)"
        return f"{head}:\n  " + (event.recorded_value or "").replace("\n", "\n  ")
    if isinstance(event, InterfaceEvent):
        return f"Interface: {event.message}"
    raise TypeError(f"not a history event: {event!r}")


class HistoryRenderer:
    """Renders the doctor-visible history incrementally: each event is rendered once.

    Events are only ever appended to h_t (Eq. 3), so the text of earlier rounds never
    changes; re-rendering it every step would make an episode quadratic in its length.
    """

    __slots__ = ("_text", "_seen", "_turn", "_asked")

    def __init__(self) -> None:
        self._text = ""
        self._seen = 0
        self._turn: int | None = None
        self._asked: str | None = None

    def render(self, events: Sequence[Event]) -> str:
        """The history text for ``events`` (a list that only grows between calls)."""
        new = self.new_lines(events)
        if new:
            joined = "\n".join(new)
            self._text = f"{self._text}\n{joined}" if self._text else joined
        return self._text

    def new_lines(self, events: Sequence[Event]) -> list[str]:
        """The lines of the events appended to ``events`` since the last call, in order
        (round headers included); the text of :meth:`render` is all lines so far, joined
        by newlines."""
        lines = []
        for event in events[self._seen:]:
            if event.turn != self._turn:
                self._turn = event.turn
                lines.append(f"[round {event.turn}]")
            if isinstance(event, DoctorEvent):
                self._asked = event.payload
            lines.append(render_event(event, self._asked))
        self._seen = len(events)
        return lines


def render_history(events: Iterable[Event]) -> str:
    """The doctor-visible history, one block per round (``[round n]`` headers)."""
    return HistoryRenderer().render(list(events))


def render_menu(menu: Sequence[CatalogEntry], n_hidden: int = 0, n_catalog: int = 1) -> str:
    """The result-blinded menu: one ``id  name`` line per entry."""
    if not n_catalog:
        return "(this case's records hold no examinations)"
    if not menu:
        return "(no further examinations listed)"
    lines = [f"{e.exam_id}  {e.label}" for e in menu]
    if n_hidden:
        lines.append(f"... and {n_hidden} more; any recorded examination can be requested "
                     "by name.")
    return "\n".join(lines)


def _extras(cfg) -> str:
    """The footer's sentence on CDEG's extra actions, when enabled
    (:func:`clinenv.protocol.extra_actions.extra_actions_hint`)."""
    return extra_actions_hint(getattr(cfg, "history_review", False),
                              getattr(cfg, "knowledge_source", None) is not None)


def render_round_footer(runtime) -> str:
    """Menu and instructions for the current acquisition round."""
    cfg = runtime.config
    parts = []
    with_menu, action_format, example_format = _formats(cfg)
    if cfg.show_menu:
        menu = runtime.menu()
        remaining = len(runtime.catalog) - len(set(runtime.requested))
        parts += ["# Available examinations (results hidden until requested)",
                  render_menu(menu, max(0, remaining - len(menu)), len(runtime.catalog)), ""]
        example = example_format.format(menu[0].exam_id) if menu else ""
        action_format = with_menu.format(example=example)
    parts += ["# Your turn",
              f"Round {runtime.turn + 1} of {cfg.acquisition_rounds}. {action_format}"
              + _extras(cfg)]
    return "\n".join(parts)


def _menu_block(state, n_catalog: int, cfg=None) -> tuple[str, str]:
    """``(menu section + blank line + "# Your turn", action format)`` of the footer
    for one :class:`~clinenv.protocol.menu.MenuState` (as :func:`render_round_footer`)."""
    menu = state.entries
    with_menu, _, example_format = _formats(cfg)
    example = example_format.format(menu[0].exam_id) if menu else ""
    head = "\n".join(["# Available examinations (results hidden until requested)",
                      render_menu(menu, state.n_hidden, n_catalog), "", "# Your turn"])
    return head, with_menu.format(example=example)


def render_header(objective: str, candidates: Sequence[str] | None) -> str:
    """Objective s0 and candidate labels K."""
    lines = ["# Task", objective]
    if candidates:
        lines += ["", *render_candidates(candidates)]
    return "\n".join(lines)


def render_doctor_view(runtime, history: HistoryRenderer | None = None) -> str:
    """x_t for the current phase of ``runtime`` (an :class:`EGIPRuntime`).

    Args:
        runtime: the episode.
        history: an incremental renderer kept for this episode (faster); ``None``
            renders the history from scratch.
    """
    if runtime.phase != "acquire":
        return render_evidence(runtime.evidence(), action_format=_action_format(runtime))
    parts = [render_header(runtime.case.objective, runtime.case.candidates)]
    if runtime.history:
        text = (history or HistoryRenderer()).render(runtime.history)
        parts += ["", "# Interaction so far", text]
    parts += ["", render_round_footer(runtime)]
    return "\n".join(parts)


class DoctorViewRenderer:
    """The doctor's texts of one EGIP episode, rendered incrementally.

    :meth:`view` equals ``render_doctor_view(runtime)`` and :meth:`delta` equals
    ``render_delta(runtime, since)`` at every step; only work that the state since the
    last call cannot have changed is reused. One renderer per runtime (episode).

    Args:
        runtime: the episode (an :class:`~clinenv.protocol.runtime.EGIPRuntime`).
    """

    __slots__ = ("_runtime", "_header", "_history", "_body", "_menu_state", "_menu_block")

    def __init__(self, runtime) -> None:
        self._runtime = runtime
        self._header = render_header(runtime.case.objective, runtime.case.candidates)
        self._history = HistoryRenderer()
        # the view up to its footer: header and history so far ("" before any event)
        self._body = ""
        self._menu_state = None
        self._menu_block = ("", "")

    def view(self) -> str:
        """x_t for the current phase (:func:`render_doctor_view`)."""
        rt = self._runtime
        if rt.phase != "acquire":
            return render_evidence(rt.evidence(), action_format=_action_format(rt))
        new = self._history.new_lines(rt.history)
        if new:  # appended: earlier rounds are never rendered again
            joined = "\n".join(new)
            self._body = (f"{self._body}\n{joined}" if self._body else
                          f"{self._header}\n\n# Interaction so far\n{joined}")
        return f"{self._body or self._header}\n\n{self.footer()}"

    def delta(self, since: int) -> str:
        """What is new since history position ``since`` (:func:`render_delta`)."""
        rt = self._runtime
        if rt.phase != "acquire":
            return render_delta(rt, since)
        body = _delta_body(rt.history, since)
        if _compact(rt.config):
            return (body + "\n\n" if body else "") + _round_line(rt)
        return (body + "\n\n" if body else "") + self.footer()

    def footer(self) -> str:
        """The current round's menu and instructions (:func:`render_round_footer`)."""
        rt = self._runtime
        cfg = rt.config
        if not cfg.show_menu:
            return (f"# Your turn\nRound {rt.turn + 1} of {cfg.acquisition_rounds}. "
                    f"{_formats(cfg)[1]}{_extras(cfg)}")
        state = rt.menu_state()
        if state is not self._menu_state:
            self._menu_state = state
            self._menu_block = _menu_block(state, len(rt.catalog), cfg)
        head, action_format = self._menu_block
        return (f"{head}\nRound {rt.turn + 1} of {cfg.acquisition_rounds}. {action_format}"
                f"{_extras(cfg)}")


def _delta_body(history: Sequence[Event], since: int) -> str:
    """The responses of ``history[since:]`` as the doctor sees them (no doctor lines)."""
    asked = None
    lines = []
    for event in history[since:]:
        if isinstance(event, DoctorEvent):
            asked = event.payload
        else:
            lines.append(render_event(event, asked))
    return "\n".join(lines)


def render_delta(runtime, since: int) -> str:
    """What is new since history position ``since``, plus this round's footer.

    In the decision phase the delta is the whole evidence interface e_T (it is the input
    of a new, terminal step, not a rewrite of earlier turns).
    """
    body = _delta_body(runtime.history, since)
    if runtime.phase != "acquire":
        return (body + "\n\n" if body else "") + render_evidence(
            runtime.evidence(), action_format=_action_format(runtime))
    if _compact(runtime.config):
        return (body + "\n\n" if body else "") + _round_line(runtime)
    return (body + "\n\n" if body else "") + render_round_footer(runtime)


def _round_line(runtime) -> str:
    """The compact footer (``tool_results="compact"``): "Round k of T." only."""
    return f"Round {runtime.turn + 1} of {runtime.config.acquisition_rounds}."


def _action_format(runtime) -> str:
    return getattr(runtime.config, "action_format", "text")
