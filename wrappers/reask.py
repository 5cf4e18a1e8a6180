"""The re-ask mechanics shared by the CDEG wrapper and the baseline wrappers.

A :class:`ReaskWrapper` intercepts the inner doctor's final answer and may re-ask it in
the same step with guidance (docs/api/wrappers.md).
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any

from clinenv.protocol.parser import parse_action
from clinenv.runlog import doctor_config

#: A re-ask: the (observation, info) pair given to the inner doctor.
Request = tuple[Mapping[str, Any], Mapping[str, Any]]
Review = Generator[Request, str, str]
GUIDANCE_HEADER = "# Guidance"
#: What a re-asked doctor is told to do after the guidance, by phase: the ``{next}`` of
#: every wrapper's guidance prompt (CDEG and its baselines).
NEXT_STEP = {"acquire": "give your next action (a question, a test request, or your "
                        "diagnosis)",
             "decide": "give your final diagnosis"}


def next_step(phase: str) -> str:
    """:data:`NEXT_STEP` of ``phase`` (``"acquire"``; anything else reads as
    ``"decide"``)."""
    return NEXT_STEP.get(phase, NEXT_STEP["decide"])


def final_answer(action: str, phase: str) -> str | None:
    """The diagnosis an action proposes as final, or ``None``.

    In the acquisition phase only a ``DIAGNOSIS READY:`` marker counts (parsed by
    :func:`clinenv.protocol.parser.parse_action`: markdown and ``<think>`` blocks are
    handled); in the decision phase every answer is final:
    the diagnosis payload (bare ``Diagnosis: X`` lines accepted) or else the visible text.
    An empty action gives ``None``.
    """
    parsed = parse_action(action, accept_bare_diagnosis=phase == "decide")
    if parsed.kind == "diagnosis":
        return parsed.payload or None
    if phase == "decide" and parsed.kind != "empty":
        return parsed.text or None
    return None


class ReaskWrapper:
    """Base of the re-asking doctor-policy wrappers (docs/api/wrappers.md).

    Args:
        doctor: the inner doctor policy (``name``, ``reset``, ``act``; optionally
            ``aact``, ``drain_calls``, ``observation_format``).

    Attributes:
        doctor: the inner doctor.
        name: ``doctor.name + suffix``.
        suffix: class attribute, e.g. ``"+cdeg"``.
    """

    suffix = "+wrapped"
    kind = "wrapper"

    def __init__(self, doctor: Any) -> None:
        for method in ("reset", "act"):
            if not callable(getattr(doctor, method, None)):
                raise TypeError(f"doctor must be a doctor policy with reset() and act(); "
                                f"{type(doctor).__name__} has no {method}()")
        self.doctor = doctor
        self.name = f"{getattr(doctor, 'name', type(doctor).__name__)}{self.suffix}"
        if callable(getattr(doctor, "drain_calls", None)):
            self.drain_calls = doctor.drain_calls
        if callable(getattr(doctor, "aact", None)):
            self.aact = self._aact
        self._log: list[dict[str, Any]] = []

    # --------------------------------------------------------------- policy API
    def reset(self, *, seed: int | None = None) -> None:
        """Start an episode: resets the inner doctor (same seed) and the episode log."""
        self.doctor.reset(seed=seed)
        self._log = []
        self.on_reset()

    def act(self, observation: Mapping[str, Any], info: Mapping[str, Any]) -> str:
        """The next action (the inner doctor's, possibly after re-asks)."""
        plan = self._plan(observation, info)
        try:
            request = next(plan)
            while True:
                request = plan.send(self.doctor.act(*request))
        except StopIteration as done:
            return done.value

    async def _aact(self, observation: Mapping[str, Any], info: Mapping[str, Any]) -> str:
        plan = self._plan(observation, info)
        try:
            request = next(plan)
            while True:
                request = plan.send(await self.doctor.aact(*request))
        except StopIteration as done:
            return done.value

    def episode_log(self) -> list[dict[str, Any]]:
        """The JSON-ready entries logged in this episode (copies), oldest first."""
        return [dict(entry) for entry in self._log]

    def config(self) -> dict[str, Any]:
        """JSON-ready description: ``{"wrapper", "inner": {"name", "config"}}`` plus
        :meth:`wrapper_config`."""
        return {"wrapper": self.kind, "inner": doctor_config(self.doctor),
                **self.wrapper_config()}

    # ------------------------------------------------------------ for subclasses
    def on_reset(self) -> None:
        """Reset the subclass's per-episode state."""

    def wrapper_config(self) -> dict[str, Any]:
        """The subclass's settings for :meth:`config` (JSON-ready)."""
        return {}

    def observe(self, observation: Mapping[str, Any], info: Mapping[str, Any]) -> None:
        """Take one step's observation and info (called once per step, first)."""

    def review(self, observation: Mapping[str, Any], info: Mapping[str, Any],
               action: str) -> Review:
        """Review the inner doctor's ``action``; ``yield`` re-asks (each gets the new
        action sent back) and ``return`` the action to give the environment."""
        return action
        yield  # pragma: no cover (makes this a generator)

    def log(self, entry: Mapping[str, Any]) -> None:
        """Append one JSON-ready entry to the episode log."""
        self._log.append(dict(entry))

    def reask(self, observation: Mapping[str, Any], info: Mapping[str, Any], text: str,
              guidance: Mapping[str, Any]) -> Request:
        """The (observation, info) of a re-ask with guidance ``text`` (docs/api/wrappers.md)."""
        obs = dict(observation)
        delta = getattr(self.doctor, "observation_format", "view") == "delta"
        if delta and info.get("phase") == "acquire":
            obs["text"] = f"{GUIDANCE_HEADER}\n{text}"
        else:
            before = str(observation.get("text", "")).rstrip()
            obs["text"] = f"{before}\n\n{GUIDANCE_HEADER}\n{text}"
        new_info = dict(info)
        new_info["guidance"] = dict(guidance)
        return obs, new_info

    # ----------------------------------------------------------------- internals
    def _plan(self, observation: Mapping[str, Any], info: Mapping[str, Any]) -> Review:
        self.observe(observation, info)
        action = yield (observation, info)
        return (yield from self.review(observation, info, action))


class BeforeAnswerWrapper(ReaskWrapper):
    """A wrapper that re-asks the inner doctor once per episode before its final answer,
    with a text from :meth:`before_answer` (the baselines' shared mechanics).

    In the acquisition phase the re-asked action is returned whatever it is (the doctor
    may go on acquiring); in the decision phase the new answer is returned unless it is
    empty, then the first answer stands. Each re-ask is logged as ``{"turn", "phase",
    "kind": <the wrapper's kind>, "proposed", ...}`` plus what :meth:`before_answer`
    adds.

    Args:
        doctor: the inner doctor policy.
        max_reasks: re-asks per episode (>= 0; default 1).
    """

    def __init__(self, doctor: Any, *, max_reasks: int = 1) -> None:
        super().__init__(doctor)
        if isinstance(max_reasks, bool) or not isinstance(max_reasks, int) or max_reasks < 0:
            raise ValueError(f"max_reasks must be an integer >= 0, got {max_reasks!r}")
        self.max_reasks = max_reasks
        self._reasks = 0
        self._turn = 0

    def on_reset(self) -> None:
        """No re-asks yet."""
        self._reasks = 0

    def observe(self, observation: Mapping[str, Any], info: Mapping[str, Any]) -> None:
        """Keep the turn."""
        self._turn = int(info.get("turn", 0) or 0)

    def before_answer(self, observation: Mapping[str, Any], info: Mapping[str, Any],
                      proposed: str) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
        """``(text, guidance, log fields)`` of the re-ask, or ``None`` for no re-ask."""
        raise NotImplementedError

    def review(self, observation: Mapping[str, Any], info: Mapping[str, Any],
               action: str) -> Review:
        """Re-ask once before the final answer (class docstring)."""
        phase = str(info.get("phase", "acquire"))
        proposed = final_answer(action, phase)
        if proposed is None or self._reasks >= self.max_reasks:
            return action
        found = self.before_answer(observation, info, proposed)
        if found is None:
            return action
        text, guidance, fields = found
        self._reasks += 1
        self.log({"turn": self._turn, "phase": phase, "kind": self.kind,
                  "proposed": proposed, **fields})
        new_action = yield self.reask(observation, info, text, {"kind": self.kind, **guidance})
        if phase != "acquire" and final_answer(new_action, phase) is None:
            return action
        return new_action
