"""The EGIP loop (EGIP sections 3.2-3.3): T acquisition rounds, then one decision on e_T.

Routes the doctor's action through :class:`~clinenv.protocol.runtime.EGIPRuntime`
(questions to the patient, requests to record lookup O, a measurement agent or an
examiner seat) and scores the terminal answer against Y with the labels K shown.
"""

from __future__ import annotations

import numbers
from typing import Any, Literal

from clinenv.env.doctor_view import answer_outcome
from clinenv.env.loop import LoopStep
from clinenv.env.seats import PendingStep
from clinenv.env.terminal_outcome import NOT_JUDGED, terminal_outcome
from clinenv.env.terminal_reward import terminal_reward
from clinenv.icd_map import load_icd_map
from clinenv.protocol.config import ProtocolConfig
from clinenv.protocol.extra_actions import KnowledgeSource, read_extra_action
from clinenv.protocol.prepared import PreparedCase
from clinenv.protocol.render import DoctorViewRenderer
from clinenv.protocol.runtime import EGIPRuntime
from clinenv.reward_spec import DEFAULT_SPEC, RewardSpec
from clinenv.scoring import score_answer

__all__ = ["EXAMINER_MODES", "EGIPLoop", "check_max_rounds"]

#: Who answers a validated exam request.
EXAMINER_MODES = ("lookup", "agent", "seat")


def check_max_rounds(value: Any, limit: int) -> int | None:
    """The reset option ``max_rounds`` checked: ``None`` when absent, else an int 1..``limit``
    (the configured T, ``acquisition_rounds``).

    Raises:
        ValueError: not an int in 1..``limit`` (a bool is refused).
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) \
            or not 1 <= value <= limit:
        raise ValueError(f"reset option max_rounds must be an int in 1..{limit} (this "
                         f"environment's acquisition_rounds), got {value!r}")
    return int(value)


class EGIPLoop:
    """The EGIP protocol loop (:class:`~clinenv.env.loop.Loop`).

    Args:
        config: the protocol settings (T, menu, matching thresholds...).
        examiner: one of :data:`EXAMINER_MODES`.
        judged: a judge rules on identifiable answers (non-answers and abstentions stay
            unscored without asking it).
        exam_cost, invalid_action_penalty: non-negative reward shaping (see
            :class:`clinenv.env.EGIPEnv`).
        observation_format: ``"view"`` (x_t each step) or ``"delta"`` (what is new).
        reward_spec: the terminal reward (:class:`~clinenv.reward_spec.RewardSpec`).

    Raises:
        ValueError: an unknown ``examiner`` mode.
        clinenv.icd_map.IcdMapError, OSError: ``config.icd_map`` cannot be read.
        clinenv.errors.CaseFormatError, OSError: ``config.knowledge_source`` cannot be
            read.
    """

    protocol = "egip"

    def __init__(self, config: ProtocolConfig, *, examiner: str = "lookup",
                 judged: bool = False, exam_cost: float = 0.0,
                 invalid_action_penalty: float = 0.0,
                 observation_format: Literal["view", "delta"] = "view",
                 reward_spec: RewardSpec = DEFAULT_SPEC) -> None:
        if examiner not in EXAMINER_MODES:
            raise ValueError(f"examiner must be one of {EXAMINER_MODES}, got {examiner!r}")
        self.config = config
        self.examiner = examiner
        self.judged = judged
        self.exam_cost = float(exam_cost)
        self.invalid_action_penalty = float(invalid_action_penalty)
        self.observation_format = observation_format
        self.reward_spec = reward_spec
        self.matching = {"accept": config.exam_accept, "suggest": config.exam_suggest}
        self.icd_map = None if config.icd_map is None else load_icd_map(config.icd_map)
        self.knowledge = (None if config.knowledge_source is None
                          else KnowledgeSource.from_file(config.knowledge_source))
        self.runtime: EGIPRuntime | None = None
        self._renderer: DoctorViewRenderer | None = None

    def start(self, prepared: PreparedCase, *, max_rounds: int | None = None) -> str:
        """Begin an episode; ``max_rounds`` (already checked: 1..T) caps this episode's
        acquisition rounds (the reset option of :meth:`clinenv.env.EGIPEnv.reset`), so
        its runtime and views count ``Round k of max_rounds``; ``None``: T."""
        config = self.config if max_rounds is None else self.config.model_copy(
            update={"acquisition_rounds": int(max_rounds)})
        self.runtime = EGIPRuntime(prepared, config)
        self._renderer = DoctorViewRenderer(self.runtime)
        return self.view()

    def view(self) -> str:
        assert self._renderer is not None
        return self._renderer.view()

    def info_keys(self) -> dict[str, Any]:
        return {}

    def route(self, action: str) -> PendingStep:
        rt = self.runtime
        assert rt is not None
        pending = PendingStep(since=len(rt.history), phase=rt.phase)
        if rt.phase == "decide":
            pending.parsed = rt.submit_answer(action)
            pending.score = score_answer(rt.answer, rt.case,  # K shown: letters count
                                         icd_map=self.icd_map)
            # A candidate chosen by letter ("B", "C. ...") reaches the judge as its label:
            # a bare letter means nothing without the candidate list.
            chose_option = pending.score.method == "option" and pending.score.matched
            pending.answer = pending.score.matched if chose_option else rt.answer
            pending.target = rt.case.target.text
            pending.judged = self.judged and pending.score.verdict != "unscored"
            return pending
        invalid_before = rt.invalid_actions
        extra = read_extra_action(action) if (self.config.history_review
                                              or self.knowledge is not None) else None
        if extra is not None and not (self.config.history_review if extra.kind ==
                                      "history_review" else self.knowledge is not None):
            extra = None  # only the other extra action is enabled: read as usual
        routing = (rt.route(action) if extra is None
                   else rt.route_extra(action, extra, self.knowledge))
        pending.routing = routing
        if routing.to == "patient":
            pending.patient_view = rt.patient_view(routing.question or "")
        elif routing.to == "examiner":
            if self.examiner == "agent":
                pending.measurement_view = rt.measurement_view(routing)
            elif self.examiner == "seat" and routing.entries:
                pending.examiner_view = rt.examiner_view(routing)
            else:
                rt.answer_exam(routing)  # record lookup O; "not recorded" without a record
            pending.reward -= self.exam_cost * len(routing.entries)
        pending.reward -= self.invalid_action_penalty * (rt.invalid_actions - invalid_before)
        return pending

    def finish(self, pending: PendingStep) -> LoopStep:
        rt = self.runtime
        assert rt is not None
        if pending.phase == "decide":
            score = pending.score
            assert score is not None and pending.parsed is not None
            verdict, judge_keys = terminal_outcome(
                score, pending.judgement if pending.judged else NOT_JUDGED,
                with_judge=self.judged)
            _, outcome = answer_outcome(rt, score, verdict)
            outcome.update(judge_keys)
            reward, outcome["reward_components"] = terminal_reward(
                rt, self.reward_spec, protocol=self.protocol, outcome=outcome)
            return LoopStep(None if self.observation_format == "view" else "",
                            float(reward), True, "answer", pending.parsed.reasoning,
                            outcome)
        routing = pending.routing
        assert routing is not None
        if pending.patient_view is not None:
            rt.answer_patient(routing, "" if pending.reply is None else str(pending.reply))
        elif pending.measurement_view is not None:
            rt.answer_measurement(routing, pending.measurement_view, "" if
                                  pending.measurement is None else str(pending.measurement))
        elif pending.examiner_view is not None:
            rt.answer_exam(routing, result_text="" if pending.measurement is None
                           else str(pending.measurement))
        assert self._renderer is not None
        text = (self._renderer.view() if self.observation_format == "view"
                else self._renderer.delta(pending.since))
        return LoopStep(text, float(pending.reward), False, routing.action.kind,
                        routing.action.reasoning,
                        patient_replied=pending.patient_view is not None)
