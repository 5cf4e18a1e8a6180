"""Retries made visible: each HTTP attempt of a call in its record (``attempts``), the
prompt tokens the server was sent (``prompt_tokens_sent``) and a warning line, against a
real FakeChatServer on 127.0.0.1 that times out or answers 429 / 503 before succeeding.

The fake server counts prompt tokens as the whitespace-separated words of the messages'
contents, so a five-word prompt is 5 tokens per request reaching it.
"""

from __future__ import annotations

import asyncio

import pytest

from clinenv.llm import BackendError
from clinenv.testing.fake_server import FakeChatServer

pytest.importorskip("openai")
from clinenv.llm.openai_backend import (  # noqa: E402
    MAX_RETRY_AFTER_S,
    OpenAIChatModel,
    aiohttp_available,
)

PROMPT = [{"role": "user", "content": "one two three four five"}]  # 5 prompt tokens


def model_for(server: FakeChatServer, **kwargs) -> OpenAIChatModel:
    kwargs.setdefault("timeout_s", 5.0)
    return OpenAIChatModel("fake-model", base_url=server.base_url, **kwargs)


@pytest.fixture(params=["httpx", pytest.param("aiohttp", marks=pytest.mark.skipif(
    not aiohttp_available(), reason="openai's aiohttp extra is not installed"))])
def transport(request):
    return request.param


def outcomes(record):
    return [a["outcome"] for a in record["attempts"]]


def test_a_timeout_then_a_429_then_success_is_logged_attempt_by_attempt(fake_server):  # noqa: F811
    fake_server.inject(hang_s=1.5)
    fake_server.inject(status=429, retry_after_ms=20)
    result = model_for(fake_server, timeout_s=0.3, max_retries=3).generate(PROMPT)
    assert result.text == "OK"
    record = result.to_log()
    assert record["n_requests"] == 3 == fake_server.stats()["n_requests"]
    assert outcomes(record) == ["timeout", "http_429", "ok"]
    timeout, limited, ok = record["attempts"]
    assert timeout["latency_s"] >= 0.3 and limited["latency_s"] < 0.3
    assert limited["wait_s"] == pytest.approx(0.02)  # the server's retry-after-ms
    assert 0.375 <= timeout["wait_s"] <= 0.5  # first backoff: 0.5 s less <= 25% jitter
    assert "wait_s" not in ok
    # one usage (5 tokens) came back; the timed-out and the refused request reached the
    # server too and are counted with the same 5 tokens
    assert (record["prompt_tokens"], record["prompt_tokens_sent"]) == (5, 15)
    assert record["warnings"] == ["retried 2 time(s) after timeout, http_429: 3 attempts "
                                  "for this call"]


def test_async_retries_are_logged_per_call_on_both_transports(fake_server, transport):  # noqa: F811
    fake_server.inject(status=503, count=2, retry_after_ms=1)
    model = model_for(fake_server, max_retries=3, http_transport=transport)

    async def main():
        try:
            return await model.agenerate(PROMPT)
        finally:
            await model.aclose()

    record = asyncio.run(main()).to_log()
    assert outcomes(record) == ["http_503", "http_503", "ok"]
    assert [a.get("wait_s") for a in record["attempts"]] == [0.001, 0.001, None]
    assert record["prompt_tokens_sent"] == 15 and record["prompt_tokens"] == 5
    assert len(record["warnings"]) == 1 and "retried 2 time(s)" in record["warnings"][0]


def test_a_call_without_retries_has_one_ok_attempt_and_no_warning(fake_server):  # noqa: F811
    record = model_for(fake_server).generate(PROMPT).to_log()
    assert outcomes(record) == ["ok"]
    assert record["prompt_tokens_sent"] == record["prompt_tokens"] == 5
    assert record["warnings"] == []


def test_unreadable_body_and_top_up_are_attempts_too(fake_server):  # noqa: F811
    """An unreadable 200 body is repeated (5 estimated tokens); a server that returns one
    of two choices is topped up (a second request, its own 5 tokens)."""
    fake_server.inject(raw=b'{"choices": [ {"index":0,')
    fake_server.inject(body={"choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": "A"}}],
                             "usage": {"prompt_tokens": 5, "completion_tokens": 1}})
    result = model_for(fake_server, max_retries=0).generate(PROMPT, n=2, seed=1)
    record = result.to_log()
    assert outcomes(record) == ["unreadable", "ok", "ok"]
    assert result.texts == ["A", "OK"]
    assert (record["prompt_tokens"], record["prompt_tokens_sent"]) == (10, 15)
    assert not any("retried" in w for w in record["warnings"])  # repeats, not retries


def test_a_retry_after_beyond_the_limit_is_not_waited_for(fake_server):  # noqa: F811
    fake_server.inject(status=429, retry_after_ms=int((MAX_RETRY_AFTER_S + 1) * 1000))
    with pytest.raises(BackendError) as caught:
        model_for(fake_server, max_retries=3).generate(PROMPT)
    assert caught.value.detail == "http_429"
    assert fake_server.stats()["n_requests"] == 1


def test_retries_are_per_request_and_bounded(fake_server):  # noqa: F811
    fake_server.inject(status=500, count=3, retry_after_ms=1)
    with pytest.raises(BackendError) as caught:
        model_for(fake_server, max_retries=2).generate(PROMPT)
    assert caught.value.detail == "http_500" and "after 3 request(s)" in str(caught.value)
    fake_server.inject(status=500, count=2, retry_after_ms=1)
    record = model_for(fake_server, max_retries=2).generate(PROMPT).to_log()
    assert outcomes(record) == ["http_500", "http_500", "ok"]


def test_the_client_itself_never_retries(fake_server):  # noqa: F811
    model = model_for(fake_server, max_retries=4)
    assert model._sync_client().max_retries == 0
    assert model.describe()["max_retries"] == 4


def test_run_totals_count_retried_requests_and_the_tokens_sent():
    from clinenv.cli.run_summary import format_llm_totals
    from clinenv.evaluation.summary import llm_totals
    from clinenv.runs.episode import call_totals

    calls = [{"n_requests": 3, "prompt_tokens": 5, "prompt_tokens_sent": 15,
              "completion_tokens": 2, "latency_s": 1.5},
             {"n_requests": 1, "prompt_tokens": 7, "completion_tokens": 1, "latency_s": 0.5},
             {"latency_s": 0.25}]  # a record written before the fields existed
    totals = call_totals(calls)
    assert (totals["n_calls"], totals["n_requests"]) == (3, 5)
    assert (totals["prompt_tokens"], totals["prompt_tokens_sent"]) == (12, 22)
    run = llm_totals([{"llm": totals}, {"llm": {"n_calls": 1, "prompt_tokens": 4,
                                               "completion_tokens": 1, "latency_s": 1.0}}])
    assert (run["n_calls"], run["n_requests"], run["prompt_tokens_sent"]) == (4, 6, 26)
    line = format_llm_totals(run)
    assert "prompt tokens 16" in line and "6 requests (retries and top-ups)" in line
    assert "prompt tokens sent 26" in line
    assert "requests" not in format_llm_totals(llm_totals([{"llm": call_totals(calls[1:2])}]))
