"""The same case under two methods: where their acquisition first differs.

:func:`doctor_actions` reduces an episode to its acquisition per turn and
:func:`first_divergence` compares two (rules in docs/report.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["doctor_actions", "first_divergence"]

Actions = dict[int, tuple[tuple[str, str], ...]]


def _fold(text: Any) -> str:
    return " ".join(str(text or "").split()).casefold()


def doctor_actions(record: Mapping[str, Any]) -> Actions:
    """``{turn: ((kind, key), ...)}`` of a run-log line's ``events``, turns ascending.

    ``kind`` is ``"question"`` or ``"exam"``; ``key`` is the question's text, or the
    exam's name as its result event resolved it, else the request text, each
    case-folded with whitespace collapsed (docs/report.md, "How the page is built",
    *Side by side*). Turns without a question or exam request are absent.
    """
    turns: dict[int, list[tuple[str, str]]] = {}
    pending: dict[int, int] = {}
    events = record.get("events")
    for event in events if isinstance(events, list) else ():
        if not isinstance(event, dict):
            continue
        turn = event.get("turn")
        if isinstance(turn, bool) or not isinstance(turn, int):
            continue
        source, routed = event.get("source"), event.get("routed_as")
        if source == "doctor" and routed == "question":
            turns.setdefault(turn, []).append(("question", _fold(event.get("text"))))
        elif source == "doctor" and routed == "test_request":
            turns.setdefault(turn, []).append(
                ("exam", _fold(event.get("payload") or event.get("text"))))
            pending[turn] = len(turns[turn]) - 1
        elif source == "measurement" and turn in pending:
            name = event.get("name") or event.get("request")
            turns[turn][pending.pop(turn)] = ("exam", _fold(name))
    return {t: tuple(turns[t]) for t in sorted(turns)}


def first_divergence(a: Actions, b: Actions) -> int | None:
    """The first turn (1-based, as logged) at which ``a`` and ``b`` differ, or ``None``.

    The turns of both are walked in ascending order; a turn with actions in one and none
    (or others) in the other differs. So when one doctor stops acquiring earlier, the
    first turn the other still acquires is the divergence.
    """
    for turn in sorted(set(a) | set(b)):
        if a.get(turn, ()) != b.get(turn, ()):
            return turn
    return None
