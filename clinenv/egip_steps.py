"""The EGIP halves of a step of :class:`clinenv.env.EGIPEnv` (EGIP sections 3.2-3.3).

:class:`EGIPSteps` is mixed into the environment beside
:class:`~clinenv.native_env.NativeSteps` (the native loops' halves). The first half
(:meth:`EGIPSteps._route_egip`) hands the doctor action to the
:class:`~clinenv.protocol.runtime.EGIPRuntime`: in the acquisition phase a question asks
for the patient's reply, a validated exam request is answered by record lookup O (or, in
the "native measurement access" ablation, EGIP Table 3A, asks the examiner seat), and
``exam_cost`` / ``invalid_action_penalty`` are subtracted; in the decision phase the
terminal answer is scored against Y with the candidate labels K shown (an option letter
counts as option K_i, and reaches a judge as its label). The second half
(:meth:`EGIPSteps._finish_egip`) records the seat's answer and builds the observation,
reward and ``info``; the terminal reward is that of the verdict
(:mod:`clinenv.terminal_outcome`, :mod:`clinenv.rewards`).
"""

from __future__ import annotations

from typing import Any

from clinenv.doctor_view import answer_outcome
from clinenv.env_seats import PendingStep
from clinenv.protocol.render import render_delta, render_doctor_view
from clinenv.protocol.runtime import EGIPRuntime
from clinenv.scoring import score_answer
from clinenv.terminal_outcome import NOT_JUDGED, terminal_outcome

__all__ = ["EGIPSteps"]


class EGIPSteps:
    """The EGIP halves of :meth:`clinenv.env.EGIPEnv._route` and ``_finish``.

    A mixin of :class:`~clinenv.env.EGIPEnv`: it reads the environment's ``judge``,
    ``examiner``, ``exam_cost``, ``invalid_action_penalty``, ``observation_format`` and
    ``_history_text``, calls its ``_emit`` and ``_reply_flags``, and
    writes ``_final``.
    """

    judge: Any
    examiner: Any
    exam_cost: float
    invalid_action_penalty: float
    observation_format: str
    _final: dict[str, Any]
    _last_obs_text: str
    _history_text: Any

    def _route_egip(self, rt: EGIPRuntime, action: str, pending: PendingStep) -> PendingStep:
        """First half of an EGIP step (module docstring)."""
        if rt.phase == "decide":
            pending.parsed = rt.submit_answer(action)
            pending.score = score_answer(rt.answer, rt.case)  # K shown: letters count
            # A candidate chosen by letter ("B", "C. ...") reaches the judge as its label:
            # a bare letter means nothing without the candidate list.
            chose_option = pending.score.method == "option" and pending.score.matched
            pending.answer = pending.score.matched if chose_option else rt.answer
            pending.target = rt.case.target.text
            # non-answers and abstentions are unscored without asking the judge
            pending.judged = self.judge is not None and pending.score.verdict != "unscored"
            return pending
        invalid_before = rt.invalid_actions
        routing = rt.route(action)
        pending.routing = routing
        if routing.to == "patient":
            pending.patient_view = rt.patient_view(routing.question or "")
        elif routing.to == "examiner":
            if self.examiner is None:
                rt.answer_exam(routing)  # record lookup O
            else:  # native measurement access (EGIP Table 3A)
                pending.measurement_view = rt.measurement_view(routing)
            pending.reward -= self.exam_cost * len(routing.entries)
        pending.reward -= self.invalid_action_penalty * (rt.invalid_actions - invalid_before)
        return pending

    def _finish_egip(self, rt: EGIPRuntime, pending: PendingStep):
        """Second half of an EGIP step: the 5-tuple of ``step`` (module docstring)."""
        if pending.phase == "decide":
            score = pending.score
            assert score is not None and pending.parsed is not None
            verdict, final = terminal_outcome(
                score, pending.judgement if pending.judged else NOT_JUDGED,
                with_judge=self.judge is not None)
            reward, outcome = answer_outcome(rt, score, verdict)
            self._final = {**outcome, **final}
            text = None if self.observation_format == "view" else ""  # None: repeat e_T
            obs, info = self._emit(text, action_kind="answer",
                                   reasoning=pending.parsed.reasoning)
            info.update(self._final)
            return obs, float(reward), True, False, info
        routing = pending.routing
        assert routing is not None
        flags = None
        if routing.to == "patient":
            rt.answer_patient(routing, "" if pending.reply is None else str(pending.reply))
            flags = self._reply_flags(rt.turn)
        elif pending.measurement_view is not None:
            rt.answer_measurement(routing, pending.measurement_view, "" if
                                  pending.measurement is None else str(pending.measurement))
        if self.observation_format == "view":
            text = render_doctor_view(rt, self._history_text)
        else:
            text = render_delta(rt, pending.since)
        obs, info = self._emit(text, action_kind=routing.action.kind,
                               reasoning=routing.action.reasoning)
        if flags is not None:
            info["patient_flags"] = flags
        return obs, float(pending.reward), False, False, info
