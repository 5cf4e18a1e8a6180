"""The simulator seats of :class:`clinenv.env.EGIPEnv`: who answers the doctor, and how.

Simulators and judges (offline and deterministic by default, LLM-backed ones opt-in;
built by :mod:`clinenv.env.simulators`):

- ``patient``: the deterministic retrieval patient (default, ``"retrieval"``), ``"llm"``
  with ``patient_model=`` (an :class:`~clinenv.agents.llm_patient.LLMPatient` that sees
  only the patient view: P and the permitted dialogue, never M or Y), or any object with
  ``reply(PatientView) -> str`` (and optionally ``async areply``), e.g.
  :class:`~clinenv.agents.patient_cache.CachedPatient`, an LLM patient whose replies are
  cached by facts, dialogue, question and settings (opt-in; repeated rows replay it);
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

``step`` and ``astep`` share one implementation: ``EGIPEnv._route`` (parse the action,
update the runtime, say which simulator must answer), the patient's reply, the examiner's
answer or the judge's verdict (sync ``reply``/``measure``/``judge`` in ``step``, awaited
``areply``/``ameasure``/``ajudge`` in ``astep`` when present), then ``EGIPEnv._finish``
(observation, reward, info). ``step`` never touches an event loop, so it is safe inside a
running loop (a notebook, an async trainer) with the LLM patient, whose sync ``reply``
uses the model's sync client; a patient, judge or examiner that is async-only (``areply``
without ``reply``, ``ajudge`` without ``judge``, ``ameasure`` without ``measure``) makes
``step`` raise a :class:`TypeError` saying to use ``await env.unwrapped.astep(action)``,
before the episode changes. Model call records (timings, tokens) of the LLM patient and
judge are collected with :meth:`clinenv.env.EGIPEnv.drain_llm_calls` for the run log and
never appear in ``info``. The environment does not own ``patient_model`` /
``judge_model``: close them yourself (``with model: ...``).

This module holds the seat mechanics: :class:`PendingStep` (a step between its two
halves), :func:`check_sync_seats`, :func:`fill_seats` / :func:`afill_seats` (the
simulators' answers), :func:`reset_seats` (the simulators' seeds) and
:func:`drain_seat_calls`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clinenv.protocol.measurement_view import MeasurementView
from clinenv.protocol.native import NativeRouting
from clinenv.protocol.runtime import Routing
from clinenv.protocol.views import ExaminerView, PatientView
from clinenv.scoring import Score

__all__ = ["PendingStep", "afill_seats", "check_sync_seats", "drain_seat_calls",
           "fill_seats", "reset_seats"]


@dataclass
class PendingStep:
    """A step between :meth:`EGIPEnv._route <clinenv.env.EGIPEnv._route>` and
    :meth:`EGIPEnv._finish <clinenv.env.EGIPEnv._finish>`.

    ``patient_view`` is set when the patient must reply (the caller stores ``reply``);
    ``measurement_view`` when the examiner (a measurement agent) must answer, or
    ``examiner_view`` when an examiner seat must report a stored record (the caller
    stores ``measurement``, the result text, in both);
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
    examiner_view: ExaminerView | None = None
    measurement: Any = None
    parsed: Any = None
    score: Score | None = None
    answer: str | None = None
    target: str | None = None
    judged: bool = False
    judgement: Any = None


def check_sync_seats(patient: Any, judge: Any, examiner: Any) -> None:
    """Refuse a synchronous step with an async-only seat, before the episode changes.

    Raises:
        TypeError: the patient, judge or examiner has no sync ``reply``, ``judge`` or
            ``measure`` (the message says to use ``await env.unwrapped.astep(action)``).
    """
    for agent, method in ((patient, "reply"), (judge, "judge"), (examiner, "measure")):
        if agent is not None and not callable(getattr(agent, method, None)):
            raise TypeError(f"{type(agent).__name__} has no sync {method}(); in an "
                            "event loop use `await env.unwrapped.astep(action)`")


def fill_seats(env: Any, pending: PendingStep, judge_kwargs: dict[str, Any]) -> None:
    """Store the answers of the seats ``pending`` asks for, by their sync methods.

    Raises:
        clinenv.llm.base.BackendError: a model-backed seat's backend failed.
    """
    if pending.patient_view is not None:
        pending.reply = env.patient.reply(pending.patient_view)
    if pending.measurement_view is not None:
        pending.measurement = env.examiner.measure(pending.measurement_view)
    if pending.judged:
        pending.judgement = env.judge.judge(pending.answer, pending.target, **judge_kwargs)


async def afill_seats(env: Any, pending: PendingStep, judge_kwargs: dict[str, Any]) -> None:
    """:func:`fill_seats` awaiting ``areply`` / ``ameasure`` / ``ajudge`` where a seat has
    them (else its sync method)."""
    if pending.patient_view is not None:
        areply = getattr(env.patient, "areply", None)
        pending.reply = (await areply(pending.patient_view) if callable(areply)
                         else env.patient.reply(pending.patient_view))
    if pending.measurement_view is not None:
        ameasure = getattr(env.examiner, "ameasure", None)
        view = pending.measurement_view
        pending.measurement = (await ameasure(view) if callable(ameasure)
                               else env.examiner.measure(view))
    if pending.judged:
        ajudge = getattr(env.judge, "ajudge", None)
        pending.judgement = (await ajudge(pending.answer, pending.target, **judge_kwargs)
                             if callable(ajudge)
                             else env.judge.judge(pending.answer, pending.target,
                                                  **judge_kwargs))


def reset_seats(patient: Any, examiner: Any, rng: Any, judge_takes_seed: bool) -> int | None:
    """Reset the patient and the examiner with seeds drawn from ``rng`` (the
    environment's ``np_random``, after the case: the case of a reset never depends on the
    simulators, and the same reset seed gives the same simulator seeds); returns
    the judge's seed (drawn between them), or ``None`` for a judge without ``seed=``.

    Seeds are ints in ``0 .. 2**31 - 2``; the order is patient, judge, examiner (EGIP's
    lookup draws nothing).
    """
    reset_patient = getattr(patient, "reset", None)
    if callable(reset_patient):
        reset_patient(seed=int(rng.integers(2**31 - 1)))
    judge_seed = int(rng.integers(2**31 - 1)) if judge_takes_seed else None
    reset_examiner = getattr(examiner, "reset", None)
    if callable(reset_examiner):  # drawn last: EGIP's lookup draws nothing here
        reset_examiner(seed=int(rng.integers(2**31 - 1)))
    return judge_seed


def drain_seat_calls(seats: tuple[tuple[str, Any], ...]) -> list[dict[str, Any]]:
    """The call records of every ``(role, agent)`` seat with ``drain_calls``, oldest
    first per seat, each with ``agent`` set to the seat's role (then forgotten)."""
    calls: list[dict[str, Any]] = []
    for role, agent in seats:
        drain = getattr(agent, "drain_calls", None)
        if callable(drain):
            calls += [{"agent": role, **{k: v for k, v in call.items() if k != "agent"}}
                      for call in drain()]
    return calls
