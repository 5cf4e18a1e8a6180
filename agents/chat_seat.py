"""The chat-seat mechanics shared by the model-backed simulators.

:class:`ChatSeat`: model, settings, config, seeded per-call settings with turn stops and
call records, for the LLM patient and the LLM measurement agent.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

from clinenv.agents.terminal_base import base_seed, call_config, turn_stops
from clinenv.llm.base import ChatModel, GenerationConfig
from clinenv.protocol.turns import Seat
from clinenv.seeding import call_seed


def check_seed(seed: Any) -> int | None:
    """``seed`` as an int (>= 0), or ``None``.

    Raises:
        ValueError: a negative or non-integer seed (``bool`` included).
    """
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, Integral)
                             or seed < 0):
        raise ValueError(f"seed must be an integer >= 0 or None, got {seed!r}")
    return None if seed is None else int(seed)


class ChatSeat:
    """Base of a simulator seat backed by a chat model (docs/api/agents.md).

    Args:
        model: the chat model.
        config: generation settings (default ``model.config``).

    Attributes:
        seat: the turn the seat speaks (:data:`~clinenv.protocol.turns.Seat`; class
            attribute): its stop strings and reply cut.

    Raises:
        TypeError: ``model`` is not a :class:`~clinenv.llm.base.ChatModel`.
    """

    name = "chat_seat"
    seat: Seat = "patient"

    def __init__(self, model: ChatModel, *, config: GenerationConfig | None = None) -> None:
        if not isinstance(model, ChatModel):
            raise TypeError(f"model must be a clinenv.llm.ChatModel, got {type(model).__name__}")
        self.model = model
        self.generation = config or model.config
        self._calls: list[dict[str, Any]] = []
        self._seed: int | None = None

    @property
    def config(self) -> dict[str, Any]:
        """JSON-ready description for run logs (never an API key)."""
        return {"agent": self.name, "backend": self.model.backend, "model": self.model.model,
                "generation": self.generation.model_dump(mode="json")}

    def reset(self, *, seed: int | None = None) -> None:
        """Start an episode; ``seed`` (>= 0) is the base of every per-call seed.

        Raises:
            ValueError: a negative or non-integer seed.
        """
        self._seed = check_seed(seed)

    def drain_calls(self) -> list[dict[str, Any]]:
        """Call records since the last drain (then cleared), oldest first: each a
        :meth:`~clinenv.llm.base.ChatResult.to_log` dict with the fields the seat's class
        names."""
        calls, self._calls = self._calls, []
        return calls

    def call_config(self, index: int, purpose: str) -> GenerationConfig:
        """The settings of call ``index`` (>= 0) for ``purpose``: one choice, seed
        ``call_seed(seed, index, purpose)``, the seat's stop strings (docs/api/agents.md)."""
        seed = base_seed(self._seed, self.generation)
        return turn_stops(call_config(self.generation, seed=call_seed(seed, index, purpose),
                                      n=1), self.seat)
