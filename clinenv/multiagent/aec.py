"""The EGIP episode as a PettingZoo AEC game: doctor, patient and examiner seats.

Agents :data:`AGENTS`; the doctor's action picks who speaks next (EGIP section 3.2).
Routing, views, rewards and infos of each seat: docs/environments.md.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from pettingzoo import AECEnv

from clinenv.cases import Case
from clinenv.env.case_pool import CasePool
from clinenv.env.config import EnvConfig
from clinenv.env.doctor_view import doctor_info, exam_mask, patient_flags
from clinenv.env.egip_loop import EGIPLoop, check_max_rounds
from clinenv.env.seats import PendingStep
from clinenv.env.simulators import make_patient
from clinenv.env.spaces import UnicodeText, clip_text
from clinenv.env.terminal_reward import terminal_reward
from clinenv.multiagent import fidelity
from clinenv.protocol.exam_noise import ExamNoise
from clinenv.protocol.render import render_history
from clinenv.protocol.runtime import EGIPRuntime
from clinenv.protocol.seat_views import render_examiner_view, render_patient_view

DOCTOR = "doctor_0"
PATIENT = "patient_0"
EXAMINER = "examiner_0"
#: Every agent name, in seat order (the doctor always plays; docs/environments.md).
AGENTS = (DOCTOR, PATIENT, EXAMINER)
#: ``examiner=`` values.
EXAMINER_KINDS = ("external", "lookup")


class EGIPAECEnv(AECEnv):
    """PettingZoo AEC environment of one EGIP episode per reset; docs/environments.md.

    Args:
        dataset: shorthand for ``EnvConfig.dataset``, as in :class:`clinenv.env.EGIPEnv`.
        env_config: the :class:`~clinenv.env.config.EnvConfig` (EGIP only), with
            ``fidelity_weight`` and ``max_steps`` (``None``: at most 2T + 1 steps).
        cases: explicit cases to draw from.
        patient: ``"external"`` (a policy's seat, default), or a built-in patient
            (:func:`clinenv.env.simulators.make_patient`).
        patient_model: the chat model of ``patient="llm"``.
        examiner: ``"external"`` (a policy's seat, default) or ``"lookup"`` (record
            lookup O).
        **overrides: ``EnvConfig`` and ``ProtocolConfig`` fields by name.

    Raises:
        ValueError: an invalid argument; the message names it (``protocol`` and
            ``preset`` too: the native protocols are in the Gymnasium env only).
        TypeError: ``env_config`` with a keyword that differs from a value it sets.
        pydantic.ValidationError: an invalid setting.
        clinenv.errors.DatasetNotFoundError: the dataset is not available.
    """

    metadata = {"name": "egip_v0", "render_modes": ["ansi"], "render_fps": 1,
                "is_parallelizable": False}

    def __init__(
        self,
        dataset: str | None = None,
        *,
        env_config: EnvConfig | None = None,
        cases: list[Case] | None = None,
        patient: Any = "external",
        patient_model: Any = None,
        examiner: str = "external",
        **overrides: Any,
    ) -> None:
        super().__init__()
        if dataset is not None:
            overrides["dataset"] = dataset
        self.env_config = settings = EnvConfig.merge(env_config, overrides,
                                                     caller=type(self).__name__)
        if examiner not in EXAMINER_KINDS:
            raise ValueError(f"examiner must be one of {EXAMINER_KINDS}, got {examiner!r}")
        if settings.protocol is not None or settings.preset is not None:
            raise ValueError("protocol=/preset= are not settings of the multi-agent "
                             "environment, which runs EGIP (its settings, e.g. "
                             "show_menu=False, are accepted): native protocols are available "
                             "in the Gymnasium env only (EGIPEnv / gym.make)")
        self.config = settings.protocol_config
        self.pool = CasePool.get(settings.dataset, cases=cases, data_dir=settings.data_dir,
                                 disclosure=settings.disclosure,
                                 allow_download=settings.allow_download,
                                 verify=settings.verify
                                 ).with_target_in_menu(self.config.target_in_menu)
        if isinstance(patient, str) and patient == "external":
            if patient_model is not None:
                raise ValueError("patient_model is used only with patient='llm'")
            if settings.patient_bias is not None:
                raise ValueError(f"patient_bias={settings.patient_bias!r} needs the LLM "
                                 "patient (patient='llm'); an external patient seat is a "
                                 "policy whose prompt the environment does not write")
            if settings.patient_persona.active:
                raise ValueError(f"patient_persona={settings.patient_persona.to_value()!r} "
                                 "works with the retrieval patient only, not with the "
                                 "external patient seat (patient='external')")
            self.patient = None
        else:
            self.patient = make_patient(patient, patient_model, bias=settings.patient_bias,
                                        persona=settings.patient_persona)
            if not callable(getattr(self.patient, "reply", None)):
                raise ValueError("patient: the PettingZoo environment calls a built-in "
                                 "patient's sync reply(view); this one has only areply")
        self.exam_noise = settings.exam_noise
        if self.exam_noise.active and examiner != "lookup":
            raise ValueError(f"exam_noise={self.exam_noise.to_dict()!r} applies to record "
                             "lookup O (examiner='lookup'), not to the external examiner "
                             "seat")
        self.examiner = examiner
        self.observation_format = settings.observation_format
        self.max_exams = settings.max_exams
        self.max_text_chars = settings.max_text_chars
        self.invalid_action_penalty = settings.invalid_action_penalty
        self.exam_cost = settings.exam_cost
        self.reward_spec = settings.reward_spec
        self.fidelity_weight = settings.fidelity_weight
        self.max_steps = settings.max_steps
        self.render_mode = settings.render_mode
        self.possible_agents = [DOCTOR]
        if self.patient is None:
            self.possible_agents.append(PATIENT)
        if examiner == "external":
            self.possible_agents.append(EXAMINER)
        self._observation_space = spaces.Dict({
            "text": UnicodeText(settings.max_text_chars),
            "exam_mask": spaces.Box(0, 1, (settings.max_exams,), dtype=np.int8),
        })
        self._action_spaces = {a: UnicodeText(settings.max_text_chars)
                               for a in self.possible_agents}
        self.agents: list[str] = []
        self.loop = EGIPLoop(self.config, examiner="seat" if examiner == "external" else "lookup",
                             exam_cost=settings.exam_cost,
                             invalid_action_penalty=settings.invalid_action_penalty,
                             observation_format=settings.observation_format,
                             reward_spec=settings.reward_spec)
        self.runtime: EGIPRuntime | None = None
        self._np_random: np.random.Generator | None = None

    # ------------------------------------------------------------- spaces
    def observation_space(self, agent: str) -> spaces.Dict:
        """The one observation space object shared by every agent.

        Raises:
            KeyError: ``agent`` is not in ``possible_agents``.
        """
        self._check_agent(agent)
        return self._observation_space

    def action_space(self, agent: str) -> UnicodeText:
        """``agent``'s text action space (a cached object per agent; equal for all).

        Raises:
            KeyError: ``agent`` is not in ``possible_agents``.
        """
        self._check_agent(agent)
        return self._action_spaces[agent]

    @property
    def np_random(self) -> np.random.Generator:
        """The environment's random generator (seeded by ``reset(seed=...)``)."""
        if self._np_random is None:
            self._np_random, _ = seeding.np_random()
        return self._np_random

    # ---------------------------------------------------------------- API
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start an episode; the doctor moves first.

        Args:
            seed: seeds ``self.np_random``; the case is drawn from it unless pinned.
            options: ``{"case_id": id_or_index}`` pins the case; ``{"max_rounds": T}`` caps
                this episode's acquisition rounds at T (1..``acquisition_rounds``), as in
                :meth:`clinenv.env.EGIPEnv.reset`; other keys are ignored.

        Raises:
            KeyError: an unknown ``case_id``.
            IndexError: a case index out of range.
            ValueError: a bad ``max_rounds``, before anything is reset.
        """
        options = options or {}
        max_rounds = check_max_rounds(options.get("max_rounds"),
                                      self.config.acquisition_rounds)
        if seed is not None:
            self._np_random, _ = seeding.np_random(seed)
        if options.get("case_id") is not None:
            case = self.pool.case(options["case_id"])
        else:
            case = self.pool.cases[int(self.np_random.integers(len(self.pool.cases)))]
        self._doctor_text: str | None = self.loop.start(
            self.pool.prepared(case, **self.loop.matching), max_rounds=max_rounds)
        self._doctor_clipped = False
        self.runtime = self.loop.runtime
        reset_patient = getattr(self.patient, "reset", None)
        if callable(reset_patient):  # as EGIPEnv: drawn after the case
            reset_patient(seed=int(self.np_random.integers(2**31 - 1)))
        if self.exam_noise.active:  # as EGIPEnv: drawn last
            self.runtime.noise = ExamNoise(self.exam_noise,
                                           int(self.np_random.integers(2**31 - 1)),
                                           case.case_id)
        self._leakable = (fidelity.leakable_values(case.records, case.patient)
                          if self.fidelity_weight else ())
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self._pending: PendingStep | None = None
        self._steps = 0
        self._final: dict[str, Any] = {}
        self._doctor_kind: str | None = None
        self._doctor_reasoning: str | None = None
        self._patient_flags: list[str] | None = None
        self._texts: dict[str, str] = {}
        self._infos: dict[str, dict[str, Any]] = {}
        self._seat_state = {a: {"reply_clipped": False} for a in (PATIENT, EXAMINER)}
        self._refresh_doctor()
        for seat in self.agents[1:]:
            self._refresh_seat(seat)
        self.agent_selection = DOCTOR
        self.infos = {a: copy.deepcopy(self._infos[a]) for a in self.agents}

    def observe(self, agent: str) -> dict[str, Any]:
        """``agent``'s current observation (a fresh dict and mask each call).

        Raises:
            KeyError: ``agent`` is not in ``possible_agents``.
            RuntimeError: before the first ``reset``.
        """
        self._check_agent(agent)
        if self.runtime is None:
            raise RuntimeError("call reset() before observe()")
        mask = (self._doctor_mask.copy() if agent == DOCTOR
                else np.zeros(self.max_exams, dtype=np.int8))
        return {"text": self._texts[agent], "exam_mask": mask}

    def step(self, action: Any) -> None:
        """Apply the action of ``agent_selection`` (text; never raises on any text).

        A done agent must be stepped with ``None``. Any non-text action of a live agent
        is read as ``str(action)`` (``None`` as ``""``).

        Raises:
            RuntimeError: before the first ``reset``.
            ValueError: a done agent stepped with an action other than ``None``.
        """
        if self.runtime is None:
            raise RuntimeError("call reset() before step()")
        if not self.agents:
            raise RuntimeError("the episode is over (agents == []); call reset()")
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        text = action if isinstance(action, str) else ("" if action is None else str(action))
        self._cumulative_rewards[agent] = 0.0
        self.rewards = dict.fromkeys(self.agents, 0.0)
        if agent == DOCTOR:
            self._doctor_step(text)
        else:
            self._seat_step(agent, text)
        self._steps += 1
        over = self.runtime.phase == "done"
        if not over and self.max_steps is not None and self._steps >= self.max_steps:
            self._pending = None
            self._final = {"answer": None, "verdict": "unscored", "correct": False,
                           "truncated_at_step": self._steps}
            reward, self._final["reward_components"] = terminal_reward(
                self.runtime, self.reward_spec, protocol="egip", outcome=self._final)
            self.rewards[DOCTOR] += reward
            self.truncations = dict.fromkeys(self.agents, True)
            over = True
        if over:
            self._refresh_doctor()
            for seat in self.agents[1:]:
                self._refresh_seat(seat)
        self.infos = {a: copy.deepcopy(self._infos[a]) for a in self.agents}
        self._accumulate_rewards()

    def render(self) -> str | None:
        """``"ansi"``: the doctor-visible transcript so far; ``None`` otherwise."""
        if self.render_mode != "ansi" or self.runtime is None:
            return None
        rt = self.runtime
        head = f"Case {rt.case.case_id} ({rt.case.dataset}), phase {rt.phase}, round {rt.turn}"
        return head + "\n" + render_history(rt.history) + "\n"

    def close(self) -> None:
        """Nothing to release (built-in simulators are in-process; models are the caller's)."""

    # ------------------------------------------------------------- turns
    def _doctor_step(self, text: str) -> None:
        pending = self.loop.route(text)
        self._pending = pending
        self._patient_flags = None
        if pending.patient_view is not None and self.patient is None:
            self._hand_over(PATIENT)
        elif pending.examiner_view is not None:
            self._hand_over(EXAMINER)  # charged when the result comes back
        else:
            if pending.patient_view is not None:
                pending.reply = self.patient.reply(pending.patient_view)
            self._close_round()

    def _hand_over(self, seat: str) -> None:
        assert self._pending is not None and self._pending.routing is not None
        action = self._pending.routing.action
        self._doctor_kind, self._doctor_reasoning = action.kind, action.reasoning
        self._refresh_seat(seat)
        self.agent_selection = seat

    def _close_round(self) -> None:
        """The loop's second half: the doctor's reward, text and (at the end) outcome."""
        assert self._pending is not None
        step = self.loop.finish(self._pending)
        self._pending = None
        self.rewards[DOCTOR] += step.reward
        self._doctor_kind, self._doctor_reasoning = step.action_kind, step.reasoning
        if step.patient_replied and self.patient is not None:
            self._patient_flags = patient_flags(self.patient)
        self._doctor_text = step.text
        if step.terminated:
            self._final = step.outcome
            self.terminations = dict.fromkeys(self.agents, True)
        self._refresh_doctor()
        self.agent_selection = DOCTOR

    def _seat_step(self, seat: str, text: str) -> None:
        rt, pending = self.runtime, self._pending
        assert rt is not None and pending is not None and pending.routing is not None
        limit = self.config.max_action_chars
        reply = text[:limit]
        state: dict[str, Any] = {"reply_clipped": len(text) > limit}
        if seat == PATIENT:
            errors = fidelity.patient_leaks(reply, self._leakable) if self.fidelity_weight else []
            pending.reply = reply
        else:
            view = pending.examiner_view
            assert view is not None
            errors = (fidelity.examiner_errors(reply, view.record, (view.request,
                                                                    view.exam_id or "",
                                                                    view.name))
                      if self.fidelity_weight else [])
            pending.measurement = reply
        if self.fidelity_weight:
            state["fidelity_errors"] = errors
            self.rewards[seat] -= self.fidelity_weight * len(errors)
        self._seat_state[seat] = state
        self._close_round()
        self._refresh_seat(seat)

    # ------------------------------------------------------- observations
    def _refresh_doctor(self) -> None:
        """The doctor's observation and info for the current state (the Gymnasium env's)."""
        rt = self.runtime
        assert rt is not None
        text = self._doctor_text
        if text is None:  # the loop repeats the last text (the end, in view format)
            text, clipped = self._texts.get(DOCTOR, ""), self._doctor_clipped
        else:
            text, clipped = clip_text(text, self.max_text_chars)
        self._doctor_text, self._doctor_clipped = None, clipped
        self._texts[DOCTOR] = text
        self._doctor_mask = exam_mask(rt, self.max_exams)
        info = doctor_info(rt, action_kind=self._doctor_kind, text_clipped=clipped,
                           reasoning=self._doctor_reasoning)
        if self._patient_flags is not None:
            info["patient_flags"] = list(self._patient_flags)
        info.update(self._final)
        self._infos[DOCTOR] = info

    def _refresh_seat(self, seat: str) -> None:
        rt = self.runtime
        assert rt is not None
        waiting = self._pending
        if seat == PATIENT:
            view = None if waiting is None else waiting.patient_view
            pending = view is not None
            text = render_patient_view(view if view is not None else rt.patient_view(""),
                                       pending=pending)
        else:
            view = None if waiting is None else waiting.examiner_view
            pending = view is not None
            text = render_examiner_view(view)
        self._texts[seat], clipped = clip_text(text, self.max_text_chars)
        self._infos[seat] = {
            "case_id": rt.case.case_id,
            "dataset": rt.case.dataset,
            "phase": rt.phase,
            "turn": rt.turn,
            "role": "patient" if seat == PATIENT else "examiner",
            "pending": pending,
            "text_clipped": clipped,
            **self._seat_state[seat],
        }

    def _check_agent(self, agent: str) -> None:
        if agent not in self.possible_agents:
            raise KeyError(f"unknown agent {agent!r}; agents of this environment: "
                           f"{self.possible_agents}")
