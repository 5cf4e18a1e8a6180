"""Concurrent rollouts (:mod:`clinenv.concurrent`) with LLM doctors over a real local server.

Every model call goes over a socket to a :class:`~clinenv.llm.fake_server.FakeChatServer`
on 127.0.0.1 whose replies depend only on the request (:mod:`llm_rollout_helpers`), so a
concurrent run must write exactly the lines of a sequential one (minus ``timing`` and
``llm``).
"""

from __future__ import annotations

import asyncio

import gymnasium as gym
import pytest
from llm_rollout_helpers import clinic_responder, role_of, without_volatile

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.llm_doctor import LLMDoctor
from clinenv.agents.scripted_doctor import ScriptedDoctor
from clinenv.concurrent import arun_concurrent, arun_episode, run_concurrent
from clinenv.llm.fake_server import FakeChatServer
from clinenv.llm.openai_backend import OpenAIChatModel
from clinenv.rollouts import run_episode, run_logged, summarize
from clinenv.runlog import read_run_log
from clinenv.seeding import episode_seed

N_DEMO = 17


@pytest.fixture
def server():
    with FakeChatServer(clinic_responder()) as srv:
        yield srv


@pytest.fixture
def model(server):
    chat = OpenAIChatModel("fake-model", base_url=server.base_url, max_retries=0)
    yield chat
    chat.close()


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
    seq = run_logged(demo_env(), LLMDoctor(model), out=tmp_path / "seq.jsonl", seed=11,
                     repetitions=2)
    seen = []
    con = run_concurrent(demo_env, lambda: LLMDoctor(model), out=tmp_path / "con.jsonl",
                         seed=11, repetitions=2, concurrency=8, progress=seen.append,
                         on_start=lambda n: seen.append(n))
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
        run_concurrent(demo_env, lambda: LLMDoctor(chat), out=tmp_path / "c.jsonl",
                       episodes=8, concurrency=8)
        chat.close()
        assert srv.stats()["max_in_flight"] >= 2


def test_resume_after_a_partial_concurrent_run(tmp_path, model):
    full = run_concurrent(demo_env, lambda: LLMDoctor(model), out=tmp_path / "full.jsonl",
                          seed=2, repetitions=2, concurrency=8)
    raw = (tmp_path / "full.jsonl").read_bytes().split(b"\n")
    partial = tmp_path / "partial.jsonl"
    partial.write_bytes(b"\n".join(raw[:10]) + b"\n" + raw[10][:57])  # crash mid-line
    resumed = run_concurrent(demo_env, lambda: LLMDoctor(model), out=partial, seed=2,
                             repetitions=2, concurrency=8, resume=True)
    assert (resumed.n_new, resumed.n_resumed, resumed.partial_bytes) == (24, 10, 57)
    assert without_volatile(resumed.lines) == without_volatile(full.lines)
    assert len(read_run_log(partial).lines) == 2 * N_DEMO
    with pytest.raises(FileExistsError):
        run_concurrent(demo_env, lambda: LLMDoctor(model), out=partial, seed=2)


def test_scripted_doctor_runs_concurrently_too(tmp_path):
    seq = run_logged(demo_env(), ScriptedDoctor(), out=tmp_path / "a.jsonl", seed=4)
    con = run_concurrent(demo_env, ScriptedDoctor, out=tmp_path / "b.jsonl", seed=4,
                         concurrency=5)
    assert without_volatile(con.lines) == without_volatile(seq.lines)
    assert all("llm" not in line for line in con.lines)


# ------------------------------------------------------------------ backend errors
def test_backend_error_becomes_an_error_line_and_the_run_goes_on(tmp_path, model, server):
    """field-bug-reports B09 class: a failed model call is recorded, never a crash."""
    clean = run_logged(demo_env(), LLMDoctor(model), out=tmp_path / "clean.jsonl",
                       episodes=4)
    server.inject(status=500, count=1)  # the very next request: episode 0, first call
    result = run_logged(demo_env(), LLMDoctor(model), out=tmp_path / "err.jsonl",
                        episodes=4)
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
    # on disk, and a resume does not run it again
    assert "error" in read_run_log(tmp_path / "err.jsonl").lines[0]
    again = run_logged(demo_env(), LLMDoctor(model), out=tmp_path / "err.jsonl",
                       episodes=4, resume=True)
    assert again.n_new == 0 and again.n_errors == 1


def test_backend_error_mid_run_in_a_concurrent_run(tmp_path, model, server):
    server.inject(status=503, count=1)
    result = run_concurrent(demo_env, lambda: LLMDoctor(model), out=tmp_path / "c.jsonl",
                            episodes=N_DEMO, concurrency=8)
    errors = [line for line in result.lines if "error" in line]
    assert result.n_errors == len(errors) == 1
    assert errors[0]["error"]["detail"] == "http_503" and errors[0]["verdict"] == "unscored"
    finished = [line for line in result.lines if "error" not in line]
    assert len(finished) == N_DEMO - 1 and all(x["terminated"] for x in finished)


# ------------------------------------------------------------------ arguments, loops
def test_run_concurrent_refuses_a_running_loop_and_arun_concurrent_works(tmp_path):
    """field-bug-reports B10: no nested event loop; the async form is offered."""
    async def inside():
        with pytest.raises(RuntimeError, match="arun_concurrent"):
            run_concurrent(demo_env, ScriptedDoctor, out=tmp_path / "x.jsonl")
        return await arun_concurrent(demo_env, ScriptedDoctor, out=tmp_path / "y.jsonl",
                                     episodes=3, concurrency=2)

    result = asyncio.run(inside())
    assert result.n_new == 3 and not (tmp_path / "x.jsonl").exists()


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_concurrency(tmp_path, bad):
    with pytest.raises(ValueError, match="concurrency"):
        run_concurrent(demo_env, ScriptedDoctor, out=tmp_path / "x.jsonl", concurrency=bad)


def test_doctors_must_share_one_config(tmp_path):
    made = iter([ScriptedDoctor(), ScriptedDoctor(n_questions=1)])
    with pytest.raises(ValueError, match="identically configured"):
        run_concurrent(demo_env, lambda: next(made), out=tmp_path / "x.jsonl",
                       episodes=2, concurrency=2)


class CrashingDoctor(ScriptedDoctor):
    """The scripted doctor with a bug on demo-06 (same name and config)."""

    def act(self, observation, info):
        if info["case_id"] == "demo-06":
            raise RuntimeError("policy bug")
        return super().act(observation, info)


def test_other_exceptions_stop_the_run_and_keep_whole_lines(tmp_path):
    out = tmp_path / "crash.jsonl"
    with pytest.raises(RuntimeError, match="policy bug"):
        run_concurrent(demo_env, CrashingDoctor, out=out, seed=6, concurrency=4)
    log = read_run_log(out)
    assert log.partial_bytes == 0 and 1 <= len(log.lines) < N_DEMO
    assert "demo-06" not in {line["case_id"] for line in log.lines}
    resumed = run_concurrent(demo_env, ScriptedDoctor, out=out, seed=6, concurrency=4,
                             resume=True)
    assert resumed.n_new == N_DEMO - len(log.lines)
    clean = run_logged(demo_env(), ScriptedDoctor(), out=tmp_path / "clean.jsonl", seed=6)
    assert without_volatile(resumed.lines) == without_volatile(clean.lines)
