"""The OpenEnv server (``clinenv serve``) with OpenEnv's own clients (``ClinenvClient``,
``GenericEnvClient``) against a real uvicorn server on 127.0.0.1 (a free port).

Runs in ``.venv-openenv`` (``pip install -e '.[test,openenv]'``; ``.ci/run`` builds it);
elsewhere it skips. The MedQA server's tests need the AgentClinic MedQA file
(``clinenv.testing.data.SHARED_DATA``). Reference episodes are in-process ``gym.make`` episodes of
the same id, settings (the tool view's: delta observations, ``premature_diagnosis=
"decide"``), case and seed. The SIGTERM test stops the shared server, so it runs last.
"""

from __future__ import annotations

import asyncio
import gc
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("openenv", reason="openenv is not installed: run in .venv-openenv "
                                      "(pip install -e '.[test,openenv]'), as .ci/run does")

import gymnasium as gym  # noqa: E402
import httpx  # noqa: E402
import numpy as np  # noqa: E402
import websockets  # noqa: E402
from openenv import GenericEnvClient  # noqa: E402

import clinenv  # noqa: E402,F401
from clinenv.agents import ScriptedDoctor  # noqa: E402
from clinenv.integrations.openenv import (  # noqa: E402
    ClinAction,
    ClinenvClient,
    make_remote_env_factory,
)
from clinenv.integrations.tools import FINAL_RESULT  # noqa: E402
from clinenv.testing.data import MEDQA_FILE, SHARED_DATA, missing_shared_data  # noqa: E402
from clinenv.testing.serve import ServeProcess  # noqa: E402

ENV_ID = "EGIP-MedQA-v0"
TOOL_VIEW = {"observation_format": "delta", "premature_diagnosis": "decide",
             "action_format": "tools"}
N_SESSIONS = 64
ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(missing_shared_data(MEDQA_FILE) is not None,
                                reason=missing_shared_data(MEDQA_FILE) or "")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = ServeProcess(tmp_path_factory.mktemp("serve"), "--env", ENV_ID, "--data-dir",
                       str(SHARED_DATA), "--max-sessions", str(N_SESSIONS + 6), cwd=ROOT)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def local_env():
    env = gym.make(ENV_ID, data_dir=str(SHARED_DATA), **TOOL_VIEW)
    yield env
    env.close()


def local_episode(env, case_id, seed):
    """(transcript, reward, verdict) of an in-process episode with the scripted doctor;
    the final observation is the tool view's FINAL_RESULT, as the server sends it."""
    doctor = ScriptedDoctor()
    obs, info = env.reset(seed=seed, options={"case_id": case_id})
    doctor.reset(seed=seed)
    transcript, total = [obs["text"]], 0.0
    while True:
        action = doctor.act(obs, info)
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        done = terminated or truncated
        transcript += [action, FINAL_RESULT if done else obs["text"]]
        if done:
            return transcript, total, info["verdict"]


async def remote_episode(url, case_id, seed):
    """The same through a ClinenvClient session (metadata is the doctor's info)."""
    doctor = ScriptedDoctor()
    client = ClinenvClient(base_url=url, message_timeout_s=60)
    try:
        result = await client.reset(seed=seed, case_id=case_id)
        doctor.reset(seed=seed)
        obs = result.observation
        transcript, total, texts = [obs.text], 0.0, [json.dumps(obs.metadata)]
        while not result.done:
            action = doctor.act({"text": obs.text}, obs.metadata)
            result = await client.step(ClinAction(text=action))
            obs = result.observation
            total += result.reward
            transcript += [action, obs.text]
            texts.append(json.dumps(obs.metadata))
        return transcript, total, obs.metadata["verdict"], obs.metadata
    finally:
        await client.close()


def test_64_sessions_no_crosstalk(server, local_env):
    cases = local_env.unwrapped.pool.cases[:N_SESSIONS]
    jobs = [(case.case_id, 1000 + i) for i, case in enumerate(cases)]

    async def all_sessions():
        return await asyncio.gather(*(remote_episode(server.url, c, s) for c, s in jobs))

    remote = asyncio.run(all_sessions())
    for (case_id, seed), (transcript, reward, verdict, meta) in zip(jobs, remote, strict=True):
        want = local_episode(local_env, case_id, seed)
        assert (transcript, reward, verdict) == want, case_id
        assert meta["case_id"] == case_id and meta["seed"] == seed
        assert meta["episode_reward"] == reward
    assert {v for _, _, v, _ in remote} >= {"correct"} or len(remote) == N_SESSIONS


def test_generic_client_dict_actions_and_unseeded_reset(server, local_env):
    with GenericEnvClient(base_url=server.url).sync() as client:
        first = client.reset()  # no seed: one is drawn and reported, with the case
        meta = first.observation["metadata"]
        assert isinstance(meta["seed"], int) and meta["case_id"]
        again = client.reset(seed=meta["seed"], case_id=meta["case_id"])
        assert again.observation["text"] == first.observation["text"]
        by_seed = client.reset(seed=meta["seed"])  # the case drawn as gym.make draws it
        obs, info = local_env.reset(seed=meta["seed"])
        assert by_seed.observation["metadata"]["case_id"] == info["case_id"]
        assert by_seed.observation["text"] == obs["text"]
        step = client.step({"text": "What brings you here today?"})
        assert not step.done and step.observation["text"]
        tool = client.step({"tool": "list_exams"})
        assert tool.observation["text"]


def test_max_rounds_reaches_the_environment_through_the_server(server, local_env):
    """A curriculum row's round budget: reset(max_rounds=2) over a session and through
    make_remote_env_factory gives exactly 2 rounds, as the in-process reset does; a bad
    budget is an error reply and the session goes on."""
    obs, _ = local_env.reset(seed=1, options={"case_id": 2, "max_rounds": 2})
    with GenericEnvClient(base_url=server.url).sync() as client:
        first = client.reset(seed=1, case_id=2, max_rounds=2)
        assert first.observation["text"] == obs["text"] and "Round 1 of 2." in obs["text"]
        phases = [client.step({"tool": "ask_patient", "arguments": {"question": q}})
                  .observation["metadata"]["phase"] for q in ("What brings you in?",
                                                               "Any fever?")]
        assert phases == ["acquire", "decide"]
        with pytest.raises(RuntimeError, match=r"max_rounds must be an int in 1\.\.19"):
            client.reset(seed=1, case_id=2, max_rounds=0)
        # the refused reset left the episode as it was: it goes on
        assert client.step({"tool": "list_exams"}).observation["text"]
        assert "Round 1 of 19." in client.reset(seed=1, case_id=2).observation["text"]
    remote = make_remote_env_factory(server.url, env_id=ENV_ID)()
    text = remote.reset(case_id=2, seed=1, max_rounds=2, prompt="ignored row field")
    assert text == obs["text"]
    with pytest.raises(ValueError, match=r"max_rounds must be an int in 1\.\.19"):
        remote.reset(case_id=2, seed=1, max_rounds=40)
    # a parquet row's budget is a numpy integer: sent as a plain int
    assert remote.reset(case_id=2, seed=1, max_rounds=np.int64(2)) == obs["text"]
    assert "Round 1 of 19." in remote.reset(case_id=2, seed=1, max_rounds=None)
    del remote  # its session closes when it is collected (no public close(): a TRL tool)
    gc.collect()
    deadline = time.monotonic() + 15
    while server.log().count(" open (") != server.log().count(" close\n"):
        assert time.monotonic() < deadline, server.log()[-2000:]
        time.sleep(0.2)


def test_mcp_tools_in_a_session(server):
    async def run():
        async with websockets.connect(server.url.replace("http", "ws") + "/ws") as ws:
            async def send(msg):
                await ws.send(json.dumps(msg))
                return json.loads(await ws.recv())

            await send({"type": "reset", "data": {"seed": 3, "case_id": 0}})
            listed = await send({"type": "mcp", "data": {"jsonrpc": "2.0", "id": 1,
                                                           "method": "tools/list"}})
            names = sorted(t["name"] for t in listed["data"]["result"]["tools"])
            called = await send({"type": "mcp", "data": {
                "jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "ask_patient", "arguments": {"question": "Any fever?"}}}})
            unknown = await send({"type": "mcp", "data": {
                "jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "reset", "arguments": {}}}})
            state = await send({"type": "state"})
            return names, called, unknown, state

    names, called, unknown, state = asyncio.run(run())
    assert names == ["ask_patient", "list_exams", "order_exam", "submit_diagnosis"]
    assert "error" not in called["data"] and json.dumps(called["data"]["result"])
    assert "error" in unknown["data"] or unknown["data"]["result"].get("isError")
    assert state["data"]["seed"] == 3


def test_malformed_input_gets_error_replies(server):
    big = "x" * (10 * 1024 * 1024)

    async def run():
        replies = {}
        async with websockets.connect(server.url.replace("http", "ws") + "/ws",
                                      max_size=None) as ws:
            async def send(name, raw):
                await ws.send(raw)
                replies[name] = json.loads(await ws.recv())

            await send("bad_json", "{not json")
            await send("before_reset", json.dumps({"type": "step", "data": {"text": "hi"}}))
            await send("reset", json.dumps({"type": "reset", "data": {"seed": 1,
                                                                       "case_id": 2}}))
            await send("unknown_tool", json.dumps({"type": "step", "data": {
                "tool": "prescribe", "arguments": {}}}))
            await send("wrong_types", json.dumps({"type": "step", "data": {
                "tool": "order_exam", "arguments": {"exam": ["T1"]}}}))
            await send("wrong_field", json.dumps({"type": "step", "data": {"text": 5}}))
            await send("both", json.dumps({"type": "step", "data": {"text": "a",
                                                                     "tool": "list_exams"}}))
            await send("bad_seed", json.dumps({"type": "reset", "data": {"seed": "x"}}))
            await send("bad_case", json.dumps({"type": "reset", "data": {"case_id": "nope"}}))
            await send("bad_kw", json.dumps({"type": "reset", "data": {"target": 1}}))
            await send("reset2", json.dumps({"type": "reset", "data": {"seed": 1,
                                                                        "case_id": 2}}))
            # a refused reset leaves no episode: reset2 starts one again
            await send("ten_mb", json.dumps({"type": "step", "data": {"text": big}}))
            await send("answer", json.dumps({"type": "step", "data": {
                "tool": "submit_diagnosis", "arguments": {"diagnosis": "Asthma"}}}))
            await send("answer2", json.dumps({"type": "step", "data": {
                "tool": "submit_diagnosis", "arguments": {"diagnosis": "Asthma"}}}))
            await send("after_done", json.dumps({"type": "step", "data": {"text": "hi"}}))
        return replies

    replies = asyncio.run(run())
    errors = {k: v["data"] for k, v in replies.items() if v["type"] == "error"}
    assert set(errors) == {"bad_json", "before_reset", "unknown_tool", "wrong_types",
                           "wrong_field", "both", "bad_seed", "bad_case", "bad_kw",
                           "ten_mb", "after_done"}, replies
    assert errors["bad_json"]["code"] == "INVALID_JSON"
    assert "reset first" in errors["before_reset"]["message"]
    assert "max_text_chars is 65536" in errors["ten_mb"]["message"]  # refused by length
    assert "episode is over" in errors["after_done"]["message"]
    assert errors["both"]["code"] == "VALIDATION_ERROR"
    assert replies["answer2"]["data"]["done"] is True
    # the server goes on serving
    with ClinenvClient(base_url=server.url).sync() as client:
        assert client.reset(seed=1, case_id=2).observation.text


def test_http_step_outside_a_session_is_an_error(server):
    reply = httpx.post(server.url + "/step", json={"action": {"text": "hi"}}, timeout=30)
    assert reply.status_code == 409 and "reset first" in reply.json()["detail"]
    reply = httpx.post(server.url + "/step", json={"action": {"nope": 1}}, timeout=30)
    assert reply.status_code == 422
    reply = httpx.post(server.url + "/reset", json={"seed": 1, "case_id": 0}, timeout=30)
    assert reply.status_code == 200 and reply.json()["observation"]["text"]


def test_dropped_client_frees_its_session(server):
    async def run():
        ws = await websockets.connect(server.url.replace("http", "ws") + "/ws")
        await ws.send(json.dumps({"type": "reset", "data": {"seed": 5, "case_id": 4}}))
        session = json.loads(await ws.recv())["data"]["observation"]["metadata"]["session"]
        ws.transport.abort()  # no close frame: the client vanished
        return session

    session = asyncio.run(run())
    deadline = time.monotonic() + 15
    while f"session {session} close" not in server.log():
        assert time.monotonic() < deadline, server.log()[-2000:]
        time.sleep(0.2)
    opened = server.log().count(" open (")
    closed = server.log().count(" close\n")
    assert opened == closed  # the active-session count is back to 0


def test_receive_timeout_drops_the_connection():
    """A server that answers its first request late: the client gives up, drops the
    socket, and its next call reads its own reply, never the stale one (#1143)."""
    async def run():
        served = []

        async def handler(ws):
            async for raw in ws:
                msg = json.loads(raw)
                seed = msg["data"].get("seed")
                served.append(seed)
                if seed == 1:
                    await asyncio.sleep(1.0)
                await ws.send(json.dumps({"type": "observation", "data": {
                    "observation": {"text": f"reply to {seed}", "metadata": {}},
                    "reward": None, "done": False}}))

        async with websockets.serve(handler, "127.0.0.1", 0) as srv:
            port = srv.sockets[0].getsockname()[1]
            client = ClinenvClient(base_url=f"http://127.0.0.1:{port}",
                                   message_timeout_s=0.3)
            with pytest.raises(TimeoutError):
                await client.reset(seed=1)
            assert client._ws is None  # dropped
            second = await client.reset(seed=2)
            await asyncio.sleep(1.0)
            third = await client.reset(seed=3)
            await client.close()
            return second.observation.text, third.observation.text

    assert asyncio.run(run()) == ("reply to 2", "reply to 3")


def test_audit_turns_through_the_server_find_what_in_process_finds(server, local_env):
    """clinenv audit's adversarial turns, played through the server, find nothing more
    than in process (and the server's metadata adds no Y)."""
    from clinenv.audit.runner import audit_case

    class Remote:
        def __init__(self, client):
            self.client, self.unwrapped = client, local_env.unwrapped

        def reset(self, seed, options):
            r = self.client.reset(seed=seed, case_id=options["case_id"])
            return {"text": r.observation.text}, r.observation.metadata

        def step(self, text):
            r = self.client.step(ClinAction(text=text))
            return {"text": r.observation.text}, r.reward, r.done, False, r.observation.metadata

    cases = local_env.unwrapped.pool.cases[:12]
    with ClinenvClient(base_url=server.url).sync() as client:
        for case in cases:
            remote, _ = audit_case(Remote(client), case)
            local, _ = audit_case(local_env, case)
            assert [(f.kind, f.item) for f in remote] == [(f.kind, f.item) for f in local]


def test_serve_refuses_a_remote_host_without_the_flag():
    proc = subprocess.run([sys.executable, "-m", "clinenv", "serve", "--host", "0.0.0.0"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--allow-remote" in proc.stderr


def test_serve_takes_run_options_preset_cases_and_an_llm_patient(tmp_path):
    """--preset, --cases and an LLM patient seat on the server, as `clinenv run` takes
    them: the menu is hidden (egip-no-menu), resets draw only the listed cases and refuse
    others, and the patient's replies come from the model server (the fake's "echo"
    responder repeats the question it was sent)."""
    from clinenv.testing.fake_server import FakeChatServer

    listed = tmp_path / "cases.txt"
    listed.write_text("demo-05\ndemo-11\n", encoding="utf-8")
    with FakeChatServer("echo") as model_server:
        srv = ServeProcess(tmp_path, "--env", "EGIP-Demo-v0", "--preset", "egip-no-menu",
                           "--cases", str(listed), "--patient", "llm", "--model", "fake",
                           "--base-url", model_server.base_url, cwd=ROOT)
        try:
            with GenericEnvClient(base_url=srv.url).sync() as client:
                drawn = {client.reset(seed=seed).observation["metadata"]["case_id"]
                         for seed in range(12)}
                assert drawn == {"demo-05", "demo-11"}
                opening = client.reset(seed=0, case_id="demo-05").observation
                assert "Tests you can request" not in opening["text"]
                assert opening["metadata"]["menu"] == []  # egip-no-menu: no menu shown
                reply = client.step({"tool": "ask_patient",
                                     "arguments": {"question": "Where does it hurt?"}})
                assert "Where does it hurt?" in reply.observation["text"]
                assert any("Where does it hurt?" in json.dumps(body)
                           for body in model_server.requests)
                with pytest.raises(Exception, match="demo-01"):
                    client.reset(case_id="demo-01")  # not listed
        finally:
            srv.stop()
    assert "Traceback" not in srv.log()


def test_sigterm_exits_0_and_closes_open_sessions(server):
    async def run():
        ws = await websockets.connect(server.url.replace("http", "ws") + "/ws")
        await ws.send(json.dumps({"type": "reset", "data": {"seed": 9, "case_id": 7}}))
        meta = json.loads(await ws.recv())["data"]["observation"]["metadata"]
        server.proc.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        code = await asyncio.to_thread(server.proc.wait, 15)
        return meta["session"], code, time.monotonic() - t0

    session, code, took = asyncio.run(run())
    log = server.log()
    assert code == 0 and took < 10, log[-2000:]
    assert f"session {session} close" in log and "Traceback" not in log
