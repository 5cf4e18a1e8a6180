"""The EGIP Gymnasium environment: a doctor acquires evidence, then decides.

One episode is one case. The doctor (the agent) acts in text:

- acquisition phase (T rounds, EGIP default 19): ask the patient a question, or request
  an examination (``REQUEST TEST: <id or name>``); the built-in patient simulator
  answers from P, the examiner by record lookup O;
- decision phase (one step): the observation is the evidence interface e_T and the
  action is the terminal answer (``DIAGNOSIS READY: <diagnosis>``), which is scored
  against Y and ends the episode.

Spaces (DESIGN.md, "Protocol and environments"):

- observation: ``Dict(text=UnicodeText(max_text_chars), exam_mask=Box(0, 1, (max_exams,),
  int8))``. ``text`` is the complete doctor view x_t (``observation_format="view"``) or
  only what is new (``"delta"``). ``exam_mask[i] == 1`` iff catalog entry ``i`` exists
  and has not been requested (all zeros without a menu);
- action: ``UnicodeText(max_action_chars)``; any string is accepted, invalid text gets
  interface feedback, never an exception.

``info`` holds only deterministic values (no timings or token counts): ``case_id``,
``dataset``, ``phase``, ``turn``, ``menu`` (list of ``{"id", "name"}``), ``candidates``
(K, doctor-visible, or ``None``),
``n_exams_requested``, ``invalid_actions``, ``action_kind``, ``text_clipped`` and, when
present, ``reasoning``; at the end also ``answer``, ``verdict`` (``correct`` / ``wrong``
/ ``unscored``), ``correct``, ``abstained`` and ``match_score`` (the scorer's 0-100
string similarity of the answer to the target, not an embedding similarity).
"""

from __future__ import annotations

from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from clinenv import rewards
from clinenv.case_pool import CasePool
from clinenv.cases import Case
from clinenv.protocol.config import ProtocolConfig
from clinenv.protocol.history import event_to_dict
from clinenv.protocol.render import (
    HistoryRenderer,
    render_delta,
    render_doctor_view,
    render_history,
)
from clinenv.protocol.runtime import EGIPRuntime
from clinenv.scoring import score_answer
from clinenv.spaces import UnicodeText, clip_text

#: Case metadata keys copied into episode records for stratified evaluation (e.g. the
#: NEJM_Ext question type, EGIP appendix F).
STRATA_KEYS = ("question_type", "specialty")
DEFAULT_MAX_EXAMS = 64
DEFAULT_MAX_TEXT_CHARS = 65_536


class EGIPEnv(gym.Env):
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
        patient: patient simulator with ``reply(PatientView) -> str``; default the
            deterministic retrieval patient.
        invalid_action_penalty: non-negative amount subtracted from the reward per invalid
            action (default 0).
        exam_cost: non-negative amount subtracted per examination test returned (a
            group request costs one per test; default 0, i.e. no cost).
        render_mode: ``None`` or ``"ansi"``.
        **protocol: :class:`~clinenv.protocol.config.ProtocolConfig` fields
            (``acquisition_rounds``, ``menu_limit``, ``show_menu``...).

    Raises:
        clinenv.errors.DatasetNotFoundError: the dataset is not available (at once, at
            construction, with instructions to get it).
        pydantic.ValidationError: an invalid protocol setting.
        ValueError: invalid environment arguments.
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
        invalid_action_penalty: float = rewards.INVALID_ACTION_PENALTY,
        exam_cost: float = rewards.EXAM_COST,
        render_mode: str | None = None,
        **protocol: Any,
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
        self.config = ProtocolConfig(**protocol)
        self.pool = CasePool.get(dataset, cases=cases, data_dir=data_dir,
                                 disclosure=disclosure, allow_download=allow_download)
        self.observation_format = observation_format
        self.max_exams = max_exams
        self.max_text_chars = max_text_chars
        self.invalid_action_penalty = float(invalid_action_penalty)
        self.exam_cost = float(exam_cost)
        self.render_mode = render_mode
        if patient is None:
            from clinenv.agents.patient_retrieval import RetrievalPatient

            patient = RetrievalPatient()
        self.patient = patient
        self.observation_space = spaces.Dict({
            "text": UnicodeText(max_text_chars),
            "exam_mask": spaces.Box(0, 1, (max_exams,), dtype=np.int8),
        })
        # Actions may carry long reasoning blocks; the visible part is cut to
        # config.max_action_chars after the reasoning is removed.
        self.action_space = UnicodeText(max_text_chars)
        self.runtime: EGIPRuntime | None = None
        self._last_obs_text = ""

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
        prepared = self.pool.prepared(case, accept=self.config.exam_accept,
                                      suggest=self.config.exam_suggest)
        self.runtime = EGIPRuntime(prepared, self.config)
        self._history_text = HistoryRenderer()
        text = render_doctor_view(self.runtime, self._history_text)
        return self._observation(text), self._info(action_kind=None)

    def step(self, action: str):
        """Apply one doctor action; see the module docstring. Never raises on any text."""
        rt = self.runtime
        if rt is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if not isinstance(action, str):
            action = "" if action is None else str(action)
        since = len(rt.history)
        reward = 0.0
        if rt.phase == "done":
            info = self._info(action_kind="after_end")
            info.update(self._final)
            return self._observation(self._last_obs_text), 0.0, True, False, info
        if rt.phase == "decide":
            parsed = rt.submit_answer(action)
            score = score_answer(rt.answer, rt.case)
            reward = {"correct": rewards.CORRECT, "wrong": rewards.WRONG}.get(
                score.verdict, rewards.UNSCORED)
            self._final = {"answer": rt.answer, "verdict": score.verdict,
                           "correct": score.verdict == "correct",
                           "abstained": score.abstained,
                           "match_score": float(score.similarity)}
            info = self._info(action_kind="answer", reasoning=parsed.reasoning)
            info.update(self._final)
            text = self._last_obs_text if self.observation_format == "view" else ""
            return self._observation(text), reward, True, False, info
        invalid_before = rt.invalid_actions
        routing = rt.route(action)
        if routing.to == "patient":
            reply = self.patient.reply(rt.patient_view(routing.question or ""))
            rt.answer_patient(routing, reply)
        elif routing.to == "examiner":
            rt.answer_exam(routing)
            reward -= self.exam_cost * len(routing.entries)
        reward -= self.invalid_action_penalty * (rt.invalid_actions - invalid_before)
        if self.observation_format == "view":
            text = render_doctor_view(rt, self._history_text)
        else:
            text = render_delta(rt, since)
        info = self._info(action_kind=routing.action.kind, reasoning=routing.action.reasoning)
        return self._observation(text), float(reward), False, False, info

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

        Once the episode is over the record also holds the reference target Y
        (``target``) for post-hoc evaluation; never pass a record to an agent.
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
        if rt.phase == "done":
            record.update(self._final)
            # Y, for post-hoc evaluation (judges, embedding similarity); records are
            # written after the episode and never shown to an agent.
            record["target"] = rt.case.target.text
        return record

    def _observation(self, text: str) -> dict[str, Any]:
        text, self._clipped = clip_text(text, self.max_text_chars)
        self._last_obs_text = text
        mask = np.zeros(self.max_exams, dtype=np.int8)
        rt = self.runtime
        if rt is not None and rt.config.show_menu and rt.phase == "acquire":
            done = set(rt.requested)
            for entry in rt.catalog.entries[: self.max_exams]:
                if entry.exam_id not in done:
                    mask[entry.index] = 1
        return {"text": text, "exam_mask": mask}

    def _info(self, *, action_kind: str | None, reasoning: str | None = None) -> dict[str, Any]:
        rt = self.runtime
        assert rt is not None
        info: dict[str, Any] = {
            "case_id": rt.case.case_id,
            "dataset": rt.case.dataset,
            "phase": rt.phase,
            "turn": rt.turn,
            "menu": [{"id": e.exam_id, "name": e.label} for e in rt.menu()]
            if rt.phase == "acquire" else [],
            "candidates": None if rt.case.candidates is None else list(rt.case.candidates),
            "n_exams_requested": len(rt.requested),
            "invalid_actions": rt.invalid_actions,
            "action_kind": action_kind,
            "text_clipped": self._clipped,
        }
        if reasoning:
            info["reasoning"] = reasoning
        return info
