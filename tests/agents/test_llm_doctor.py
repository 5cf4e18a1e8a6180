"""The LLM doctor through the real EGIP environment: exact messages, seeds, episodes,
think blocks, truncated empty replies, markdown answers and per-call seeds."""

from __future__ import annotations

import asyncio
import importlib.util
import json

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv.agents.llm_doctor import LLMDoctor, LLMDoctorConfig, evidence_part
from clinenv.agents.llm_patient import LLMPatient
from clinenv.agents.prompts import (
    AGENTCLINIC_BUDGET_KNOWN,
    AGENTCLINIC_DOCTOR_SYSTEM,
    DIRECT_SYSTEM,
    EGIP_DOCTOR_SYSTEM,
)
from clinenv.agents.terminal_direct import Direct
from clinenv.llm import Choice, GenerationConfig, ScriptedChatModel
from clinenv.protocol.evidence import TERMINAL_INSTRUCTIONS
from clinenv.seeding import call_seed

#: The stored chest X-ray record of demo-01 (clinenv/datasets/data/demo.jsonl).
DEMO01_CXR = ("Findings: Dense right lower lobe consolidation with air bronchograms, "
              "consistent with lobar pneumonia; no pleural effusion.")


def scripted(acquire, decide="DIAGNOSIS READY: Lobar pneumonia"):
    """A model that answers acquisition calls from ``acquire`` (in order, then its last
    item) and decision calls (Direct system prompt) with ``decide``."""
    acquire = list(acquire)
    state = {"i": 0}

    def respond(messages, config, index):
        if messages[0]["content"] == DIRECT_SYSTEM:
            return decide
        reply = acquire[min(state["i"], len(acquire) - 1)]
        state["i"] += 1
        return reply

    return ScriptedChatModel(respond)


def run(doctor, case_id="demo-01", seed=7, *, use_async=False, **env_kwargs):
    """One episode; returns (observations, infos, env.unwrapped)."""
    env = gym.make("EGIP-Demo-v0", **env_kwargs)
    obs, info = env.reset(seed=seed, options={"case_id": case_id})
    doctor.reset(seed=seed)
    observations, infos = [obs], [info]
    while True:
        action = (asyncio.run(doctor.aact(obs, info)) if use_async
                  else doctor.act(obs, info))
        obs, _reward, terminated, _truncated, info = env.step(action)
        observations.append(obs)
        infos.append(info)
        if terminated:
            return observations, infos, env.unwrapped


# ------------------------------------------------------------------ full episodes
def test_episode_test_request_is_looked_up_and_the_answer_scored():
    model = scripted(["What brings you in today?", "REQUEST TEST: Chest X-Ray"])
    doctor = LLMDoctor(model)
    _, infos, env = run(doctor, acquisition_rounds=2)
    record = env.episode_record()
    measurement = record["events"][3]
    assert (measurement["exam_id"], measurement["recorded_value"]) == ("T4", DEMO01_CXR)
    assert infos[-1]["answer"] == "Lobar pneumonia" and infos[-1]["verdict"] == "correct"
    assert [c["purpose"] for c in doctor.drain_calls()] == ["acquire", "acquire", "decide"]
    assert doctor.drain_calls() == []  # drained


def test_view_format_is_stateless_system_plus_the_view():
    model = scripted(["What brings you in today?", "REQUEST TEST: T4"])
    observations, _, _ = run(LLMDoctor(model), acquisition_rounds=2)
    assert [messages for messages, _ in model.calls] == [
        [{"role": "system", "content": EGIP_DOCTOR_SYSTEM},
         {"role": "user", "content": observations[0]["text"]}],
        [{"role": "system", "content": EGIP_DOCTOR_SYSTEM},
         {"role": "user", "content": observations[1]["text"]}],
        [{"role": "system", "content": DIRECT_SYSTEM},
         {"role": "user", "content": observations[2]["text"]}],
    ]
    assert observations[2]["text"].startswith("# Objective (S0)")


def test_delta_format_keeps_its_own_chat_history_without_think_blocks():
    model = scripted(["<think>start broad</think>What brings you in today?",
                      "REQUEST TEST: T4", "Any chest pain?"])
    doctor = LLMDoctor(model, observation_format="delta")
    observations, infos, _ = run(doctor, acquisition_rounds=3, observation_format="delta")
    system = {"role": "system", "content": EGIP_DOCTOR_SYSTEM}
    o = [obs["text"] for obs in observations]
    assert model.calls[2][0] == [
        system,
        {"role": "user", "content": o[0]},
        {"role": "assistant", "content": "What brings you in today?"},
        {"role": "user", "content": o[1]},
        {"role": "assistant", "content": "REQUEST TEST: T4"},
        {"role": "user", "content": o[2]},
    ]
    # the decision call gets e_T only: the delta's leading responses are cut off
    assert not o[3].startswith("# Objective (S0)")
    assert model.calls[3][0][1]["content"] == evidence_part(o[3])
    assert evidence_part(o[3]).startswith("# Objective (S0)")
    assert infos[-1]["verdict"] == "correct"


def test_async_act_sends_the_same_calls_as_act():
    replies = ["What brings you in today?", "REQUEST TEST: T4", "REQUEST TEST: PE2"]
    sync_model, async_model = scripted(replies), scripted(replies)
    _, sync_infos, _ = run(LLMDoctor(sync_model), acquisition_rounds=3)
    _, async_infos, _ = run(LLMDoctor(async_model), acquisition_rounds=3, use_async=True)
    assert sync_model.calls == async_model.calls
    assert sync_infos == async_infos


# ---------------------------------------------------------------------- seeds
# field-bug-reports B08(c)
def test_every_call_carries_a_distinct_reproducible_seed():
    """Seeds derive from the episode seed, the turn and the purpose."""
    def seeds(seed):
        model = scripted(["What brings you in today?", "REQUEST TEST: T4", "Any cough?"])
        run(LLMDoctor(model), seed=seed, acquisition_rounds=3)
        return [config.seed for _, config in model.calls]

    expected = [call_seed(7, 0, "acquire"), call_seed(7, 1, "acquire"),
                call_seed(7, 2, "acquire"), call_seed(7, 3, "decide")]
    assert seeds(7) == seeds(7) == expected
    assert len(set(expected)) == 4
    assert set(seeds(8)).isdisjoint(expected)


def test_unseeded_doctor_sends_no_seed_and_config_is_respected():
    model = scripted(["Any cough?"])
    doctor = LLMDoctor(model, config=GenerationConfig(temperature=0.3, max_tokens=64))
    run(doctor, seed=None, acquisition_rounds=1)
    stops = ("\nPatient:", "\nExaminer [", "<|im_end|>", "<|eot_id|>")
    assert [config for _, config in model.calls] == [
        GenerationConfig(temperature=0.3, max_tokens=64, stop=stops)] * 2


# ------------------------------------------------------------ markdown answers
# field-bug-reports B05
@pytest.mark.parametrize(("reply", "answer"), [
    ("**DIAGNOSIS READY:** **Lobar pneumonia**", "Lobar pneumonia"),
    ("DIAGNOSIS READY: *Lobar pneumonia*.", "Lobar pneumonia"),
    ("### Diagnosis ready: lobar pneumonia", "lobar pneumonia"),
    ("**Diagnosis:** Lobar pneumonia", "Lobar pneumonia"),
])
def test_b05_markdown_answers_are_extracted_through_the_env(reply, answer):
    """Marker or value wrapped in markdown; the env gets the reply unchanged."""
    _, infos, _ = run(LLMDoctor(scripted(["Any cough?"], decide=reply)), acquisition_rounds=1)
    assert infos[-1]["answer"] == answer and infos[-1]["verdict"] == "correct"


def test_b05_bare_diagnosis_line_is_a_format_miss_in_strict_mode():
    _, infos, env = run(LLMDoctor(scripted(["Any cough?"], decide="**Diagnosis:** Lobar "
                                                                  "pneumonia")),
                        acquisition_rounds=1, strict_markers=True)
    assert infos[-1]["answer"] is None and infos[-1]["verdict"] == "unscored"
    assert any(e.get("kind") == "format_miss" for e in env.episode_record()["events"])


# ---------------------------------------------------------------- think blocks
# field-bug-reports B01(a) and (b)
def test_b01_think_blocks_never_route_and_never_reach_the_patient():
    """A REQUEST TEST inside reasoning is ignored; empty think pairs
    leave no tags; the patient model never sees reasoning text."""
    patient_model = ScriptedChatModel(["It started three days ago."])
    model = scripted(
        ["<think>\nFever, hilar nodes. Lymphoma? Maybe REQUEST TEST: Biopsy. No.\n</think>"
         "\n\nWhen did it start?",
         "<think>\n\n</think>\n\n<think>\n</think>\n\nREQUEST TEST: T4"],
        decide="<think>\nMaybe REQUEST TEST: Sputum culture first.\n</think>\n\n"
               "DIAGNOSIS READY: Lobar pneumonia")
    _, infos, env = run(LLMDoctor(model), acquisition_rounds=2,
                        patient=LLMPatient(patient_model))
    events = env.episode_record()["events"]
    assert events[0]["text"] == "When did it start?" and events[0]["routed_as"] == "question"
    assert "Biopsy" in infos[1]["reasoning"]
    assert events[2]["text"] == "REQUEST TEST: T4" and events[3]["exam_id"] == "T4"
    assert "<think>" not in json.dumps(events) and "Biopsy" not in json.dumps(events)
    assert not any("Biopsy" in m["content"] or "think>" in m["content"]
                   for messages, _ in patient_model.calls for m in messages)
    assert infos[-1]["answer"] == "Lobar pneumonia" and infos[-1]["verdict"] == "correct"
    assert infos[-1]["n_exams_requested"] == 1  # the sputum culture was never requested


# ----------------------------------------------------------- truncated replies
# field-bug-reports B04(a)
def test_b04a_truncated_empty_reply_is_no_action_and_the_round_counts():
    """A reply cut at ``finish_reason="length"`` with no content: the doctor returns "", the env
    gives interface feedback, the round counts toward T, nothing is scored from it."""
    model = scripted([Choice(text="", finish_reason="length"),
                      Choice(text="<think>Weighing Addison disease against",
                             finish_reason="length"),
                      "Any cough?"])
    doctor = LLMDoctor(model)
    _, infos, env = run(doctor, acquisition_rounds=3)
    assert [info["turn"] for info in infos] == [0, 1, 2, 3, 3]
    assert infos[1]["invalid_actions"] == 1 and infos[2]["invalid_actions"] == 2
    events = env.episode_record()["events"]
    assert [e["kind"] for e in events if e["source"] == "interface"][:2] == [
        "empty_action", "empty_action"]
    records = doctor.drain_calls()
    assert [(r["truncated"], r["flags"]) for r in records[:3]] == [
        (True, ["empty_reply"]), (True, ["empty_reply"]), (False, [])]
    assert infos[-1]["verdict"] == "correct"


def test_b04a_truncated_empty_terminal_reply_is_unscored():
    model = scripted(["Any cough?"], decide=Choice(text="", finish_reason="length"))
    _, infos, _ = run(LLMDoctor(model), acquisition_rounds=1)
    assert infos[-1]["answer"] is None and infos[-1]["verdict"] == "unscored"


# ---------------------------------------------------------------- prompts, config
def test_agentclinic_prompt_states_budget_and_markers():
    model = scripted(["Any cough?"])
    run(LLMDoctor(model, prompt="agentclinic", max_questions=20), acquisition_rounds=1)
    system = model.calls[0][0][0]["content"]
    assert system == AGENTCLINIC_DOCTOR_SYSTEM.format(budget="at most 20")
    assert "REQUEST TEST:" in system and "DIAGNOSIS READY:" in system
    assert "at most 20 questions" in system
    default = LLMDoctor(model, prompt="agentclinic").system_prompt
    assert "a limited number of questions" in default


def test_config_describes_the_doctor_for_the_run_log():
    doctor = LLMDoctor(ScriptedChatModel(["x"], model="m1"), strategy="vote",
                       config=GenerationConfig(temperature=0.5), name="doc")
    config = json.loads(json.dumps(doctor.config))
    assert config == {
        "agent": "llm_doctor", "backend": "scripted", "model": "m1",
        "generation": GenerationConfig(temperature=0.5).model_dump(mode="json"),
        "strategy": {"name": "vote", "n_samples": 5, "temperature": None},
        "prompt": "egip", "observation_format": "view", "max_questions": None}
    assert doctor.name == "doc" and LLMDoctor(ScriptedChatModel(["x"])).name == "llm-direct"


@pytest.mark.skipif(importlib.util.find_spec("openai") is None,
                    reason="the openai client is not installed (extra 'openai')")
def test_config_never_holds_the_api_key():
    from clinenv.llm.openai_backend import OpenAIChatModel

    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", api_key="sk-secret-123")
    try:
        assert "sk-secret-123" not in json.dumps(LLMDoctor(model).config)
    finally:
        model.close()


def test_arguments_are_checked():
    model = ScriptedChatModel(["x"])
    for kwargs, match in (({"prompt": "medqa"}, "prompt"),
                          ({"observation_format": "full"}, "observation_format"),
                          ({"strategy": "council"}, "strategy"),
                          ({"max_questions": 0}, "max_questions")):
        with pytest.raises(ValueError, match=match):
            LLMDoctor(model, **kwargs)
    with pytest.raises(TypeError, match="strategy"):
        LLMDoctor(model, strategy=Direct)
    with pytest.raises(TypeError, match="model"):
        LLMDoctor("gpt")
    doctor = LLMDoctor(model)
    with pytest.raises(ValueError, match="seed"):
        doctor.reset(seed=-1)
    with pytest.raises(ValueError, match="phase"):
        doctor.act({"text": "x"}, {"phase": "done"})
    with pytest.raises(ValueError, match="text"):
        doctor.act({}, {"phase": "acquire"})


def test_settings_object_and_keywords_build_the_same_doctor():
    """The doctor's settings are one LLMDoctorConfig: given whole or as keywords, the same
    doctor (prompt, config for the log); never both; the object is frozen and checked."""
    model = ScriptedChatModel(["x"], model="m1")
    settings = LLMDoctorConfig(prompt="agentclinic", max_questions=7, bias="recency")
    by_object = LLMDoctor(model, doctor_config=settings)
    by_keywords = LLMDoctor(model, prompt="agentclinic", max_questions=7, bias="recency")
    assert by_object.doctor_config == by_keywords.doctor_config == settings
    assert by_object.config == by_keywords.config
    assert by_object.config["bias"] == "recency" and by_object.config["max_questions"] == 7
    assert by_object.system_prompt == by_keywords.system_prompt
    assert AGENTCLINIC_BUDGET_KNOWN.format(n=7) in by_object.system_prompt
    assert (by_object.prompt, by_object.observation_format, by_object.max_questions,
            by_object.bias) == ("agentclinic", "view", 7, "recency")
    with pytest.raises(TypeError, match=r"settings \['bias'\] given both"):
        LLMDoctor(model, doctor_config=settings, bias="recency")
    with pytest.raises(TypeError, match="doctor_config must be an LLMDoctorConfig"):
        LLMDoctor(model, doctor_config={"prompt": "egip"})
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['stratgy', "
                                        r"'temperature'\]; its settings are prompt, "):
        LLMDoctor(model, stratgy="vote", temperature=0.3)  # temperature: GenerationConfig
    with pytest.raises(ValueError, match="frozen"):
        settings.bias = None  # type: ignore[misc]
    with pytest.raises(ValueError, match="max_questions must be an integer >= 1"):
        settings.replace(max_questions=True)
    with pytest.raises(ValueError, match=r"bias must be None or one of .*'self_diagnosis' "
                                         r"is a patient bias"):
        LLMDoctorConfig(bias="self_diagnosis")


def test_terminal_instructions_reach_the_decision_call():
    model = scripted(["Any cough?"])
    run(LLMDoctor(model), acquisition_rounds=1)
    assert model.calls[-1][0][1]["content"].endswith(TERMINAL_INSTRUCTIONS)


# ------------------------------------------------------------ real HTTP server
@pytest.mark.skipif(importlib.util.find_spec("openai") is None,
                    reason="the openai client is not installed (extra 'openai')")
def test_episode_over_a_real_http_server_with_direct():
    """LLMDoctor + Direct over the OpenAI client and a chat-completions server on
    127.0.0.1: the test request is looked up and the answer scored."""
    from clinenv.llm.openai_backend import OpenAIChatModel
    from clinenv.testing.fake_server import FakeChatServer

    def respond(body, index):
        last = body["messages"][-1]["content"]
        if body["messages"][0]["content"] == DIRECT_SYSTEM:
            return "**DIAGNOSIS READY:** Lobar pneumonia"
        return "REQUEST TEST: Chest X-Ray" if "Chest X-Ray" in last else "Any cough?"

    with FakeChatServer(respond) as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url, api_key="x")
        try:
            doctor = LLMDoctor(model)
            _, infos, env = run(doctor, seed=3, acquisition_rounds=2)
        finally:
            model.close()
        requests = list(server.requests)
    assert [r.get("seed") for r in requests] == [
        call_seed(3, 0, "acquire"), call_seed(3, 1, "acquire"), call_seed(3, 2, "decide")]
    events = env.episode_record()["events"]
    assert events[1]["exam_id"] == "T4" and events[1]["recorded_value"] == DEMO01_CXR
    assert infos[-1]["answer"] == "Lobar pneumonia" and infos[-1]["verdict"] == "correct"
    records = doctor.drain_calls()
    assert [(r["purpose"], r["backend"], r["seed"]) for r in records] == [
        ("acquire", "openai", requests[0]["seed"]), ("acquire", "openai", requests[1]["seed"]),
        ("decide", "openai", requests[2]["seed"])]


# ------------------------------------------------- the history cut to the doctor's turn
#: The doctor's stop strings (written out by hand); the first four are sent.
DOCTOR_STOPS = ("\nPatient:", "\nExaminer [", "<|im_end|>", "<|eot_id|>", "<end_of_turn>",
                "\nUser:")


@pytest.mark.parametrize(("raw", "own", "cut"), [
    ("Any fever?<|im_end|>\n<|im_start|>user\nPatient: No fever.", "Any fever?", True),
    ("How long has it lasted?<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
     "Two weeks.", "How long has it lasted?", True),
    ("REQUEST TEST: CBC<end_of_turn>\n<start_of_turn>user\nExaminer [CBC]: normal",
     "REQUEST TEST: CBC", True),
    ("Any weight loss? [INST] No. [/INST]", "Any weight loss?", True),
    ("Doctor: Where does it hurt?\n**Patient:** In my knee.", "Where does it hurt?", True),
    # a label inside a line is text, not a turn
    ("I asked the Caregiver: is he eating?", "I asked the Caregiver: is he eating?", False),
])
def test_delta_doctor_history_holds_only_its_own_turn(raw, own, cut):
    model = ScriptedChatModel([raw, "Any cough?"])
    doctor = LLMDoctor(model, observation_format="delta")
    doctor.reset(seed=3)
    first = doctor.act({"text": "A 40-year-old presents."}, {"phase": "acquire", "turn": 0})
    assert first == raw  # the environment's parser cuts the action itself
    doctor.act({"text": "Patient: Since yesterday."}, {"phase": "acquire", "turn": 1})
    sent = model.calls[1][0]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[2]["content"] == own
    records = doctor.drain_calls()
    assert records[0]["flags"] == (["wrote_past_turn"] if cut else [])
    assert records[1]["flags"] == []
    assert model.calls[0][1].stop == DOCTOR_STOPS[:4]
