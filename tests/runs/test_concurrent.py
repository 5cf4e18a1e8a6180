"""Concurrent rollouts (:mod:`clinenv.runs.concurrent`) with LLM doctors over a real local server.

Every model call goes over a socket to a :class:`~clinenv.testing.fake_server.FakeChatServer`
on 127.0.0.1 whose replies depend only on the request (:mod:`clinenv.testing.clinic`), so a
concurrent run must write exactly the lines of a sequential one (minus ``timing`` and
``llm``).
"""

from __future__ import annotations

import asyncio
import inspect
import socket

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.llm_doctor import LLMDoctor
from clinenv.agents.scripted_doctor import ScriptedDoctor
from clinenv.evaluation.summary import summarize
from clinenv.llm.openai_backend import OpenAIChatModel
from clinenv.runlog import read_run_log
from clinenv.runs import Concurrent, RunSpec, arun, run
from clinenv.runs.concurrent import arun_episode
from clinenv.runs.fail_fast import NON_RETRYABLE_DETAILS, RunAborted
from clinenv.runs.logged import run_episode
from clinenv.seeding import episode_seed
from clinenv.testing.clinic import clinic_responder, role_of, without_volatile
from clinenv.testing.fake_server import FakeChatServer

N_DEMO = 17


def demo_env():
    return gym.make("EGIP-Demo-v0")


# ------------------------------------------------------------------ one episode
@pytest.mark.parametrize("strategy", ["direct", "vote", "full"])
def test_llm_doctor_strategies_answer_and_are_scored(model, server, strategy):
    """Full episodes: actions parsed, tests looked up, the strategy's answer scored.

    The server's doctor requests every menu examination, then answers what the report
    calls "consistent with X": demo-01's chest X-ray names lobar pneumonia (target
    "Lobar pneumonia"), demo-05's CT acute appendicitis (target "Acute appendicitis").
    """
    env = demo_env()
    expected = {"demo-01": ("lobar pneumonia", 9), "demo-05": ("acute appendicitis", 7)}
    for case_id, (answer, n_exams) in expected.items():
        server.requests.clear()
        record = asyncio.run(arun_episode(env, LLMDoctor(model, strategy=strategy),
                                          case_id=case_id, seed=3))
        assert (record["answer"], record["verdict"], record["correct"]) == (
            answer, "correct", True)
        assert record["n_exams_requested"] == n_exams and record["invalid_actions"] == 0
        purposes = [c["purpose"] for c in record["llm"]["calls"]]
        decision = {"direct": ["decide"], "vote": ["decide", "vote"],
                    "full": ["council", "ledger", "consensus"]}[strategy]
        assert purposes == ["acquire"] * 19 + decision
        assert record["llm"]["n_calls"] == len(purposes) == len(server.requests)
        if strategy == "vote":  # the Direct sample, then four more in one request
            assert [b["n"] for b in server.requests[-2:]] == [1, 4]
        assert {role_of(b) for b in server.requests} == (
            {"doctor", "council", "ledger", "consensus"} if strategy == "full"
            else {"doctor"})
    # the sync path gives the same record
    sync = run_episode(env, LLMDoctor(model, strategy=strategy), case_id="demo-05", seed=3)
    assert without_volatile([sync]) == without_volatile([record])


def test_llm_totals_sum_the_calls(model):
    record = run_episode(demo_env(), LLMDoctor(model), case_id="demo-01", seed=0)
    llm = record["llm"]
    calls = llm["calls"]
    assert llm["n_calls"] == len(calls) == 20
    assert llm["prompt_tokens"] == sum(c["prompt_tokens"] for c in calls) > 0
    assert llm["completion_tokens"] == sum(c["completion_tokens"] for c in calls) > 0
    assert llm["latency_s"] == pytest.approx(sum(c["latency_s"] for c in calls))
    assert {c["agent"] for c in calls} == {"doctor"}


# ------------------------------------------------------------------ whole runs
def test_concurrent_run_writes_the_lines_of_a_sequential_run(tmp_path, model, server):
    seq = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=tmp_path / "seq.jsonl", seed=11,
                                                          repetitions=2))
    seen = []
    con = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=tmp_path / "con.jsonl", seed=11,
                                                          repetitions=2), Concurrent(8),
              progress=seen.append, on_start=lambda n: seen.append(n))
    assert seen[0] == 2 * N_DEMO and len(seen) == 1 + 2 * N_DEMO
    assert con.n_new == 2 * N_DEMO and con.n_resumed == 0 and con.n_errors == 0
    assert without_volatile(con.lines) == without_volatile(seq.lines)
    assert [(x["case_index"], x["repetition"]) for x in con.lines] == [
        (i, r) for r in range(2) for i in range(N_DEMO)]
    assert all(x["seed"] == episode_seed(11, x["repetition"], x["case_index"])
               for x in con.lines)
    on_disk = read_run_log(tmp_path / "con.jsonl").lines
    key = lambda x: (x["repetition"], x["case_index"])  # noqa: E731
    assert without_volatile(sorted(on_disk, key=key)) == without_volatile(con.lines)
    assert all(line["llm"]["n_calls"] >= 20 for line in on_disk)
    assert summarize(con.lines) == summarize(seq.lines)


def test_concurrent_runs_really_overlap(tmp_path):
    with FakeChatServer(clinic_responder(), delay_s=0.01) as srv:
        chat = OpenAIChatModel("fake-model", base_url=srv.base_url, max_retries=0)
        run(demo_env, lambda: LLMDoctor(chat), RunSpec(out=tmp_path / "c.jsonl", episodes=8),
            Concurrent(8))
        chat.close()
        assert srv.stats()["max_in_flight"] >= 2


def test_resume_after_a_partial_concurrent_run(tmp_path, model):
    full = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=tmp_path / "full.jsonl", seed=2,
                                                           repetitions=2), Concurrent(8))
    raw = (tmp_path / "full.jsonl").read_bytes().split(b"\n")
    partial = tmp_path / "partial.jsonl"
    partial.write_bytes(b"\n".join(raw[:10]) + b"\n" + raw[10][:57])  # crash mid-line
    resumed = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=partial, seed=2, repetitions=2,
                                                              resume=True), Concurrent(8))
    assert (resumed.n_new, resumed.n_resumed, resumed.partial_bytes) == (24, 10, 57)
    assert without_volatile(resumed.lines) == without_volatile(full.lines)
    assert len(read_run_log(partial).lines) == 2 * N_DEMO
    with pytest.raises(FileExistsError):
        run(demo_env, lambda: LLMDoctor(model), RunSpec(out=partial, seed=2), Concurrent())


def test_scripted_doctor_runs_concurrently_too(tmp_path):
    seq = run(demo_env, ScriptedDoctor, RunSpec(out=tmp_path / "a.jsonl", seed=4))
    con = run(demo_env, ScriptedDoctor, RunSpec(out=tmp_path / "b.jsonl", seed=4), Concurrent(5))
    assert without_volatile(con.lines) == without_volatile(seq.lines)
    assert all("llm" not in line for line in con.lines)


# ------------------------------------------------------------------ backend errors
# field-bug-reports B09 class
def test_backend_error_becomes_an_error_line_and_the_run_goes_on(tmp_path, model, server):
    """A failed model call is recorded, never a crash."""
    clean = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=tmp_path / "clean.jsonl",
                                                            episodes=4))
    server.inject(status=500, count=1)  # the very next request: episode 0, first call
    result = run(demo_env, lambda: LLMDoctor(model),
                 RunSpec(out=tmp_path / "err.jsonl", episodes=4))
    first, *rest = result.lines
    assert result.n_errors == 1 and not any("error" in line for line in rest)
    assert first["error"]["type"] == "BackendError"
    assert first["error"]["detail"] == "http_500" and first["error"]["backend"] == "openai"
    assert (first["verdict"], first["correct"], first["terminated"]) == (
        "unscored", False, False)
    assert first["events"] == [] and first["steps"] == 0 and first["answer"] is None
    assert first["llm"]["n_calls"] == 0
    assert without_volatile(rest) == without_volatile(clean.lines[1:])
    summary = summarize(result.lines)
    assert (summary["n_errors"], summary["n_unscored"]) == (
        1, 1 + sum(x["verdict"] == "unscored" for x in rest))
    # on disk, and a resume with retry_errors=False does not run it again
    assert "error" in read_run_log(tmp_path / "err.jsonl").lines[0]
    before = (tmp_path / "err.jsonl").read_bytes()
    again = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=tmp_path / "err.jsonl", episodes=4,
                                                            resume=True, retry_errors=False))
    assert again.n_new == 0 and again.n_errors == 1 and again.n_retried == 0
    assert (tmp_path / "err.jsonl").read_bytes() == before


def test_backend_error_mid_run_in_a_concurrent_run(tmp_path, model, server):
    server.inject(status=503, count=1)
    result = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=tmp_path / "c.jsonl",
                                                             episodes=N_DEMO), Concurrent(8))
    errors = [line for line in result.lines if "error" in line]
    assert result.n_errors == len(errors) == 1
    assert errors[0]["error"]["detail"] == "http_503" and errors[0]["verdict"] == "unscored"
    finished = [line for line in result.lines if "error" not in line]
    assert len(finished) == N_DEMO - 1 and all(x["terminated"] for x in finished)


def error_keys(lines):
    return [(x["case_id"], x["repetition"]) for x in lines if "error" in x]


def test_resume_reruns_exactly_the_error_lines(tmp_path, model, server):
    """After a server outage, ``resume=True`` runs the error lines' episodes again and
    appends their lines, which supersede the error lines (clinenv.runlog)."""
    clean = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=tmp_path / "clean.jsonl", seed=5,
                                                            episodes=3, repetitions=2))
    out = tmp_path / "outage.jsonl"

    def outage(line):  # the first request after (1, rep 0) and after (0, rep 1) fails
        if (line["case_index"], line["repetition"]) in ((1, 0), (0, 1)):
            server.inject(status=500)

    server.inject(status=500)  # the very first request: (0, rep 0)
    first = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=out, seed=5, episodes=3,
                                                            repetitions=2), progress=outage)
    failed = [("demo-01", 0), ("demo-03", 0), ("demo-02", 1)]
    assert first.n_errors == 3 and error_keys(first.lines) == failed
    old = out.read_bytes()
    assert len(old.splitlines()) == 6

    seen = []
    resumed = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=out, seed=5, episodes=3,
                                                              repetitions=2, resume=True),
                  progress=seen.append)
    assert (resumed.n_new, resumed.n_retried, resumed.n_resumed, resumed.n_errors) == (
        3, 3, 3, 0)
    assert [(x["case_id"], x["repetition"]) for x in seen] == failed  # plan order
    data = out.read_bytes()
    assert data.startswith(old) and len(data.splitlines()) == 9  # appended, none rewritten
    log = read_run_log(out)
    assert without_volatile(log.lines[6:]) == without_volatile(seen)
    assert without_volatile(resumed.lines) == without_volatile(clean.lines)
    standing = [log.episodes()[(x["case_id"], x["repetition"])] for x in clean.lines]
    assert without_volatile(standing) == without_volatile(clean.lines)
    # the raw lines summarize like the clean run: each episode once, latest verdict
    assert summarize(log.lines, plan=resumed.plan) == summarize(clean.lines,
                                                                plan=clean.plan)
    # nothing is left to retry
    assert run(demo_env, lambda: LLMDoctor(model), RunSpec(out=out, seed=5, episodes=3,
                                                           repetitions=2, resume=True)).n_new == 0


def test_a_retry_that_fails_again_is_retried_on_the_next_resume(tmp_path, model, server):
    out = tmp_path / "r.jsonl"
    server.inject(status=500)
    run(demo_env, lambda: LLMDoctor(model), RunSpec(out=out, episodes=2))
    server.inject(status=502)  # the outage goes on: the retry fails too
    again = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=out, episodes=2, resume=True))
    assert (again.n_retried, again.n_errors) == (1, 1)
    assert again.lines[0]["error"]["detail"] == "http_502"
    third = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=out, episodes=2, resume=True))
    assert (third.n_retried, third.n_errors) == (1, 0)
    details = [x.get("error", {}).get("detail") for x in read_run_log(out).lines]
    assert details == ["http_500", None, "http_502", None]


def test_concurrent_resume_reruns_exactly_the_error_lines(tmp_path, model, server):
    clean = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=tmp_path / "clean.jsonl", seed=8))
    out = tmp_path / "c.jsonl"
    server.inject(status=503, count=3)  # each failed request ends one episode
    first = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=out, seed=8), Concurrent(8))
    failed = error_keys(first.lines)
    assert first.n_errors == len(failed) == 3
    resumed = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=out, seed=8, resume=True),
                  Concurrent(8))
    assert (resumed.n_new, resumed.n_retried, resumed.n_errors) == (3, 3, 0)
    lines = read_run_log(out).lines
    assert len(lines) == N_DEMO + 3
    assert sorted((x["case_id"], x["repetition"]) for x in lines[N_DEMO:]) == sorted(failed)
    assert without_volatile(resumed.lines) == without_volatile(clean.lines)


# ------------------------------------------------------------------ arguments, loops
# field-bug-reports B10
def test_run_concurrent_refuses_a_running_loop_and_arun_works(tmp_path):
    """No nested event loop; the async form is offered."""
    async def inside():
        with pytest.raises(RuntimeError, match=r"await arun\("):
            run(demo_env, ScriptedDoctor, RunSpec(out=tmp_path / "x.jsonl"), Concurrent())
        return await arun(demo_env, ScriptedDoctor, RunSpec(out=tmp_path / "y.jsonl", episodes=3),
                          Concurrent(2))

    result = asyncio.run(inside())
    assert result.n_new == 3 and not (tmp_path / "x.jsonl").exists()


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_concurrency(tmp_path, bad):
    with pytest.raises(ValueError, match="concurrency"):
        run(demo_env, ScriptedDoctor, RunSpec(out=tmp_path / "x.jsonl"), Concurrent(bad))


def test_doctors_must_share_one_config(tmp_path):
    made = iter([ScriptedDoctor(), ScriptedDoctor(n_questions=1)])
    with pytest.raises(ValueError, match="identically configured"):
        run(demo_env, lambda: next(made), RunSpec(out=tmp_path / "x.jsonl", episodes=2),
            Concurrent(2))


class CrashingDoctor(ScriptedDoctor):
    """The scripted doctor with a bug on demo-06 (same name and config)."""

    def act(self, observation, info):
        if info["case_id"] == "demo-06":
            raise RuntimeError("policy bug")
        return super().act(observation, info)


def test_other_exceptions_stop_the_run_and_keep_whole_lines(tmp_path):
    out = tmp_path / "crash.jsonl"
    with pytest.raises(RuntimeError, match="policy bug"):
        run(demo_env, CrashingDoctor, RunSpec(out=out, seed=6), Concurrent(4))
    log = read_run_log(out)
    assert log.partial_bytes == 0 and 1 <= len(log.lines) < N_DEMO
    assert "demo-06" not in {line["case_id"] for line in log.lines}
    resumed = run(demo_env, ScriptedDoctor, RunSpec(out=out, seed=6, resume=True), Concurrent(4))
    assert resumed.n_new == N_DEMO - len(log.lines)
    clean = run(demo_env, ScriptedDoctor, RunSpec(out=tmp_path / "clean.jsonl", seed=6))
    assert without_volatile(resumed.lines) == without_volatile(clean.lines)


# ------------------------------------------------------------------ fail fast
@pytest.fixture
def down_model():
    """The model of the fixtures, but its server is down (every request refused): its URL
    names a port on 127.0.0.1 that this test holds bound and never listens on, so no
    other process (a parallel test worker) can take the port meanwhile."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        chat = OpenAIChatModel("fake-model", base_url=url, max_retries=0)
        yield chat
        chat.close()


@pytest.fixture
def wrong_url_model(server):
    """The model of the fixtures behind a wrong URL: the server answers 404."""
    chat = OpenAIChatModel("fake-model", base_url=server.base_url[:-len("/v1")] + "/v2",
                           max_retries=0)
    yield chat
    chat.close()


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_a_refused_request_stops_the_run_at_once(tmp_path, model, server, status):
    """A non-retryable HTTP status is a configuration problem: the run stops on the
    episode that met it, which gets no line; the lines before stay; a resume (after the
    fix) completes the run as if nothing happened."""
    assert f"http_{status}" in NON_RETRYABLE_DETAILS
    clean = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=tmp_path / "clean.jsonl",
                                                            episodes=4))
    out = tmp_path / "run.jsonl"
    n_before = []

    def refuse_next(line):  # after the first episode, the server starts refusing
        n_before.append(len(server.requests))
        server.inject(status=status)

    with pytest.raises(RunAborted) as stop:
        run(demo_env, lambda: LLMDoctor(model), RunSpec(out=out, episodes=4), progress=refuse_next)
    err = stop.value
    assert (err.reason, err.error["detail"], err.case_id, err.n_written) == (
        "configuration", f"http_{status}", "demo-02", 1)
    assert "injected fault" in err.error["message"] and str(out) in str(err)
    assert len(server.requests) == n_before[0] + 1  # one refused request, then the stop
    log = read_run_log(out)
    assert without_volatile(log.lines) == without_volatile(clean.lines[:1])
    resumed = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=out, episodes=4, resume=True))
    assert (resumed.n_new, resumed.n_retried, resumed.n_errors) == (3, 0, 0)
    assert without_volatile(resumed.lines) == without_volatile(clean.lines)


def test_a_wrong_url_stops_a_concurrent_run_without_a_line(tmp_path, model,
                                                           wrong_url_model):
    """Wrong URL (the server answers 404) with 4 episodes in flight: no new episode
    starts, the ones in flight are cancelled, the log holds no line, not even a partial
    one; the resume with the right URL writes the clean run's lines."""
    out = tmp_path / "c.jsonl"
    with pytest.raises(RunAborted) as stop:
        run(demo_env, lambda: LLMDoctor(wrong_url_model), RunSpec(out=out), Concurrent(4))
    assert (stop.value.reason, stop.value.error["detail"], stop.value.n_written) == (
        "configuration", "http_404", 0)
    assert "/v2" in stop.value.error["message"]
    log = read_run_log(out)
    assert (log.lines, log.partial_bytes) == ([], 0)
    resumed = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=out, resume=True), Concurrent(4))
    clean = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=tmp_path / "clean.jsonl"))
    assert resumed.n_new == N_DEMO
    assert without_volatile(resumed.lines) == without_volatile(clean.lines)


def test_an_outage_stops_after_max_consecutive_errors(tmp_path, model, down_model):
    """Server down (connection refused): the first ``max_consecutive_errors`` episodes
    become error lines, then the run stops; a resume once the server is back runs them
    again and the rest."""
    out = tmp_path / "down.jsonl"
    with pytest.raises(RunAborted) as stop:
        run(demo_env, lambda: LLMDoctor(down_model), RunSpec(out=out, episodes=8,
                                                             max_consecutive_errors=3))
    err = stop.value
    assert (err.reason, err.error["detail"], err.n_errors_in_a_row, err.n_written) == (
        "outage", "connection", 3, 3)
    lines = read_run_log(out).lines
    assert [(x["case_id"], x["error"]["detail"]) for x in lines] == [
        ("demo-01", "connection"), ("demo-02", "connection"), ("demo-03", "connection")]
    resumed = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=out, episodes=8, resume=True))
    assert (resumed.n_new, resumed.n_retried, resumed.n_errors) == (8, 3, 0)
    clean = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=tmp_path / "clean.jsonl",
                                                            episodes=8))
    assert without_volatile(resumed.lines) == without_volatile(clean.lines)


def test_a_finished_episode_resets_the_count(tmp_path, model, server):
    """Errors on episodes 1 and 3 of 4 are not in a row: with a limit of 2 the run
    finishes (2 error lines); with a limit of 1 it stops after the first."""
    def outage_after_demo_02(line):
        if line["case_id"] == "demo-02":
            server.inject(status=500)

    server.inject(status=500)
    done = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=tmp_path / "a.jsonl", episodes=4,
                                                           max_consecutive_errors=2),
               progress=outage_after_demo_02)
    assert error_keys(done.lines) == [("demo-01", 0), ("demo-03", 0)]
    server.inject(status=500)
    with pytest.raises(RunAborted, match=r"1 episode\(s\) in a row"):
        run(demo_env, lambda: LLMDoctor(model), RunSpec(out=tmp_path / "b.jsonl", episodes=4,
                                                        max_consecutive_errors=1))
    assert len(read_run_log(tmp_path / "b.jsonl").lines) == 1
    # None: never stop
    server.inject(status=500, count=4)
    never = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=tmp_path / "c.jsonl", episodes=4,
                                                            max_consecutive_errors=None))
    assert never.n_errors == 4


def test_an_outage_stops_a_concurrent_run_with_whole_error_lines(tmp_path, model,
                                                                 down_model):
    out = tmp_path / "down.jsonl"
    with pytest.raises(RunAborted) as stop:
        run(demo_env, lambda: LLMDoctor(down_model), RunSpec(out=out, max_consecutive_errors=5),
            Concurrent(4))
    assert (stop.value.reason, stop.value.n_errors_in_a_row) == ("outage", 5)
    log = read_run_log(out)
    # the fifth error line stops it; at most the 3 other workers' lines being written
    # at that moment follow; every line is whole and an error line
    assert log.partial_bytes == 0 and 5 <= len(log.lines) <= 5 + 3
    assert all(x["error"]["detail"] == "connection" for x in log.lines)
    resumed = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=out, resume=True), Concurrent(4))
    assert (resumed.n_new, resumed.n_retried, resumed.n_errors) == (
        N_DEMO, len(log.lines), 0)
    clean = run(demo_env, lambda: LLMDoctor(model), RunSpec(out=tmp_path / "clean.jsonl"))
    assert without_volatile(resumed.lines) == without_volatile(clean.lines)


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "5"])
def test_bad_max_consecutive_errors_is_refused_before_anything_is_written(tmp_path, bad):
    for runner in (lambda out: run(demo_env, ScriptedDoctor, RunSpec(out=out,
                                                                     max_consecutive_errors=bad)),
                   lambda out: run(demo_env, ScriptedDoctor, RunSpec(out=out,
                                                                     max_consecutive_errors=bad),
                                   Concurrent())):
        with pytest.raises(ValueError, match="max_consecutive_errors"):
            runner(tmp_path / "x.jsonl")
        assert not (tmp_path / "x.jsonl").exists()


# ------------------------------------------------------------------ signatures
@pytest.mark.parametrize("runner", [run, arun])
def test_runners_have_explicit_keyword_only_options(runner, tmp_path):
    """Discoverable signatures (IDE completion, ``help()``): the settings are the spec,
    the executor is named, the hooks are keyword-only; none hidden in ``**options``."""
    params = inspect.signature(runner).parameters
    assert not any(p.kind is p.VAR_KEYWORD for p in params.values())
    assert list(params) == ["make_env", "make_doctor", "spec", "executor", "progress",
                            "on_start"]
    options = {name: p for name, p in params.items() if p.kind is p.KEYWORD_ONLY}
    assert set(options) == {"progress", "on_start"}
    assert params["spec"].kind is params["spec"].POSITIONAL_OR_KEYWORD
    assert params["executor"].default is None  # Serial()
    doc = inspect.getdoc(run)
    assert all(f"{name}:" in doc for name in params)
    with pytest.raises(TypeError, match="bogus"):
        run(demo_env, ScriptedDoctor, RunSpec(out=tmp_path / "x.jsonl"), bogus=1)
