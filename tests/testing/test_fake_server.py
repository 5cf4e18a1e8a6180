"""The local OpenAI-compatible server, spoken to over raw HTTP (no OpenAI client), and its
built-in clinician responder against real EGIP episodes."""

from __future__ import annotations

import http.client
import importlib.util
import json
import socket
import subprocess
import sys
import threading
import urllib.request

import gymnasium as gym
import pytest

from clinenv.agents.prompts import (
    AGENTCLINIC_DOCTOR_SYSTEM,
    CONSENSUS_SYSTEM,
    COUNCIL_SYSTEM,
    DIRECT_SYSTEM,
    EGIP_DOCTOR_SYSTEM,
    EVIDENCE_HEADING,
    JUDGE_RETRY_USER,
    JUDGE_SYSTEM,
    JUDGE_USER,
    LEDGER_HEADING,
    LEDGER_SYSTEM,
    PATIENT_OPENING,
    PATIENT_SYSTEM,
    PATIENT_VOICE_SELF,
    PROPOSALS_HEADING,
)
from clinenv.protocol.evidence import TERMINAL_INSTRUCTIONS
from clinenv.testing.fake_responders import (
    DECISION_MARKER,
    FALLBACK_QUESTION,
    clinician_responder,
    role_of,
)
from clinenv.testing.fake_server import FakeChatServer


def post(server: FakeChatServer, body, *, timeout: float = 10.0, raw: bytes | None = None,
         path: str = "/v1/chat/completions"):
    """POST ``body`` as JSON; returns (status, headers, parsed JSON)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        data = raw if raw is not None else json.dumps(body).encode()
        conn.request("POST", path, data, {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), json.loads(response.read())
    finally:
        conn.close()


def get(server: FakeChatServer, path: str):
    with urllib.request.urlopen(server.base_url.removesuffix("/v1") + path, timeout=10) as r:
        return json.loads(r.read())


BODY = {"model": "fake-model", "n": 3,
        "messages": [{"role": "system", "content": "be brief please"},
                     {"role": "user", "content": "cough"}]}


def test_reply_has_openai_shape_n_choices_and_whitespace_usage(fake_server):  # noqa: F811
    status, _, reply = post(fake_server, BODY)
    assert status == 200
    assert fake_server.base_url == f"http://127.0.0.1:{fake_server.port}/v1"
    assert reply["object"] == "chat.completion" and reply["id"].startswith("chatcmpl-")
    assert (reply["model"], reply["system_fingerprint"]) == ("fake-model", "fp-fake")
    assert isinstance(reply["created"], int)
    assert [(c["index"], c["message"], c["finish_reason"]) for c in reply["choices"]] == [
        (i, {"role": "assistant", "content": "OK"}, "stop") for i in range(3)]
    # "be brief please" + "cough" = 4 words; 3 replies of one word.
    assert reply["usage"] == {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7}
    assert fake_server.requests == [BODY]


def test_ignore_n_returns_one_choice():
    with FakeChatServer(ignore_n=True) as server:
        _, _, reply = post(server, BODY)
    assert len(reply["choices"]) == 1


def test_responder_gets_body_and_index_and_may_return_a_message_dict():
    def responder(body, index):
        if index == 0:
            return f"{body['messages'][-1]['content']}-{index}"
        return {"content": None, "reasoning": "thinking hard", "finish_reason": "length"}

    with FakeChatServer(responder, model="m2", system_fingerprint="fp-2") as server:
        _, _, reply = post(server, {**BODY, "n": 2})
    first, second = reply["choices"]
    assert first["message"] == {"role": "assistant", "content": "cough-0"}
    assert second == {"index": 1, "finish_reason": "length", "logprobs": None,
                      "message": {"role": "assistant", "content": None,
                                  "reasoning": "thinking hard"}}
    assert reply["usage"]["completion_tokens"] == 1 + 2  # "cough-0" + "thinking hard"
    assert (reply["model"], reply["system_fingerprint"]) == ("m2", "fp-2")


def test_injected_faults_are_consumed_first_in_first_out(fake_server):  # noqa: F811
    fake_server.inject(status=429, retry_after_ms=25)
    fake_server.inject(status=503, count=2)
    fake_server.inject(body={"choices": []})
    status, headers, reply = post(fake_server, BODY)
    assert status == 429 and headers["retry-after-ms"] == "25"
    assert reply["error"]["type"] == "rate_limit_exceeded" and reply["error"]["code"] == 429
    assert [post(fake_server, BODY)[0] for _ in range(2)] == [503, 503]
    status, _, reply = post(fake_server, BODY)
    assert (status, reply) == (200, {"choices": []})
    assert post(fake_server, BODY)[2]["choices"][0]["message"]["content"] == "OK"
    stats = fake_server.stats()
    assert (stats["n_requests"], stats["n_errors"], stats["pending_faults"]) == (5, 3, 0)
    assert len(fake_server.requests) == 5


def test_raw_body_fault_is_returned_verbatim(fake_server):  # noqa: F811
    body = {"id": "x", "object": "chat.completion", "choices": [],
            "usage": {"prompt_tokens": 50, "completion_tokens": 0, "total_tokens": 50}}
    fake_server.inject(body=body)
    body["id"] = "mutated after inject"  # the server keeps its own copy
    status, _, reply = post(fake_server, BODY)
    assert status == 200
    assert reply == {"id": "x", "object": "chat.completion", "choices": [],
                     "usage": {"prompt_tokens": 50, "completion_tokens": 0, "total_tokens": 50}}


def test_raw_bytes_fault_is_sent_byte_for_byte_with_its_content_type(fake_server):  # noqa: F811
    fake_server.inject(raw=b'{"choices": [ {"index":0,')
    fake_server.inject(raw=bytearray(b"<p>busy</p>"), content_type="text/html")
    replies = []
    for _ in range(2):
        conn = http.client.HTTPConnection("127.0.0.1", fake_server.port, timeout=10)
        try:
            conn.request("POST", "/v1/chat/completions", json.dumps(BODY).encode(),
                         {"Content-Type": "application/json"})
            response = conn.getresponse()
            replies.append((response.status, response.getheader("Content-Type"),
                            response.read()))
        finally:
            conn.close()
    assert replies == [(200, "application/json", b'{"choices": [ {"index":0,'),
                       (200, "text/html", b"<p>busy</p>")]
    assert post(fake_server, BODY)[0] == 200  # faults used up: a normal reply again


def test_hang_fault_makes_a_client_time_out_then_service_resumes(fake_server):  # noqa: F811
    fake_server.inject(hang_s=1.0)
    with pytest.raises((TimeoutError, socket.timeout)):
        post(fake_server, BODY, timeout=0.2)
    status, _, reply = post(fake_server, BODY)
    assert status == 200 and reply["choices"][0]["message"]["content"] == "OK"


@pytest.mark.parametrize("kwargs, field", [
    ({}, "exactly one"),
    ({"status": 500, "hang_s": 1.0}, "exactly one"),
    ({"status": 500, "count": 0}, "count"),
    ({"status": 200}, "status"),
    ({"hang_s": -1.0}, "hang_s"),
    ({"hang_s": 1.0, "retry_after_ms": 5}, "retry_after_ms"),
    ({"body": ["not", "a", "dict"]}, "body"),
    ({"raw": "text, not bytes"}, "raw"),
    ({"raw": b"x", "body": {}}, "exactly one"),
    ({"raw": b"x", "content_type": " "}, "content_type"),
])
def test_inject_rejects_bad_arguments(fake_server, kwargs, field):  # noqa: F811
    with pytest.raises(ValueError, match=field):
        fake_server.inject(**kwargs)


def test_bad_input_gets_error_json_not_a_crash(fake_server):  # noqa: F811
    status, _, reply = post(fake_server, None, raw=b"{not json")
    assert status == 400 and "JSON object" in reply["error"]["message"]
    status, _, reply = post(fake_server, BODY, path="/v1/completions")
    assert status == 404
    status, _, reply = post(fake_server, {**BODY, "n": 0})
    assert status == 500 and "n must be a positive int" in reply["error"]["message"]
    assert post(fake_server, BODY)[0] == 200  # still serving


def test_responder_exception_is_reported_as_500():
    def broken(body, index):
        raise KeyError("no such field")

    with FakeChatServer(broken) as server:
        status, _, reply = post(server, BODY)
    assert status == 500 and "KeyError" in reply["error"]["message"]


def test_get_routes_and_stats(fake_server):  # noqa: F811
    fake_server.delay_s = 0.05  # adjustable while running
    post(fake_server, BODY)
    assert get(fake_server, "/health") == {"status": "ok"}
    assert get(fake_server, "/v1/models")["data"][0]["id"] == "fake-model"
    stats = get(fake_server, "/stats")
    assert stats["n_requests"] == 1 and stats["delay_s"] == 0.05
    ((start, end),) = stats["intervals"]
    assert end - start >= 0.05  # the delay is slept inside the handled interval


def test_serves_64_concurrent_clients_at_once():
    """64 clients are inside the responder at the same moment: the barrier only opens
    when all 64 requests are being handled in parallel (a 500 otherwise)."""
    barrier = threading.Barrier(64, timeout=20)

    def responder(body, index):
        barrier.wait()
        return body["messages"][-1]["content"]

    results: dict[int, tuple[int, str]] = {}

    def client(i: int) -> None:
        status, _, reply = post(server, {"model": "m", "messages": [
            {"role": "user", "content": f"patient {i}"}]}, timeout=30)
        results[i] = (status, reply["choices"][0]["message"]["content"])

    with FakeChatServer(responder, delay_s=0.2) as server:
        threads = [threading.Thread(target=client, args=(i,)) for i in range(64)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        stats = server.stats()
    assert results == {i: (200, f"patient {i}") for i in range(64)}
    assert stats["max_in_flight"] == 64 and stats["n_errors"] == 0


def test_stop_is_idempotent_and_releases_the_port():
    server = FakeChatServer().start()
    port = server.port
    server.stop()
    server.stop()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # free again


def test_stop_closes_open_keep_alive_connections():
    """A client holding a pooled connection must not keep being served after stop()."""
    server = FakeChatServer().start()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        conn.request("POST", "/v1/chat/completions", json.dumps(BODY).encode())
        assert conn.getresponse().read()  # the connection is now open and idle
        server.stop()
        with pytest.raises((http.client.HTTPException, OSError)):
            conn.request("POST", "/v1/chat/completions", json.dumps(BODY).encode())
            conn.getresponse().read()
    finally:
        conn.close()
        server.stop()


def test_unknown_responder_name_and_negative_delay_are_rejected():
    with pytest.raises(ValueError, match="clinician"):
        FakeChatServer("doctor")
    with pytest.raises(ValueError, match="delay_s"):
        FakeChatServer(delay_s=-1)


# --------------------------------------------------------------------------- clinician
def _body(*contents: tuple[str, str]) -> dict:
    return {"messages": [{"role": role, "content": text} for role, text in contents]}


MENU_VIEW = """# Task
Evaluate the patient.

# Available examinations (results hidden until requested)
PE1  Vital Signs
t2  Chest X-ray
T3  CT Chest
... and 4 more; any recorded examination can be requested by name.

# Your turn
Round 3 of 19."""


def test_clinician_requests_the_first_menu_id_not_yet_requested_in_the_conversation():
    fresh = _body(("user", MENU_VIEW))
    assert clinician_responder(fresh, 0) == "REQUEST TEST: PE1"
    # Earlier requests in the chat history (delta format), matched case-insensitively.
    history = _body(("user", "Round 1"), ("assistant", "request test: pe1"),
                    ("user", "Round 2"), ("assistant", "**REQUEST TEST:** T2"),
                    ("user", MENU_VIEW))
    assert clinician_responder(history, 0) == "REQUEST TEST: T3"
    done = _body(("assistant", "REQUEST TEST: PE1 REQUEST TEST: T2 REQUEST TEST: T3"),
                 ("user", MENU_VIEW))
    assert clinician_responder(done, 0) == FALLBACK_QUESTION
    assert clinician_responder(_body(("user", "Hello doctor")), 0) == FALLBACK_QUESTION


def test_clinician_decision_rules():
    assert DECISION_MARKER in TERMINAL_INSTRUCTIONS
    evidence = ("# Objective (S0)\nX\n\n# Acquired observations\n"
                "[O1] Measurement PE1 Vital Signs:\n    Temperature: 38.9 °C\n    HR 90\n"
                "[O2] Measurement Biopsy: not recorded (unknown)\n"
                "[O3] Measurement T2 Chest X-ray:\n    Findings: bilateral hilar nodes\n"
                "[O4] Patient, asked \"Pain?\": no\n\n# Instructions\n" + TERMINAL_INSTRUCTIONS)
    assert clinician_responder(_body(("user", evidence)), 0) == (
        "DIAGNOSIS READY: Findings: bilateral hilar nodes")
    no_results = ("# Acquired observations\n[O1] Measurement Biopsy: not recorded (unknown)\n"
                  "\n# Instructions\n" + TERMINAL_INSTRUCTIONS)
    assert clinician_responder(_body(("user", no_results)), 0) == "DIAGNOSIS READY: Unknown"


# ------------------------------------------------------------ clinician: every seat
def _ask(server: FakeChatServer, messages: list[dict]) -> str:
    """The server's reply content to ``messages`` over raw HTTP."""
    status, _, reply = post(server, {"model": "m", "messages": messages})
    assert status == 200
    return reply["choices"][0]["message"]["content"]


def test_role_of_reads_each_exact_system_prompt():
    prompts = {"patient": PATIENT_SYSTEM.format(voice=PATIENT_VOICE_SELF, facts="x"),
               "judge": JUDGE_SYSTEM, "direct": DIRECT_SYSTEM, "council": COUNCIL_SYSTEM,
               "ledger": LEDGER_SYSTEM, "consensus": CONSENSUS_SYSTEM,
               "doctor": EGIP_DOCTOR_SYSTEM}
    for role, prompt in prompts.items():
        assert role_of(_body(("system", prompt), ("user", "hi"))) == role
    agentclinic = AGENTCLINIC_DOCTOR_SYSTEM.format(budget="at most 20")
    assert role_of(_body(("system", agentclinic), ("user", "hi"))) == "doctor"
    assert role_of(_body(("user", "hi"))) == "doctor"  # no system prompt
    assert role_of(_body(("system", "You are a pirate."), ("user", "hi"))) == "doctor"


def test_clinician_patient_answers_from_the_persona_facts_never_the_question():
    facts = ("Demographics: 34-year-old man\nSymptoms:\n  Primary Symptom: Fever and night "
             "sweats\n  Secondary Symptoms:\n    - Fatigue\n    - Shortness of breath\n"
             "Current Medications: Methadone 60 mg daily.")
    system = PATIENT_SYSTEM.format(voice=PATIENT_VOICE_SELF, facts=facts)
    with FakeChatServer("clinician") as server:
        first = _ask(server, [{"role": "system", "content": system},
                              {"role": "user", "content": f"{PATIENT_OPENING}\nAny other "
                                                          "symptoms?"}])
        medication = _ask(server, [{"role": "system", "content": system},
                                   {"role": "user", "content": "Do you take medications?"}])
        breath = _ask(server, [{"role": "system", "content": system},
                               {"role": "user", "content": "Any breath problems?"}])
        unmatched = _ask(server, [{"role": "system", "content": system},
                                  {"role": "user", "content": "What brings you in?"}])
        nothing = _ask(server, [{"role": "system", "content": PATIENT_SYSTEM.format(
            voice=PATIENT_VOICE_SELF, facts="(none)")}, {"role": "user", "content": "Pain?"}])
    # "symptoms" -> "symptom": the first fact labelled with it wins the tie
    assert first == "Fever and night sweats."
    assert medication == "Methadone 60 mg daily."
    assert breath == "Shortness of breath."  # a list item, under its parent's label
    assert unmatched == "Fever and night sweats."  # no shared word: the first symptom
    assert nothing == "I'm not sure."


@pytest.mark.parametrize(("target", "answer", "verdict"), [
    ("Lobar pneumonia", "lobar  PNEUMONIA.", "Yes"),
    ("Graves’ disease", "**graves’ disease**", "Yes"),
    ("Lobar pneumonia", "Pneumonia", "No"),
])
def test_clinician_judge_compares_answer_and_reference(target, answer, verdict):
    question = JUDGE_USER.format(target=target, answer=answer)
    with FakeChatServer("clinician") as server:
        first = _ask(server, [{"role": "system", "content": JUDGE_SYSTEM},
                              {"role": "user", "content": question}])
        retried = _ask(server, [{"role": "system", "content": JUDGE_SYSTEM},
                                {"role": "user", "content": question},
                                {"role": "assistant", "content": "Maybe."},
                                {"role": "user", "content": JUDGE_RETRY_USER}])
    assert first == retried == verdict


def test_clinician_terminal_seats_on_a_real_evidence_interface():
    """demo-02 e_T (O1 patient, O2 potassium, O3 not recorded, O4 "Pending", O5 ECG):
    the label is the ECG's first result line; admissible ids O1, O2, O5."""
    env = gym.make("EGIP-Demo-v0", acquisition_rounds=5)
    env.reset(seed=0, options={"case_id": "demo-02"})
    for action in ["Where does it hurt?", "REQUEST TEST: T3",
                   "REQUEST TEST: Bone marrow biopsy", "REQUEST TEST: T5", "REQUEST TEST: T1"]:
        obs, *_ = env.step(action)
    evidence = obs["text"]
    label = ("Findings: Sinus bradycardia at 54 bpm; ST-segment elevation of 3 mm in leads "
             "II, III and aVF with reciprocal ST depression in I and aVL.")
    with FakeChatServer("clinician") as server:
        direct = _ask(server, [{"role": "system", "content": DIRECT_SYSTEM},
                               {"role": "user", "content": evidence}])
        council = _ask(server, [{"role": "system", "content": COUNCIL_SYSTEM},
                                {"role": "user", "content": evidence}])
        block = f"{EVIDENCE_HEADING}\n{evidence}\n\n{PROPOSALS_HEADING}\n1. STEMI\n2. Pericarditis"
        ledger = _ask(server, [{"role": "system", "content": LEDGER_SYSTEM},
                               {"role": "user", "content": block}])
        consensus = _ask(server, [{"role": "system", "content": CONSENSUS_SYSTEM},
                                  {"role": "user", "content": f"{block}\n\n{LEDGER_HEADING}\n"
                                                              "[O3] cites O9"}])
    assert direct == f"DIAGNOSIS READY: {label}"
    assert council == f"DIAGNOSIS: {label}\nBASIS: O1, O2, O5"
    assert ledger == "STEMI: supported by O1, O2, O5.\nPericarditis: supported by O1, O2, O5."
    assert json.loads(consensus) == {"diagnosis": "STEMI", "support": ["O1", "O2", "O5"],
                                     "conflict": [], "insufficient": False}


def test_clinician_consensus_declares_insufficiency_without_any_label():
    evidence = ("# Objective (S0)\nX\n\n# Acquired observations\n"
                "[O1] Measurement Biopsy: not recorded (unknown)\n\n# Instructions\n"
                + TERMINAL_INSTRUCTIONS)
    block = f"{EVIDENCE_HEADING}\n{evidence}\n\n{PROPOSALS_HEADING}\n(no usable proposal)"
    reply = clinician_responder(_body(("system", CONSENSUS_SYSTEM), ("user", block)), 0)
    assert json.loads(reply) == {"diagnosis": "", "support": [], "conflict": [],
                                 "insufficient": True}


@pytest.mark.skipif(importlib.util.find_spec("openai") is None,
                    reason="the openai client is not installed (extra 'openai')")
def test_clinician_plays_doctor_full_patient_and_judge_in_one_episode():
    """demo-14 over one server: 12 menu exams in menu order (PE1-PE5, T3, T6, T1, T4, T5,
    T2, T7), then two questions the LLM patient answers from P; Full accepts the first
    candidate, citing every known observation: O10 (T5, rheumatoid factor, stored as
    "Pending") is unknown and left out. The LLM judge compares it with the target."""
    from clinenv.agents.llm_doctor import LLMDoctor
    from clinenv.llm.openai_backend import OpenAIChatModel

    with FakeChatServer("clinician") as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url, timeout_s=10)
        env = gym.make("EGIP-Demo-v0", acquisition_rounds=14, patient="llm",
                       patient_model=model, judge="llm", judge_model=model)
        doctor = LLMDoctor(model, strategy="full")
        obs, info = env.reset(seed=3, options={"case_id": "demo-14"})
        doctor.reset(seed=3)
        while True:
            obs, _, terminated, truncated, info = env.step(doctor.act(obs, info))
            if terminated or truncated:
                break
        model.close()
    events = env.unwrapped.episode_record()["events"]
    assert [e["exam_id"] for e in events if e["source"] == "measurement"] == [
        "PE1", "PE2", "PE3", "PE4", "PE5", "T3", "T6", "T1", "T4", "T5", "T2", "T7"]
    assert [e["reply"] for e in events if e["source"] == "patient"] == [
        "Fever and night sweats."] * 2
    detail = doctor.last_decision.detail
    known = [f"O{i}" for i in range(1, 15) if i != 10]
    assert detail["admissible"] == ["S0", *known]
    assert (detail["outcome"], detail["support"]) == ("accepted", known)
    assert (info["answer"], info["judge_verdict"], info["scorer"]) == (
        "Infective endocarditis", "correct", "llm-judge")


def _play(env_id: str, case_id: str, server: FakeChatServer):
    """One episode where the server's clinician picks every action from the full view."""
    env = gym.make(env_id)
    obs, _ = env.reset(seed=0, options={"case_id": case_id})
    actions, info = [], {}
    while True:
        _, _, reply = post(server, {"model": "m", "messages": [
            {"role": "user", "content": obs["text"]}]})
        actions.append(reply["choices"][0]["message"]["content"])
        obs, _, terminated, truncated, info = env.step(actions[-1])
        if terminated or truncated:
            return actions, info


def _raw_records(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def test_clinician_plays_a_full_medqa_episode(shared_data_dir):
    """Menu order PE1, PE2, T1, T2, T3 (vital signs, other exam, CBC, imaging), then the
    fallback question, then the first line of the last result: CT Chest's findings."""
    record = next(r["OSCE_Examination"] for r in
                  _raw_records(shared_data_dir / "agentclinic_medqa.jsonl")
                  if r["OSCE_Examination"]["Objective_for_Doctor"].startswith(
                      "Evaluate and diagnose the patient presenting with weakness and "
                      "decreased sensation in the right arm"))
    with FakeChatServer("clinician") as server:
        actions, info = _play("EGIP-MedQA-v0", "medqa-0092", server)
    n_exams = len(record["Physical_Examination_Findings"]) + len(record["Test_Results"])
    assert n_exams == 5
    assert actions[:5] == [f"REQUEST TEST: {i}" for i in ("PE1", "PE2", "T1", "T2", "T3")]
    assert set(actions[5:-1]) == {FALLBACK_QUESTION}
    finding = record["Test_Results"]["CT_Chest"]["Findings"]
    assert actions[-1] == f"DIAGNOSIS READY: Findings: {finding}"
    assert info["answer"] == f"Findings: {finding}" and info["n_exams_requested"] == 5


def test_clinician_answers_the_first_nejm_candidate(shared_data_dir):
    records = _raw_records(shared_data_dir / "agentclinic_nejm.jsonl")
    record = next(r for r in records if "from Mali" in r["question"])
    with FakeChatServer("clinician") as server:
        actions, info = _play("EGIP-NEJM-v0", "nejm-0013", server)
    assert actions[-1] == f"DIAGNOSIS READY: {record['answers'][0]['text']}"
    assert info["answer"] == "Balantidium coli"


# --------------------------------------------------------------------------- CLI
def test_command_line_prints_ready_serves_stats_and_exits_on_sigterm():
    with subprocess.Popen(
            [sys.executable, "-m", "clinenv.testing.fake_server", "--delay-ms", "5",
             "--responder", "yes", "--port", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            line = proc.stdout.readline().strip()
            assert line.startswith("READY http://127.0.0.1:"), proc.stderr.read()
            base_url = line.split()[1]
            request = urllib.request.Request(
                base_url + "/chat/completions", data=json.dumps(BODY).encode(),
                headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as r:
                reply = json.loads(r.read())
            assert [c["message"]["content"] for c in reply["choices"]] == ["Yes"] * 3
            with urllib.request.urlopen(base_url.removesuffix("/v1") + "/stats", timeout=10) as r:
                stats = json.loads(r.read())
            assert stats["n_requests"] == 1 and stats["delay_s"] == 0.005
            assert len(stats["intervals"]) == 1
        finally:
            proc.terminate()
            assert proc.wait(timeout=10) == 0
        assert proc.stderr.read() == ""  # quiet: no request log, no runpy double-import warning


def test_command_line_rejects_unknown_responder():
    done = subprocess.run([sys.executable, "-m", "clinenv.testing.fake_server", "--responder",
                           "oracle"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "invalid choice" in done.stderr


def test_stream_true_is_answered_as_server_sent_events_the_openai_client_reads():
    """``stream: true`` gets OpenAI's SSE chunks (verifiers' rollouts stream); without it
    the reply is the same JSON as before."""
    openai = pytest.importorskip("openai")
    call = {"id": "call_1", "type": "function",
            "function": {"name": "submit_diagnosis", "arguments": '{"diagnosis": "flu"}'}}

    def responder(body, index):
        if body["messages"][-1]["content"] == "tool":
            return {"content": None, "tool_calls": [call], "finish_reason": "tool_calls"}
        return "two words"

    with FakeChatServer(responder) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        stream = client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "cough"}], stream=True,
            stream_options={"include_usage": True})
        chunks = list(stream)
        assert all(c.object == "chat.completion.chunk" for c in chunks)
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
            "two words")
        assert [c.choices[0].finish_reason for c in chunks if c.choices] == [None, "stop"]
        assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 2
        with client.chat.completions.stream(
                model="fake-model", messages=[{"role": "user", "content": "tool"}]) as s:
            final = s.get_final_completion()
        message = final.choices[0].message
        assert final.choices[0].finish_reason == "tool_calls"
        assert [(t.id, t.function.name, t.function.arguments) for t in message.tool_calls] == [
            ("call_1", "submit_diagnosis", '{"diagnosis": "flu"}')]
        # without stream_options there is no usage chunk; the stream ends with [DONE]
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("POST", "/v1/chat/completions", json.dumps(
            {"model": "m", "stream": True, "messages": [{"role": "user", "content": "a"}]}),
            {"Content-Type": "application/json"})
        response = conn.getresponse()
        text = response.read().decode()
        conn.close()
        assert response.getheader("Content-Type") == "text/event-stream"
        events = text.split("\n\n")
        assert events[-2:] == ["data: [DONE]", ""] and len(events) == 4
        assert json.loads(events[1].removeprefix("data: "))["choices"][0]["finish_reason"] == (
            "stop")
        status, _, reply = post(server, BODY)  # non-stream: plain JSON as before
        assert status == 200 and reply["object"] == "chat.completion"
