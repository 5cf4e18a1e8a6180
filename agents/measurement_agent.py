"""Measurement agents: the native examiner that holds every record of the case.

Two examiners answer a :class:`~clinenv.protocol.measurement_view.MeasurementView` with
``measure(view) -> str`` (the environment's ``examiner=`` seat):

- :class:`LLMMeasurementAgent` -- AgentClinic's measurement agent in this project's words
  (:data:`~clinenv.agents.prompts.MEASUREMENT_SYSTEM`): a chat model that holds all
  physical-examination and test data (the view's ``records_text``), answers as
  ``RESULTS: ...`` and, under the ``normal_readings`` rule, reports ``NORMAL READINGS``
  for anything its data do not hold (weakness W1). It receives the doctor's request and
  its history (earlier requests and answers, and in the native protocols every patient
  reply) in one user message; its reply is cut to the examiner's own turn
  (:func:`~clinenv.protocol.turns.cut_turn`, seat ``"examiner"``), and a cut call's
  record has the flag ``"wrote_past_turn"``;
- :class:`NativeRecordReader` -- a deterministic, offline STAND-IN for that agent, so
  that the native ids run without a model. It is not a model of what an LLM answers:
  it returns every record whose examination name fuzzily occurs in the request
  (rapidfuzz ``partial_ratio`` of the normalized name against the normalized request;
  names of 4 characters or fewer must occur as whole words), every record of a group
  whose WHOLE group name occurs in the request as words (``"X Rays"`` is not named by
  "chest x-ray": a group discloses several records, so it is never matched fuzzily), and
  ``RESULTS: NORMAL READINGS`` (or ``RESULTS: NOT RECORDED`` without the rule) when none
  does.

Neither ever sees the patient facts P or the target Y, and neither mutates the case.
"""

from __future__ import annotations

import re
from typing import Any

from rapidfuzz import fuzz

from clinenv.agents.chat_seat import ChatSeat
from clinenv.agents.prompts import (
    MEASUREMENT_HISTORY,
    MEASUREMENT_RULE_NORMAL,
    MEASUREMENT_RULE_NOT_RECORDED,
    MEASUREMENT_SYSTEM,
    MEASUREMENT_USER,
)
from clinenv.agents.terminal_base import CallRequest, Plan, arun_plan, run_plan
from clinenv.protocol.catalog import Catalog, normalize_name
from clinenv.protocol.lookup import record_at, render_record
from clinenv.protocol.measurement_view import MeasurementView
from clinenv.protocol.parser import split_reasoning
from clinenv.protocol.turns import cut_turn

#: The reader's answer when no record matches, under the normal-readings rule.
NORMAL_READINGS = "RESULTS: NORMAL READINGS"
#: The reader's answer when no record matches, without the rule.
NOT_RECORDED = "RESULTS: NOT RECORDED"
#: The LLM agent's answer when its reply had no visible text (B04).
NO_REPLY = "RESULTS: (no result was reported)"
_SPEAKERS = {"doctor": "Doctor", "measurement": "You", "patient": "Patient"}


def _check_view(view: Any) -> MeasurementView:
    if not isinstance(view, MeasurementView):
        raise TypeError(f"view must be a MeasurementView, got {type(view).__name__}")
    return view


class LLMMeasurementAgent(ChatSeat):
    """The native measurement agent backed by a chat model (module docstring).

    Model, settings, :meth:`reset` seeds and call records come from
    :class:`~clinenv.agents.chat_seat.ChatSeat`; each call record has
    ``purpose="measurement"``, ``agent="measurement"``, ``request_index`` and ``flags``
    (``["wrote_past_turn"]`` when the reply went past the examiner's turn, else ``[]``).

    Args:
        model: the chat model.
        config: generation settings (default ``model.config``).

    Raises:
        TypeError: ``model`` is not a :class:`~clinenv.llm.base.ChatModel`.
    """

    name = "llm_measurement"
    seat = "examiner"

    @staticmethod
    def messages_for(view: MeasurementView) -> list[dict[str, str]]:
        """The exact messages sent for ``view``: the system prompt with every record and
        the rule for missing data, then one user message with the history and request.

        Raises:
            TypeError: ``view`` is not a MeasurementView.
        """
        view = _check_view(view)
        rule = MEASUREMENT_RULE_NORMAL if view.normal_readings else MEASUREMENT_RULE_NOT_RECORDED
        system = MEASUREMENT_SYSTEM.format(missing_rule=rule,
                                           records=view.records_text or "(no data)")
        lines = "\n".join(f"{_SPEAKERS[who]}: {text}" for who, text in view.history)
        history = MEASUREMENT_HISTORY.format(lines=lines) if lines else ""
        return [{"role": "system", "content": system},
                {"role": "user", "content": MEASUREMENT_USER.format(history=history,
                                                                    request=view.request)}]

    def measure(self, view: MeasurementView) -> str:
        """The answer to ``view.request`` (``<think>`` blocks removed, cut to the
        examiner's turn; :data:`NO_REPLY` when nothing visible is left).

        Raises:
            TypeError: ``view`` is not a MeasurementView.
            clinenv.llm.base.BackendError: the model call failed.
        """
        return run_plan(self._plan(view), self.model)

    async def ameasure(self, view: MeasurementView) -> str:
        """:meth:`measure` with the asynchronous model API."""
        return await arun_plan(self._plan(view), self.model)

    def _plan(self, view: MeasurementView) -> Plan[str]:
        messages = self.messages_for(view)
        index = sum(who == "measurement" for who, _ in view.history)
        result = yield CallRequest("measurement", messages,
                                   self.call_config(index, "measurement"))
        visible, _ = split_reasoning(result.text or "")
        own = cut_turn(visible, "examiner")
        answer = own.text if own.wrote_past_turn else visible
        self._calls.append(result.to_log(purpose="measurement", agent="measurement",
                                         request_index=index, flags=own.flags))
        return answer or NO_REPLY


class NativeRecordReader:
    """Deterministic offline stand-in for the native measurement agent (module docstring).

    Args:
        threshold: ``partial_ratio`` (0-100) at which a name counts as requested.

    Raises:
        ValueError: a threshold outside 0-100.
    """

    name = "record_reader"

    def __init__(self, threshold: float = 90.0) -> None:
        if not 0 <= threshold <= 100:
            raise ValueError(f"threshold must be in 0..100, got {threshold!r}")
        self.threshold = float(threshold)

    @property
    def config(self) -> dict[str, Any]:
        """JSON-ready description for run logs."""
        return {"agent": self.name, "threshold": self.threshold}

    def measure(self, view: MeasurementView) -> str:
        """``RESULTS: <name>: <result>; ...`` for every matching record, in catalog
        order, else :data:`NORMAL_READINGS` / :data:`NOT_RECORDED`.

        Raises:
            TypeError: ``view`` is not a MeasurementView.
        """
        view = _check_view(view)
        request = normalize_name(view.request)
        words = set(request.split())
        found = []
        for entry in view.catalog if view.catalog is not None else Catalog(view.records):
            if self._names(entry.name, request, words) or (
                    entry.group and _names_whole(entry.group, request)):
                value = render_record(record_at(view.records, entry.source_path))
                found.append(f"{entry.name}: " + re.sub(r"\s*\n\s*", "; ", value.strip()))
        if found:
            return "RESULTS: " + "; ".join(found)
        return NORMAL_READINGS if view.normal_readings else NOT_RECORDED

    def _names(self, name: str, request: str, words: set[str]) -> bool:
        """Whether the request names one examination (fuzzily; short names as words)."""
        key = normalize_name(name)
        if not key:
            return False
        if len(key) <= 4:
            return all(word in words for word in key.split())
        return fuzz.partial_ratio(key, request) >= self.threshold


def _names_whole(group: str, request: str) -> bool:
    """Whether the normalized ``request`` holds the whole normalized ``group`` name as a
    run of whole words."""
    key = normalize_name(group)
    return bool(key) and f" {key} " in f" {request} "
