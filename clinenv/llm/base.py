"""The chat-model interface every LLM backend implements.

Messages (``{"role", "content"}`` dicts) in, a :class:`ChatResult` of ``n``
:class:`Choice` objects out; the backends: docs/llm-doctors.md.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import Field, field_validator

from clinenv.config_model import ConfigModel

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


class GenerationConfig(ConfigModel):
    """Sampling settings of one call.

    Attributes:
        temperature: >= 0; 0 is greedy where the backend supports it.
        max_tokens: >= 1 new tokens per choice (the EGIP paper uses 200 per call,
            appendix A.1).
        top_p: in (0, 1].
        seed: per-request sampling seed, or ``None``; backends that ignore seeds are
            reported, not trusted.
        stop: stop strings (the text is cut before the first one).
        n: >= 1 choices wanted; a backend that returns fewer is topped up.
        extra: backend-specific fields merged into the request (e.g. vLLM's ``top_k``).
    """


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
        """A copy with ``overrides`` applied (``None`` values are ignored), validated;
        this config itself when no override is given (it is frozen), so a call without
        overrides costs no copy.

        Raises:
            pydantic.ValidationError: an override is out of range or unknown.
        """
        changes = {k: v for k, v in overrides.items() if v is not None}
        if not changes:
            return self
        data = self.model_dump()
        data.update(changes)
        return GenerationConfig(**data)


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """``text`` cut before the earliest occurrence of any stop string; and whether it
    was cut. Empty stop strings are ignored; ``cut_at_stop("a STOP b END", ["END",
    "STOP"]) == ("a ", True)``."""
    cuts = [i for s in stop if s and (i := text.find(s)) >= 0]
    return (text[:min(cuts)], True) if cuts else (text, False)


@dataclass(frozen=True)
class Choice:
    """One generated reply.

    Attributes:
        text: the reply content; ``""`` when the model produced none (never ``None``).
        finish_reason: ``"stop"``, ``"length"`` (cut by ``max_tokens``), ``"error"`` or
            ``"unknown"``.
        reasoning: the server's separate reasoning text, else ``None``; never shown to
            other agents.
        from_reasoning: ``text`` was taken from ``reasoning`` (the content was empty).
        raw_text: the reply as written when ``text`` was cut afterwards (at a stop string
            or a turn boundary), else ``None``.
        stop_enforced: ``text`` was cut here at a stop string the server wrote past.
        wrote_past_turn: the reply went on past its end; ``text`` keeps what came before.
        token_ids: the completion's token ids (end token included, before any cut), kept
            with :attr:`ChatModel.log_tokens`; else ``None``.
        logprobs: the sampled tokens' natural-log probabilities, one per ``token_ids``
            entry; ``None`` when not kept or not sent.
    """

    text: str
    finish_reason: str = "stop"
    reasoning: str | None = None
    from_reasoning: bool = False
    raw_text: str | None = None
    stop_enforced: bool = False
    wrote_past_turn: bool = False
    token_ids: tuple[int, ...] | None = None
    logprobs: tuple[float, ...] | None = None

    @property
    def truncated(self) -> bool:
        """Whether the reply was cut by ``max_tokens``."""
        return self.finish_reason == "length"

    @property
    def raw(self) -> str:
        """The reply as the model wrote it, before any cut (:attr:`raw_text`, else
        :attr:`text`)."""
        return self.raw_text if self.raw_text is not None else self.text

    def cut(self, text: str, *, stop_enforced: bool = False) -> Choice:
        """A copy whose text is ``text`` (a prefix of this reply kept by a cut), marked
        :attr:`wrote_past_turn` and keeping the original in :attr:`raw_text`; a cut at
        a stop string (``stop_enforced``) also ends with ``finish_reason="stop"``."""
        return dataclasses.replace(
            self, text=text, raw_text=self.raw, wrote_past_turn=True,
            stop_enforced=self.stop_enforced or stop_enforced,
            finish_reason="stop" if stop_enforced else self.finish_reason)


def enforce_stop(choice: Choice, stop: Sequence[str]) -> Choice:
    """``choice`` cut before its first stop string (:func:`cut_at_stop`), marked
    :attr:`Choice.stop_enforced` with ``finish_reason="stop"``; unchanged when its text
    holds none. Backends call it on every choice, as a server that honours ``stop``
    would have cut there."""
    text, cut = cut_at_stop(choice.text, stop)
    return choice.cut(text, stop_enforced=True) if cut else choice


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
        warnings: human-readable notes (identical choices, retries, top-ups...).
        attempts: one ``{"outcome", "latency_s"}`` dict per HTTP request (``"wait_s"``
            before a retry); ``()`` for in-process backends.
        prompt_tokens_sent: prompt tokens of every request that reached the server.
        messages: the call's messages when :attr:`ChatModel.log_messages`, else ``None``.
        prompt_ids: the prompt's token ids when :attr:`ChatModel.log_tokens` and the
            backend sees them, else ``None``.
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
    attempts: tuple[Mapping[str, Any], ...] = ()
    prompt_tokens_sent: int | None = None
    messages: tuple[Mapping[str, str], ...] | None = None
    prompt_ids: tuple[int, ...] | None = None

    @property
    def text(self) -> str:
        """The first choice's text."""
        return self.choices[0].text if self.choices else ""

    @property
    def texts(self) -> list[str]:
        """Every choice's text, in order."""
        return [c.text for c in self.choices]

    def with_choices(self, choices: Sequence[Choice]) -> ChatResult:
        """A copy with ``choices`` instead (e.g. cut to their turn by a seat)."""
        return dataclasses.replace(self, choices=tuple(choices))

    def to_log(self, **context: Any) -> dict[str, Any]:
        """A JSON-ready record of this call for the run log (``context`` keys first).

        Keys: ``backend``, ``model``, ``n``, ``n_requests``, ``latency_s``,
        ``prompt_tokens``, ``prompt_tokens_sent`` (``prompt_tokens`` unless the backend
        counted more, e.g. retried requests), ``completion_tokens``, ``finish_reasons``,
        ``truncated`` (any choice cut by ``max_tokens``), ``stop_enforced`` (any choice
        cut on this side at a stop string), ``seed``, ``system_fingerprint``,
        ``warnings``, ``attempts`` (list of :attr:`attempts` dicts). When a choice
        :attr:`~Choice.wrote_past_turn`, ``flags`` (the context's, or a new list) ends
        with ``"wrote_past_turn"``. When the call's :attr:`messages` were kept:
        ``messages`` (list of ``{"role", "content"}``) and ``raw_reply`` (list of str,
        one per choice, each before any cut).
        """
        record = dict(context)
        if any(c.wrote_past_turn for c in self.choices):
            flags = list(record.get("flags") or [])
            record["flags"] = flags if "wrote_past_turn" in flags else [*flags,
                                                                        "wrote_past_turn"]
        record.update(
            backend=self.backend,
            model=self.model,
            n=len(self.choices),
            n_requests=self.n_requests,
            latency_s=round(self.latency_s, 6),
            prompt_tokens=self.prompt_tokens,
            prompt_tokens_sent=(self.prompt_tokens if self.prompt_tokens_sent is None
                                else self.prompt_tokens_sent),
            completion_tokens=self.completion_tokens,
            finish_reasons=[c.finish_reason for c in self.choices],
            truncated=any(c.truncated for c in self.choices),
            stop_enforced=any(c.stop_enforced for c in self.choices),
            seed=self.seed,
            system_fingerprint=self.system_fingerprint,
            warnings=list(self.warnings),
            attempts=[dict(a) for a in self.attempts],
        )
        if self.messages is not None:
            record["messages"] = [dict(m) for m in self.messages]
            record["raw_reply"] = [c.raw for c in self.choices]
        if any(c.token_ids is not None for c in self.choices):
            record["completion_ids"] = [list(c.token_ids or ()) for c in self.choices]
            record["logprobs"] = [None if c.logprobs is None else list(c.logprobs)
                                  for c in self.choices]
            if self.prompt_ids is not None:
                record["prompt_ids"] = list(self.prompt_ids)
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
        log_messages: keep each call's messages on its result (:attr:`ChatResult.
            messages`), so that its run-log record holds them and the raw replies
            (default ``False``; ``clinenv run --log-messages`` sets it). Left out of
            :meth:`describe`: it changes the log, never a reply.
        log_tokens: ask the backend for token ids and logprobs and keep them
            (:attr:`Choice.token_ids`, :attr:`Choice.logprobs`,
            :attr:`ChatResult.prompt_ids`; default ``False``; ``clinenv run
            --log-tokens`` sets it). Left out of :meth:`describe` as well.
    """

    backend: ClassVar[str] = "abstract"
    log_messages: bool = False
    log_tokens: bool = False

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
        checked = check_messages(messages)
        return self._keep_messages(
            self._generate(checked, (config or self.config).merged(**overrides)), checked)

    async def agenerate(self, messages: Sequence[Message],
                        config: GenerationConfig | None = None, **overrides: Any) -> ChatResult:
        """One call, asynchronously (same arguments and errors as :meth:`generate`)."""
        checked = check_messages(messages)
        return self._keep_messages(
            await self._agenerate(checked, (config or self.config).merged(**overrides)),
            checked)

    def _keep_messages(self, result: ChatResult, messages: list[dict[str, str]]) -> ChatResult:
        """``result`` with ``messages`` attached when :attr:`log_messages` is on."""
        if not self.log_messages:
            return result
        return dataclasses.replace(result, messages=tuple(dict(m) for m in messages))

    def generate_batch(self, conversations: Sequence[Sequence[Message]],
                       config: GenerationConfig | None = None,
                       **overrides: Any) -> list[ChatResult]:
        """Many independent calls with one config; results in input order.

        The base implementation loops over :meth:`generate`; batching backends override.
        """
        cfg = (config or self.config).merged(**overrides)
        checked = [check_messages(m) for m in conversations]
        return [self._keep_messages(self._generate(m, cfg), m) for m in checked]

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
