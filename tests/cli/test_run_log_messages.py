"""``--log-messages``: every model call's messages and raw reply (before any cut) in the
run log's call records, and never without the flag.

The CLI runs in process against a real FakeChatServer on 127.0.0.1 whose patient goes
on past its turn (``\\nDoctor: ...``, ignoring ``stop``), so the raw reply differs from
what the patient says in the episode.
"""

from __future__ import annotations

import json

import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.cli import main
from clinenv.llm import ChatResult, Choice, ScriptedChatModel
from clinenv.runlog import read_run_log
from clinenv.testing.clinic import PATIENT_REPLY, clinic_responder, role_of
from clinenv.testing.fake_server import FakeChatServer

INVENTED = "\nDoctor: Anything else you want to tell me?"
MSGS = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]



@pytest.fixture
def talkative_server():
    """The test clinic, with a patient that writes the doctor's next turn too."""
    clinic = clinic_responder()

    def reply(body, index):
        text = clinic(body, index)
        return text + INVENTED if role_of(body) == "patient" else text

    with FakeChatServer(reply) as server:
        yield server


def run(server, out, *extra):
    return main(["run", "--env", "EGIP-Demo-v0", "--doctor", "llm", "--patient", "llm",
                 "--judge", "llm", "--base-url", server.base_url, "--model", "fake",
                 "--episodes", "2", "--quiet", "--out", out, *extra])


def test_log_messages_writes_each_calls_messages_and_raw_reply(workdir, talkative_server,
                                                                capsys):
    assert run(talkative_server, "run.jsonl", "--log-messages") == 0, capsys.readouterr()
    lines = read_run_log(workdir / "run.jsonl").lines
    calls = [c for line in lines for c in line["llm"]["calls"]]
    assert len(calls) == len(talkative_server.requests) > 0
    # exactly the messages the server received, call for call
    logged = sorted(json.dumps(c["messages"], sort_keys=True) for c in calls)
    sent = sorted(json.dumps(b["messages"], sort_keys=True) for b in talkative_server.requests)
    assert logged == sent
    assert all(isinstance(c["raw_reply"], list) and len(c["raw_reply"]) == c["n"]
               for c in calls)
    patient = [c for c in calls if c["agent"] == "patient"]
    assert patient and all(c["raw_reply"] == [PATIENT_REPLY + INVENTED] for c in patient)
    # the same reply each time: from the second on it also repeats itself
    assert [c["flags"] for c in patient[:2]] == [
        ["speaks_as_doctor", "wrote_past_turn"],
        ["speaks_as_doctor", "repeats_own_reply", "wrote_past_turn"]]
    assert all(c["stop_enforced"] for c in patient)
    # the episode itself holds only the patient's own turn
    for line in lines:
        episode = json.dumps({k: v for k, v in line.items() if k != "llm"})
        assert "Anything else you want" not in episode
    judge = [c for c in calls if c["agent"] == "judge"]
    assert judge and all(c["raw_reply"] == ["Yes"] for c in judge)


def test_without_the_flag_no_message_or_raw_reply_is_written(workdir, talkative_server,
                                                              capsys):
    assert run(talkative_server, "run.jsonl") == 0, capsys.readouterr()
    lines = read_run_log(workdir / "run.jsonl").lines
    calls = [c for line in lines for c in line["llm"]["calls"]]
    assert calls and not any("messages" in c or "raw_reply" in c for c in calls)
    assert "Anything else you want" not in (workdir / "run.jsonl").read_text("utf-8")
    # the cut still shows in the records
    assert any("wrote_past_turn" in c.get("flags", []) for c in calls)


def test_log_messages_is_off_by_default_on_a_model():
    model = ScriptedChatModel(["Fine.\nPatient: more"])
    assert model.log_messages is False
    record = model.generate(MSGS).to_log()
    assert "messages" not in record and "raw_reply" not in record
    model.log_messages = True
    result = model.generate(MSGS)
    assert result.messages == tuple(MSGS)
    assert result.to_log()["messages"] == MSGS
    batch = model.generate_batch([MSGS, MSGS[1:]])
    assert [r.to_log()["messages"] for r in batch] == [MSGS, MSGS[1:]]
    assert model.describe() == {"backend": "scripted", "model": "scripted",
                                "config": model.config.model_dump(mode="json")}


def test_raw_reply_is_the_reply_before_any_cut():
    result = ChatResult(
        choices=(Choice("Fine.").cut("Fine"), Choice("Ok", raw_text="Ok<|im_end|>x",
                                                     stop_enforced=True,
                                                     wrote_past_turn=True),
                 Choice("untouched")),
        model="m", backend="scripted", messages=tuple(MSGS))
    record = result.to_log(flags=[])
    assert record["raw_reply"] == ["Fine.", "Ok<|im_end|>x", "untouched"]
    assert record["flags"] == ["wrote_past_turn"] and record["stop_enforced"] is True
