"""A deterministic, in-process chat model with scripted replies.

Replies come from a list (cycled) or a function of the messages; named scripts
(:data:`SCRIPTS`) are registered by :mod:`clinenv.testing.fake_responders` on import.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from clinenv.llm.base import ChatModel, ChatResult, Choice, GenerationConfig

#: ``responder(messages, config, index) -> str | Choice``; ``index`` counts choices over
#: the model's lifetime (0, 1, 2...).
Responder = Callable[[list[dict[str, str]], GenerationConfig, int], "str | Choice"]
#: Named responders of the ``"scripted"`` backend (:func:`register_script`).
SCRIPTS: dict[str, Responder] = {}


def register_script(name: str, responder: Responder) -> None:
    """Make ``responder`` the script ``name`` of the ``"scripted"`` backend."""
    SCRIPTS[name] = responder


def named_script(name: str) -> Responder:
    """The registered script ``name``.

    Raises:
        ValueError: no script of that name (the message lists the registered ones).
    """
    try:
        return SCRIPTS[name]
    except KeyError:
        raise ValueError(f"responder must be one of {sorted(SCRIPTS)} (import "
                         "clinenv.testing.fake_responders for the built-in ones, or pass "
                         f"replies=), got {name!r}") from None


class ScriptedChatModel(ChatModel):
    """Replies from a script.

    Args:
        replies: a non-empty sequence of replies (``str`` or :class:`Choice`), used in
            order and cycled; or a :data:`Responder` function.
        model: the model name to report.
        config: default generation config.

    Attributes:
        calls: ``[(messages, config), ...]`` of every call, oldest first (copies).

    Raises:
        ValueError: an empty reply list.
    """

    backend = "scripted"

    def __init__(self, replies: Sequence[str | Choice] | Responder, *,
                 model: str = "scripted", config: GenerationConfig | None = None) -> None:
        super().__init__(model, config=config)
        if not callable(replies):
            replies = list(replies)
            if not replies:
                raise ValueError("replies must not be empty")
        self._replies = replies
        self._count = 0
        self._lock = threading.Lock()
        self.calls: list[tuple[list[dict[str, str]], GenerationConfig]] = []

    def _next(self, messages: list[dict[str, str]], config: GenerationConfig) -> Choice:
        with self._lock:
            index = self._count
            self._count += 1
        if callable(self._replies):
            reply: Any = self._replies(messages, config, index)
        else:
            reply = self._replies[index % len(self._replies)]
        return reply if isinstance(reply, Choice) else Choice(text=str(reply))

    def _generate(self, messages: list[dict[str, str]], config: GenerationConfig) -> ChatResult:
        start = time.perf_counter()
        with self._lock:
            self.calls.append(([dict(m) for m in messages], config))
        choices = tuple(self._next(messages, config) for _ in range(config.n))
        return ChatResult(choices=choices, model=self.model, backend=self.backend,
                          prompt_tokens=sum(len(m["content"].split()) for m in messages),
                          completion_tokens=sum(len(c.text.split()) for c in choices),
                          latency_s=time.perf_counter() - start, n_requests=1,
                          seed=config.seed)

    async def _agenerate(self, messages: list[dict[str, str]],
                         config: GenerationConfig) -> ChatResult:
        return self._generate(messages, config)
