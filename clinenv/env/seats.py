"""The simulator seats of :class:`clinenv.env.EGIPEnv`: who answers the doctor, and how.

The mechanics shared by ``step`` and ``astep``: :class:`PendingStep`, filling, seeding
and draining the seats; the seat options are in docs/environments.md.
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
