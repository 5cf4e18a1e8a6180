"""The EGIP Gymnasium environment: a doctor acquires evidence, then decides.

One episode is one case: T acquisition rounds, then one decision step scored against Y
(EGIP section 3.2). Spaces, ``info`` keys, rewards and seats: docs/environments.md.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from clinenv.cases import Case
from clinenv.env.case_pool import CasePool
from clinenv.env.config import (
    DEFAULT_MAX_EXAMS,
    DEFAULT_MAX_TEXT_CHARS,
    EnvConfig,
    is_default_field,
)
from clinenv.env.doctor_view import (
    doctor_info,
    exam_mask,
    patient_flags,
    reports_flags,
)
from clinenv.env.egip_loop import EGIPLoop, check_max_rounds
from clinenv.env.loop import Loop
from clinenv.env.native_loop import NativeLoop
from clinenv.env.seats import (
    PendingStep,
    afill_seats,
    check_sync_seats,
    drain_seat_calls,
    fill_seats,
    reset_seats,
)
from clinenv.env.simulators import accepts_seed, make_examiner, make_judge, make_patient
from clinenv.env.spaces import UnicodeText, clip_text
from clinenv.env.terminal_outcome import JUDGE_TO_VERDICT
from clinenv.env.terminal_reward import runtime_record
from clinenv.protocol.biases import bias_hints_target
from clinenv.protocol.exam_noise import ExamNoise
from clinenv.protocol.history import event_to_dict
from clinenv.protocol.native import NativeRuntime
from clinenv.protocol.presets import PROTOCOLS
from clinenv.protocol.render import render_history
from clinenv.protocol.runtime import EGIPRuntime
from clinenv.reward_components import RewardComponents

#: Case metadata keys copied into episode records for stratified evaluation (e.g. the
#: NEJM_Ext question type, EGIP appendix F).
STRATA_KEYS = ("question_type", "specialty")
__all__ = ["DEFAULT_MAX_EXAMS", "DEFAULT_MAX_TEXT_CHARS", "EGIPEnv", "EnvConfig",
           "JUDGE_TO_VERDICT", "PROTOCOLS", "STRATA_KEYS"]


def case_flags(case: Case, patient_bias: str | None) -> dict[str, Any]:
    """A record's ``case_flags``: the case's :class:`~clinenv.cases.CaseFlags`, with
    ``target_in_bias`` only under a patient bias, where it says whether that bias hints
    at the target (:func:`~clinenv.protocol.biases.bias_hints_target`); runs without a
    bias keep the flags they always had. The runner adds the doctor's bias
    (:func:`clinenv.runs.episode.run_episode`)."""
    flags = case.flags.model_dump(mode="json", exclude={"target_in_bias"})
    if patient_bias is not None:
        flags["target_in_bias"] = bias_hints_target(case.flags.target_in_bias,
                                                    patient_bias=patient_bias)
    return flags


class EGIPEnv(gym.Env):
    """Gymnasium environment for EGIP diagnosis episodes.

    Args:
        dataset: shorthand for ``EnvConfig.dataset`` (a registry name or a case file).
        env_config: the :class:`~clinenv.env.config.EnvConfig` (cases, protocol,
            observation, reward); kept, merged with the keywords, as :attr:`env_config`.
            Each of its fields is also an attribute (``env.max_exams``...).
        cases: explicit cases to draw from (overrides the dataset).
        patient: ``None`` / ``"retrieval"``, ``"llm"`` or a patient object
            (docs/environments.md, "Seats"); seeded at every ``reset`` after the case.
        patient_model: the chat model of ``patient="llm"``.
        judge: ``None`` / ``"deterministic"``, ``"llm"`` or a judge object; non-answers
            are never judged.
        judge_model: the chat model of ``judge="llm"``.
        examiner: ``None`` (lookup O under EGIP, the record reader under a native
            protocol), ``"lookup"``, ``"reader"``, ``"llm"`` or an examiner object.
        examiner_model: the chat model of ``examiner="llm"``.
        **overrides: ``EnvConfig`` fields and protocol options by name, merged into
            ``env_config`` (:meth:`~clinenv.env.config.EnvConfig.merge`).

    Raises:
        clinenv.errors.DatasetNotFoundError: the dataset is not available (at once, with
            instructions to get it).
        pydantic.ValidationError: an invalid setting (the field named).
        ValueError: invalid seats (``patient='llm' needs patient_model``), an unknown
            protocol or preset, a setting of the PettingZoo game only.
        TypeError: ``env_config`` with a keyword that differs from a value it sets.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(
        self,
        dataset: str | None = None,
        *,
        env_config: EnvConfig | None = None,
        cases: list[Case] | None = None,
        patient: Any = None,
        patient_model: Any = None,
        judge: Any = None,
        judge_model: Any = None,
        examiner: Any = None,
        examiner_model: Any = None,
        **overrides: Any,
    ) -> None:
        if dataset is not None:
            overrides["dataset"] = dataset
        self.env_config = settings = EnvConfig.merge(env_config, overrides,
                                                     caller=type(self).__name__)
        for name in ("fidelity_weight", "max_steps"):
            if not is_default_field(name, getattr(settings, name)):
                raise ValueError(f"{name} is a setting of the PettingZoo game "
                                 "(clinenv.multiagent), not of EGIPEnv")
        self.protocol, self.config = settings.protocol_name, settings.protocol_config
        if examiner is None:
            examiner = settings.preset_examiner
        self._native = self.protocol != "egip"
        self.pool = CasePool.get(settings.dataset, cases=cases, data_dir=settings.data_dir,
                                 disclosure=settings.disclosure,
                                 allow_download=settings.allow_download,
                                 verify=settings.verify)
        if not self._native:  # the menu setting (off by default: "keep")
            self.pool = self.pool.with_target_in_menu(self.config.target_in_menu)
        # plain attributes, read by the step
        self.observation_format = settings.observation_format
        self.max_exams = settings.max_exams
        self.max_text_chars = settings.max_text_chars
        self.invalid_action_penalty = settings.invalid_action_penalty
        self.exam_cost = settings.exam_cost
        self.render_mode = settings.render_mode
        self.reward_spec = settings.reward_spec
        self.patient = make_patient(patient, patient_model, bias=settings.patient_bias,
                                    persona=settings.patient_persona)
        self.judge = make_judge(judge, judge_model,
                                strict=self._native and self.config.strict_yes)
        self.examiner = make_examiner(examiner, examiner_model, native=self._native)
        self.patient_persona, self.exam_noise = settings.patient_persona, settings.exam_noise
        if self.exam_noise.active and (self._native or self.examiner is not None):
            raise ValueError(f"exam_noise={self.exam_noise.to_dict()!r} applies to record "
                             "lookup O under EGIP (examiner=None or 'lookup'), not to "
                             + ("a native protocol's examiner" if self._native
                                else f"examiner={type(self.examiner).__name__}"))
        self._judge_takes_seed = accepts_seed(self.judge)
        self._judge_seed: int | None = None
        self.observation_space = spaces.Dict({
            "text": UnicodeText(settings.max_text_chars),
            "exam_mask": spaces.Box(0, 1, (settings.max_exams,), dtype=np.int8),
        })
        # Actions may carry long reasoning blocks; the visible part is cut to
        # config.max_action_chars after the reasoning is removed.
        self.action_space = UnicodeText(settings.max_text_chars)
        shaping = dict(exam_cost=settings.exam_cost,
                       invalid_action_penalty=settings.invalid_action_penalty,
                       observation_format=settings.observation_format,
                       reward_spec=settings.reward_spec)
        if self._native:
            self.loop: Loop = NativeLoop(self.protocol, self.config,
                                         judged=self.judge is not None, **shaping)
        else:
            self.loop = EGIPLoop(self.config, judged=self.judge is not None,
                                 examiner="lookup" if self.examiner is None else "agent",
                                 **shaping)
        self.runtime: EGIPRuntime | NativeRuntime | None = None
        self._last_obs_text = ""
        self._final: dict[str, Any] = {}
        self._flagged_replies: list[dict[str, Any]] = []
        self._max_rounds: int | None = None

    # ------------------------------------------------------------------ API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start an episode.

        Args:
            seed: seeds ``self.np_random``; the case is drawn from it unless pinned.
            options: ``{"case_id": id_or_index}`` pins the case (a ``case_id`` string or
                a 0-based index into the dataset); ``{"max_rounds": T}`` (EGIP only, an
                int 1..``acquisition_rounds``) caps this episode's acquisition rounds at
                T (the view counts ``Round k of T``; the record keeps ``max_rounds``), a
                round budget a trainer's row carries (:mod:`clinenv.integrations.
                curriculum`); absent or ``None``: the configured T, the episode
                unchanged.

        Raises:
            KeyError: an unknown ``case_id``.
            IndexError: a case index out of range.
            ValueError: a bad ``max_rounds`` (not an int in 1..T, or under a native
                protocol), before anything is reset.
        """
        options = options or {}
        max_rounds = self._max_rounds_option(options.get("max_rounds"))
        super().reset(seed=seed)
        if options.get("case_id") is not None:
            case = self.pool.case(options["case_id"])
        else:
            case = self.pool.cases[int(self.np_random.integers(len(self.pool.cases)))]
        prepared = self.pool.prepared(case, **self.loop.matching)
        text = (self.loop.start(prepared) if max_rounds is None
                else self.loop.start(prepared, max_rounds=max_rounds))
        self.runtime = self.loop.runtime
        self._max_rounds = max_rounds
        self._final = {}  # an episode cut by a judge error never shows the last outcome
        self._flagged_replies = []
        # simulator seeds, drawn after the case
        self._judge_seed = reset_seats(self.patient, self.examiner, self.np_random,
                                       self._judge_takes_seed)
        if self.exam_noise.active:  # drawn last: without noise nothing is drawn
            self.runtime.noise = ExamNoise(self.exam_noise,
                                           int(self.np_random.integers(2**31 - 1)),
                                           case.case_id)
        return self._emit(text, action_kind=None)

    def _max_rounds_option(self, value: Any) -> int | None:
        """The reset option ``max_rounds`` checked (:meth:`reset`); ``None`` if absent.

        Raises:
            ValueError: not an int in 1..``config.acquisition_rounds``, or a native
                protocol (whose turn limit is ``max_turns``).
        """
        if value is not None and self._native:
            raise ValueError(f"reset option max_rounds: an EGIP option; the {self.protocol} "
                             "protocol limits turns with max_turns=")
        return check_max_rounds(value, self.config.acquisition_rounds)

    def step(self, action: str):
        """Apply one doctor action (docs/environments.md). Never raises on any text.

        The patient answers through its sync ``reply`` and the judge through ``judge``;
        no event loop is used, so this is safe inside a running loop.

        Raises:
            gymnasium.error.ResetNeeded: no episode (call ``reset`` first).
            TypeError: the patient, judge or examiner is async-only (no sync ``reply``,
                ``judge`` or ``measure``); use :meth:`astep`.
            clinenv.llm.base.BackendError: an LLM patient's or judge's backend failed
                after its retries (rollouts record the episode as an error line).
        """
        check_sync_seats(self.patient, self.judge, self.examiner)
        pending = self._route(action)
        fill_seats(self, pending, self._judge_kwargs())
        return self._finish(pending)

    async def astep(self, action: str):
        """:meth:`step` for asyncio: awaits the patient's ``areply`` and the judge's
        ``ajudge`` when they have them (else calls ``reply`` / ``judge``).

        Same semantics, return value and errors as :meth:`step` (one implementation:
        :meth:`_route`, then the simulator, then :meth:`_finish`); many episodes can run
        at once in one loop (:mod:`clinenv.runs.concurrent`).
        """
        pending = self._route(action)
        await afill_seats(self, pending, self._judge_kwargs())
        return self._finish(pending)

    def drain_llm_calls(self) -> list[dict[str, Any]]:
        """Call records of the LLM patient, judge and measurement agent since the last
        drain, then forget them.

        Each record is the agent's ``drain_calls()`` entry (a
        :meth:`clinenv.llm.base.ChatResult.to_log` dict: backend, model, tokens,
        latency...) with ``agent`` set to ``"patient"``, ``"judge"`` or ``"examiner"``.
        Non-deterministic (timings), so it goes to the run log's ``llm`` field, never into
        ``info``. Empty for simulators without ``drain_calls`` (the retrieval patient,
        the scorer, the record reader).
        """
        return drain_seat_calls(self._seats())

    @property
    def has_llm_agents(self) -> bool:
        """The patient, judge or examiner records model calls (has ``drain_calls``)."""
        return any(callable(getattr(a, "drain_calls", None)) for _, a in self._seats())

    def _seats(self) -> tuple[tuple[str, Any], ...]:
        seats = (("patient", self.patient), ("judge", self.judge))
        return seats if self.examiner is None else (*seats, ("examiner", self.examiner))

    # ----------------------------------------------------------- step pieces
    def _judge_kwargs(self) -> dict[str, Any]:
        """``{"seed": ...}`` for a judge that takes a seed (drawn at reset), else ``{}``."""
        return {"seed": self._judge_seed} if self._judge_takes_seed else {}

    def _route(self, action: Any) -> PendingStep:
        """First half of a step: parse ``action`` and update the runtime.

        Examiner answers (record lookup O) and interface feedback are applied here; what
        needs a simulator (the patient's reply, the judge's verdict) is returned in the
        :class:`PendingStep` for the caller to fill in.
        """
        rt = self.runtime
        if rt is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if not isinstance(action, str):
            action = "" if action is None else str(action)
        if rt.phase == "done":
            return PendingStep(since=len(rt.history), phase="done")
        return self.loop.route(action)

    def _finish(self, pending: PendingStep):
        """Second half of a step: apply the simulator's answer; the 5-tuple of ``step``."""
        rt = self.runtime
        assert rt is not None
        if pending.phase == "done":
            obs, info = self._emit(None, action_kind="after_end")
            info.update((k, copy.deepcopy(v)) for k, v in self._final.items()
                        if k != "reward_components")
            return obs, 0.0, True, False, info
        step = self.loop.finish(pending)
        flags = self._reply_flags(rt.turn) if step.patient_replied else None
        obs, info = self._emit(step.text, action_kind=step.action_kind,
                               reasoning=step.reasoning)
        if flags is not None:
            info["patient_flags"] = flags
        if step.terminated:
            self._final = step.outcome
            info.update(copy.deepcopy(self._final))  # a copy: the record keeps its own
        return obs, step.reward, step.terminated, False, info

    def _view_text(self) -> str:
        """The complete doctor view x_t of the current state (the loop's)."""
        return self.loop.view()

    def _reply_flags(self, turn: int) -> list[str] | None:
        """The flags of the patient's latest reply (``last_flags``), or ``None`` for
        a patient that reports none; a flagged reply is kept for the episode record."""
        flags = patient_flags(self.patient)
        if flags:
            self._flagged_replies.append({"turn": turn, "flags": list(flags)})
        return flags

    @property
    def _reports_flags(self) -> bool:
        return reports_flags(self.patient)

    def render(self) -> str | None:
        """``"ansi"``: the transcript so far (history and, at the end, the answer)."""
        if self.render_mode != "ansi" or self.runtime is None:
            return None
        rt = self.runtime
        head = f"Case {rt.case.case_id} ({rt.case.dataset}), phase {rt.phase}, round {rt.turn}"
        return head + "\n" + render_history(rt.history) + "\n"

    # -------------------------------------------------------------- helpers
    def episode_record(self) -> dict[str, Any]:
        """JSON-ready record of the current episode: events, evidence and outcome.

        Keys: ``case_id``, ``dataset``, ``phase``, ``turns``, ``n_exams_requested``,
        ``invalid_actions``, ``stopped_early``, ``events``, ``evidence``, ``answer``,
        ``case_flags``, ``case_strata``; ``max_rounds`` when the reset option set it;
        with a flag-reporting patient (the LLM patient)
        ``patient_flags``, the flagged replies so far as ``[{"turn": int, "flags":
        [str, ...]}, ...]`` (``[]`` when none; docs/environments.md). Once the
        episode is over the record also holds the outcome keys of ``info`` and the
        reference target Y (``target``) for post-hoc evaluation; never pass a record to
        an agent.
        """
        rt = self.runtime
        if rt is None:
            raise gym.error.ResetNeeded("no episode: call reset() first")
        record = {
            "case_id": rt.case.case_id,
            "dataset": rt.case.dataset,
            "phase": rt.phase,
            "turns": rt.turn,
            "n_exams_requested": len(rt.requested),
            "invalid_actions": rt.invalid_actions,
            "stopped_early": rt.stopped_early,
            "events": [event_to_dict(e) for e in rt.history],
            "evidence": rt.evidence().to_dict(),
            "answer": rt.answer,
            "case_flags": case_flags(rt.case, self.env_config.patient_bias),
            "case_strata": {key: rt.case.metadata[key] for key in STRATA_KEYS
                            if key in rt.case.metadata},
        }
        if self.loop.protocol != "egip":
            record["protocol"] = self.loop.protocol
        if self._max_rounds is not None:  # the reset option (absent: no key)
            record["max_rounds"] = self._max_rounds
        if self._reports_flags:
            record["patient_flags"] = [{"turn": e["turn"], "flags": list(e["flags"])}
                                       for e in self._flagged_replies]
        if rt.phase == "done":
            record.update(copy.deepcopy(self._final))  # never the dicts info handed out
            # Y, for post-hoc evaluation (judges, embedding similarity); records are
            # written after the episode and never shown to an agent.
            record["target"] = rt.case.target.text
        return record

    def reward_components(self, record: Mapping[str, Any] | None = None) -> RewardComponents:
        """The reward components (:mod:`clinenv.reward_components`) of ``record``
        (default: the current episode, finished or not; an unfinished one gets
        diagnosis 0 and format 0) on the current episode's case, with this
        environment's exam costs; ``self.reward_spec.reward(...)`` is its spec reward
        (without the legacy per-step terms).

        Raises:
            gymnasium.error.ResetNeeded: no episode.
        """
        rt = self.runtime
        if rt is None:
            raise gym.error.ResetNeeded("no episode: call reset() first")
        if record is None:
            record = runtime_record(rt, protocol=self.loop.protocol, outcome=self._final)
        return self.reward_spec.components(record, rt.case)

    def _emit(self, text: str | None, *, action_kind: str | None,
              reasoning: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """The observation of ``text`` and the ``info`` that describes it, in that order,
        so ``info["text_clipped"]`` is the clipping of this very observation. ``None``
        repeats the last observation text, with its clipping."""
        if text is None:
            observation = {"text": self._last_obs_text,
                           "exam_mask": exam_mask(self.runtime, self.max_exams)}
        else:
            observation = self._observation(text)
        return observation, self._info(action_kind=action_kind, reasoning=reasoning)

    def _observation(self, text: str) -> dict[str, Any]:
        text, self._clipped = clip_text(text, self.max_text_chars)
        self._last_obs_text = text
        return {"text": text, "exam_mask": exam_mask(self.runtime, self.max_exams)}

    def _info(self, *, action_kind: str | None, reasoning: str | None = None) -> dict[str, Any]:
        assert self.runtime is not None
        info = doctor_info(self.runtime, action_kind=action_kind, text_clipped=self._clipped,
                           reasoning=reasoning)
        info.update(self.loop.info_keys())
        return info

