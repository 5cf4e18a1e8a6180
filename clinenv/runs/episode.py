"""One episode: a doctor policy through a Gymnasium EGIP environment, timed and recorded.

:func:`run_episode` and :func:`play_episode`, the one episode loop (also of
:func:`clinenv.runs.concurrent.arun_episode`); the record is in docs/api/runs.md.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from clinenv.llm.base import BackendError
from clinenv.llm.tokens import compact_prompt_ids
from clinenv.protocol.biases import bias_hints_target

__all__ = [
    "EpisodeTally", "awaitable", "call_totals", "episode_llm", "error_dict",
    "play_episode", "run_episode", "run_without_loop",
]


def run_episode(
    env: Any,
    doctor: Any,
    *,
    case_id: str | int,
    seed: int | None,
    max_steps: int = 100_000,
) -> dict[str, Any]:
    """Run one episode: ``doctor.act`` → ``env.step`` until the episode ends.

    Environment and doctor are reset with ``seed`` (and ``options={"case_id": case_id}``);
    timings go only into the record. A :class:`~clinenv.llm.base.BackendError` of any seat
    ends the episode as an error record instead of propagating.

    Args:
        env: a Gymnasium environment whose ``unwrapped`` is :class:`clinenv.env.EGIPEnv`.
        doctor: a :class:`clinenv.agents.base.DoctorPolicy`.
        case_id: a ``case_id`` string or a 0-based case index.
        seed: the episode seed.
        max_steps: safety cap on ``env.step`` calls; reaching it sets ``truncated``.

    Returns:
        The episode record: ``env.unwrapped.episode_record()`` plus ``reward``, ``steps``,
        ``terminated``, ``truncated``, ``reward_components``, ``timing`` and, when present,
        ``llm``, ``doctor_log`` and ``error`` (docs/api/runs.md).

    Raises:
        KeyError, IndexError: unknown case id or index (from ``env.reset``).
    """
    return run_without_loop(play_episode(
        env, doctor, awaitable(doctor.act), awaitable(env.step),
        case_id=case_id, seed=seed, max_steps=max_steps))


async def play_episode(env: Any, doctor: Any, act: Callable[..., Awaitable[Any]],
                       step: Callable[[Any], Awaitable[tuple]], *, case_id: str | int,
                       seed: int | None, max_steps: int) -> dict[str, Any]:
    """The one episode loop of :func:`run_episode` and
    :func:`clinenv.runs.concurrent.arun_episode`: reset, then ``await act(observation, info)``
    → ``await step(action)`` until the episode ends, timed by an :class:`EpisodeTally`.

    Args:
        env: the environment (reset here with ``seed`` and ``options={"case_id": ...}``).
        doctor: the doctor policy (reset here with ``seed``).
        act: the doctor's move, awaited (``doctor.aact``, or :func:`awaitable` of
            ``doctor.act``).
        step: the environment's move, awaited, returning Gymnasium's 5-tuple.
        case_id: as in :func:`run_episode`.
        seed: as in :func:`run_episode`.
        max_steps: as in :func:`run_episode`.

    Returns:
        The record of :func:`run_episode`; a :class:`~clinenv.llm.base.BackendError`
        of either move makes it an error record.
    """
    tally = EpisodeTally()
    observation, info = env.reset(seed=seed, options={"case_id": case_id})
    doctor.reset(seed=seed)
    tally.reset_done()
    try:
        while not tally.should_stop(max_steps):
            t0 = tally.clock()
            action = await act(observation, info)
            t1 = tally.clock()
            observation, reward, terminated, truncated, info = await step(action)
            tally.add_step(reward, terminated, truncated, doctor_s=t1 - t0,
                           env_s=tally.clock() - t1)
    except BackendError as err:
        tally.error = err
    return tally.record(env, doctor)


def awaitable(function: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """``function`` as a coroutine function that calls it at once (never suspends)."""
    async def call(*args: Any) -> Any:
        return function(*args)

    return call


def run_without_loop(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """The result of a coroutine that never suspends, run without an event loop.

    :func:`run_episode` drives :func:`play_episode` with :func:`awaitable` moves this
    way, so the synchronous and the asynchronous runner share one loop and work inside
    a running event loop too (no nested loop).

    Raises:
        RuntimeError: the coroutine suspended (it awaited real I/O); it is closed.
    """
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("a synchronous episode awaited pending I/O; use "
                       "clinenv.runs.concurrent.arun_episode for awaitable moves")


@dataclass
class EpisodeTally:
    """Bookkeeping of one running episode of :func:`play_episode` (so
    :func:`run_episode` and :func:`clinenv.runs.concurrent.arun_episode` return the same
    record).

    Attributes:
        start: ``time.perf_counter()`` at the start; times below are wall seconds.
        reset_s, doctor_s, env_s: time in ``reset``, in the doctor, in the environment.
        reward: sum of step rewards.
        steps: ``env.step`` calls so far.
        terminated, truncated: the episode's end flags.
        error: the backend error that stopped the episode, if any.
    """

    start: float = field(default_factory=time.perf_counter)
    reset_s: float = 0.0
    doctor_s: float = 0.0
    env_s: float = 0.0
    reward: float = 0.0
    steps: int = 0
    terminated: bool = False
    truncated: bool = False
    error: BackendError | None = None

    @staticmethod
    def clock() -> float:
        """The clock of every timing (``time.perf_counter``)."""
        return time.perf_counter()

    def reset_done(self) -> None:
        """Mark the end of ``env.reset`` and ``doctor.reset``."""
        self.reset_s = self.clock() - self.start

    def should_stop(self, max_steps: int) -> bool:
        """The episode is over, or reached ``max_steps`` (then it is truncated)."""
        if self.terminated or self.truncated:
            return True
        if self.steps >= max_steps:
            self.truncated = True
            return True
        return False

    def add_step(self, reward: float, terminated: bool, truncated: bool, *,
                 doctor_s: float, env_s: float) -> None:
        """Count one ``env.step``."""
        self.reward += float(reward)
        self.steps += 1
        self.terminated, self.truncated = bool(terminated), bool(truncated)
        self.doctor_s += doctor_s
        self.env_s += env_s

    def record(self, env: Any, doctor: Any) -> dict[str, Any]:
        """The episode record (see :func:`run_episode`); drains the model call records."""
        record = env.unwrapped.episode_record()
        mark_doctor_bias(record, env, doctor)
        record.update(reward=self.reward, steps=self.steps, terminated=self.terminated,
                      truncated=self.truncated)
        if self.error is not None:
            record.update(terminated=False, verdict="unscored", correct=False,
                          error=error_dict(self.error))
        components = getattr(env.unwrapped, "reward_components", None)
        unfinished = self.error is not None or self.truncated
        if callable(components) and (unfinished or "reward_components" not in record):
            # a cut-off or error episode: the unfinished rule (clinenv.reward_components)
            found = components(record)
            record["reward_components"] = found.to_dict()
            spec = getattr(env.unwrapped, "reward_spec", None)
            if unfinished and spec is not None:
                # its reward as every adapter gives it (ToolEpisode.episode_reward): the
                # step rewards so far plus the spec's reward of the unfinished episode
                record["reward"] = self.reward + spec.reward(found)
        llm = episode_llm(env, doctor)
        if llm is not None:
            record["llm"] = llm
        doctor_log = getattr(doctor, "episode_log", None)
        if callable(doctor_log):
            record["doctor_log"] = doctor_log()
        record["timing"] = {"reset_s": self.reset_s, "doctor_s": self.doctor_s,
                            "env_s": self.env_s, "total_s": self.clock() - self.start}
        return record


def doctor_bias(doctor: Any) -> str | None:
    """The bias of the doctor, or of a doctor it wraps (``.doctor``, as the policy
    wrappers keep it): its ``bias`` attribute (``LLMDoctor(bias=...)``), else ``None``."""
    seen: set[int] = set()
    while doctor is not None and id(doctor) not in seen:
        seen.add(id(doctor))
        bias = getattr(doctor, "bias", None)
        if isinstance(bias, str):
            return bias
        doctor = getattr(doctor, "doctor", None)
    return None


def mark_doctor_bias(record: dict[str, Any], env: Any, doctor: Any) -> None:
    """With a biased doctor, ``record["case_flags"]["target_in_bias"]``: whether its
    bias, or the environment's patient bias, hints at the case's target
    (:func:`~clinenv.protocol.biases.bias_hints_target`); without one, nothing."""
    bias = doctor_bias(doctor)
    runtime = getattr(env.unwrapped, "runtime", None)
    flags = record.get("case_flags")
    if bias is None or runtime is None or not isinstance(flags, dict):
        return
    flags["target_in_bias"] = bool(flags.get("target_in_bias")) or bias_hints_target(
        runtime.case.flags.target_in_bias, doctor_bias=bias)


def error_dict(err: BaseException) -> dict[str, Any]:
    """``{"type", "message", "backend", "detail"}`` of an exception, for a log line
    (``backend`` and ``detail`` are ``""`` when the exception has none)."""
    return {"type": type(err).__name__, "message": str(err),
            "backend": getattr(err, "backend", "") or "",
            "detail": getattr(err, "detail", "") or ""}


def episode_llm(env: Any, doctor: Any) -> dict[str, Any] | None:
    """The ``llm`` field of an episode record, or ``None`` without any LLM agent.

    Drains ``doctor.drain_calls()`` (records get ``agent="doctor"`` unless they name
    one) and ``env.unwrapped.drain_llm_calls()`` (patient, judge). Records with
    ``prompt_ids`` (``--log-tokens``) get them compacted
    (:func:`clinenv.llm.tokens.compact_prompt_ids`).
    """
    drain = getattr(doctor, "drain_calls", None)
    unwrapped = env.unwrapped
    env_llm = bool(getattr(unwrapped, "has_llm_agents", False))
    if not callable(drain) and not env_llm:
        return None
    calls = [{"agent": "doctor", **call} for call in drain()] if callable(drain) else []
    if env_llm:
        calls += unwrapped.drain_llm_calls()
    if any("prompt_ids" in call for call in calls):
        calls = compact_prompt_ids(calls)
    return call_totals(calls) | {"calls": calls}


def call_totals(calls: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"n_calls", "n_requests", "prompt_tokens", "prompt_tokens_sent",
    "completion_tokens", "latency_s"}`` of call records.

    Token sums skip calls that did not report them and are ``None`` when none did;
    ``prompt_tokens_sent`` counts the prompt of every attempt that reached the server
    (retries included; a call record without the field counts its ``prompt_tokens``);
    ``n_requests`` the HTTP requests or engine calls (retries and top-ups included; 1 per
    call without the field); ``latency_s`` is the sum of the calls' wall seconds (float).
    """
    def total(key: str, fallback: str | None = None) -> int | None:
        known = [int(c[key] if c.get(key) is not None else c[fallback]) for c in calls
                 if c.get(key) is not None or (fallback and c.get(fallback) is not None)]
        return sum(known) if known else None

    return {"n_calls": len(calls),
            "n_requests": sum(int(c.get("n_requests") or 1) for c in calls),
            "prompt_tokens": total("prompt_tokens"),
            "prompt_tokens_sent": total("prompt_tokens_sent", "prompt_tokens"),
            "completion_tokens": total("completion_tokens"),
            "latency_s": float(sum(float(c.get("latency_s") or 0.0) for c in calls))}
