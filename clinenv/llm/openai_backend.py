"""Chat models behind an OpenAI-compatible chat-completions server.

``vllm serve MODEL``, llama.cpp's server, hosted providers, or the project's own
:class:`~clinenv.testing.fake_server.FakeChatServer`. Uses the ``openai`` client (extra
``openai``), imported when a model is constructed.

Policies (each one answers a field-bug-reports entry):

- **Retries**: bounded retries with exponential backoff, done here (the openai client
  is built with ``max_retries=0``) so that each attempt is seen: timeouts, connection
  errors, 408, 409, 429 and 5xx are retried ``max_retries`` times after the first
  attempt of each request, waiting ``retry-after-ms`` / ``retry-after`` when the server
  sends one (up to :data:`MAX_RETRY_AFTER_S`; a longer one is not retried), else
  0.5 s doubling up to 8 s, less up to 25% jitter (the openai client's own schedule);
  ``x-should-retry: true|false`` is obeyed. A final failure raises
  :class:`~clinenv.llm.base.BackendError` with ``detail`` ``"timeout"``,
  ``"connection"``, ``"http_<status>"`` or ``"malformed"``. ``ChatResult.n_requests``
  counts every HTTP request sent, retries included (an httpx request hook), and
  ``ChatResult.attempts`` holds one ``{"outcome", "latency_s"}`` dict per request
  (``"wait_s"`` added before a retry; outcomes ``"ok"``, ``"no_choices"``,
  ``"unreadable"``, ``"timeout"``, ``"connection"``, ``"http_<status>"``, ``"error"``).
  A call with retries gets a warning line naming them.
- **Prompt tokens sent**: ``ChatResult.prompt_tokens_sent`` counts the prompt tokens of
  every request that reached the server: the server's own count for each reply with
  ``usage``, and for an attempt that reached it without one (a timeout, an HTTP error,
  an unreadable body) the prompt tokens the server reported for this call's messages
  (every request of a call sends the same messages), an estimate; a ``"connection"``
  attempt counts none. ``None`` when no reply reported usage.
- **Stop strings**: at most :data:`MAX_SERVER_STOPS` (the OpenAI API's limit) of
  ``config.stop`` are sent; all of them are enforced on the reply here
  (:func:`~clinenv.llm.base.enforce_stop`), since some servers ignore ``stop`` and
  return text past it: such a choice is cut, gets ``finish_reason="stop"`` and
  ``stop_enforced=True``, and its record's ``flags`` get ``"wrote_past_turn"``.
- **Fewer choices than n** (B08a): further requests ask for the missing count, the k-th
  with a distinct seed derived from the call's seed (:func:`clinenv.seeding.call_seed`
  with keys ``"top-up", k``) when the call has one. Every non-empty reply adds at least
  one choice, so at most ``n - 1`` top-ups follow (``n + 1`` requests in all with the
  one repeat of an empty reply, retries aside); a reply is never used as more samples
  than it holds. Noted in ``ChatResult.warnings``.
- **Identical choices** at temperature > 0 with n > 1 (B08b): a warning.
- **No choices** (B09): one more request; a second empty reply raises
  ``BackendError(detail="no_choices")``, never an ``IndexError``.
- **Unreadable replies**: a 200 reply whose body is not JSON (broken or cut JSON under
  ``content-type: application/json``, or another content type), is JSON but not an
  object, or is an object without a ``choices`` list gets the same policy: one more
  request, and a second unreadable reply raises ``BackendError(detail="malformed")``
  (the contract of :class:`~clinenv.llm.base.BackendError`), never a
  ``json.JSONDecodeError`` escaping into a rollout. The one repeat for an empty reply
  and the one for an unreadable reply are counted apart.
- **content null / reasoning** (B04): ``None`` content becomes ``""`` with the finish
  reason kept. The server's ``reasoning`` / ``reasoning_content`` text is kept apart in
  :attr:`Choice.reasoning`. When the content is empty, the reasoning holds text and the
  finish reason is ``"stop"``, the default ``reasoning_fallback="reasoning"`` takes the
  reasoning as the answer (``Choice.from_reasoning=True``, with a warning);
  ``reasoning_fallback="content"`` keeps ``""`` (with a warning). A reply cut by
  ``max_tokens`` (``"length"``) never falls back: its text stays ``""`` and it is
  truncated.
- **Think tags** (B01): ``<think>`` blocks inside the content are kept as sent; the
  protocol parser removes them.
- **Event loops** (B10): one ``AsyncOpenAI`` client per running event loop (held weakly
  by loop), closed when that loop shuts down its async generators (``asyncio.run`` does
  so before closing the loop) or by :meth:`OpenAIChatModel.close` /
  :meth:`OpenAIChatModel.aclose`; so successive ``asyncio.run`` calls on one model work.
  :meth:`~clinenv.llm.base.ChatModel.generate` uses a separate synchronous client and
  works from any thread, including one that runs an event loop.
- **HTTP transport** of the asynchronous client: the openai client's own choices,
  httpx (its default) or aiohttp (its ``DefaultAioHttpClient``, installed by the
  ``openai[aiohttp]`` extra). At 64 concurrent requests the HTTP stack is most of the
  client's CPU time, and with aiohttp a request costs roughly a third less client CPU
  (benchmarks/bench_rollout.py), so fewer requests queue on the client.
  ``http_transport="auto"`` (default) takes aiohttp when it is installed. Timeouts and
  error types stay the openai client's; the one difference, aiohttp's
  refused or dropped connections surfacing as a timeout, is undone here: a failure
  whose cause is a connection error and no timeout gets ``detail "connection"`` on both
  transports.
"""

from __future__ import annotations

import asyncio
import contextvars
import email.utils
import json
import math
import os
import random
import threading
import time
import weakref
from collections.abc import AsyncIterator
from typing import Any, Literal

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

#: Requests sent by the current call: the request hooks increment the counter of the
#: call whose context they run in (sync: the calling thread; async: the calling task).
_REQUEST_COUNTER: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "clinenv_openai_request_counter", default=None)

#: Stop strings sent to the server at most (the OpenAI API's limit); all are enforced here.
MAX_SERVER_STOPS = 4
#: Longest ``retry-after`` waited for (seconds); a longer one is not retried.
MAX_RETRY_AFTER_S = 60.0
#: First backoff wait (seconds), doubled per retry up to :data:`MAX_RETRY_DELAY_S`.
INITIAL_RETRY_DELAY_S = 0.5
MAX_RETRY_DELAY_S = 8.0

ReasoningFallback = Literal["reasoning", "content"]
HttpTransport = Literal["auto", "aiohttp", "httpx"]


#: The chat-completions route, relative to ``base_url``. Requests go through the client's
#: generic ``post`` (its documented way to call any route) with the body as plain JSON and
#: the reply parsed as plain JSON: the typed ``chat.completions.create`` path costs about
#: 40% more client CPU per request (request transforms and response models), which is the
#: bottleneck at 64 concurrent episodes (benchmarks/bench_rollout.py). Retries, timeouts
#: and error types are the client's own either way.
_PATH = "/chat/completions"


#: What the client raises when a 200 reply declared as JSON does not decode (the client
#: calls ``json.loads`` on it); a body of another content type comes back as a ``str``.
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
            "pip install 'clinenv[openai]'") from exc
    return openai


def _count_request(request: Any) -> None:
    counter = _REQUEST_COUNTER.get()
    if counter is not None:
        counter[0] += 1


async def _acount_request(request: Any) -> None:
    _count_request(request)


async def _close_on_loop_shutdown(client: Any) -> AsyncIterator[None]:
    """An async generator parked at its ``yield`` until the loop shuts down its async
    generators; then it closes ``client`` on that loop (B10)."""
    try:
        yield
    finally:
        await client.close()


def _aiohttp_client_class(openai: Any) -> Any:
    """openai's aiohttp-backed async HTTP client class, or ``None`` when this openai
    version lacks it or its ``aiohttp`` extra is not installed (then constructing it
    raises; a constructed client opens no session before its first request)."""
    cls = getattr(openai, "DefaultAioHttpClient", None)
    if cls is None:
        return None
    try:
        cls()
    except (RuntimeError, ImportError):
        return None
    return cls


def aiohttp_available() -> bool:
    """Whether ``http_transport="aiohttp"`` can be used here (the installed openai client
    has an aiohttp transport and its ``aiohttp`` extra is installed).

    Raises:
        BackendUnavailableError: the ``openai`` package is missing.
    """
    return _aiohttp_client_class(_import_openai()) is not None


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and its chain of causes (``__cause__``, else ``__context__``)."""
    chain: list[BaseException] = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    return chain


def _refused_or_dropped(exc: BaseException) -> bool:
    """Whether an ``APITimeoutError`` is really a connection failure: its causes hold an
    aiohttp connection error and no timeout (aiohttp's transport reports refused and
    dropped connections as connect timeouts)."""
    try:
        import aiohttp
    except ImportError:
        return False
    causes = _causes(exc)[1:]
    return (any(isinstance(c, aiohttp.ClientConnectionError) for c in causes)
            and not any(isinstance(c, TimeoutError) for c in causes))


def _detail(exc: Exception) -> str:
    """The machine-readable kind of a client exception: ``"timeout"``, ``"connection"``,
    ``"http_<status>"``, ``"malformed"`` or ``"error"``."""
    openai = _import_openai()
    if isinstance(exc, openai.APITimeoutError) and _refused_or_dropped(exc):
        return "connection"
    if isinstance(exc, openai.APITimeoutError):
        return "timeout"
    if isinstance(exc, openai.APIConnectionError):
        return "connection"
    if isinstance(exc, openai.APIStatusError):
        return f"http_{exc.status_code}"
    if isinstance(exc, openai.APIResponseValidationError):
        return "malformed"
    return "error"


def _backend_error(exc: Exception, base_url: str, n_requests: int) -> BackendError:
    """A client exception as a :class:`BackendError` with a machine-readable detail."""
    detail = _detail(exc)
    return BackendError(f"{base_url}: {detail} after {n_requests} request(s): {exc}",
                        backend=OpenAIChatModel.backend, detail=detail)


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


def retry_wait_s(exc: Exception, retry: int) -> float | None:
    """Seconds to wait before retry ``retry`` (0-based) of a request that failed with
    ``exc``, or ``None`` when that failure is not retried (module docstring)."""
    openai = _import_openai()
    backoff = min(INITIAL_RETRY_DELAY_S * 2.0 ** min(retry, 60), MAX_RETRY_DELAY_S)
    backoff *= 1 - 0.25 * random.random()
    if isinstance(exc, openai.APIConnectionError):  # timeouts included
        return backoff
    if not isinstance(exc, openai.APIStatusError):
        return None
    headers = exc.response.headers
    after = retry_after_s(headers)
    if after is not None and math.isfinite(after) and after > MAX_RETRY_AFTER_S:
        return None
    should = headers.get("x-should-retry")
    status = exc.status_code
    if should == "false" or (should != "true" and status not in (408, 409, 429)
                             and status < 500):
        return None
    return after if after is not None and 0 < after <= MAX_RETRY_AFTER_S else backoff


class _Collector:
    """Collects the choices of one logical call over its requests (sans I/O).

    ``next_request()`` gives the keyword arguments of the next request (``None`` when
    ``n`` choices are in); ``add(completion)`` ingests a reply. Both raise
    :class:`BackendError` when the policy gives up.
    """

    def __init__(self, model: str, messages: list[dict[str, str]], config: GenerationConfig,
                 fallback: ReasoningFallback) -> None:
        self.model = model
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
        """Prompt tokens of every attempt that reached the server (module docstring)."""
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
        if self.choices:  # a top-up request (B08a); each reply adds >= 1 choice
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
        if not choices:  # B09
            self.attempt("no_choices", start, prompt_tokens=tokens)
            self.empty_replies += 1
            if self.empty_replies > 1:
                raise BackendError("server returned no choices twice (field-bug-reports B09)",
                                   backend="openai", detail="no_choices")
            self.warnings.append("server returned no choices; request repeated once (B09)")
            return
        self.attempt("ok", start, prompt_tokens=tokens)
        missing = self.config.n - len(self.choices)
        if len(choices) < missing:
            self.warnings.append(f"server returned {len(choices)} of {missing} requested "
                                 "choices; topping up (B08)")
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
        if text.strip() or reasoning is None:
            return Choice(text=text, finish_reason=reason, reasoning=reasoning)
        # Empty content with reasoning text (B04).
        if reason == "length":
            self.warnings.append(f"choice {position}: cut by max_tokens inside reasoning; "
                                 "no answer (B04)")
            return Choice(text="", finish_reason=reason, reasoning=reasoning)
        if reason == "stop" and self.fallback == "reasoning":
            self.warnings.append(f"choice {position}: no content; the reasoning text is "
                                 "used as the answer (B04)")
            return Choice(text=reasoning, finish_reason=reason, reasoning=reasoning,
                          from_reasoning=True)
        self.warnings.append(f"choice {position}: no content, only reasoning; answer left "
                             "empty (B04)")
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
            attempts=tuple(self.attempts), prompt_tokens_sent=self.prompt_tokens_sent())


class OpenAIChatModel(ChatModel):
    """A model served over the OpenAI chat-completions protocol.

    Args:
        model: the model name the server knows (``"Qwen/Qwen3-8B"``, ``"gpt-4o"``...).
        base_url: the server's ``/v1`` URL (``"http://127.0.0.1:8000/v1"``); ``None``
            uses the client's default (``OPENAI_BASE_URL`` or OpenAI's API).
        api_key: the key; ``None`` reads ``OPENAI_API_KEY``, else sends ``"EMPTY"``
            (local servers need none).
        timeout_s: seconds per HTTP request (> 0) before it counts as timed out.
        max_retries: retries after the first attempt of each request (>= 0), with
            backoff (module docstring).
        config: default :class:`GenerationConfig`.
        reasoning_fallback: ``"reasoning"`` (default) or ``"content"``: what a reply with
            empty content but a complete reasoning text becomes (see the module
            docstring, B04).
        http_transport: the asynchronous client's HTTP transport: ``"auto"`` (default:
            aiohttp when the ``openai[aiohttp]`` extra is installed, else httpx),
            ``"aiohttp"`` or ``"httpx"``. The synchronous client always uses httpx. The
            transport in use is :attr:`async_transport`; it is left out of
            :meth:`describe` (it changes speed, never replies, so a run log resumed on
            a machine without aiohttp still matches).

    Sends ``temperature``, ``top_p``, ``max_tokens``, ``n``, and when set ``seed`` and
    ``stop`` as top-level request fields, and ``config.extra`` merged into the body
    (e.g. vLLM's ``top_k``).

    Attributes:
        async_transport: ``"aiohttp"`` or ``"httpx"``, the transport the asynchronous
            client uses.

    Raises:
        BackendUnavailableError: the ``openai`` package is missing, or
            ``http_transport="aiohttp"`` without the ``openai[aiohttp]`` extra.
        ValueError: ``timeout_s`` <= 0, ``max_retries`` < 0, an unknown
            ``reasoning_fallback`` or ``http_transport``.
    """

    backend = "openai"

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout_s: float = 60.0, max_retries: int = 3,
                 config: GenerationConfig | None = None,
                 reasoning_fallback: ReasoningFallback = "reasoning",
                 http_transport: HttpTransport = "auto") -> None:
        openai = _import_openai()
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
        has_aiohttp = _aiohttp_client_class(openai) is not None
        if http_transport == "aiohttp" and not has_aiohttp:
            raise BackendUnavailableError(
                "http_transport='aiohttp' needs openai's aiohttp extra: "
                "pip install 'openai[aiohttp]'")
        self.async_transport: Literal["aiohttp", "httpx"] = (
            "aiohttp" if http_transport != "httpx" and has_aiohttp else "httpx")
        super().__init__(model, config=config)
        self.base_url = base_url
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.reasoning_fallback: ReasoningFallback = reasoning_fallback
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self._init_clients()

    def _init_clients(self) -> None:
        self._lock = threading.Lock()
        self._sync: Any = None
        # loop -> (AsyncOpenAI, shutdown guard); weak keys: a finished loop is not kept.
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

    def _sync_client(self) -> Any:
        with self._lock:
            if self._sync is None:
                openai = _import_openai()
                http = openai.DefaultHttpxClient(event_hooks={"request": [_count_request]})
                self._sync = openai.OpenAI(http_client=http, **self._client_kwargs())
            return self._sync

    async def _async_client(self) -> Any:
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._async.get(loop)
            if entry is not None:  # the common case: no scan for stale loops
                return entry[0]
            for stale in [lp for lp in self._async if lp.is_closed()]:
                del self._async[stale]
            entry = self._async.get(loop)
            fresh = entry is None
            if fresh:
                openai = _import_openai()
                http_class = (_aiohttp_client_class(openai) if self.async_transport == "aiohttp"
                              else openai.DefaultAsyncHttpxClient)
                http = http_class(event_hooks={"request": [_acount_request]})
                client = openai.AsyncOpenAI(http_client=http, **self._client_kwargs())
                entry = (client, _close_on_loop_shutdown(client))
                self._async[loop] = entry
        if fresh:
            await entry[1].__anext__()  # registers the guard with this loop
        return entry[0]

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
        collector = _Collector(self.model, messages, config, self.reasoning_fallback)
        counter = [0]
        token = _REQUEST_COUNTER.set(counter)
        start = time.perf_counter()
        openai = _import_openai()
        try:
            while (kwargs := collector.next_request()) is not None:
                retry = 0
                while True:
                    began = time.perf_counter()
                    try:
                        completion = client.post(_PATH, cast_to=object, body=kwargs)
                    except _UNDECODABLE as exc:
                        collector.attempt("unreadable", began)
                        collector.unreadable(f"body is not valid JSON: {exc}")
                        break
                    except openai.OpenAIError as exc:
                        wait = self._failed(collector, exc, began, retry, client, counter)
                        time.sleep(wait)
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
        collector = _Collector(self.model, messages, config, self.reasoning_fallback)
        counter = [0]
        token = _REQUEST_COUNTER.set(counter)
        start = time.perf_counter()
        openai = _import_openai()
        try:
            while (kwargs := collector.next_request()) is not None:
                retry = 0
                while True:
                    began = time.perf_counter()
                    try:
                        completion = await client.post(_PATH, cast_to=object, body=kwargs)
                    except _UNDECODABLE as exc:
                        collector.attempt("unreadable", began)
                        collector.unreadable(f"body is not valid JSON: {exc}")
                        break
                    except openai.OpenAIError as exc:
                        wait = self._failed(collector, exc, began, retry, client, counter)
                        await asyncio.sleep(wait)
                        retry += 1
                        continue
                    collector.add(completion, began)
                    break
        finally:
            _REQUEST_COUNTER.reset(token)
        return collector.result(self.model, time.perf_counter() - start, counter[0])

    def _failed(self, collector: _Collector, exc: Exception, began: float, retry: int,
                client: Any, counter: list[int]) -> float:
        """Record a failed attempt; return the wait before retry ``retry`` (0-based).

        Raises:
            BackendError: the failure is not retried, or the retries are used up.
        """
        wait = retry_wait_s(exc, retry) if retry < self.max_retries else None
        collector.attempt(_detail(exc), began, wait_s=wait)
        if wait is None:
            raise _backend_error(exc, str(client.base_url), counter[0]) from exc
        return wait
