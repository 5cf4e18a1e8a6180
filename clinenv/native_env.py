"""The native AgentClinic / MedAgentSim protocols inside the Gymnasium environment.

:class:`clinenv.env.EGIPEnv` runs the native loops (``protocol="agentclinic"`` or
``"medagentsim"``) with the same two-halves step as EGIP: this module holds the native
halves, mixed into the environment by :class:`NativeSteps`. Data flows one way: the
:class:`~clinenv.protocol.native.NativeRuntime` routes the doctor's whole utterance
(:class:`~clinenv.protocol.native.NativeRouting`), the environment fills the seat that
must answer, the runtime records the answer, and this module turns the runtime's state
into the observation, reward and ``info``.

What the native doctor gets (:mod:`clinenv.protocol.native_render`): its starting
information, the transcript and the latest response; no menu (``exam_mask`` all zeros,
``info["menu"] == []``) and no candidate labels (``info["candidates"] is None``).
``DIAGNOSIS READY`` ends the episode (``info["answer"]`` is the whole utterance); the
diagnosis is read from it as AgentClinic's moderator reads it
(:func:`~clinenv.protocol.native.moderator_answer`: the doctor's own turn, the first
line after the marker; ``info["scored_answer"]``) and that text is scored, without the
candidate labels the doctor never saw (an option letter is a free answer, never option
K_i), and sent to the judge. An utterance whose diagnosis is no identifiable answer (a
template placeholder, an abstention, nothing after the marker) is not judged, as under
EGIP; its verdict follows ``strict_yes`` (``"wrong"`` by default) and it is unscored in
U and coverage (``info["answer_status"]``). ``REQUEST TEST`` sends
the whole utterance to the examiner (a measurement agent); anything else goes to the
patient. ``info["protocol"]`` names the loop; the last ``info`` also has ``end_reason``
(``"diagnosis"`` or ``"no_diagnosis"``: an unfinished episode, verdict ``"wrong"`` by
default, :attr:`~clinenv.protocol.native_config.NativeConfig.unfinished`).
MedAgentSim's last turn is a decision phase (``info["phase"] == "decide"``) whose
observation is the transcript plus a discussion instruction.

Rewards: ``exam_cost`` is subtracted once per measurement REQUEST (one utterance, however
many tests it names: the native loop parses no test names), ``invalid_action_penalty``
per empty utterance; the terminal reward is that of the verdict (:mod:`clinenv.rewards`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clinenv.doctor_view import answer_outcome
from clinenv.protocol.native import NativeRouting, NativeRuntime, moderator_answer
from clinenv.protocol.native_config import NativeConfig
from clinenv.protocol.native_render import render_native_delta, render_native_view
from clinenv.scoring import score_answer
from clinenv.terminal_outcome import NOT_JUDGED, terminal_outcome

if TYPE_CHECKING:
    from clinenv.env_seats import PendingStep

__all__ = ["NativeSteps"]


class NativeSteps:
    """The native halves of :meth:`clinenv.env.EGIPEnv._route` and ``_finish``.

    A mixin of :class:`~clinenv.env.EGIPEnv`: it reads the environment's ``config``
    (a :class:`~clinenv.protocol.native_config.NativeConfig`), ``judge``, ``exam_cost``,
    ``invalid_action_penalty`` and ``observation_format``, calls its ``_emit`` and
    ``_reply_flags``, and writes ``_final``.
    """

    config: Any
    judge: Any
    exam_cost: float
    invalid_action_penalty: float
    observation_format: str
    _final: dict[str, Any]
    _last_obs_text: str

    def _route_native(self, rt: NativeRuntime, action: str, pending: PendingStep) -> PendingStep:
        """First half of a native step: the runtime routes the whole utterance; a
        diagnosis is scored and judged on the answer the moderator reads in it
        (module docstring), without the candidate labels."""
        invalid_before = rt.invalid_actions
        routing = rt.submit_answer(action) if rt.phase == "decide" else rt.route(action)
        pending.routing = routing
        if routing.to == "patient":
            pending.patient_view = rt.patient_view(routing.text)
        elif routing.to == "examiner":
            pending.measurement_view = rt.measurement_view(routing.text)
            pending.reward -= self.exam_cost  # per request (module docstring)
        elif routing.to == "judge":  # the diagnosis the moderator reads in the utterance
            answer = moderator_answer(rt.answer, strict_markers=self.config.strict_markers)
            pending.score = score_answer(answer, rt.case, use_candidates=False)
            pending.answer, pending.target = answer, rt.case.target.text
            # no identifiable answer (none, placeholder, abstention): never judged
            pending.judged = self.judge is not None and pending.score.verdict != "unscored"
        pending.reward -= self.invalid_action_penalty * (rt.invalid_actions - invalid_before)
        return pending

    def _finish_native(self, rt: NativeRuntime, pending: PendingStep):
        """Second half of a native step: record the seat's answer; the 5-tuple."""
        routing = pending.routing
        assert isinstance(routing, NativeRouting)
        flags = None
        if routing.to == "patient":
            rt.answer_patient(routing, "" if pending.reply is None else str(pending.reply))
            flags = self._reply_flags(rt.turn)
        elif routing.to == "examiner":
            rt.answer_measurement(routing, "" if pending.measurement is None
                                  else str(pending.measurement))
        if rt.phase == "done":
            return self._native_outcome(rt, pending)
        text = (render_native_view(rt) if self.observation_format == "view"
                else render_native_delta(rt))
        obs, info = self._emit(text, action_kind=routing.kind, reasoning=routing.reasoning)
        if flags is not None:
            info["patient_flags"] = flags
        return obs, float(pending.reward), False, False, info

    def _native_outcome(self, rt: NativeRuntime, pending: PendingStep):
        """The last step of a native episode: verdict, reward, info (``end_reason``).

        The verdict is :func:`~clinenv.terminal_outcome.terminal_outcome` with
        ``strict=strict_yes``; an episode without a diagnosis gets the ``unfinished``
        verdict (default ``"wrong"``) and is never judged. ``answer_status`` says
        whether an identifiable answer came out (:func:`~clinenv.doctor_view.
        answer_outcome`), whatever the verdict.
        """
        cfg = self.config
        assert isinstance(cfg, NativeConfig)
        score = (pending.score if pending.score is not None
                 else score_answer(None, rt.case, use_candidates=False))
        judgement = pending.judgement if pending.judged else NOT_JUDGED
        verdict, keys = terminal_outcome(score, judgement, strict=cfg.strict_yes,
                                         with_judge=self.judge is not None)
        if rt.answer is None:
            verdict = cfg.unfinished
        reward, outcome = answer_outcome(rt, score, verdict,
                                         scored_answer=pending.answer if pending.score
                                         is not None else None)
        self._final = {**outcome, **keys, "end_reason": rt.end_reason}
        routing = pending.routing
        assert isinstance(routing, NativeRouting)
        obs, info = self._emit(None, action_kind=routing.kind,
                               reasoning=routing.reasoning)
        info.update(self._final)
        return (obs, float(reward) + pending.reward, True,
                False, info)
