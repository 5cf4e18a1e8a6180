"""The aiohttp transport of :class:`OpenAIChatModel` against the openai client itself.

Every check runs a real HTTP server on 127.0.0.1 and holds the aiohttp transport to the
openai client (the synchronous ``OpenAI`` and the ``httpx`` transport's ``AsyncOpenAI``)
as the reference: the request line and body bytes, the error texts that reach the run
log, proxies from the environment; plus the transport's own headers and what the
constructor imports (``preload``).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from clinenv.llm import BackendError, GenerationConfig
from clinenv.testing.fake_server import FakeChatServer

pytest.importorskip("openai")
pytest.importorskip("aiohttp")
from clinenv.llm.openai_backend import OpenAIChatModel, _env_proxy  # noqa: E402

MSGS = [{"role": "system", "content": "Tu es médecin."},
        {"role": "user", "content": "Fièvre \u2028 et toux; \"guillemets\" \\ ok"}]
COMPLETION = {"id": "c1", "object": "chat.completion", "model": "served",
              "choices": [{"index": 0, "finish_reason": "stop",
                           "message": {"role": "assistant", "content": "OK"}}],
              "usage": {"prompt_tokens": 7, "completion_tokens": 1}}


class Capture:
    """A 127.0.0.1 HTTP server that records each request (request-line target, headers,
    body bytes) and answers every one with ``reply`` = ``(status, content type, body)``."""

    def __init__(self, reply: tuple[int, str, bytes] | None = None) -> None:
        self.reply = reply or (200, "application/json", json.dumps(COMPLETION).encode())
        self.seen: list[tuple[str, dict[str, str], bytes]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()},
                                   body))
                status, content_type, data = owner.reply
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.root = f"http://127.0.0.1:{self.httpd.server_port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def capture() -> Iterator[Capture]:
    server = Capture()
    yield server
    server.close()


def call(model: OpenAIChatModel, mode: str, messages=MSGS, **overrides):
    """One call through the synchronous client (``mode="sync"``) or the asynchronous one."""
    if mode == "sync":
        return model.generate(messages, **overrides)

    async def main():
        try:
            return await model.agenerate(messages, **overrides)
        finally:
            await model.aclose()

    return asyncio.run(main())


MODES = [("sync", "httpx"), ("async", "httpx"), ("async", "aiohttp")]


def test_every_client_sends_the_same_request_line_and_body_bytes(capture):
    for mode, transport in MODES:
        model = OpenAIChatModel("m", base_url=capture.root + "/v1", api_key="sk-1",
                                http_transport=transport)
        call(model, mode, temperature=0.3, seed=9, stop=["\nPatient:"],
             extra={"top_k": 20, "chat_template_kwargs": {"enable_thinking": False}})
        model.close()
    (path, _, body), *others = capture.seen
    assert len(others) == 2 and all((p, b) == (path, body) for p, _, b in others)
    assert path == "/v1/chat/completions"
    # compact UTF-8 JSON, keys in the collector's order (what the openai client sends)
    assert body == json.dumps(
        {"model": "m", "messages": MSGS, "n": 1, "temperature": 0.3, "top_p": 1.0,
         "max_tokens": 200, "seed": 9, "stop": ["\nPatient:"], "top_k": 20,
         "chat_template_kwargs": {"enable_thinking": False}},
        ensure_ascii=False, separators=(",", ":")).encode()


def test_aiohttp_headers_carry_the_key_and_the_openai_organization(capture, monkeypatch):
    monkeypatch.setenv("OPENAI_ORG_ID", "org-7")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-3")
    model = OpenAIChatModel("m", base_url=capture.root + "/v1", api_key="sk-secret")
    result = call(model, "async")
    call(model, "sync")
    (_, headers, _), (_, reference, _) = capture.seen
    wanted = {"authorization": "Bearer sk-secret", "content-type": "application/json",
              "accept": "application/json", "openai-organization": "org-7",
              "openai-project": "proj-3"}
    assert {k: headers.get(k) for k in wanted} == wanted
    assert {k: reference.get(k) for k in wanted} == wanted  # the openai client's own
    assert not [k for k in headers if k.startswith("x-stainless")]
    assert (result.text, result.model, result.prompt_tokens, result.n_requests) == (
        "OK", "served", 7, 1)


@pytest.mark.parametrize("reply", [
    (400, "application/json", json.dumps({"error": {"message": "bad model 'm'"}}).encode()),
    (404, "application/json", json.dumps({"message": "no route"}).encode()),
    (502, "text/html", b"<html>Bad gateway</html>"),
    (503, "application/json", b'{"error": "overloaded"}'),
])
def test_http_errors_read_the_same_on_every_client(reply):
    """The error text (the run log's ``error.message``) and detail match the openai
    client's for a JSON error with a message, a bare message, HTML and a JSON string."""
    server = Capture(reply)
    try:
        texts = set()
        for mode, transport in MODES:
            model = OpenAIChatModel("m", base_url=server.root + "/v1", max_retries=0,
                                    http_transport=transport)
            with pytest.raises(BackendError) as caught:
                call(model, mode)
            model.close()
            texts.add((str(caught.value), caught.value.detail))
    finally:
        server.close()
    (text, detail), = texts
    assert detail == f"http_{reply[0]}"
    assert text.startswith(f"{server.root}/v1/: http_{reply[0]} after 1 request(s): "
                           f"Error code: {reply[0]}")


def test_timeouts_and_refused_connections_read_the_same_on_every_client():
    with FakeChatServer() as server:
        server.inject(hang_s=1.5, count=6)
        texts = set()
        for mode, transport in MODES:
            model = OpenAIChatModel("m", base_url=server.base_url, timeout_s=0.2,
                                    max_retries=1, http_transport=transport)
            with pytest.raises(BackendError) as caught:
                call(model, mode)
            model.close()
            texts.add(str(caught.value))
    assert texts == {f"{server.base_url}/: timeout after 2 request(s): Request timed out."}
    # the server is gone now: the port refuses connections
    texts = set()
    for mode, transport in MODES:
        model = OpenAIChatModel("m", base_url=server.base_url, max_retries=0,
                                http_transport=transport)
        with pytest.raises(BackendError) as caught:
            call(model, mode)
        model.close()
        texts.add(str(caught.value))
    assert texts == {f"{server.base_url}/: connection after 1 request(s): Connection error."}


def test_a_proxy_from_the_environment_carries_every_clients_requests(capture, monkeypatch):
    """``http_proxy`` points at the capture server, which answers as the upstream would:
    each client sends it the absolute URL of a host that does not resolve."""
    monkeypatch.setenv("http_proxy", capture.root)
    monkeypatch.setenv("HTTP_PROXY", capture.root)
    for name in ("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    for mode, transport in MODES:
        model = OpenAIChatModel("m", base_url="http://upstream.invalid/v1",
                                http_transport=transport)
        assert call(model, mode).text == "OK"
        model.close()
    assert [p for p, _, _ in capture.seen] == [
        "http://upstream.invalid/v1/chat/completions"] * 3


def test_env_proxy_follows_scheme_all_and_no_proxy(monkeypatch):
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    assert _env_proxy("https://api.example.org/v1/chat/completions") is None
    monkeypatch.setenv("all_proxy", "http://all:1")
    assert _env_proxy("https://api.example.org/v1") == "http://all:1"
    monkeypatch.setenv("https_proxy", "http://secure:2")
    assert _env_proxy("https://api.example.org/v1") == "http://secure:2"
    assert _env_proxy("http://api.example.org/v1") == "http://all:1"
    monkeypatch.setenv("no_proxy", "127.0.0.1,.example.org")
    assert _env_proxy("https://api.example.org/v1") is None
    assert _env_proxy("http://127.0.0.1:8000/v1") is None
    assert _env_proxy("https://other.net/v1") == "http://secure:2"


def test_preload_async_leaves_the_openai_package_out_until_a_sync_call():
    with FakeChatServer() as server:
        script = (
            "import sys\n"
            "from clinenv.llm.openai_backend import OpenAIChatModel\n"
            f"m = OpenAIChatModel('m', base_url={server.base_url!r}, preload='async')\n"
            "assert 'aiohttp' in sys.modules and 'openai' not in sys.modules\n"
            "import asyncio\n"
            "msgs = [{'role': 'user', 'content': 'hi'}]\n"
            "assert asyncio.run(m.agenerate(msgs)).text == 'OK'\n"
            "assert 'openai' not in sys.modules\n"
            "assert m.generate(msgs).text == 'OK' and 'openai' in sys.modules\n"
            "m.close()\n"
            "print('done')\n")
        done = subprocess.run([sys.executable, "-W", "error", "-c", script],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (done.stdout.strip(), done.stderr) == ("done", "")


def test_bad_preload_names_the_field():
    with pytest.raises(ValueError, match="preload"):
        OpenAIChatModel("m", preload="eager")


def test_merged_without_overrides_is_the_config_itself():
    config = GenerationConfig(temperature=0.2, stop=("END",))
    assert config.merged() is config and config.merged(seed=None) is config
    merged = config.merged(seed=3, temperature=None)
    assert merged is not config and (merged.seed, merged.temperature) == (3, 0.2)
    with pytest.raises(ValueError, match="temperature"):
        config.merged(temperature=-1)
