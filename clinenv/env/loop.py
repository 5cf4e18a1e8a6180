"""The loop interface: one protocol's episode, stepped in two halves around the seats.

``loop.start(prepared)`` gives x_0; ``loop.route(action)`` parses the action and says
which seats must answer; ``loop.finish(pending)`` returns the :class:`LoopStep`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from clinenv.env.seats import PendingStep
from clinenv.protocol.prepared import PreparedCase

__all__ = ["Loop", "LoopStep"]


@dataclass(frozen=True)
class LoopStep:
    """The second half of a step, before the environment wraps it.

    ``text``: the doctor's new observation text (``None``: repeat the last one);
    ``reward``: this step's doctor reward (shaping, or the terminal reward);
    ``terminated``: the episode ended; ``action_kind`` / ``reasoning``: of the doctor's
    action, for ``info``; ``outcome``: the terminal ``info`` keys (``{}`` before the end);
    ``patient_replied``: a patient seat answered in this step (its flags go to ``info``).
    """

    text: str | None
    reward: float
    terminated: bool
    action_kind: str | None
    reasoning: str | None = None
    outcome: dict[str, Any] = field(default_factory=dict)
    patient_replied: bool = False


class Loop(Protocol):
    """What the environments need of a protocol loop."""

    #: ``"egip"``, ``"agentclinic"`` or ``"medagentsim"``.
    protocol: str
    #: The exam-matching thresholds its catalog uses: ``{"accept": .., "suggest": ..}``.
    matching: dict[str, float]
    #: The runtime of the current episode (``None`` before :meth:`start`).
    runtime: Any

    def start(self, prepared: PreparedCase) -> str:
        """Begin an episode on ``prepared``; the complete first view x_0."""

    def view(self) -> str:
        """The complete doctor view of the current state."""

    def route(self, action: str) -> PendingStep:
        """First half of a step (the runtime not yet ``"done"``)."""

    def finish(self, pending: PendingStep) -> LoopStep:
        """Second half: record the seats' answers; the step's outcome."""

    def info_keys(self) -> dict[str, Any]:
        """Keys this protocol adds to, or overrides in, every doctor ``info``."""
