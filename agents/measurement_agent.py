"""The LLM measurement agent: the native examiner that holds every record of the case.

AgentClinic's measurement agent (``examiner="llm"``): answers ``RESULTS: ...`` from the
records, never sees P or Y; offline: :class:`clinenv.env.record_reader.NativeRecordReader`.
"""

from __future__ import annotations

from clinenv.agents.chat_seat import ChatSeat
from clinenv.agents.prompts import (
    MEASUREMENT_HISTORY,
    MEASUREMENT_RULE_NORMAL,
    MEASUREMENT_RULE_NOT_RECORDED,
    MEASUREMENT_SYSTEM,
    MEASUREMENT_USER,
)
from clinenv.agents.terminal_base import CallRequest, Plan, arun_plan, run_plan
from clinenv.env.record_reader import check_view
from clinenv.protocol.measurement_view import MeasurementView
from clinenv.protocol.parser import split_reasoning
from clinenv.protocol.turns import cut_turn

#: The LLM agent's answer when its reply had no visible text.
NO_REPLY = "RESULTS: (no result was reported)"
_SPEAKERS = {"doctor": "Doctor", "measurement": "You", "patient": "Patient"}


class LLMMeasurementAgent(ChatSeat):
    """The native measurement agent backed by a chat model.

    Takes ``model`` and ``config`` as :class:`~clinenv.agents.chat_seat.ChatSeat` does
    (raises :class:`TypeError` for a non-:class:`~clinenv.llm.base.ChatModel`). Each call
    record has ``purpose="measurement"``, ``agent="measurement"``, ``request_index`` and
    ``flags`` (``["wrote_past_turn"]`` when the reply went past the examiner's turn).
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
        view = check_view(view)
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
