"""The chat-model interface every LLM backend implements.

Messages in, texts out. A call takes a list of chat messages (``{"role": "system" |
"user" | "assistant", "content": str}``) and a :class:`GenerationConfig` and returns a
:class:`ChatResult` with ``n`` :class:`Choice` objects. Every backend offers a
synchronous :meth:`ChatModel.generate` and an asynchronous :meth:`ChatModel.agenerate`;
:meth:`ChatModel.generate_batch` runs many conversations at once (the in-process vLLM
engine batches them; other backends loop).

Backends (each in its own module, heavy imports deferred until construction):

- :mod:`clinenv.llm.openai_backend` -- any OpenAI-compatible server (``vllm serve``,
  llama.cpp's server, providers); extra ``openai``;
- :mod:`clinenv.llm.vllm_backend` -- an in-process vLLM engine; extra ``vllm``;
- :mod:`clinenv.llm.hf_backend` -- a local transformers causal LM; extra ``hf``;
- :mod:`clinenv.llm.scripted` -- deterministic scripted replies (tests, offline demos).

Timings and token counts belong to :meth:`ChatResult.to_log` records, which rollouts
write to the run log; they never go into a Gymnasium ``info`` dict.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: One chat message: ``{"role": "system" | "user" | "assistant", "content": str}``.
Message = Mapping[str, str]

ROLES = ("system", "user", "assistant")


class LLMError(Exception):
    """Base class of the LLM layer's errors."""


class BackendError(LLMError):
    """A backend failed to produce a usable reply after its retries.

    Raised for an unusable server reply (no choices, malformed JSON, an HTTP error that
    is not retried or still fails after the retries), never as a bare ``IndexError`` or
    ``KeyError``.

    Attributes:
        backend: the backend name (``"openai"``, ``"vllm"``...).
        detail: a short machine-readable reason (``"no_choices"``, ``"http_429"``,
            ``"timeout"``, ``"malformed"``...).
    """

    def __init__(self, message: str, *, backend: str = "", detail: str = "") -> None:
        super().__init__(message)
        self.backend = backend
        self.detail = detail


class BackendUnavailableError(LLMError, ImportError):
    """A backend's optional dependency is missing; the message names the pip extra."""


class GenerationConfig(BaseModel):
    """Sampling settings of one call.

    Attributes:
        temperature: >= 0; 0 is greedy where the backend supports it.
        max_tokens: >= 1 new tokens per choice (the EGIP paper uses 200 per call,
            appendix A.1).
        top_p: in (0, 1].
        seed: per-request sampling seed, or ``None``; backends that ignore seeds are
            reported, not trusted (field-bug-reports B08).
        stop: stop strings (the text is cut before the first one).
        n: >= 1 choices wanted; a backend that returns fewer is topped up.
        extra: backend-specific fields merged into the request (e.g. vLLM's ``top_k``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float = Field(0.0, ge=0.0)
    max_tokens: int = Field(200, ge=1)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    seed: int | None = None
    stop: tuple[str, ...] = ()
    n: int = Field(1, ge=1)
    extra: dict[str, Any] = Field(default_factory=dict)

    @field_validator("stop", mode="before")
    @classmethod
    def _stop_tuple(cls, value: Any) -> Any:
        if value is None:
            return ()
        if isinstance(value, str):
            return (value,)
        return tuple(value)

    def merged(self, **overrides: Any) -> GenerationConfig:
        """A copy with ``overrides`` applied (``None`` values are ignored), validated.

        Raises:
            pydantic.ValidationError: an override is out of range or unknown.
        """
        data = self.model_dump()
        data.update({k: v for k, v in overrides.items() if v is not None})
        return GenerationConfig(**data)


@dataclass(frozen=True)
class Choice:
    """One generated reply.

    Attributes:
        text: the reply content; ``""`` when the model produced none (never ``None``).
        finish_reason: ``"stop"``, ``"length"`` (cut by ``max_tokens``), ``"error"`` or
            ``"unknown"``.
        reasoning: a separate reasoning text returned by the server (``reasoning`` /
            ``reasoning_content`` fields), else ``None``. Never shown to other agents.
        from_reasoning: ``text`` was taken from ``reasoning`` because the server returned
            no content but a complete answer there (field-bug-reports B04(b); flagged in
            :attr:`ChatResult.warnings`).
    """

    text: str
    finish_reason: str = "stop"
    reasoning: str | None = None
    from_reasoning: bool = False

    @property
    def truncated(self) -> bool:
        """Whether the reply was cut by ``max_tokens``."""
        return self.finish_reason == "length"


@dataclass(frozen=True)
class ChatResult:
    """The outcome of one logical call (retries and top-up requests included).

    Attributes:
        choices: exactly ``config.n`` choices (backends top up or raise).
        model: the model name the backend reported (or was configured with).
        backend: ``"openai"``, ``"vllm"``, ``"transformers"`` or ``"scripted"``.
        prompt_tokens, completion_tokens: summed over every request, ``None`` if unknown.
        latency_s: wall seconds of the whole call.
        n_requests: requests or engine calls made (retries and top-ups included).
        seed: the seed sent with the first request (``None``: none sent).
        system_fingerprint: the server's fingerprint when it sends one.
        warnings: human-readable notes (identical choices at temperature > 0, content
            taken from reasoning, ``n`` topped up...).
    """

    choices: tuple[Choice, ...]
    model: str
    backend: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float = 0.0
    n_requests: int = 1
    seed: int | None = None
    system_fingerprint: str | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def text(self) -> str:
        """The first choice's text."""
        return self.choices[0].text if self.choices else ""

    @property
    def texts(self) -> list[str]:
        """Every choice's text, in order."""
        return [c.text for c in self.choices]

    def to_log(self, **context: Any) -> dict[str, Any]:
        """A JSON-ready record of this call for the run log (``context`` keys first).

        Keys: ``backend``, ``model``, ``n``, ``n_requests``, ``latency_s``,
        ``prompt_tokens``, ``completion_tokens``, ``finish_reasons``, ``truncated``
        (any choice cut by ``max_tokens``), ``seed``, ``system_fingerprint``,
        ``warnings``.
        """
        record = dict(context)
        record.update(
            backend=self.backend,
            model=self.model,
            n=len(self.choices),
            n_requests=self.n_requests,
            latency_s=round(self.latency_s, 6),
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            finish_reasons=[c.finish_reason for c in self.choices],
            truncated=any(c.truncated for c in self.choices),
            seed=self.seed,
            system_fingerprint=self.system_fingerprint,
            warnings=list(self.warnings),
        )
        return record


def check_messages(messages: Sequence[Message]) -> list[dict[str, str]]:
    """Validate chat messages and return plain-dict copies.

    Raises:
        ValueError: an empty list, a role outside :data:`ROLES`, or a non-string content
            (the message says which index).
    """
    if not messages:
        raise ValueError("messages must not be empty")
    out = []
    for i, message in enumerate(messages):
        role = message.get("role")
        content = message.get("content")
        if role not in ROLES:
            raise ValueError(f"messages[{i}].role must be one of {ROLES}, got {role!r}")
        if not isinstance(content, str):
            raise ValueError(f"messages[{i}].content must be a str, got "
                             f"{type(content).__name__}")
        out.append({"role": role, "content": content})
    return out


class ChatModel(abc.ABC):
    """A chat model: messages in, ``n`` texts out.

    Subclasses implement :meth:`_generate` and :meth:`_agenerate` (and may override
    :meth:`generate_batch` to batch). Public methods validate the messages and merge the
    call's overrides into :attr:`config`.

    Attributes:
        backend: short backend name (class attribute).
        model: the model name or path.
        config: default :class:`GenerationConfig` of every call.
    """

    backend: ClassVar[str] = "abstract"

    def __init__(self, model: str, *, config: GenerationConfig | None = None) -> None:
        self.model = model
        self.config = config or GenerationConfig()

    # ------------------------------------------------------------------- public
    def generate(self, messages: Sequence[Message], config: GenerationConfig | None = None,
                 **overrides: Any) -> ChatResult:
        """One call, synchronously.

        Args:
            messages: the conversation (see :data:`Message`).
            config: replaces :attr:`config` for this call.
            **overrides: :class:`GenerationConfig` fields for this call.

        Raises:
            ValueError: malformed messages.
            BackendError: the backend could not produce a usable reply.
        """
        return self._generate(check_messages(messages), (config or self.config).merged(**overrides))

    async def agenerate(self, messages: Sequence[Message],
                        config: GenerationConfig | None = None, **overrides: Any) -> ChatResult:
        """One call, asynchronously (same arguments and errors as :meth:`generate`)."""
        return await self._agenerate(check_messages(messages),
                                     (config or self.config).merged(**overrides))

    def generate_batch(self, conversations: Sequence[Sequence[Message]],
                       config: GenerationConfig | None = None,
                       **overrides: Any) -> list[ChatResult]:
        """Many independent calls with one config; results in input order.

        The base implementation loops over :meth:`generate`; batching backends override.
        """
        cfg = (config or self.config).merged(**overrides)
        return [self._generate(check_messages(m), cfg) for m in conversations]

    def describe(self) -> dict[str, Any]:
        """JSON-ready description for run logs: ``backend``, ``model``, ``config``."""
        return {"backend": self.backend, "model": self.model,
                "config": self.config.model_dump(mode="json")}

    def close(self) -> None:
        """Release clients, engines or models (idempotent); the base holds none."""
        return None

    async def aclose(self) -> None:
        """Asynchronous :meth:`close`."""
        self.close()

    def __enter__(self) -> ChatModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------- backends
    @abc.abstractmethod
    def _generate(self, messages: list[dict[str, str]], config: GenerationConfig) -> ChatResult:
        """Backend call with validated messages and the merged config."""

    async def _agenerate(self, messages: list[dict[str, str]],
                         config: GenerationConfig) -> ChatResult:
        """Backend async call; the default runs :meth:`_generate` in a worker thread."""
        import asyncio

        return await asyncio.to_thread(self._generate, messages, config)
