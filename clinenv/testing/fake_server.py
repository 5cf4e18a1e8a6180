"""A local OpenAI-compatible chat-completions server for tests, benchmarks and offline demos.

:class:`FakeChatServer` serves replies from a responder (:mod:`clinenv.testing.fake_responders`,
whose built-ins are re-exported here) and can be told to fail; ``python -m
clinenv.testing.fake_server`` runs it from the command line (``--help``). Routes, faults,
token ids and responders: docs/testing.md, "Test doubles".
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from clinenv.testing.fake_responders import (
    DECISION_MARKER,
    FALLBACK_QUESTION,
    MENU_HEADING,
    RESPONDERS,
    Responder,
    clinician_responder,
    content_text,
    echo_responder,
    last_user_text,
    ok_responder,
    resolve_responder,
    yes_responder,
)

__all__ = [
    "DECISION_MARKER", "FALLBACK_QUESTION", "FakeChatServer", "MENU_HEADING", "RESPONDERS",
    "Responder", "clinician_responder", "echo_responder", "fake_logprob", "last_user_text",
    "main",
    "ok_responder", "resolve_responder", "yes_responder",
]


# --------------------------------------------------------------------------- faults
@dataclass(frozen=True)
class _Fault:
    status: int | None = None
    retry_after_ms: int | None = None
    hang_s: float | None = None
    body: dict | None = None
    raw: bytes | None = None
    content_type: str = "application/json"


@dataclass(frozen=True)
class _Raw:
    """A reply body sent byte for byte (an injected ``raw`` fault)."""

    data: bytes
    content_type: str


def _words(text: Any) -> int:
    return len(text.split()) if isinstance(text, str) else 0


def _error_body(status: int, message: str) -> dict:
    kind = {400: "invalid_request_error", 404: "not_found_error",
            429: "rate_limit_exceeded"}.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": status}}


# --------------------------------------------------------------------------- HTTP layer
class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse their connections
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:  # the socket was shut down by FakeChatServer.stop()
            pass
        finally:
            self.server.owner._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet logging
        return

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None):
        """Send ``payload`` as JSON, or a :class:`_Raw` body as its bytes, unchanged."""
        if isinstance(payload, _Raw):
            data, content_type = payload.data, payload.content_type
        else:
            data, content_type = json.dumps(payload).encode("utf-8"), "application/json"
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up (timeouts) or the server is stopping
            self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        owner = self.server.owner
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/stats":
            self._send_json(200, owner.stats())
        elif path == "/health":
            self._send_json(200, {"status": "ok"})
        elif path == "/v1/models":
            self._send_json(200, {"object": "list", "data": [
                {"id": owner.model, "object": "model", "created": 0, "owned_by": "clinenv"}]})
        else:
            self._send_json(404, _error_body(404, f"no route GET {path}"))

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        owner = self.server.owner
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            length = max(0, int(self.headers.get("Content-Length") or 0))
        except ValueError:
            self.close_connection = True
            self._send_json(400, _error_body(400, "bad Content-Length header"))
            return
        raw = self.rfile.read(length) if length else b""
        if path != "/v1/chat/completions":
            self._send_json(404, _error_body(404, f"no route POST {path}"))
            return
        status, payload, headers = owner._handle(raw)
        self._send_json(status, payload, headers)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 256  # listen backlog: 64+ clients connect at once

    owner: FakeChatServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client drops its connection (a timed-out request, a closed
        client); print anything else as the standard server does."""
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


def fake_logprob(position: int) -> float:
    """The fake server's logprob of the completion token at 0-based ``position``:
    ``-(1 + position % 5) / 8`` (exact in binary floating point)."""
    return -(1 + position % 5) / 8


# --------------------------------------------------------------------------- server
class FakeChatServer:
    """An OpenAI-compatible chat-completions server on 127.0.0.1, in daemon threads.

    A context manager (or :meth:`start` and :meth:`stop`)::

        with FakeChatServer("clinician", delay_s=0.2) as server:
            client = OpenAIChatModel("fake-model", base_url=server.base_url)

    One thread per connection (keep-alive, listen backlog 256). What it replies, its
    token ids and its faults: docs/testing.md, "The fake chat server".

    Args:
        responder: a :data:`Responder`, a :data:`RESPONDERS` name, or ``None`` (replies
            ``"OK"``).
        delay_s: seconds slept before each reply (>= 0); may be changed at any time.
        host: interface to bind (default loopback only).
        port: port to bind; 0 picks a free one.
        model: the model name of replies and of ``GET /v1/models``.
        ignore_n: return one choice whatever ``n`` says.
        system_fingerprint: reported in every reply.
        tokenizer: a Hugging Face tokenizer with a chat template for requested token
            ids, or ``None`` (UTF-8 bytes as ids).

    Attributes:
        base_url: ``"http://HOST:PORT/v1"`` once started.
        delay_s: see above.
        requests: every JSON body received at ``POST /v1/chat/completions``, in arrival
            order.

    Raises:
        ValueError: an unknown responder name or a negative delay.
    """

    def __init__(self, responder: Responder | str | None = None, *, delay_s: float = 0.0,
                 host: str = "127.0.0.1", port: int = 0, model: str = "fake-model",
                 ignore_n: bool = False, system_fingerprint: str = "fp-fake",
                 tokenizer: Any = None) -> None:
        if delay_s < 0:
            raise ValueError(f"delay_s must be >= 0, got {delay_s}")
        self.responder = resolve_responder(responder)
        self.delay_s = float(delay_s)
        self.host = host
        self.port = int(port)
        self.model = model
        self.ignore_n = bool(ignore_n)
        self.system_fingerprint = system_fingerprint
        self.tokenizer = tokenizer
        self.requests: list[dict] = []
        self.base_url = ""
        self._lock = threading.Lock()
        self._faults: deque[_Fault] = deque()
        self._intervals: list[tuple[float, float]] = []
        self._n_requests = 0
        self._n_errors = 0
        self._in_flight = 0
        self._max_in_flight = 0
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> FakeChatServer:
        """Bind and serve in a daemon thread; returns ``self``. Idempotent.

        Raises:
            OSError: the port cannot be bound.
        """
        if self._httpd is not None:
            return self
        httpd = _HTTPServer((self.host, self.port), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self.port = httpd.server_address[1]
        self.base_url = f"http://{self.host}:{self.port}/v1"
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"FakeChatServer:{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: close the listening socket and shut down open (keep-alive)
        connections, so clients see connection errors afterwards. Idempotent; requests
        still sleeping in their threads are abandoned (daemon threads)."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _track(self, connection: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def __enter__(self) -> FakeChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ faults
    def inject(self, *, status: int | None = None, count: int = 1,
               retry_after_ms: int | None = None, hang_s: float | None = None,
               body: dict | None = None, raw: bytes | None = None,
               content_type: str = "application/json") -> None:
        """Queue ``count`` identical faults; each of the next requests takes one (FIFO).

        Exactly one kind per call:

        - ``status``: an HTTP error (400..599) with an OpenAI-style error JSON, and a
          ``retry-after-ms`` header when ``retry_after_ms`` is given;
        - ``hang_s``: sleep that many seconds (after :attr:`delay_s`), then reply
          normally;
        - ``body``: this JSON object with status 200 instead of a completion;
        - ``raw``: these bytes with status 200 and ``Content-Type: <content_type>``.

        Raises:
            ValueError: not exactly one kind, ``count`` < 1, a status outside 400..599,
                a negative ``hang_s`` or ``retry_after_ms``, ``retry_after_ms``
                without ``status``, ``raw`` that is not ``bytes``, or an empty
                ``content_type``.
        """
        kinds = [k for k, v in (("status", status), ("hang_s", hang_s), ("body", body),
                                ("raw", raw)) if v is not None]
        if len(kinds) != 1:
            raise ValueError("inject needs exactly one of status, hang_s, body, raw; "
                             f"got {kinds}")
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        if status is not None and not 400 <= status <= 599:
            raise ValueError(f"status must be in 400..599, got {status}")
        if hang_s is not None and hang_s < 0:
            raise ValueError(f"hang_s must be >= 0, got {hang_s}")
        if retry_after_ms is not None and (status is None or retry_after_ms < 0):
            raise ValueError("retry_after_ms must be >= 0 and goes with status")
        if body is not None and not isinstance(body, dict):
            raise ValueError(f"body must be a dict, got {type(body).__name__}")
        if raw is not None and not isinstance(raw, bytes | bytearray):
            raise ValueError(f"raw must be bytes, got {type(raw).__name__}")
        if not isinstance(content_type, str) or not content_type.strip():
            raise ValueError(f"content_type must be a non-empty string, got {content_type!r}")
        fault = _Fault(status=status, retry_after_ms=retry_after_ms, hang_s=hang_s,
                       body=None if body is None else json.loads(json.dumps(body)),
                       raw=None if raw is None else bytes(raw), content_type=content_type)
        with self._lock:
            self._faults.extend([fault] * count)

    # ------------------------------------------------------------------ stats
    def stats(self) -> dict:
        """Counters since start (JSON-ready).

        Returns:
            ``{"n_requests": int`` (chat-completion POSTs received, faulty and invalid
            ones included), ``"intervals": [(start, end), ...]`` (``time.monotonic()``
            seconds at arrival and at reply of each finished request, in finishing
            order; on Linux this clock is shared by all processes, so a benchmark in
            another process may compare it with its own), ``"n_errors": int`` (error
            replies sent: injected statuses, invalid bodies, responder failures),
            ``"max_in_flight": int`` (most requests handled at once),
            ``"pending_faults": int``, ``"delay_s": float}``.
        """
        with self._lock:
            return {"n_requests": self._n_requests, "intervals": list(self._intervals),
                    "n_errors": self._n_errors, "max_in_flight": self._max_in_flight,
                    "pending_faults": len(self._faults), "delay_s": self.delay_s}

    # ------------------------------------------------------------------ handling
    def _handle(self, raw: bytes) -> tuple[int, Any, dict[str, str]]:
        """One chat-completions request: (status, JSON payload or :class:`_Raw`, extra
        headers)."""
        start = time.monotonic()
        try:
            body = json.loads(raw.decode("utf-8")) if raw else None
        except (UnicodeDecodeError, json.JSONDecodeError):
            body = None
        with self._lock:
            self._n_requests += 1
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            if isinstance(body, dict):
                self.requests.append(body)
            fault = self._faults.popleft() if self._faults else None
        status, payload, headers = 500, _error_body(500, "server failure"), {}
        try:
            status, payload, headers = self._reply(body, fault)
        finally:
            with self._lock:
                self._in_flight -= 1
                self._n_errors += int(status >= 400)
                self._intervals.append((start, time.monotonic()))
        return status, payload, headers

    def _reply(self, body: Any, fault: _Fault | None) -> tuple[int, Any, dict[str, str]]:
        if self.delay_s > 0:
            time.sleep(self.delay_s)
        if not isinstance(body, dict):
            return 400, _error_body(400, "request body must be a JSON object"), {}
        if fault is not None:
            if fault.status is not None:
                headers = {}
                if fault.retry_after_ms is not None:
                    headers["retry-after-ms"] = str(fault.retry_after_ms)
                return fault.status, _error_body(fault.status, "injected fault"), headers
            if fault.body is not None:
                return 200, fault.body, {}
            if fault.raw is not None:
                return 200, _Raw(fault.raw, fault.content_type), {}
            time.sleep(fault.hang_s or 0.0)
        try:
            completion = self._completion(body)
            if body.get("stream") is True:
                return 200, _Raw(_sse(completion, body), "text/event-stream"), {}
            return 200, completion, {}
        except Exception as exc:  # noqa: BLE001 - report responder bugs to the client
            return 500, _error_body(500, f"responder failed: {type(exc).__name__}: {exc}"), {}

    def _completion(self, body: dict) -> dict:
        n = body.get("n")
        n = 1 if n is None else n
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive int, got {n!r}")
        choices = []
        for index in range(1 if self.ignore_n else n):
            reply = self.responder(body, index)
            if isinstance(reply, dict):
                message = dict(reply)
                finish_reason = message.pop("finish_reason", "stop")
                message.setdefault("role", "assistant")
            else:
                message = {"role": "assistant", "content": str(reply)}
                finish_reason = "stop"
            choice = {"index": index, "message": message,
                      "finish_reason": finish_reason, "logprobs": None}
            if body.get("return_token_ids") is True or body.get("logprobs") is True:
                ids = self._completion_ids(str(message.get("content") or ""))
                if body.get("return_token_ids") is True:
                    choice["token_ids"] = ids
                if body.get("logprobs") is True:
                    choice["logprobs"] = {"content": [
                        {"token": str(t), "logprob": fake_logprob(k), "bytes": None,
                         "top_logprobs": []} for k, t in enumerate(ids)]}
            choices.append(choice)
        prompt = sum(_words(content_text(m.get("content")))
                     for m in body.get("messages") or [] if isinstance(m, dict))
        completion = sum(_words(c["message"].get("content"))
                         + _words(c["message"].get("reasoning")) for c in choices)
        reply = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "system_fingerprint": self.system_fingerprint,
            "choices": choices,
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion},
        }
        if body.get("return_token_ids") is True:
            reply["prompt_token_ids"] = self._prompt_ids(body.get("messages") or [])
        return reply

    def _prompt_ids(self, messages: list) -> list[int]:
        plain = [{"role": m.get("role"), "content": content_text(m.get("content"))}
                 for m in messages if isinstance(m, dict)]
        if self.tokenizer is None:
            text = "".join(f"<|{m['role']}|>{m['content']}\n" for m in plain)
            return list((text + "<|assistant|>").encode("utf-8"))
        text = self.tokenizer.apply_chat_template(plain, add_generation_prompt=True,
                                                  tokenize=False)
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def _completion_ids(self, content: str) -> list[int]:
        if self.tokenizer is None:
            return list((content + "\n").encode("utf-8"))
        return [*self.tokenizer.encode(content, add_special_tokens=False),
                self.tokenizer.eos_token_id]


def _sse(completion: dict, body: dict) -> bytes:
    """``completion`` as OpenAI's streaming chat-completions events (``stream: true``):
    per choice a chunk with the role and the whole content (and tool calls, each with its
    ``index``) as ``choices[0].delta``, then one with its ``finish_reason``; a usage chunk
    with ``choices: []`` when ``stream_options.include_usage`` is set; then ``[DONE]``."""
    head = {key: completion[key] for key in ("id", "created", "model", "system_fingerprint")}
    head["object"] = "chat.completion.chunk"
    events = []
    for choice in completion["choices"]:
        message = choice["message"]
        delta = {key: value for key, value in message.items() if key != "tool_calls"}
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **call}
                                   for i, call in enumerate(message["tool_calls"])]
        events.append({**head, "choices": [{"index": choice["index"], "delta": delta,
                                            "finish_reason": None, "logprobs": None}]})
        events.append({**head, "choices": [{"index": choice["index"], "delta": {},
                                            "finish_reason": choice["finish_reason"],
                                            "logprobs": None}]})
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        events.append({**head, "choices": [], "usage": completion["usage"]})
    return b"".join(b"data: " + json.dumps(event).encode("utf-8") + b"\n\n"
                    for event in events) + b"data: [DONE]\n\n"


# --------------------------------------------------------------------------- CLI
def spawn_server(delay_ms: float = 0.0, responder: str = "clinician"
                 ) -> tuple[subprocess.Popen, str]:
    """The command-line server in a subprocess and its base URL (its ``READY <url>``
    line); the caller terminates it. Raises :class:`RuntimeError` if it does not start."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "clinenv.testing.fake_server", "--delay-ms", str(delay_ms),
         "--responder", responder], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("READY "):
        proc.kill()
        raise RuntimeError(f"fake server did not start (got {line!r})")
    return proc, line.split(None, 1)[1].strip()


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: serve until SIGTERM or Ctrl-C; prints ``READY <base_url>`` first."""
    parser = argparse.ArgumentParser(
        prog="python -m clinenv.testing.fake_server",
        description="Local OpenAI-compatible chat-completions server (tests, benchmarks).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--delay-ms", type=float, default=0.0,
                        help="sleep per request before replying, milliseconds")
    parser.add_argument("--responder", choices=sorted(RESPONDERS), default="ok")
    parser.add_argument("--model", default="fake-model")
    parser.add_argument("--ignore-n", action="store_true",
                        help="return one choice whatever n says")
    args = parser.parse_args(argv)
    if args.delay_ms < 0:
        parser.error("--delay-ms must be >= 0")

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server = FakeChatServer(args.responder, delay_s=args.delay_ms / 1000.0, host=args.host,
                            port=args.port, model=args.model, ignore_n=args.ignore_n)
    with server:
        print(f"READY {server.base_url}", flush=True)
        while not stop.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
