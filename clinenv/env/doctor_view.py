"""The doctor's exam mask, info and outcome: one implementation for every environment.

Shared by :class:`clinenv.env.EGIPEnv` and the PettingZoo doctor seat, so both give the
same ``exam_mask``, ``info`` keys and terminal outcome.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clinenv.env import rewards
from clinenv.protocol.runtime import EGIPRuntime
from clinenv.scoring import Score


def exam_mask(rt: EGIPRuntime | None, max_exams: int) -> np.ndarray:
    """The doctor's ``exam_mask``: ``int8`` of shape ``(max_exams,)`` (a fresh array).

    ``mask[i] == 1`` iff catalog entry ``i`` exists, has not been requested, the menu is
    shown (``show_menu``) and the episode is in the acquisition phase; all zeros
    otherwise (no episode, decision phase, after the end, or without a menu). Catalog
    entries beyond ``max_exams`` have no slot.
    """
    if rt is None or not rt.config.show_menu or rt.phase != "acquire":
        return np.zeros(max_exams, dtype=np.int8)
    # one byte per catalog entry, 1 where unrequested; cut or zero-padded to max_exams
    slots = (rt.menu_state().open_mask + bytes(max_exams))[:max_exams]
    return np.frombuffer(slots, dtype=np.int8).copy()


def doctor_info(rt: EGIPRuntime, *, action_kind: str | None, text_clipped: bool,
                reasoning: str | None = None) -> dict[str, Any]:
    """The doctor's ``info`` during an episode (a fresh dict; deterministic values only).

    Keys: ``case_id``, ``dataset``, ``phase`` (``acquire`` / ``decide`` / ``done``),
    ``turn``, ``menu`` (list of ``{"id", "name"}``; empty outside the acquisition
    phase), ``candidates`` (K or ``None``), ``n_exams_requested``, ``invalid_actions``,
    ``action_kind`` (the last doctor action's kind, ``None`` at reset), ``text_clipped``
    (this step's observation text was cut to the space's length), ``action_flags`` (the
    flags of the last doctor action, :attr:`EGIPRuntime.action_flags`: among
    ``"wrote_past_turn"``, ``"echoes_prompt"``, ``"placeholder_request"``,
    ``"placeholder_answer"``; ``[]`` at reset and for a clean action),
    ``new_observations`` (the observations of e_T acquired by the last action, as
    :meth:`~clinenv.protocol.evidence.Observation.to_dict` dicts — a Patient reply or the
    Measurement results of one request, ``[]`` at reset, after interface feedback and
    outside the acquisition phase; policy wrappers such as CDEG track the evidence state
    from it) and, when the last action carried any, ``reasoning``. The outcome keys
    (:func:`answer_outcome`) are added by the environment at the end.
    """
    info: dict[str, Any] = {
        "case_id": rt.case.case_id,
        "dataset": rt.case.dataset,
        "phase": rt.phase,
        "turn": rt.turn,
        "menu": _menu_items(rt) if rt.phase == "acquire" else [],
        "candidates": None if rt.case.candidates is None else list(rt.case.candidates),
        "n_exams_requested": len(rt.requested),
        "invalid_actions": rt.invalid_actions,
        "action_kind": action_kind,
        "text_clipped": text_clipped,
        "action_flags": list(rt.action_flags) if action_kind is not None else [],
        "new_observations": new_observations(rt) if action_kind is not None else [],
    }
    if reasoning:
        info["reasoning"] = reasoning
    return info


def _menu_items(rt: EGIPRuntime) -> list[dict[str, str]]:
    """``info["menu"]``: fresh ``{"id", "name"}`` dicts of the runtime's menu."""
    if not rt.config.show_menu:  # the native runtimes never show one
        return []
    return [{"id": exam_id, "name": label} for exam_id, label in rt.menu_state().items]


def new_observations(rt: EGIPRuntime) -> list[dict[str, Any]]:
    """The observations acquired in the current round ``rt.turn`` (fresh dicts, in order).

    Only Patient and Measurement events of the last round count (interface feedback is
    never an observation, EGIP 3.3); ids are those of e_T (``O1``, ``O2``...).
    """
    if rt.phase == "done":
        return []
    # the round's events are at the end of the history (the round that ends acquisition
    # may close with an interface event after its observations)
    turn = rt.turn
    for event in reversed(rt.history):
        if getattr(event, "turn", None) != turn:
            return []  # the round acquired nothing
        if event.source in ("patient", "measurement"):
            break
    else:
        return []
    return [o.to_dict() for o in rt.observations() if o.turn == turn]


#: ``scored_answer`` default of :func:`answer_outcome`: the runtime's answer.
_RUNTIME_ANSWER: Any = object()


def answer_outcome(rt: EGIPRuntime, score: Score, verdict: str | None = None, *,
                   scored_answer: Any = _RUNTIME_ANSWER) -> tuple[float, dict[str, Any]]:
    """The terminal reward and outcome keys of the doctor's answer.

    Args:
        rt: the runtime after :meth:`~clinenv.protocol.runtime.EGIPRuntime.submit_answer`
            (or a :class:`~clinenv.protocol.native.NativeRuntime` at its end).
        score: the deterministic scorer's :class:`~clinenv.scoring.Score` of the answer.
        verdict: the final verdict (``correct`` / ``wrong`` / ``unscored``) when a judge
            or a protocol rule replaced the scorer's; default ``score.verdict``.
        scored_answer: the text the scorer read, when it is not ``rt.answer`` (the
            native protocols: the diagnosis the moderator reads in the final utterance,
            :func:`clinenv.protocol.native.moderator_answer`, or ``None``).

    Returns:
        ``(reward, outcome)``: :data:`clinenv.env.rewards.CORRECT`, ``WRONG`` or ``UNSCORED``
        by verdict, and ``{"answer", "scored_answer", "verdict", "correct",
        "abstained", "placeholder", "answer_status", "match_score" (0-100),
        "scorer": "deterministic"}``. ``answer_status`` is ``"answer"``,
        ``"no_answer"``, ``"placeholder"`` (also for the action flag
        ``placeholder_answer``) or ``"abstained"``; ``abstained`` and ``placeholder``
        follow it. An output that is not an ``"answer"`` is unscored in U and coverage.
    """
    verdict = score.verdict if verdict is None else verdict
    reward = {"correct": rewards.CORRECT, "wrong": rewards.WRONG}.get(verdict, rewards.UNSCORED)
    status = score.status
    if status != "answer" and "placeholder_answer" in getattr(rt, "action_flags", ()):
        status = "placeholder"
    read = rt.answer if scored_answer is _RUNTIME_ANSWER else scored_answer
    return float(reward), {"answer": rt.answer, "scored_answer": read, "verdict": verdict,
                           "correct": verdict == "correct",
                           "abstained": status == "abstained",
                           "placeholder": status == "placeholder", "answer_status": status,
                           "match_score": float(score.similarity), "scorer": "deterministic"}


def reports_flags(patient: Any) -> bool:
    """Whether ``patient`` reports the flags of its replies: it has a ``last_flags``
    attribute (the LLM patient, :class:`~clinenv.agents.llm_patient.LLMPatient`, or any
    patient object with one; the retrieval patient and ``None`` have none)."""
    return hasattr(patient, "last_flags")


def patient_flags(patient: Any) -> list[str] | None:
    """The doctor's ``info["patient_flags"]`` after ``patient`` replied.

    Read right after the reply: ``patient.last_flags`` holds the flags of the latest
    reply only.

    Returns:
        ``None`` for a patient that reports no flags (:func:`reports_flags`), else a fresh
        list of strings: ``[]`` for a clean reply (``last_flags`` empty or ``None``), else
        among ``"speaks_as_doctor"``, ``"repeats_own_reply"`` and ``"empty_reply"``.
    """
    if not reports_flags(patient):
        return None
    return [str(flag) for flag in (patient.last_flags or ())]
