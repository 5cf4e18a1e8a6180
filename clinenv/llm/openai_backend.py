"""Chat models behind an OpenAI-compatible chat-completions server.

Extra ``openai``; a final failure raises :class:`~clinenv.llm.base.BackendError`. The
transports, retries and reply handling: docs/llm-doctors.md.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import email.utils
import importlib.util
import json
import math
import os
import random
import threading
import time
import weakref
from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal

from clinenv.errors import install_hint
from clinenv.llm.base import (
    BackendError,
    BackendUnavailableError,
    ChatModel,
    ChatResult,
    Choice,
    GenerationConfig,
    enforce_stop,
)
from clinenv.llm.checks import finish_reason, identical_choices_warning
from clinenv.seeding import call_seed

#: Requests sent by the current call: the openai clients' request hooks and the aiohttp
#: transport increment the counter of the call whose context they run in (sync: the
#: calling thread; async: the calling task).
_REQUEST_COUNTER: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "clinenv_openai_request_counter", default=None)

#: Stop strings sent to the server at most (the OpenAI API's limit); all are enforced here.
MAX_SERVER_STOPS = 4
#: Longest ``retry-after`` waited for (seconds); a longer one is not retried.
MAX_RETRY_AFTER_S = 60.0
#: First backoff wait (seconds), doubled per retry up to :data:`MAX_RETRY_DELAY_S`.
INITIAL_RETRY_DELAY_S = 0.5
MAX_RETRY_DELAY_S = 8.0
#: The aiohttp transport's connection limit and keep-alive expiry (seconds): the openai
#: client's defaults (``DEFAULT_CONNECTION_LIMITS``).
MAX_CONNECTIONS = 1000
KEEPALIVE_S = 5.0
#: Where a ``base_url`` of ``None`` points: ``OPENAI_BASE_URL``, else this (as the
#: openai client does).
DEFAULT_BASE_URL = "https://api.openai.com/v1"

ReasoningFallback = Literal["reasoning", "content"]
HttpTransport = Literal["auto", "aiohttp", "httpx"]
Preload = Literal["both", "async", "sync"]

#: The chat-completions route, relative to ``base_url``.
_PATH = "/chat/completions"

#: What a 200 reply declared as JSON raises when its body does not decode (both
#: transports call ``json.loads`` on the bytes); a body of another content type comes
#: back as a ``str``.
_UNDECODABLE = (json.JSONDecodeError, UnicodeDecodeError)


def _field(obj: Any, name: str, kind: type) -> Any:
    """``obj[name]`` when ``obj`` is a dict and the value has type ``kind``, else ``None``."""
    value = obj.get(name) if isinstance(obj, dict) else None
    return value if isinstance(value, kind) else None


def _import_openai() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise BackendUnavailableError(
            "the OpenAI-compatible backend needs the openai client: "
            + install_hint("openai")) from exc
    return openai


def _installed(name: str) -> bool:
    """Whether top-level package ``name`` can be imported (found without importing it)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def aiohttp_available() -> bool:
    """Whether ``http_transport="aiohttp"`` can be used here (``aiohttp`` is installed;
    the ``openai`` extra installs it)."""
    return _installed("aiohttp")


def _count_request(request: Any) -> None:
    counter = _REQUEST_COUNTER.get()
    if counter is not None:
        counter[0] += 1


async def _acount_request(request: Any) -> None:
    _count_request(request)


async def _close_on_loop_shutdown(client: Any) -> AsyncIterator[None]:
    """An async generator parked at its ``yield`` until the loop shuts down its async
    generators; then it closes ``client`` on that loop."""
    try:
        yield
    finally:
        await client.close()


def _encode(body: Mapping[str, Any]) -> bytes:
    """A request body as the openai client encodes it: compact UTF-8 JSON, no NaN."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False).encode()


def _root_url(base_url: str | None) -> str:
    """``base_url`` (default: ``OPENAI_BASE_URL``, else :data:`DEFAULT_BASE_URL`) with one
    trailing slash, as the openai client keeps it."""
    url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    return url if url.endswith("/") else url + "/"


def _env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``<scheme>_proxy``, else
    ``all_proxy``; none when ``no_proxy`` covers its host), as the openai client's httpx
    reads them; ``None`` without one."""
    import urllib.request
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or (parts.hostname and urllib.request.proxy_bypass_environment(
            parts.hostname, proxies)):
        return None
    return proxy


class _Failure(Exception):
    """A failed HTTP attempt, whichever client made it (its text: the openai client's).

    Attributes:
        detail: ``"timeout"``, ``"connection"``, ``"http_<status>"``, ``"malformed"`` or
            ``"error"``.
        headers: an ``"http_<status>"`` reply's headers (case-insensitive ``get``), else
            ``None``.
    """

    def __init__(self, message: str, *, detail: str, headers: Any = None) -> None:
        super().__init__(message)
        self.detail = detail
        self.headers = headers


def _openai_failure(exc: Exception, openai: Any) -> _Failure:
    """An openai client exception as a :class:`_Failure` (its text kept)."""
    if isinstance(exc, openai.APITimeoutError):
        return _Failure(str(exc), detail="timeout")
    if isinstance(exc, openai.APIConnectionError):
        return _Failure(str(exc), detail="connection")
    if isinstance(exc, openai.APIStatusError):
        return _Failure(str(exc), detail=f"http_{exc.status_code}",
                        headers=exc.response.headers)
    if isinstance(exc, openai.APIResponseValidationError):
        return _Failure(str(exc), detail="malformed")
    return _Failure(str(exc), detail="error")


def _status_message(status: int, body: bytes) -> str:
    """The openai client's text for an HTTP error reply: ``"Error code: <status>"``, then
    ``" - <message>"`` when the body is JSON with an (``error``) ``message`` string."""
    text = f"Error code: {status}"
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return text
    error = data.get("error", data) if isinstance(data, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return f"{text} - {message}" if isinstance(message, str) and message else text


def _backend_error(exc: _Failure, base_url: str, n_requests: int) -> BackendError:
    """A failed attempt as a :class:`BackendError` with a machine-readable detail."""
    return BackendError(f"{base_url}: {exc.detail} after {n_requests} request(s): {exc}",
                        backend=OpenAIChatModel.backend, detail=exc.detail)


def retry_after_s(headers: Any) -> float | None:
    """Seconds a reply's ``retry-after-ms`` / ``retry-after`` header asks to wait
    (a number, or an HTTP date for ``retry-after``), or ``None`` without a usable one."""
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) / divisor
        except ValueError:
            continue
    try:
        date = email.utils.parsedate_tz(headers.get("retry-after"))
        return None if date is None else float(email.utils.mktime_tz(date) - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


def retry_wait_s(detail: str, headers: Any, retry: int) -> float | None:
    """Seconds to wait before retry ``retry`` (0-based) of a request that failed with
    ``detail`` (``"timeout"``, ``"connection"``, ``"http_<status>"``...; ``headers``: the
    reply's, for an HTTP error), or ``None`` when that failure is not retried
    (docs/llm-doctors.md)."""
    backoff = min(INITIAL_RETRY_DELAY_S * 2.0 ** min(retry, 60), MAX_RETRY_DELAY_S)
    backoff *= 1 - 0.25 * random.random()
    if detail in ("timeout", "connection"):
        return backoff
    if not detail.startswith("http_"):
        return None
    status = int(detail[5:])
    after = retry_after_s(headers)
    if after is not None and math.isfinite(after) and after > MAX_RETRY_AFTER_S:
        return None
    should = headers.get("x-should-retry") if headers is not None else None
    if should == "false" or (should != "true" and status not in (408, 409, 429)
                             and status < 500):
        return None
    return after if after is not None and 0 < after <= MAX_RETRY_AFTER_S else backoff


# --------------------------------------------------------------------------- clients
class _AsyncOpenAIClient:
    """The openai client's ``AsyncOpenAI`` behind :meth:`apost`; failures raise
    :class:`_Failure`."""

    def __init__(self, client: Any, openai: Any) -> None:
        self.client = client
        self.base_url = str(client.base_url)
        self._openai = openai

    async def apost(self, body: dict[str, Any]) -> Any:
        try:
            return await self.client.post(_PATH, cast_to=object, body=body)
        except self._openai.OpenAIError as exc:
            raise _openai_failure(exc, self._openai) from exc

    async def close(self) -> None:
        await self.client.close()


def _post(client: Any, openai: Any, body: dict[str, Any]) -> Any:
    """``body`` posted with the openai client's synchronous ``OpenAI`` ``client``;
    failures raise :class:`_Failure`."""
    try:
        return client.post(_PATH, cast_to=object, body=body)
    except openai.OpenAIError as exc:
        raise _openai_failure(exc, openai) from exc


class _AioHttpClient:
    """``POST <base_url>/chat/completions`` with one ``aiohttp.ClientSession`` (made in
    the running event loop; docs/llm-doctors.md says what it sends and how it fails)."""

    def __init__(self, base_url: str, headers: dict[str, str], timeout_s: float) -> None:
        import aiohttp

        self.base_url = base_url
        self._url = base_url + _PATH.lstrip("/")
        self._headers = headers
        self._timeout = aiohttp.ClientTimeout(total=None, connect=timeout_s,
                                              sock_connect=timeout_s, sock_read=timeout_s)
        # the proxy is looked up once: aiohttp's trust_env would look it up (and read
        # ~/.netrc) in a worker thread on every request
        self._proxy = _env_proxy(self._url)
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=MAX_CONNECTIONS,
                                           keepalive_timeout=KEEPALIVE_S))
        self._transport_errors = (aiohttp.ClientError, OSError)

    async def apost(self, body: dict[str, Any]) -> Any:
        data = _encode(body)
        counter = _REQUEST_COUNTER.get()
        if counter is not None:
            counter[0] += 1
        try:
            async with self._session.post(self._url, data=data, headers=self._headers,
                                          timeout=self._timeout, proxy=self._proxy) as reply:
                raw = await reply.read()
        except (asyncio.TimeoutError, TimeoutError) as exc:  # aiohttp's timeouts included
            raise _Failure("Request timed out.", detail="timeout") from exc
        except self._transport_errors as exc:
            raise _Failure("Connection error.", detail="connection") from exc
        if counter is not None and reply.history:  # redirects followed
            counter[0] += len(reply.history)
        status = reply.status
        if status >= 400:
            raise _Failure(_status_message(status, raw), detail=f"http_{status}",
                           headers=reply.headers)
        content_type = reply.headers.get("content-type", "*").split(";")[0]
        if not content_type.endswith("json"):
            try:
                return raw.decode(reply.charset or "utf-8", errors="replace")
            except LookupError:  # a charset Python does not know
                return raw.decode("utf-8", errors="replace")
        return json.loads(raw)

    async def close(self) -> None:
        await self._session.close()


class _Collector:
    """Collects the choices of one logical call over its requests (sans I/O).

    ``next_request()`` gives the keyword arguments of the next request (``None`` when
    ``n`` choices are in); ``add(completion)`` ingests a reply. Both raise
    :class:`BackendError` when the policy gives up.
    """

    def __init__(self, model: str, messages: list[dict[str, str]], config: GenerationConfig,
                 fallback: ReasoningFallback, tokens: bool = False) -> None:
        self.model = model
        self.tokens = tokens
        self.prompt_ids: tuple[int, ...] | None = None
        self.messages = messages
        self.config = config
        self.fallback = fallback
        self.choices: list[Choice] = []
        self.warnings: list[str] = []
        self.top_ups = 0
        self.empty_replies = 0
        self.malformed_replies = 0
        self.prompt_tokens: int | None = None
        self.completion_tokens: int | None = None
        self.fingerprint: str | None = None
        self.reported_model: str | None = None
        self.attempts: list[dict[str, Any]] = []
        self._attempt_tokens: list[int | None] = []  # prompt tokens reported per attempt

    def attempt(self, outcome: str, start: float, *, prompt_tokens: int | None = None,
                wait_s: float | None = None) -> None:
        """Record one HTTP attempt that began at ``start`` (``time.perf_counter``)."""
        record: dict[str, Any] = {"outcome": outcome,
                                  "latency_s": round(time.perf_counter() - start, 6)}
        if wait_s is not None:
            record["wait_s"] = round(wait_s, 6)
        self.attempts.append(record)
        self._attempt_tokens.append(prompt_tokens)

    def prompt_tokens_sent(self) -> int | None:
        """Prompt tokens of every attempt that reached the server (docs/llm-doctors.md)."""
        known = [t for t in self._attempt_tokens if t is not None]
        if not known:
            return None
        return sum(t if t is not None else (0 if a["outcome"] == "connection" else known[0])
                   for a, t in zip(self.attempts, self._attempt_tokens, strict=True))

    def next_request(self) -> dict[str, Any] | None:
        cfg = self.config
        missing = cfg.n - len(self.choices)
        if missing <= 0:
            return None
        seed = cfg.seed
        if self.choices:  # a top-up request; each reply adds >= 1 choice
            self.top_ups += 1
            seed = call_seed(cfg.seed, "top-up", self.top_ups)
        kwargs: dict[str, Any] = {
            "model": self.model, "messages": self.messages, "n": missing,
            "temperature": cfg.temperature, "top_p": cfg.top_p, "max_tokens": cfg.max_tokens,
        }
        if seed is not None:
            kwargs["seed"] = seed
        if cfg.stop:
            kwargs["stop"] = list(cfg.stop)[:MAX_SERVER_STOPS]
        if self.tokens:
            kwargs.update(logprobs=True, return_token_ids=True)
        if cfg.extra:
            kwargs.update(cfg.extra)
        return kwargs

    def unreadable(self, what: str) -> None:
        """Note an unreadable reply (``what`` says why): the first one is repeated, the
        second raises ``BackendError(detail="malformed")``."""
        self.malformed_replies += 1
        if self.malformed_replies > 1:
            raise BackendError(f"unreadable reply twice; the last: {what}", backend="openai",
                               detail="malformed")
        self.warnings.append(f"unreadable reply ({what[:120]}); request repeated once")

    def add(self, completion: Any, start: float) -> None:
        """Ingest the reply of the attempt that began at ``start`` (and record it)."""
        choices = completion.get("choices") if isinstance(completion, dict) else None
        if not isinstance(choices, list):
            self.attempt("unreadable", start)
            self.unreadable(f"no 'choices' list in {str(completion)[:200]!r}")
            return
        tokens = self._usage(completion)
        if not choices:
            self.attempt("no_choices", start, prompt_tokens=tokens)
            self.empty_replies += 1
            if self.empty_replies > 1:
                raise BackendError("server returned no choices twice",
                                   backend="openai", detail="no_choices")
            self.warnings.append("server returned no choices; request repeated once")
            return
        self.attempt("ok", start, prompt_tokens=tokens)
        if self.tokens and self.prompt_ids is None:
            self.prompt_ids = _int_list(completion.get("prompt_token_ids"))
        missing = self.config.n - len(self.choices)
        if len(choices) < missing:
            self.warnings.append(f"server returned {len(choices)} of {missing} requested "
                                 "choices; topping up")
        for raw in list(choices)[:missing]:
            self.choices.append(enforce_stop(self._choice(raw, len(self.choices)),
                                             self.config.stop))

    def _usage(self, completion: Any) -> int | None:
        """Add a reply's token counts; return its prompt tokens (``None``: not sent)."""
        self.fingerprint = self.fingerprint or _field(completion, "system_fingerprint", str)
        self.reported_model = self.reported_model or _field(completion, "model", str)
        usage = _field(completion, "usage", dict) or {}
        for name in ("prompt_tokens", "completion_tokens"):
            value = usage.get(name)
            if isinstance(value, int):
                setattr(self, name, (getattr(self, name) or 0) + value)
        prompt = usage.get("prompt_tokens")
        return prompt if isinstance(prompt, int) else None

    def _choice(self, raw: Any, position: int) -> Choice:
        message = _field(raw, "message", dict) or {}
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        reasoning = None
        for name in ("reasoning", "reasoning_content"):
            value = message.get(name)
            if isinstance(value, str) and value.strip():
                reasoning = value
                break
        reason = finish_reason(_field(raw, "finish_reason", str))
        if self.tokens:
            return dataclasses.replace(self._text_choice(text, reason, reasoning, position),
                                       **_choice_tokens(raw))
        return self._text_choice(text, reason, reasoning, position)

    def _text_choice(self, text: str, reason: str, reasoning: str | None,
                     position: int) -> Choice:
        if text.strip() or reasoning is None:
            return Choice(text=text, finish_reason=reason, reasoning=reasoning)
        # Empty content with reasoning text.
        if reason == "length":
            self.warnings.append(f"choice {position}: cut by max_tokens inside reasoning; "
                                 "no answer")
            return Choice(text="", finish_reason=reason, reasoning=reasoning)
        if reason == "stop" and self.fallback == "reasoning":
            self.warnings.append(f"choice {position}: no content; the reasoning text is "
                                 "used as the answer")
            return Choice(text=reasoning, finish_reason=reason, reasoning=reasoning,
                          from_reasoning=True)
        self.warnings.append(f"choice {position}: no content, only reasoning; answer left "
                             "empty")
        return Choice(text="", finish_reason=reason, reasoning=reasoning)

    def result(self, configured_model: str, latency_s: float, n_requests: int) -> ChatResult:
        choices = tuple(self.choices)
        warnings = list(self.warnings)
        note = identical_choices_warning(choices, self.config)
        if note:
            warnings.append(note)
        retried = [a["outcome"] for a in self.attempts if "wait_s" in a]
        if retried:
            warnings.append(f"retried {len(retried)} time(s) after {', '.join(retried)}: "
                            f"{len(self.attempts)} attempts for this call")
        stopped = sum(c.stop_enforced for c in choices)
        if stopped:
            warnings.append(f"{stopped} choice(s) went past a stop string the server did "
                            "not apply; cut here")
        return ChatResult(
            choices=choices, model=self.reported_model or configured_model, backend="openai",
            prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens,
            latency_s=latency_s, n_requests=n_requests, seed=self.config.seed,
            system_fingerprint=self.fingerprint, warnings=tuple(warnings),
            attempts=tuple(self.attempts), prompt_tokens_sent=self.prompt_tokens_sent(),
            prompt_ids=self.prompt_ids)


def _int_list(value: Any) -> tuple[int, ...] | None:
    """``value`` as a tuple of ints when it is a list of ints, else ``None``."""
    if isinstance(value, list) and all(type(v) is int for v in value):
        return tuple(value)
    return None


def _choice_tokens(raw: Any) -> dict[str, Any]:
    """``token_ids`` and ``logprobs`` of a reply choice (vLLM's ``token_ids`` and
    ``logprobs.content[*].logprob``); ``None`` where absent or malformed, and the
    logprobs also where their count differs from the token ids'."""
    ids = _int_list(raw.get("token_ids")) if isinstance(raw, dict) else None
    content = (_field(raw, "logprobs", dict) or {}).get("content")
    logprobs = None
    if isinstance(content, list) and all(
            isinstance(c, dict) and isinstance(c.get("logprob"), (int, float))
            and not isinstance(c.get("logprob"), bool) for c in content):
        logprobs = tuple(float(c["logprob"]) for c in content)
        if ids is not None and len(logprobs) != len(ids):
            logprobs = None
    return {"token_ids": ids, "logprobs": logprobs}


#: :func:`_owned_httpx_client`'s class, made on first use (openai is imported lazily).
_OWNED_HTTPX_CLIENT: Any = None


def _owned_httpx_client(openai: Any) -> Any:
    """openai's ``DefaultHttpxClient`` class, closing its pool when garbage-collected as
    the client openai builds for itself does (a client passed in is never closed by
    openai): a model dropped without :meth:`OpenAIChatModel.close` leaves no open
    socket behind."""
    global _OWNED_HTTPX_CLIENT
    if _OWNED_HTTPX_CLIENT is None:
        class OwnedHttpxClient(openai.DefaultHttpxClient):
            def __del__(self) -> None:
                if not self.is_closed:
                    try:
                        self.close()
                    except Exception:  # interpreter shutdown: nothing left to close
                        pass

        _OWNED_HTTPX_CLIENT = OwnedHttpxClient
    return _OWNED_HTTPX_CLIENT


class OpenAIChatModel(ChatModel):
    """A model served over the OpenAI chat-completions protocol (docs/llm-doctors.md).

    Args:
        model: the model name the server knows (``"Qwen/Qwen3-8B"``...).
        base_url: the server's ``/v1`` URL; ``None`` uses ``OPENAI_BASE_URL``, else OpenAI.
        api_key: ``None`` reads ``OPENAI_API_KEY``, else sends ``"EMPTY"``.
        timeout_s: seconds per HTTP request (> 0).
        max_retries: retries after the first attempt of each request (>= 0).
        config: default :class:`GenerationConfig`; ``config.extra`` is merged into the body.
        reasoning_fallback: ``"reasoning"`` (default) or ``"content"``.
        http_transport: of the asynchronous calls: ``"auto"`` (aiohttp when installed,
            else httpx), ``"aiohttp"`` or ``"httpx"``; left out of :meth:`describe`.
        preload: the clients imported now: ``"both"`` (default), ``"async"`` or ``"sync"``.

    Raises:
        BackendUnavailableError: ``openai`` is missing, or aiohttp for ``"aiohttp"``.
        ValueError: ``timeout_s`` <= 0, ``max_retries`` < 0, or an unknown
            ``reasoning_fallback``, ``http_transport`` or ``preload``.
    """

    backend = "openai"

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout_s: float = 60.0, max_retries: int = 3,
                 config: GenerationConfig | None = None,
                 reasoning_fallback: ReasoningFallback = "reasoning",
                 http_transport: HttpTransport = "auto", preload: Preload = "both") -> None:
        if not _installed("openai"):
            _import_openai()  # raises BackendUnavailableError naming the extra
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if reasoning_fallback not in ("reasoning", "content"):
            raise ValueError("reasoning_fallback must be 'reasoning' or 'content', got "
                             f"{reasoning_fallback!r}")
        if http_transport not in ("auto", "aiohttp", "httpx"):
            raise ValueError("http_transport must be 'auto', 'aiohttp' or 'httpx', got "
                             f"{http_transport!r}")
        if preload not in ("both", "async", "sync"):
            raise ValueError(f"preload must be 'both', 'async' or 'sync', got {preload!r}")
        has_aiohttp = http_transport != "httpx" and aiohttp_available()
        if http_transport == "aiohttp" and not has_aiohttp:
            raise BackendUnavailableError(
                "http_transport='aiohttp' needs aiohttp: pip install 'openai[aiohttp]' "
                f"(or {install_hint('openai')})")
        self.async_transport: Literal["aiohttp", "httpx"] = (
            "aiohttp" if has_aiohttp else "httpx")
        if preload != "sync" and self.async_transport == "aiohttp":
            import aiohttp  # noqa: F401  (imported now, before the first request)
        if preload != "async" or self.async_transport == "httpx":
            _import_openai()
        super().__init__(model, config=config)
        self.base_url = base_url
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.reasoning_fallback: ReasoningFallback = reasoning_fallback
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self._init_clients()

    def _init_clients(self) -> None:
        self._lock = threading.Lock()
        self._sync: Any = None  # the openai client's OpenAI
        # loop -> (client, shutdown guard); weak keys: a finished loop is not kept.
        self._async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Any, Any]] = (
            weakref.WeakKeyDictionary())
        self._closing: set[asyncio.Task] = set()  # close() tasks scheduled on a running loop

    # ------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict[str, Any]:
        """Picklable without its clients (they are rebuilt on first use)."""
        state = self.__dict__.copy()
        for name in ("_lock", "_sync", "_async", "_closing"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_clients()

    def describe(self) -> dict[str, Any]:
        """Backend, model, config, base URL, timeout, retries and fallback (no key)."""
        info = super().describe()
        info.update(base_url=self.base_url, timeout_s=self.timeout_s,
                    max_retries=self.max_retries, reasoning_fallback=self.reasoning_fallback)
        return info

    # ------------------------------------------------------------------ clients
    def _client_kwargs(self) -> dict[str, Any]:
        # Retries are done by _post (each attempt recorded), never by the client.
        return {"base_url": self.base_url, "api_key": self._api_key,
                "timeout": self.timeout_s, "max_retries": 0}

    def _aiohttp_headers(self) -> dict[str, str]:
        """The aiohttp transport's request headers (docs/llm-doctors.md)."""
        headers = {"Authorization": f"Bearer {self._api_key}",
                   "Content-Type": "application/json", "Accept": "application/json"}
        for name, variable in (("OpenAI-Organization", "OPENAI_ORG_ID"),
                               ("OpenAI-Project", "OPENAI_PROJECT_ID")):
            value = os.environ.get(variable)
            if value:
                headers[name] = value
        return headers

    def _sync_client(self) -> Any:
        with self._lock:
            if self._sync is None:
                openai = _import_openai()
                http = _owned_httpx_client(openai)(event_hooks={"request": [_count_request]})
                self._sync = openai.OpenAI(http_client=http, **self._client_kwargs())
            return self._sync

    def _new_async_client(self) -> Any:
        """A fresh asynchronous client of :attr:`async_transport` (in the running loop)."""
        if self.async_transport == "aiohttp":
            return _AioHttpClient(_root_url(self.base_url), self._aiohttp_headers(),
                                  self.timeout_s)
        openai = _import_openai()
        http = openai.DefaultAsyncHttpxClient(event_hooks={"request": [_acount_request]})
        return _AsyncOpenAIClient(
            openai.AsyncOpenAI(http_client=http, **self._client_kwargs()), openai)

    async def _async_client(self) -> Any:
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._async.get(loop)
            if entry is not None:  # the common case: no scan for stale loops
                return entry[0]
            for stale in [lp for lp in self._async if lp.is_closed()]:
                del self._async[stale]
            client = self._new_async_client()
            entry = (client, _close_on_loop_shutdown(client))
            self._async[loop] = entry
        await entry[1].__anext__()  # registers the guard with this loop
        return client

    def close(self) -> None:
        """Close the synchronous client and every event loop's asynchronous client.

        An asynchronous client whose loop runs in this thread cannot be awaited here; its
        closing is scheduled on that loop (prefer ``await model.aclose()`` there). The
        model stays usable: clients are rebuilt on the next call.
        """
        with self._lock:
            sync, self._sync = self._sync, None
            entries = list(self._async.items())
            self._async.clear()
        if sync is not None:
            sync.close()
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        for loop, (client, _guard) in entries:
            if loop.is_closed():
                continue
            if loop is current:
                task = loop.create_task(client.close())
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
            elif loop.is_running():
                asyncio.run_coroutine_threadsafe(client.close(), loop).result(timeout=10)
            else:
                loop.run_until_complete(client.close())

    async def aclose(self) -> None:
        """Close this loop's asynchronous client (awaited), then the others as
        :meth:`close` does."""
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._async.pop(loop, None)
        if entry is not None:
            await entry[0].close()
        self.close()

    # ------------------------------------------------------------------ calls
    def _generate(self, messages: list[dict[str, str]], config: GenerationConfig) -> ChatResult:
        client = self._sync_client()
        openai = _import_openai()
        collector = _Collector(self.model, messages, config, self.reasoning_fallback,
                               self.log_tokens)
        counter = [0]
        token = _REQUEST_COUNTER.set(counter)
        start = time.perf_counter()
        try:
            while (kwargs := collector.next_request()) is not None:
                retry = 0
                while True:
                    began = time.perf_counter()
                    try:
                        completion = _post(client, openai, kwargs)
                    except _UNDECODABLE as exc:
                        collector.attempt("unreadable", began)
                        collector.unreadable(f"body is not valid JSON: {exc}")
                        break
                    except _Failure as exc:
                        time.sleep(self._failed(collector, exc, began, retry, client, counter))
                        retry += 1
                        continue
                    collector.add(completion, began)
                    break
        finally:
            _REQUEST_COUNTER.reset(token)
        return collector.result(self.model, time.perf_counter() - start, counter[0])

    async def _agenerate(self, messages: list[dict[str, str]],
                         config: GenerationConfig) -> ChatResult:
        client = await self._async_client()
        collector = _Collector(self.model, messages, config, self.reasoning_fallback,
                               self.log_tokens)
        counter = [0]
        token = _REQUEST_COUNTER.set(counter)
        start = time.perf_counter()
        try:
            while (kwargs := collector.next_request()) is not None:
                retry = 0
                while True:
                    began = time.perf_counter()
                    try:
                        completion = await client.apost(kwargs)
                    except _UNDECODABLE as exc:
                        collector.attempt("unreadable", began)
                        collector.unreadable(f"body is not valid JSON: {exc}")
                        break
                    except _Failure as exc:
                        await asyncio.sleep(
                            self._failed(collector, exc, began, retry, client, counter))
                        retry += 1
                        continue
                    collector.add(completion, began)
                    break
        finally:
            _REQUEST_COUNTER.reset(token)
        return collector.result(self.model, time.perf_counter() - start, counter[0])

    def _failed(self, collector: _Collector, exc: _Failure, began: float, retry: int,
                client: Any, counter: list[int]) -> float:
        """Record a failed attempt; return the wait before retry ``retry`` (0-based).

        Raises:
            BackendError: the failure is not retried, or the retries are used up.
        """
        wait = (retry_wait_s(exc.detail, exc.headers, retry) if retry < self.max_retries
                else None)
        collector.attempt(exc.detail, began, wait_s=wait)
        if wait is None:
            raise _backend_error(exc, str(client.base_url), counter[0]) from exc
        return wait
