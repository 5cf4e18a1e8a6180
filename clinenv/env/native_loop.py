"""The native AgentClinic / MedAgentSim loops, as published (``protocol="agentclinic"`` or
``"medagentsim"``).

Driven by :class:`~clinenv.protocol.native.NativeRuntime`; every difference from EGIP,
with its ``info`` keys and costs, is listed in docs/protocols.md.
"""

from __future__ import annotations

from typing import Any, Literal

from clinenv.env.doctor_view import answer_outcome
from clinenv.env.loop import LoopStep
from clinenv.env.seats import PendingStep
from clinenv.env.terminal_outcome import NOT_JUDGED, terminal_outcome
from clinenv.env.terminal_reward import terminal_reward
from clinenv.protocol.config import ProtocolConfig
from clinenv.protocol.native import NativeRouting, NativeRuntime, moderator_answer
from clinenv.protocol.native_config import NativeConfig
from clinenv.protocol.native_render import render_native_delta, render_native_view
from clinenv.protocol.prepared import PreparedCase
from clinenv.reward_spec import DEFAULT_SPEC, RewardSpec
from clinenv.scoring import score_answer

__all__ = ["NativeLoop"]

#: The native runtimes' catalogs use EGIP's exam-matching thresholds.
_EGIP_MATCHING = ProtocolConfig()


class NativeLoop:
    """A native protocol loop (:class:`~clinenv.env.loop.Loop`).

    Args:
        protocol: ``"agentclinic"`` or ``"medagentsim"``.
        config: the native settings (``max_turns``, ``strict_yes``...).
        judged: a judge rules on identifiable answers.
        exam_cost, invalid_action_penalty: non-negative reward shaping.
        observation_format: ``"view"`` or ``"delta"``.
        reward_spec: the terminal reward (:class:`~clinenv.reward_spec.RewardSpec`).
    """

    def __init__(self, protocol: str, config: NativeConfig, *, judged: bool = False,
                 exam_cost: float = 0.0, invalid_action_penalty: float = 0.0,
                 observation_format: Literal["view", "delta"] = "view",
                 reward_spec: RewardSpec = DEFAULT_SPEC) -> None:
        self.protocol = protocol
        self.config = config
        self.judged = judged
        self.exam_cost = float(exam_cost)
        self.invalid_action_penalty = float(invalid_action_penalty)
        self.observation_format = observation_format
        self.reward_spec = reward_spec
        self.matching = {"accept": _EGIP_MATCHING.exam_accept,
                         "suggest": _EGIP_MATCHING.exam_suggest}
        self.runtime: NativeRuntime | None = None

    def start(self, prepared: PreparedCase) -> str:
        self.runtime = NativeRuntime(prepared, self.config)
        return self.view()

    def view(self) -> str:
        assert self.runtime is not None
        return render_native_view(self.runtime)

    def info_keys(self) -> dict[str, Any]:
        # the native doctor never sees the candidate labels
        return {"candidates": None, "protocol": self.protocol}

    def route(self, action: str) -> PendingStep:
        rt = self.runtime
        assert rt is not None
        pending = PendingStep(since=len(rt.history), phase=rt.phase)
        invalid_before = rt.invalid_actions
        routing = rt.submit_answer(action) if rt.phase == "decide" else rt.route(action)
        pending.routing = routing
        if routing.to == "patient":
            pending.patient_view = rt.patient_view(routing.text)
        elif routing.to == "examiner":
            pending.measurement_view = rt.measurement_view(routing.text)
            pending.reward -= self.exam_cost  # per request: the native loop parses no test names
        elif routing.to == "judge":  # the diagnosis the moderator reads in the utterance
            answer = moderator_answer(rt.answer, strict_markers=self.config.strict_markers)
            pending.score = score_answer(answer, rt.case, use_candidates=False)
            pending.answer, pending.target = answer, rt.case.target.text
            # no identifiable answer (none, placeholder, abstention): never judged
            pending.judged = self.judged and pending.score.verdict != "unscored"
        pending.reward -= self.invalid_action_penalty * (rt.invalid_actions - invalid_before)
        return pending

    def finish(self, pending: PendingStep) -> LoopStep:
        rt = self.runtime
        routing = pending.routing
        assert rt is not None and isinstance(routing, NativeRouting)
        if routing.to == "patient":
            rt.answer_patient(routing, "" if pending.reply is None else str(pending.reply))
        elif routing.to == "examiner":
            rt.answer_measurement(routing, "" if pending.measurement is None
                                  else str(pending.measurement))
        replied = routing.to == "patient"
        if rt.phase == "done":
            reward, outcome = self._outcome(pending)
            return LoopStep(None, reward + pending.reward, True, routing.kind,
                            routing.reasoning, outcome, patient_replied=replied)
        text = (render_native_view(rt) if self.observation_format == "view"
                else render_native_delta(rt))
        return LoopStep(text, float(pending.reward), False, routing.kind, routing.reasoning,
                        patient_replied=replied)

    def _outcome(self, pending: PendingStep) -> tuple[float, dict[str, Any]]:
        """The verdict of the last step: :func:`~clinenv.env.terminal_outcome.
        terminal_outcome` with ``strict=strict_yes``; an episode without a diagnosis gets
        the ``unfinished`` verdict and is never judged."""
        rt, cfg = self.runtime, self.config
        assert rt is not None
        score = (pending.score if pending.score is not None
                 else score_answer(None, rt.case, use_candidates=False))
        judgement = pending.judgement if pending.judged else NOT_JUDGED
        verdict, keys = terminal_outcome(score, judgement, strict=cfg.strict_yes,
                                         with_judge=self.judged)
        if rt.answer is None:
            verdict = cfg.unfinished
        _, outcome = answer_outcome(rt, score, verdict, scored_answer=pending.answer
                                    if pending.score is not None else None)
        outcome.update(keys, end_reason=rt.end_reason)
        reward, outcome["reward_components"] = terminal_reward(
            rt, self.reward_spec, protocol=self.protocol, outcome=outcome)
        return float(reward), outcome
