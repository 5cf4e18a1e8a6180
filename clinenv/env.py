"""The EGIP Gymnasium environment: a doctor acquires evidence, then decides.

One episode is one case. The doctor (the agent) acts in text:

- acquisition phase (T rounds, EGIP default 19): ask the patient a question, or request
  an examination (``REQUEST TEST: <id or name>``); the built-in patient simulator
  answers from P, the examiner by record lookup O;
- decision phase (one step): the observation is the evidence interface e_T and the
  action is the terminal answer (``DIAGNOSIS READY: <diagnosis>``), which is scored
  against Y and ends the episode.

Spaces (EGIP section 3.2, the doctor view x_t = R(s0, K, h_t, menu)):

- observation: ``Dict(text=UnicodeText(max_text_chars), exam_mask=Box(0, 1, (max_exams,),
  int8))``. ``text`` is the complete doctor view x_t (``observation_format="view"``) or
  only what is new (``"delta"``). ``exam_mask[i] == 1`` iff catalog entry ``i`` exists
  and has not been requested (all zeros without a menu);
- action: ``UnicodeText(max_text_chars)``; any string is accepted (the visible part is
  cut to the protocol's ``max_action_chars`` once reasoning is removed), invalid text
  gets interface feedback, never an exception.

``exam_mask`` and ``info`` are built by :mod:`clinenv.doctor_view` (shared with the
PettingZoo doctor seat). ``info`` holds only deterministic values (no timings or token
counts): ``case_id``, ``dataset``, ``phase``, ``turn``, ``menu`` (list of ``{"id",
"name"}``), ``candidates`` (K, doctor-visible, or ``None``), ``n_exams_requested``,
``invalid_actions``, ``action_kind``, ``text_clipped`` and, when present,
``reasoning``; at the end also ``answer``, ``verdict`` (``correct`` / ``wrong`` /
``unscored``), ``correct``, ``abstained``, ``match_score`` (the deterministic scorer's
0-100 string similarity of the answer to the target, not an embedding similarity) and
``scorer`` (``"deterministic"`` or ``"llm-judge"``); with a judge also ``judge_verdict``
(``"correct"`` / ``"wrong"`` / ``"unparsed"``, ``None`` when the judge was not asked).

``info["patient_flags"]`` (field-bug-reports B16) is present on every step that a
flag-reporting patient answered — the LLM patient, or any patient object with a
``last_flags`` attribute (the flags of its latest reply): a list of strings, ``[]`` for a
clean reply, else among ``"speaks_as_doctor"`` (the reply spoke as the doctor; only the
patient's own words were kept), ``"repeats_own_reply"`` (it repeated an earlier reply of
its own word for word, the opening included) and ``"empty_reply"``. The flags depend on
the reply's text only, so identical replies give identical infos. The episode record
keeps the flagged replies as ``patient_flags``: ``[{"turn", "flags"}, ...]``.

What the environment cannot see is not in ``info``: a doctor reply cut by ``max_tokens``
(field-bug-reports B04a) comes from the doctor's own model, so it is flagged in the
doctor's call records — the run log's ``llm.calls[*].truncated`` (and ``flags``
``"empty_reply"`` when nothing visible was left; :mod:`clinenv.agents.llm_doctor`) —
while the environment only receives the (empty) action and answers it with interface
feedback.

Simulators and judges (offline and deterministic by default, LLM-backed ones opt-in;
built by :mod:`clinenv.simulators`):

- ``patient``: the deterministic retrieval patient (default, ``"retrieval"``), ``"llm"``
  with ``patient_model=`` (an :class:`~clinenv.agents.llm_patient.LLMPatient` that sees
  only the patient view: P and the permitted dialogue, never M or Y), or any object with
  ``reply(PatientView) -> str`` (and optionally ``async areply``);
- ``judge``: ``None`` (the deterministic scorer, :func:`clinenv.scoring.score_answer`),
  ``"llm"`` with ``judge_model=`` (an :class:`~clinenv.agents.judge.LLMJudge`), or any
  object with ``judge(answer, target)`` (and optionally ``async ajudge``) returning a
  verdict object with ``.verdict`` in ``correct`` / ``wrong`` / ``unparsed``.

- ``examiner``: record lookup O (default under EGIP, answered inside the runtime), the
  deterministic record reader ``"reader"``, the LLM measurement agent ``"llm"`` with
  ``examiner_model=``, or any object with ``measure(MeasurementView) -> str`` (and
  optionally ``async ameasure``); see :mod:`clinenv.agents.measurement_agent`. Under
  EGIP a measurement agent is the "native measurement access" ablation (EGIP Table 3A):
  validated requests go to it, its answer is recorded with availability ``"generated"``.

Protocols (``protocol=`` or ``preset=``, :mod:`clinenv.protocol.presets`): ``"egip"``
(everything above), or the native loops ``"agentclinic"`` and ``"medagentsim"``
(:mod:`clinenv.protocol.native`, settings :class:`~clinenv.protocol.native_config.
NativeConfig`; their step halves and ``info`` keys in :mod:`clinenv.native_env`).
``docs/protocols.md`` lists every difference from EGIP with the setting that controls it.
Verdicts (the scorer's, a judge's ruling) follow :mod:`clinenv.terminal_outcome` in
both.

``step`` and ``astep`` share one implementation: :meth:`EGIPEnv._route` (parse the
action, update the runtime, say which simulator must answer), the patient's reply, the
examiner's answer or the judge's verdict (sync ``reply``/``measure``/``judge`` in
``step``, awaited ``areply``/``ameasure``/``ajudge`` in ``astep`` when present), then
:meth:`EGIPEnv._finish` (observation, reward, info).
``step`` never touches an event loop, so it is safe inside a running loop (a notebook, an
async trainer) with the LLM patient, whose sync ``reply`` uses the model's sync client
(field-bug-reports B10); a patient, judge or examiner that is async-only (``areply``
without ``reply``, ``ajudge`` without ``judge``, ``ameasure`` without ``measure``)
makes ``step`` raise a :class:`TypeError` saying to use ``await
env.unwrapped.astep(action)``, before the episode changes. Model call records (timings,
tokens) of the LLM patient and judge are collected with :meth:`EGIPEnv.drain_llm_calls`
for the run log and never appear in ``info``. The environment does not own
``patient_model`` / ``judge_model``: close them yourself (``with model: ...``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from clinenv import rewards
from clinenv.case_pool import CasePool
from clinenv.cases import Case
from clinenv.doctor_view import (
    answer_outcome,
    doctor_info,
    exam_mask,
    patient_flags,
    reports_flags,
)
from clinenv.native_env import NativeSteps
from clinenv.protocol.config import ProtocolConfig
from clinenv.protocol.history import event_to_dict
from clinenv.protocol.measurement_view import MeasurementView
from clinenv.protocol.native import NativeRouting, NativeRuntime
from clinenv.protocol.native_config import NativeConfig
from clinenv.protocol.native_render import render_native_view
from clinenv.protocol.presets import resolve_preset
from clinenv.protocol.render import (
    HistoryRenderer,
    render_delta,
    render_doctor_view,
    render_history,
)
from clinenv.protocol.runtime import EGIPRuntime, Routing
from clinenv.protocol.views import PatientView
from clinenv.scoring import Score, score_answer
from clinenv.simulators import accepts_seed, make_examiner, make_judge, make_patient
from clinenv.spaces import UnicodeText, clip_text
from clinenv.terminal_outcome import JUDGE_TO_VERDICT, NOT_JUDGED, terminal_outcome

#: Case metadata keys copied into episode records for stratified evaluation (e.g. the
#: NEJM_Ext question type, EGIP appendix F).
STRATA_KEYS = ("question_type", "specialty")
DEFAULT_MAX_EXAMS = 64
DEFAULT_MAX_TEXT_CHARS = 65_536
__all__ = ["DEFAULT_MAX_EXAMS", "DEFAULT_MAX_TEXT_CHARS", "EGIPEnv", "JUDGE_TO_VERDICT",
           "PROTOCOLS", "STRATA_KEYS"]
#: ``protocol=`` values: EGIP (default) and the native loops (:mod:`clinenv.protocol.native`).
PROTOCOLS = ("egip", "agentclinic", "medagentsim")


class EGIPEnv(NativeSteps, gym.Env):
    """Gymnasium environment for EGIP diagnosis episodes.

    Args:
        dataset: a registry name (``"demo"``, ``"medqa"``, ``"nejm"``...) or a path to a
            case file; ignored when ``cases`` is given.
        cases: explicit cases to draw from (overrides ``dataset``).
        data_dir: directory holding the dataset files (else ``CLINENV_DATA_DIR``...).
        disclosure: NEJM objective disclosure (``"question"``, ``"presentation"``,
            ``"vignette"``); see :mod:`clinenv.datasets`.
        allow_download: let the loader download a missing public dataset.
        observation_format: ``"view"`` (complete x_t each step) or ``"delta"``.
        max_exams: length of ``exam_mask`` (catalog entries beyond it stay requestable by
            name but have no mask slot).
        max_text_chars: observation text limit; longer text is clipped (noted in info).
        patient: ``None`` or ``"retrieval"`` (the deterministic retrieval patient),
            ``"llm"`` (an LLM patient over ``patient_model``), or an object with
            ``reply(PatientView) -> str`` (optionally ``async areply``, ``reset(seed=)``
            and ``last_flags``, the flags of its latest reply for
            ``info["patient_flags"]``). A patient with ``reset`` is reset at every ``reset`` with
            a seed drawn from ``self.np_random`` after the case (B08c); so, without
            a pinned case, an LLM patient changes the case sequence of unseeded resets.
        patient_model: the :class:`~clinenv.llm.base.ChatModel` of ``patient="llm"``
            (required there, refused otherwise).
        judge: ``None`` or ``"deterministic"`` (the deterministic scorer), ``"llm"`` (an
            LLM judge over ``judge_model``), or an object with ``judge(answer, target)``
            (optionally ``async ajudge``). Non-answers and abstentions are never sent to
            the judge: they stay unscored. A judge whose method takes ``seed=`` gets one
            drawn from ``self.np_random`` at reset (after the patient's).
        judge_model: the :class:`~clinenv.llm.base.ChatModel` of ``judge="llm"``.
        invalid_action_penalty: non-negative amount subtracted from the reward per invalid
            action (default 0).
        exam_cost: non-negative amount subtracted per examination test returned under
            EGIP (a group request costs one per test), per measurement request under a
            native protocol (the whole utterance is one request, whatever it names);
            default 0, i.e. no cost.
        render_mode: ``None`` or ``"ansi"``.
        protocol: ``"egip"`` (default), ``"agentclinic"`` or ``"medagentsim"`` (the
            native loops; see the module docstring and ``docs/protocols.md``).
        preset: a named set of these kwargs (:data:`clinenv.protocol.presets.PRESETS`:
            ``"egip"``, ``"egip-no-menu"``, ``"egip-native-measurement"``,
            ``"agentclinic"``, ``"medagentsim"``); explicit kwargs win.
        examiner: ``None`` (record lookup O under EGIP; the record reader under a native
            protocol), ``"lookup"``, ``"reader"`` (the deterministic offline stand-in of
            the native measurement agent), ``"llm"`` (the LLM measurement agent over
            ``examiner_model``), or an object with ``measure(MeasurementView) -> str``
            (optionally ``async ameasure`` and ``reset(seed=)``). Under EGIP any
            examiner but lookup is the "native measurement access" ablation: validated
            requests go to it and its answer is recorded as ``"generated"``.
        examiner_model: the :class:`~clinenv.llm.base.ChatModel` of ``examiner="llm"``.
        **settings: :class:`~clinenv.protocol.config.ProtocolConfig` fields under EGIP
            (``acquisition_rounds``, ``menu_limit``, ``show_menu``...), or
            :class:`~clinenv.protocol.native_config.NativeConfig` fields under a native
            protocol (``max_turns``, ``normal_readings``, ``strict_yes``...).

    Raises:
        clinenv.errors.DatasetNotFoundError: the dataset is not available (at once, at
            construction, with instructions to get it).
        pydantic.ValidationError: an invalid protocol setting.
        ValueError: invalid environment arguments (the message names the argument,
            e.g. ``patient='llm' needs patient_model``), an unknown protocol or preset.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(
        self,
        dataset: str = "demo",
        *,
        cases: list[Case] | None = None,
        data_dir: str | None = None,
        disclosure: str = "presentation",
        allow_download: bool = False,
        observation_format: Literal["view", "delta"] = "view",
        max_exams: int = DEFAULT_MAX_EXAMS,
        max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
        patient: Any = None,
        patient_model: Any = None,
        judge: Any = None,
        judge_model: Any = None,
        invalid_action_penalty: float = rewards.INVALID_ACTION_PENALTY,
        exam_cost: float = rewards.EXAM_COST,
        render_mode: str | None = None,
        protocol: str | None = None,
        preset: str | None = None,
        examiner: Any = None,
        examiner_model: Any = None,
        **settings: Any,
    ) -> None:
        if observation_format not in ("view", "delta"):
            raise ValueError(f"observation_format must be 'view' or 'delta', "
                             f"got {observation_format!r}")
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if max_exams < 1 or max_text_chars < 256:
            raise ValueError("max_exams must be >= 1 and max_text_chars >= 256")
        if invalid_action_penalty < 0 or exam_cost < 0:
            raise ValueError("invalid_action_penalty and exam_cost are non-negative amounts "
                             "subtracted from the reward")
        explicit = {k: v for k, v in (("protocol", protocol), ("examiner", examiner))
                    if v is not None}
        settings = resolve_preset(preset, {**settings, **explicit})
        self.protocol = settings.pop("protocol", "egip")
        examiner = settings.pop("examiner", None)
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {self.protocol!r}")
        self._native = self.protocol != "egip"
        self.config: ProtocolConfig | NativeConfig
        if self._native:
            if "acquisition_rounds" in settings:
                raise ValueError(f"protocol {self.protocol!r} counts doctor turns: use "
                                 "max_turns= (default 20) instead of acquisition_rounds=")
            settings.setdefault("final_turn", "discussion" if self.protocol == "medagentsim"
                                else "notice")
            self.config = NativeConfig(**settings)
        else:
            self.config = ProtocolConfig(**settings)
        self.pool = CasePool.get(dataset, cases=cases, data_dir=data_dir,
                                 disclosure=disclosure, allow_download=allow_download)
        self.observation_format = observation_format
        self.max_exams = max_exams
        self.max_text_chars = max_text_chars
        self.invalid_action_penalty = float(invalid_action_penalty)
        self.exam_cost = float(exam_cost)
        self.render_mode = render_mode
        self.patient = make_patient(patient, patient_model)
        self.judge = make_judge(judge, judge_model,
                                strict=self._native and self.config.strict_yes)
        self.examiner = make_examiner(examiner, examiner_model, native=self._native)
        self._judge_takes_seed = accepts_seed(self.judge)
        self._judge_seed: int | None = None
        self.observation_space = spaces.Dict({
            "text": UnicodeText(max_text_chars),
            "exam_mask": spaces.Box(0, 1, (max_exams,), dtype=np.int8),
        })
        # Actions may carry long reasoning blocks; the visible part is cut to
        # config.max_action_chars after the reasoning is removed.
        self.action_space = UnicodeText(max_text_chars)
        self.runtime: EGIPRuntime | NativeRuntime | None = None
        self._last_obs_text = ""
        self._final: dict[str, Any] = {}
        self._flagged_replies: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start an episode.

        Args:
            seed: seeds ``self.np_random``; the case is drawn from it unless pinned.
            options: ``{"case_id": id_or_index}`` pins the case (a ``case_id`` string or
                a 0-based index into the dataset).

        Raises:
            KeyError: an unknown ``case_id``.
            IndexError: a case index out of range.
        """
        super().reset(seed=seed)
        options = options or {}
        if options.get("case_id") is not None:
            case = self.pool.case(options["case_id"])
        else:
            case = self.pool.cases[int(self.np_random.integers(len(self.pool.cases)))]
        if self._native:
            defaults = ProtocolConfig()
            prepared = self.pool.prepared(case, accept=defaults.exam_accept,
                                          suggest=defaults.exam_suggest)
            self.runtime = NativeRuntime(prepared, self.config)
        else:
            prepared = self.pool.prepared(case, accept=self.config.exam_accept,
                                          suggest=self.config.exam_suggest)
            self.runtime = EGIPRuntime(prepared, self.config)
        self._final = {}  # an episode cut by a judge error never shows the last outcome
        self._flagged_replies = []
        self._history_text = HistoryRenderer()
        # Simulator seeds are drawn after the case, so the case of a reset never depends
        # on the simulators; the same reset seed gives the same simulator seeds (B08c).
        reset_patient = getattr(self.patient, "reset", None)
        if callable(reset_patient):
            reset_patient(seed=int(self.np_random.integers(2**31 - 1)))
        self._judge_seed = (int(self.np_random.integers(2**31 - 1))
                            if self._judge_takes_seed else None)
        reset_examiner = getattr(self.examiner, "reset", None)
        if callable(reset_examiner):  # drawn last: EGIP's lookup draws nothing here
            reset_examiner(seed=int(self.np_random.integers(2**31 - 1)))
        return self._observation(self._view_text()), self._info(action_kind=None)

    def step(self, action: str):
        """Apply one doctor action; see the module docstring. Never raises on any text.

        The patient answers through its sync ``reply`` and the judge through ``judge``;
        no event loop is used, so this is safe inside a running loop (B10).

        Raises:
            gymnasium.error.ResetNeeded: no episode (call ``reset`` first).
            TypeError: the patient, judge or examiner is async-only (no sync ``reply``,
                ``judge`` or ``measure``); use :meth:`astep`.
            clinenv.llm.base.BackendError: an LLM patient's or judge's backend failed
                after its retries (rollouts record the episode as an error line).
        """
        for agent, method in ((self.patient, "reply"), (self.judge, "judge"),
                              (self.examiner, "measure")):
            if agent is not None and not callable(getattr(agent, method, None)):
                raise TypeError(f"{type(agent).__name__} has no sync {method}(); in an "
                                "event loop use `await env.unwrapped.astep(action)`")
        pending = self._route(action)
        if pending.patient_view is not None:
            pending.reply = self.patient.reply(pending.patient_view)
        if pending.measurement_view is not None:
            pending.measurement = self.examiner.measure(pending.measurement_view)
        if pending.judged:
            pending.judgement = self.judge.judge(pending.answer, pending.target,
                                                 **self._judge_kwargs())
        return self._finish(pending)

    async def astep(self, action: str):
        """:meth:`step` for asyncio: awaits the patient's ``areply`` and the judge's
        ``ajudge`` when they have them (else calls ``reply`` / ``judge``).

        Same semantics, return value and errors as :meth:`step` (one implementation:
        :meth:`_route`, then the simulator, then :meth:`_finish`); many episodes can run
        at once in one loop (:mod:`clinenv.concurrent`).
        """
        pending = self._route(action)
        if pending.patient_view is not None:
            areply = getattr(self.patient, "areply", None)
            pending.reply = (await areply(pending.patient_view) if callable(areply)
                             else self.patient.reply(pending.patient_view))
        if pending.measurement_view is not None:
            ameasure = getattr(self.examiner, "ameasure", None)
            view = pending.measurement_view
            pending.measurement = (await ameasure(view) if callable(ameasure)
                                   else self.examiner.measure(view))
        if pending.judged:
            ajudge = getattr(self.judge, "ajudge", None)
            kwargs = self._judge_kwargs()
            pending.judgement = (await ajudge(pending.answer, pending.target, **kwargs)
                                 if callable(ajudge)
                                 else self.judge.judge(pending.answer, pending.target, **kwargs))
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
        calls: list[dict[str, Any]] = []
        for role, agent in self._seats():
            drain = getattr(agent, "drain_calls", None)
            if callable(drain):
                calls += [{"agent": role, **{k: v for k, v in call.items() if k != "agent"}}
                          for call in drain()]
        return calls

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

    def _route(self, action: Any) -> _Pending:
        """First half of a step: parse ``action`` and update the runtime.

        Examiner answers (record lookup O) and interface feedback are applied here; what
        needs a simulator (the patient's reply, the judge's verdict) is returned in the
        :class:`_Pending` for the caller to fill in.
        """
        rt = self.runtime
        if rt is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if not isinstance(action, str):
            action = "" if action is None else str(action)
        pending = _Pending(since=len(rt.history), phase=rt.phase)
        if rt.phase == "done":
            return pending
        if isinstance(rt, NativeRuntime):
            return self._route_native(rt, action, pending)
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

    def _finish(self, pending: _Pending):
        """Second half of a step: apply the simulator's answer; the 5-tuple of ``step``."""
        rt = self.runtime
        assert rt is not None
        if pending.phase == "done":
            info = self._info(action_kind="after_end")
            info.update(self._final)
            return self._observation(self._last_obs_text), 0.0, True, False, info
        if isinstance(rt, NativeRuntime):
            return self._finish_native(rt, pending)
        if pending.phase == "decide":
            score = pending.score
            assert score is not None and pending.parsed is not None
            verdict, final = terminal_outcome(
                score, pending.judgement if pending.judged else NOT_JUDGED,
                with_judge=self.judge is not None)
            reward, outcome = answer_outcome(rt, score, verdict)
            self._final = {**outcome, **final}
            info = self._info(action_kind="answer", reasoning=pending.parsed.reasoning)
            info.update(self._final)
            text = self._last_obs_text if self.observation_format == "view" else ""
            return self._observation(text), float(reward), True, False, info
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
        info = self._info(action_kind=routing.action.kind, reasoning=routing.action.reasoning)
        if flags is not None:
            info["patient_flags"] = flags
        return self._observation(text), float(pending.reward), False, False, info

    def _view_text(self) -> str:
        """The complete doctor view x_t of the current phase (reset observation)."""
        if isinstance(self.runtime, NativeRuntime):
            return render_native_view(self.runtime)
        return render_doctor_view(self.runtime, self._history_text)

    def _reply_flags(self, turn: int) -> list[str] | None:
        """The flags of the patient's latest reply (``last_flags``; B16), or ``None`` for
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
        ``case_flags``, ``case_strata``; with a flag-reporting patient (the LLM patient)
        ``patient_flags``, the flagged replies so far as ``[{"turn": int, "flags":
        [str, ...]}, ...]`` (``[]`` when none; B16, see the module docstring). Once the
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
            "case_flags": rt.case.flags.model_dump(mode="json"),
            "case_strata": {key: rt.case.metadata[key] for key in STRATA_KEYS
                            if key in rt.case.metadata},
        }
        if self._native:
            record["protocol"] = self.protocol
        if self._reports_flags:
            record["patient_flags"] = [{"turn": e["turn"], "flags": list(e["flags"])}
                                       for e in self._flagged_replies]
        if rt.phase == "done":
            record.update(self._final)
            # Y, for post-hoc evaluation (judges, embedding similarity); records are
            # written after the episode and never shown to an agent.
            record["target"] = rt.case.target.text
        return record

    def _observation(self, text: str) -> dict[str, Any]:
        text, self._clipped = clip_text(text, self.max_text_chars)
        self._last_obs_text = text
        return {"text": text, "exam_mask": exam_mask(self.runtime, self.max_exams)}

    def _info(self, *, action_kind: str | None, reasoning: str | None = None) -> dict[str, Any]:
        assert self.runtime is not None
        info = doctor_info(self.runtime, action_kind=action_kind, text_clipped=self._clipped,
                           reasoning=reasoning)
        if self._native:  # the native doctor never sees the candidate labels
            info["candidates"] = None
            info["protocol"] = self.protocol
        return info


@dataclass
class _Pending:
    """A step between :meth:`EGIPEnv._route` and :meth:`EGIPEnv._finish`.

    ``patient_view`` is set when the patient must reply (the caller stores ``reply``);
    ``measurement_view`` when the examiner (a measurement agent) must answer (the caller
    stores ``measurement``);
    ``judged`` when the judge must rule on ``answer`` against ``target`` (the caller
    stores ``judgement``).
    """

    since: int
    phase: str
    reward: float = 0.0
    routing: Routing | NativeRouting | None = None
    patient_view: PatientView | None = None
    reply: Any = None
    measurement_view: MeasurementView | None = None
    measurement: Any = None
    parsed: Any = None
    score: Score | None = None
    answer: str | None = None
    target: str | None = None
    judged: bool = False
    judgement: Any = None
