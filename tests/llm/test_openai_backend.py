"""The OpenAI-compatible backend against a real FakeChatServer on 127.0.0.1."""

from __future__ import annotations

import asyncio
import gc
import pickle
import socket
import subprocess
import sys
import textwrap
import warnings

import pytest

from clinenv.llm import BackendError, BackendUnavailableError, GenerationConfig
from clinenv.seeding import call_seed
from clinenv.testing.fake_server import FakeChatServer

pytest.importorskip("openai")
from clinenv.llm.openai_backend import OpenAIChatModel, aiohttp_available  # noqa: E402
from clinenv.testing.tiny_chat import user

MSGS = [{"role": "system", "content": "You are a doctor."},
        {"role": "user", "content": "Fever and cough."}]


def model_for(server: FakeChatServer, **kwargs) -> OpenAIChatModel:
    kwargs.setdefault("timeout_s", 5.0)
    return OpenAIChatModel("fake-model", base_url=server.base_url, **kwargs)


#: openai's aiohttp transport is usable here (its ``aiohttp`` extra is installed).
HAS_AIOHTTP = aiohttp_available()


@pytest.fixture(params=[
    "httpx", pytest.param("aiohttp", marks=pytest.mark.skipif(
        not HAS_AIOHTTP, reason="openai's aiohttp extra is not installed"))])
def transport(request):
    """The asynchronous client's HTTP transport; async tests run on both."""
    return request.param


def by_seed(body, index):
    """Replies that differ per request (its seed) and per choice."""
    return f"seed={body.get('seed')} choice={index}"


# --------------------------------------------------------------------------- basics
def test_sampling_fields_reach_the_server_and_the_result_is_complete():
    with FakeChatServer("echo", model="served-name", system_fingerprint="fp-9") as server:
        model = model_for(server, config=GenerationConfig(max_tokens=64))
        result = model.generate(MSGS, temperature=0.3, top_p=0.9, seed=1234,
                                stop=["\nPatient:", "###"], extra={"top_k": 20})
    (body,) = server.requests
    assert body == {"model": "fake-model", "messages": MSGS, "n": 1, "temperature": 0.3,
                    "top_p": 0.9, "max_tokens": 64, "seed": 1234,
                    "stop": ["\nPatient:", "###"], "top_k": 20}
    assert result.texts == ["Fever and cough."]
    assert (result.backend, result.model, result.seed, result.system_fingerprint) == (
        "openai", "served-name", 1234, "fp-9")
    # Whitespace tokens: 4 + 3 in the messages, 3 in the reply.
    assert (result.prompt_tokens, result.completion_tokens) == (7, 3)
    assert result.n_requests == 1 and result.warnings == ()
    assert result.choices[0].finish_reason == "stop"


def test_unset_seed_and_stop_are_not_sent(fake_server):  # noqa: F811
    model_for(fake_server).generate(user("hi"))
    assert "seed" not in fake_server.requests[0] and "stop" not in fake_server.requests[0]


def test_async_call(fake_server, transport):  # noqa: F811
    model = model_for(fake_server, http_transport=transport)
    assert model.async_transport == transport

    async def main():
        result = await model.agenerate(user("hi"), n=2, seed=5)
        await model.aclose()
        return result

    result = asyncio.run(main())
    assert result.texts == ["OK", "OK"] and result.n_requests == 1
    assert fake_server.requests[0]["n"] == 2 and fake_server.requests[0]["seed"] == 5


def test_a_model_dropped_without_close_leaves_no_open_socket(fake_server):  # noqa: F811
    model = model_for(fake_server)
    assert model.generate(user("hi")).text == "OK"  # a pooled keep-alive connection
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        del model
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_sync_generate_works_inside_a_running_event_loop(fake_server):  # noqa: F811
    model = model_for(fake_server)

    async def main():
        return model.generate(user("hi")).text

    assert asyncio.run(main()) == "OK"
    model.close()


# --------------------------------------------------------------------------- retries
@pytest.mark.parametrize("status", [429, 500, 503])
def test_retryable_status_is_retried_and_every_request_counted(fake_server, status):  # noqa: F811
    fake_server.inject(status=status, count=2, retry_after_ms=1)
    result = model_for(fake_server, max_retries=3).generate(user("hi"))
    assert result.text == "OK"
    assert result.n_requests == 3 == fake_server.stats()["n_requests"]


def test_timeout_is_retried(fake_server):  # noqa: F811
    fake_server.inject(hang_s=2.0)
    result = model_for(fake_server, timeout_s=0.3, max_retries=1).generate(user("hi"))
    assert result.text == "OK" and result.n_requests == 2


def test_async_retries_are_counted_per_call(fake_server, transport):  # noqa: F811
    """Eight concurrent calls share four injected 429s: each call counts its own
    requests, and the counts add up to what the server received."""
    fake_server.inject(status=429, count=4, retry_after_ms=1)
    model = model_for(fake_server, max_retries=3, http_transport=transport)

    async def main():
        results = await asyncio.gather(*(model.agenerate(user(f"q{i}")) for i in range(8)))
        await model.aclose()
        return results

    results = asyncio.run(main())
    assert sum(r.n_requests for r in results) == 12 == fake_server.stats()["n_requests"]
    assert all(r.text == "OK" for r in results)


@pytest.mark.parametrize("status", [429, 503])
def test_exhausted_retries_raise_backend_error_with_detail(fake_server, status):  # noqa: F811
    fake_server.inject(status=status, count=3, retry_after_ms=1)
    with pytest.raises(BackendError) as caught:
        model_for(fake_server, max_retries=2).generate(user("hi"))
    assert (caught.value.backend, caught.value.detail) == ("openai", f"http_{status}")
    assert "3 request(s)" in str(caught.value)
    assert fake_server.stats()["n_requests"] == 3


def test_exhausted_timeouts_raise_timeout_detail(fake_server, transport):  # noqa: F811
    fake_server.inject(hang_s=2.0, count=2)
    model = model_for(fake_server, timeout_s=0.2, max_retries=1, http_transport=transport)

    async def main():
        try:
            await model.agenerate(user("hi"))
        finally:
            await model.aclose()

    with pytest.raises(BackendError) as caught:
        asyncio.run(main())
    assert caught.value.detail == "timeout"
    assert fake_server.stats()["n_requests"] == 2


def test_client_errors_are_not_retried(fake_server):  # noqa: F811
    fake_server.inject(status=400)
    with pytest.raises(BackendError) as caught:
        model_for(fake_server, max_retries=3).generate(user("hi"))
    assert caught.value.detail == "http_400" and fake_server.stats()["n_requests"] == 1


def test_unreachable_server_is_a_connection_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        model = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
        with pytest.raises(BackendError) as caught:
            model.generate(user("hi"))
    assert caught.value.detail == "connection"


def test_async_unreachable_server_is_a_connection_error_on_both_transports(transport):
    """aiohttp's transport reports a refused connection as a connect timeout; the
    detail is still "connection", as with httpx (and it is retried like one)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        model = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1,
                                http_transport=transport)

        async def main():
            try:
                return await model.agenerate(user("hi"))
            finally:
                await model.aclose()

        with pytest.raises(BackendError) as caught:
            asyncio.run(main())
    assert caught.value.detail == "connection"
    assert "after 2 request(s)" in str(caught.value)


def test_dropped_connection_is_a_connection_error_on_both_transports(transport):
    """The server goes away while a request waits for its reply (max_retries=0)."""
    server = FakeChatServer().start()
    server.inject(hang_s=30.0)
    model = model_for(server, max_retries=0, timeout_s=60, http_transport=transport)

    async def main():
        task = asyncio.ensure_future(model.agenerate(user("hi")))
        while server.stats()["n_requests"] == 0:  # wait until the request is in
            await asyncio.sleep(0.01)
        await asyncio.to_thread(server.stop)
        try:
            return await task
        finally:
            await model.aclose()

    with pytest.raises(BackendError) as caught:
        asyncio.run(main())
    assert caught.value.detail == "connection"


# ---------------------------------------------------------------------- seeds
# field-bug-reports B08a
def test_n_is_topped_up_with_distinct_seeds_when_the_server_ignores_n():
    """A server that answers n=4 with one choice."""
    with FakeChatServer(by_seed, ignore_n=True) as server:
        result = model_for(server).generate(user("hi"), n=4, seed=11, temperature=0.7)
    seeds = [11] + [call_seed(11, "top-up", k) for k in (1, 2, 3)]
    assert [b["n"] for b in server.requests] == [4, 3, 2, 1]
    assert [b["seed"] for b in server.requests] == seeds and len(set(seeds)) == 4
    assert result.texts == [f"seed={s} choice=0" for s in seeds]
    assert result.n_requests == 4 and result.seed == 11
    assert sum("topping up" in w for w in result.warnings) == 3


def test_top_up_without_seed_sends_no_seed():
    with FakeChatServer(ignore_n=True) as server:
        result = model_for(server).generate(user("hi"), n=2)
    assert [("seed" in b, b["n"]) for b in server.requests] == [(False, 2), (False, 1)]
    assert len(result.choices) == 2


def test_extra_choices_beyond_n_are_not_used(fake_server):  # noqa: F811
    fake_server.inject(body={"choices": [
        {"index": i, "finish_reason": "stop", "message": {"role": "assistant",
                                                         "content": f"c{i}"}}
        for i in range(3)]})
    assert model_for(fake_server).generate(user("hi"), n=2).texts == ["c0", "c1"]


# field-bug-reports B08b
def test_identical_choices_at_positive_temperature_are_flagged(fake_server):  # noqa: F811
    """Four identical samples at temperature 0.7."""
    model = model_for(fake_server)
    flagged = model.generate(user("hi"), n=4, temperature=0.7)
    assert flagged.texts == ["OK"] * 4
    assert any("identical" in w for w in flagged.warnings)
    assert not model.generate(user("hi"), n=4, temperature=0.0).warnings


def test_distinct_choices_are_not_flagged():
    with FakeChatServer(by_seed) as server:
        result = model_for(server).generate(user("hi"), n=3, temperature=0.7, seed=2)
    assert result.warnings == () and len(set(result.texts)) == 3


# ------------------------------------------------------- reasoning and cut replies
def _reasoning_body(finish_reason: str, reasoning: str, field: str = "reasoning") -> dict:
    return {"choices": [{"index": 0, "finish_reason": finish_reason, "message": {
        "role": "assistant", "content": None, field: reasoning}}]}


# field-bug-reports B04(a)
def test_b04a_truncated_reasoning_gives_no_answer(fake_server):  # noqa: F811
    """Cut by max_tokens inside reasoning, content null."""
    fake_server.inject(body=_reasoning_body("length", "Weighing Addison disease against..."))
    result = model_for(fake_server).generate(user("hi"))
    (choice,) = result.choices
    assert (choice.text, choice.finish_reason, choice.truncated) == ("", "length", True)
    assert choice.reasoning == "Weighing Addison disease against..."
    assert not choice.from_reasoning
    assert result.to_log()["truncated"] is True
    assert any("cut by max_tokens inside reasoning" in w for w in result.warnings)


# field-bug-reports B04(b)
@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_b04b_complete_answer_in_reasoning_falls_back_by_default(fake_server, field):  # noqa: F811
    """The documented default takes the reasoning as the answer
    and flags it."""
    fake_server.inject(body=_reasoning_body("stop", "DIAGNOSIS READY: Addison disease", field))
    result = model_for(fake_server).generate(user("hi"))
    (choice,) = result.choices
    assert (choice.text, choice.from_reasoning) == ("DIAGNOSIS READY: Addison disease", True)
    assert choice.reasoning == "DIAGNOSIS READY: Addison disease"
    assert any("reasoning text is used as the answer" in w for w in result.warnings)


def test_b04b_content_policy_leaves_the_answer_empty(fake_server):  # noqa: F811
    fake_server.inject(body=_reasoning_body("stop", "DIAGNOSIS READY: Addison disease"))
    result = model_for(fake_server, reasoning_fallback="content").generate(user("hi"))
    (choice,) = result.choices
    assert (choice.text, choice.from_reasoning, choice.finish_reason) == ("", False, "stop")
    assert choice.reasoning == "DIAGNOSIS READY: Addison disease"
    assert any("answer left empty" in w for w in result.warnings)


# field-bug-reports B04(c)
def test_b04c_plain_answer_without_tags_is_kept_as_is():
    """No think tags is not an unfinished reply."""
    with FakeChatServer(lambda body, i: "DIAGNOSIS READY: Addison disease") as server:
        result = model_for(server).generate(user("hi"))
    assert result.text == "DIAGNOSIS READY: Addison disease"
    assert result.warnings == () and result.choices[0].reasoning is None


# field-bug-reports B01
def test_content_and_reasoning_stay_apart_and_think_tags_are_not_stripped():
    """The backend keeps <think> blocks (the parser strips them)
    and keeps a separate reasoning field out of the text."""
    think = ("<think>\nLymphoma? Maybe REQUEST TEST: Biopsy.\n</think>\n\n"
             "DIAGNOSIS READY: Sarcoidosis")

    def responder(body, index):
        return {"content": think, "reasoning": "hidden chain"}

    with FakeChatServer(responder) as server:
        result = model_for(server).generate(user("hi"))
    (choice,) = result.choices
    assert (choice.text, choice.reasoning, choice.from_reasoning) == (
        think, "hidden chain", False)


# ------------------------------------------------------------------ empty choices
EMPTY = {"id": "x", "object": "chat.completion", "choices": [],
         "usage": {"prompt_tokens": 50, "completion_tokens": 0, "total_tokens": 50}}


# field-bug-reports B09
def test_b09_empty_choices_are_retried_once(fake_server):  # noqa: F811
    """An empty ``choices`` list, then a normal reply."""
    fake_server.inject(body=EMPTY)
    result = model_for(fake_server).generate(user("hi"))
    assert result.text == "OK" and result.n_requests == 2
    assert result.prompt_tokens == 50 + 1  # usage of both replies
    assert any("no choices" in w for w in result.warnings)


def test_b09_empty_choices_twice_is_a_typed_error(fake_server, transport):  # noqa: F811
    fake_server.inject(body=EMPTY, count=2)
    model = model_for(fake_server, http_transport=transport)

    async def main():
        try:
            return await model.agenerate(user("hi"))
        finally:
            await model.aclose()

    with pytest.raises(BackendError) as caught:
        asyncio.run(main())
    assert caught.value.detail == "no_choices"
    assert fake_server.stats()["n_requests"] == 2


# ------------------------------------------------------------------ unreadable replies
#: A 200 reply cut inside the JSON, declared as application/json.
BROKEN = b'{"choices": [ {"index":0,'


@pytest.mark.parametrize(("fault", "why"), [
    ({"raw": BROKEN}, "not valid JSON"),
    ({"raw": b"\xff\xfe{}"}, "not valid JSON"),  # not even UTF-8
    ({"raw": b'[{"index": 0}]'}, "no 'choices' list"),  # JSON, but not an object
    ({"raw": b"<html>Bad gateway</html>", "content_type": "text/html"}, "no 'choices' list"),
    ({"body": {"error_free": True}}, "no 'choices' list"),
])
def test_unreadable_reply_is_repeated_once(fake_server, fault, why):  # noqa: F811
    """Base contract (BackendError docstring): one unreadable 200 reply costs one repeat."""
    fake_server.inject(**fault)
    result = model_for(fake_server).generate(user("hi"))
    assert result.text == "OK" and result.n_requests == 2
    assert fake_server.stats()["n_requests"] == 2
    assert [w for w in result.warnings if "unreadable reply" in w and why in w]


@pytest.mark.parametrize("fault", [{"raw": BROKEN}, {"raw": b"[1, 2]"},
                                   {"body": {"error_free": True}}])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_unreadable_reply_twice_is_malformed_never_a_json_error(fake_server, fault,  # noqa: F811
                                                                mode, transport):
    """A broken body used to escape as json.JSONDecodeError and crash a whole run."""
    fake_server.inject(count=2, **fault)
    model = model_for(fake_server, http_transport=transport)

    async def main():
        try:
            return await model.agenerate(user("hi"))
        finally:
            await model.aclose()

    with pytest.raises(BackendError) as caught:
        model.generate(user("hi")) if mode == "sync" else asyncio.run(main())
    assert (caught.value.detail, caught.value.backend) == ("malformed", "openai")
    assert fake_server.stats()["n_requests"] == 2
    model.close()


def test_unreadable_and_empty_replies_have_one_repeat_each(fake_server):  # noqa: F811
    fake_server.inject(raw=BROKEN)
    fake_server.inject(body=EMPTY)
    result = model_for(fake_server).generate(user("hi"))
    assert result.text == "OK" and result.n_requests == 3


# -------------------------------------------------------------------- event loops
# field-bug-reports B10
def test_b10_successive_asyncio_run_calls_on_one_model(transport):
    """Three asyncio.run calls in a row reuse one model."""
    with FakeChatServer("echo") as server:
        model = model_for(server, http_transport=transport)
        texts = [asyncio.run(model.agenerate(user(f"step {i}"))).text for i in range(3)]
        model.close()
    assert texts == ["step 0", "step 1", "step 2"]


def test_b10_64_concurrent_calls_in_one_loop_then_close(transport):
    with FakeChatServer("echo", delay_s=0.2) as server:
        model = model_for(server, timeout_s=30, http_transport=transport)

        async def main():
            results = await asyncio.gather(
                *(model.agenerate(user(f"patient {i}")) for i in range(64)))
            await model.aclose()
            return results

        results = asyncio.run(main())
        stats = server.stats()
    assert [r.text for r in results] == [f"patient {i}" for i in range(64)]
    assert stats["n_requests"] == 64 and stats["max_in_flight"] > 1
    assert len(model._async) == 0 and model._sync is None


def test_b10_clean_shutdown_leaves_no_warnings_or_loop_errors(transport):
    """In a fresh interpreter with every warning an error (ResourceWarning included, so an
    unclosed socket or transport would print "Exception ignored"): three asyncio.run
    calls, a sync call from inside a loop, then close: nothing on stderr (no "Event loop
    is closed", no "Task exception was never retrieved")."""
    script = textwrap.dedent("""
        import asyncio, gc
        from clinenv.testing.fake_server import FakeChatServer
        from clinenv.llm.openai_backend import OpenAIChatModel
        msgs = [{"role": "user", "content": "hi"}]
        with FakeChatServer() as server:
            model = OpenAIChatModel("m", base_url=server.base_url, http_transport=TRANSPORT)
            for _ in range(3):
                assert asyncio.run(model.agenerate(msgs)).text == "OK"
            async def inside():
                return model.generate(msgs).text
            assert asyncio.run(inside()) == "OK"
            model.close()
            del model
            gc.collect()
        print("done")
    """)
    script = script.replace("TRANSPORT", repr(transport))
    done = subprocess.run([sys.executable, "-W", "error", "-c", script],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "done"
    assert done.stderr == ""


# --------------------------------------------------------------------------- misc
def test_model_pickles_without_its_clients(fake_server):  # noqa: F811
    model = model_for(fake_server, max_retries=1)
    model.generate(user("hi"))
    clone = pickle.loads(pickle.dumps(model))
    assert clone.generate(user("hi")).text == "OK"
    assert clone.describe() == {
        "backend": "openai", "model": "fake-model", "config": model.config.model_dump(mode="json"),
        "base_url": fake_server.base_url, "timeout_s": 5.0, "max_retries": 1,
        "reasoning_fallback": "reasoning"}


def test_api_key_resolution(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    assert OpenAIChatModel("m", base_url="http://127.0.0.1:1/v1")._api_key == "sk-from-env"
    assert OpenAIChatModel("m", api_key="sk-given")._api_key == "sk-given"
    monkeypatch.delenv("OPENAI_API_KEY")
    assert OpenAIChatModel("m", base_url="http://127.0.0.1:1/v1")._api_key == "EMPTY"


@pytest.mark.parametrize("kwargs, field", [
    ({"timeout_s": 0}, "timeout_s"), ({"max_retries": -1}, "max_retries"),
    ({"reasoning_fallback": "think"}, "reasoning_fallback"),
    ({"http_transport": "curl"}, "http_transport")])
def test_bad_arguments_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        OpenAIChatModel("m", **kwargs)


def test_missing_openai_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(BackendUnavailableError,
            match=r"pip install -e '\.\[openai\]' in a clinenv clone"):
        OpenAIChatModel("m")


def test_aiohttp_transport_without_the_extra_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "aiohttp", None)  # import aiohttp fails
    assert not aiohttp_available()
    with pytest.raises(BackendUnavailableError, match=r"openai\[aiohttp\]"):
        OpenAIChatModel("m", http_transport="aiohttp")
    assert OpenAIChatModel("m").async_transport == "httpx"  # "auto" falls back


@pytest.mark.skipif(not HAS_AIOHTTP, reason="openai's aiohttp extra is not installed")
def test_auto_transport_prefers_aiohttp_and_describe_leaves_it_out():
    auto = OpenAIChatModel("m", base_url="http://127.0.0.1:1/v1")
    plain = OpenAIChatModel("m", base_url="http://127.0.0.1:1/v1", http_transport="httpx")
    assert (auto.async_transport, plain.async_transport) == ("aiohttp", "httpx")
    assert auto.describe() == plain.describe()  # a resumed run log matches either way
