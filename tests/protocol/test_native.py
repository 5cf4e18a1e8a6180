"""The native AgentClinic / MedAgentSim protocols, the examiner seat and the presets.

LLM seats talk over a real socket to a :class:`~clinenv.testing.fake_server.FakeChatServer`
on 127.0.0.1; assertions read the requests that server received. Expected values are
computed from the source records (the raw JSON lines) or written by hand.
"""
# issue 6

from __future__ import annotations

import asyncio
import json

import gymnasium as gym
import pydantic
import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.prompts import (
    JUDGE_SYSTEM,
    JUDGE_USER,
    MEASUREMENT_RULE_NORMAL,
    MEASUREMENT_RULE_NOT_RECORDED,
    PATIENT_SYSTEM,
)
from clinenv.env import EGIPEnv, rewards
from clinenv.env.record_reader import NativeRecordReader
from clinenv.llm.openai_backend import OpenAIChatModel
from clinenv.protocol.native_render import DISCUSSION_INSTRUCTIONS, FINAL_NOTICE
from clinenv.protocol.presets import PRESETS, resolve_preset
from clinenv.testing.data import MEDQA_FILE, NEJM_FILE, leaves, skip_without_shared_data
from clinenv.testing.fake_server import FakeChatServer

MEASUREMENT_PREFIX = "You report examination and test results"
PATIENT_PREFIX = PATIENT_SYSTEM.split("{")[0]
PATIENT_REPLY = "The cough started three days ago."
MEASURED = "RESULTS: measured by the fake agent"
DEMO_TARGET = "Lobar pneumonia"  # demo-01's Y, from the bundled demo file


def role(body: dict) -> str:
    system = body["messages"][0]["content"]
    if system.startswith(MEASUREMENT_PREFIX):
        return "measurement"
    if system.startswith(PATIENT_PREFIX):
        return "patient"
    return "judge" if system == JUDGE_SYSTEM else "other"


def clinic(judge_reply: str = "yes"):
    def reply(body: dict, index: int) -> str:
        return {"measurement": MEASURED, "patient": PATIENT_REPLY,
                "judge": judge_reply}.get(role(body), "OK")
    return reply


@pytest.fixture
def served():
    """``(server, model)``: a fake clinic answering ``yes`` as judge."""
    with FakeChatServer(clinic()) as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url, max_retries=0)
        yield server, model
        model.close()


def requests_of(server, who: str) -> list[dict]:
    return [body for body in server.requests if role(body) == who]


def play(env, actions, case_id="demo-01", seed=0):
    steps = [env.reset(seed=seed, options={"case_id": case_id})]
    for action in actions:
        steps.append(env.step(action))
    return steps


def raw_line(file_name: str, index: int) -> dict:
    folder = skip_without_shared_data(MEDQA_FILE, NEJM_FILE)
    with open(folder / file_name, encoding="utf-8") as fh:
        return json.loads(fh.read().splitlines()[index])


# ------------------------------------------------------------------ measurement agent
def test_measurement_agent_holds_the_whole_record(served, shared_data_dir):
    """The LLM measurement agent's prompt holds every PE and test leaf of the source
    record, in AgentClinic's form (PE dict with the tests under key "tests", as a Python
    repr), and the whole doctor utterance; later requests carry the patient replies."""
    server, model = served
    osce = raw_line(MEDQA_FILE, 0)["OSCE_Examination"]
    expected = repr({**osce["Physical_Examination_Findings"],
                     "tests": osce["Test_Results"]})
    env = gym.make("AgentClinic-MedQA-v0", examiner="llm", examiner_model=model,
                   patient="llm", patient_model=model).unwrapped
    utterance = "Let me check a few things. REQUEST TEST: Chest_X-Ray, and the blood count"
    steps = play(env, ["What brings you in?", utterance, "REQUEST TEST: ECG"],
                 case_id="medqa-0001")
    first, second = requests_of(server, "measurement")
    system = first["messages"][0]["content"]
    assert expected in system and MEASUREMENT_RULE_NORMAL in system
    for leaf in leaves(osce["Physical_Examination_Findings"]) :
        assert str(leaf) in system
    for leaf in leaves(osce["Test_Results"]):
        assert str(leaf) in system
    assert first["messages"][1]["content"].endswith("The doctor's request: " + utterance)
    history = second["messages"][1]["content"]
    assert f"Patient: {PATIENT_REPLY}" in history and f"Doctor: {utterance}" in history
    assert f"You: {MEASURED}" in history
    assert steps[2][0]["text"].count(MEASURED) == 1
    event = env.episode_record()["events"][3]
    assert event["result_availability"] == "generated" and event["recorded_value"] == MEASURED
    assert osce["Test_Results"] is not None and "tests" not in osce["Physical_Examination_Findings"]


def test_unrecorded_test_reads_normal(served):
    """W1 reproduced as an option: an unrecorded test is NORMAL READINGS under the
    native rule (reader and LLM prompt), "not recorded" with normal_readings=False."""
    server, model = served
    steps = play(gym.make("AgentClinic-Demo-v0"), ["REQUEST TEST: Serum lipase"])
    assert "# Latest response\nRESULTS: NORMAL READINGS\n" in steps[1][0]["text"]
    steps = play(gym.make("AgentClinic-Demo-v0", normal_readings=False),
                 ["REQUEST TEST: Serum lipase"])
    assert "# Latest response\nRESULTS: NOT RECORDED\n" in steps[1][0]["text"]
    play(gym.make("AgentClinic-Demo-v0", examiner="llm", examiner_model=model,
                  normal_readings=False), ["REQUEST TEST: Serum lipase"])
    system = requests_of(server, "measurement")[0]["messages"][0]["content"]
    assert MEASUREMENT_RULE_NOT_RECORDED in system and MEASUREMENT_RULE_NORMAL not in system


def test_record_reader_returns_the_named_records():
    """The offline stand-in: every record whose name occurs in the utterance (here the
    demo-01 Chest X-Ray, hand-copied from the demo file), nothing else."""
    steps = play(gym.make("AgentClinic-Demo-v0"), ["REQUEST TEST: chest x-ray please"])
    assert ("RESULTS: Chest X-Ray: Findings: Dense right lower lobe consolidation with air "
            "bronchograms, consistent with lobar pneumonia; no pleural effusion."
            ) in steps[1][0]["text"]
    assert "Vital Signs" not in steps[1][0]["text"]
    with pytest.raises(ValueError, match="threshold"):
        NativeRecordReader(threshold=120)


# ------------------------------------------------------------------- judging, markers
# field-bug-reports B07
def test_judge_sees_the_diagnosis_the_moderator_reads(served):
    """The judge gets the diagnosis after the marker, hedges on its line included, never
    the marker or the prose before it; ``info["answer"]`` keeps the whole utterance;
    strict "yes"."""
    server, model = served
    final = "Given the X-ray, DIAGNOSIS READY: Lobar pneumonia, or maybe an empyema"
    env = gym.make("AgentClinic-Demo-v0", judge="llm", judge_model=model)
    steps = play(env, ["What brings you in?", final])
    (body,) = requests_of(server, "judge")
    assert body["messages"][1]["content"] == JUDGE_USER.format(
        target=DEMO_TARGET, answer="Lobar pneumonia, or maybe an empyema")
    info = steps[-1][4]
    assert steps[-1][2] and info["verdict"] == "correct" and info["answer"] == final
    assert info["scored_answer"] == "Lobar pneumonia, or maybe an empyema"
    assert info["scorer"] == "llm-judge" and info["end_reason"] == "diagnosis"


# field-bug-reports B07
@pytest.mark.parametrize(("reply", "verdict"), [("yes", "correct"), ("Yes", "correct"),
                                                ("Yes.", "wrong"), (" yes", "wrong"),
                                                ("Maybe", "wrong")])
def test_strict_yes(reply, verdict):
    """Only an exact (lower-cased) "yes" scores under strict_yes; nothing unscored."""
    with FakeChatServer(clinic(reply)) as server:
        with OpenAIChatModel("fake-model", base_url=server.base_url, max_retries=0) as m:
            steps = play(gym.make("AgentClinic-Demo-v0", judge="llm", judge_model=m),
                         ["DIAGNOSIS READY: Lobar pneumonia"])
    assert steps[-1][4]["verdict"] == verdict


def test_offline_scorer_reads_the_answer_the_moderator_reads():
    """Without a judge the deterministic scorer reads the diagnosis after the marker, as
    the moderator does: prose before the marker does not hide it. An abstention stays
    AgentClinic's "wrong" (strict) but holds no identifiable answer."""
    ok = play(gym.make("AgentClinic-Demo-v0"), ["DIAGNOSIS READY: Lobar pneumonia"])
    assert ok[-1][4]["verdict"] == "correct" and ok[-1][1] == rewards.CORRECT
    prose = play(gym.make("AgentClinic-Demo-v0"),
                 ["I am fairly sure now. DIAGNOSIS READY: Lobar pneumonia"])
    assert prose[-1][4]["verdict"] == "correct"
    none = play(gym.make("AgentClinic-Demo-v0"), ["DIAGNOSIS READY: Undetermined"])
    assert none[-1][4]["verdict"] == "wrong"
    assert none[-1][4]["answer_status"] == "abstained" and none[-1][4]["abstained"]


# field-bug-reports B01
@pytest.mark.parametrize(("action", "kind", "ends"), [
    ("REQUEST TEST: Chest X-Ray. DIAGNOSIS READY: Lobar pneumonia", "diagnosis", True),
    ("diagnosis ready: Lobar pneumonia", "question", False),
    ("Request test: Chest X-Ray", "question", False),
    ("**DIAGNOSIS READY:** Lobar pneumonia", "diagnosis", True),
    ("REQUEST TESTS: Chest X-Ray", "test_request", False),
    ("<think>REQUEST TEST: biopsy</think>DIAGNOSIS READY: Lobar pneumonia", "diagnosis", True),
    ("<think>DIAGNOSIS READY: x</think>How long have you had the cough?", "question", False),
])
def test_markers_case_sensitive_and_diagnosis_first(action, kind, ends):
    """AgentClinic's substring rules: diagnosis before test, case-sensitive; reasoning
    blocks are never routed."""
    env = gym.make("AgentClinic-Demo-v0").unwrapped
    steps = play(env, [action])
    assert steps[1][4]["action_kind"] == kind and steps[1][2] == ends
    sources = [e["source"] for e in env.episode_record()["events"]]
    assert sources == (["doctor"] if ends else
                       ["doctor", "measurement" if kind == "test_request" else "patient"])


def test_lenient_markers_option():
    steps = play(gym.make("AgentClinic-Demo-v0", strict_markers=False),
                 ["diagnosis ready: Lobar pneumonia"])
    assert steps[1][2] and steps[1][4]["verdict"] == "correct"


# ------------------------------------------------------------------ turns, accounting
def test_final_notice_at_turn_20_and_unfinished_counts_wrong():
    """The notice is appended to the 19th reply only; a 20th utterance without the
    marker ends the episode, scored wrong with end_reason no_diagnosis (W10)."""
    env = gym.make("AgentClinic-Demo-v0").unwrapped
    steps = play(env, ["Any other symptoms?"] * 20)
    texts = [s[0]["text"] for s in steps]
    assert [FINAL_NOTICE in t for t in texts[:20]] == [False] * 19 + [True]
    assert "Turn 20 of 20." in texts[19]
    assert texts[19].split("# Latest response\n")[1].split("\n\n")[0].endswith(FINAL_NOTICE)
    assert all(not s[2] for s in steps[1:20])
    obs, reward, terminated, truncated, info = steps[20]
    assert terminated and not truncated and reward == rewards.WRONG
    assert info["verdict"] == "wrong" and not info["correct"] and info["answer"] is None
    record = env.episode_record()
    assert record["end_reason"] == "no_diagnosis" and record["turns"] == 20
    unscored = play(gym.make("AgentClinic-Demo-v0", unfinished="unscored", max_turns=2),
                    ["Hi", "Hi"])
    assert unscored[-1][4]["verdict"] == "unscored"


def test_medagentsim_final_turn_is_a_discussion():
    """After 19 turns the phase is "decide"; the observation is the transcript plus the
    discussion instruction (the contract of the "discussion" strategy)."""
    env = gym.make("MedAgentSim-Demo-v0").unwrapped
    steps = play(env, ["What brings you in?"] + ["REQUEST TEST: Chest X-Ray"] * 18)
    obs, _, terminated, _, info = steps[-1]
    assert info["phase"] == "decide" and info["protocol"] == "medagentsim" and not terminated
    assert info["candidates"] is None and info["turn"] == 19
    # as published, the discussion never sees the starting information
    assert obs["text"].startswith("# Consultation transcript\nDoctor: What brings you in?")
    assert "# Task" not in obs["text"] and env.runtime.objective not in obs["text"]
    assert obs["text"].endswith("# Final discussion\n" + DISCUSSION_INSTRUCTIONS)
    assert "Patient: " in obs["text"] and "Measurement: RESULTS: Chest X-Ray" in obs["text"]
    *_, last = env.step("After discussion we agree. DIAGNOSIS READY: Lobar pneumonia")
    assert last["end_reason"] == "diagnosis" and last["turn"] == 20
    env.reset(seed=0, options={"case_id": "demo-01"})
    for _ in range(19):
        env.step("Anything else?")
    *_, last = env.step("We could not agree.")
    assert last["verdict"] == "wrong" and last["end_reason"] == "no_diagnosis"


def test_patient_history_holds_measurement_results(served):
    """W5 reproduced as an option: the patient hears the measurement results before the
    next question; with patient_sees_results=False it does not."""
    server, model = served
    kwargs = dict(patient="llm", patient_model=model, examiner="llm", examiner_model=model)
    play(gym.make("AgentClinic-Demo-v0", **kwargs),
         ["REQUEST TEST: Chest X-Ray", "Does it hurt?", "And the fever?"])
    first, second = requests_of(server, "patient")
    assert MEASURED in first["messages"][-1]["content"]
    assert first["messages"][-1]["content"].endswith("Does it hurt?")
    assert MEASURED in json.dumps(second["messages"])
    assert MEASURED not in second["messages"][-1]["content"]  # heard once, kept in history
    server.requests.clear()
    play(gym.make("AgentClinic-Demo-v0", patient_sees_results=False, **kwargs),
         ["REQUEST TEST: Chest X-Ray", "Does it hurt?"])
    assert MEASURED not in json.dumps(requests_of(server, "patient"))


def test_astep_gives_what_step_gives():
    actions = ["What brings you in?", "REQUEST TEST: Vital signs", "DIAGNOSIS READY: x"]

    async def aplay(env):
        out = [env.reset(seed=3, options={"case_id": "demo-02"})]
        for action in actions:
            out.append(await env.unwrapped.astep(action))
        return out

    sync = play(gym.make("MedAgentSim-Demo-v0"), actions, case_id="demo-02", seed=3)
    asy = asyncio.run(aplay(gym.make("MedAgentSim-Demo-v0")))
    assert [(s[0]["text"], *s[1:]) for s in sync[1:]] == [(s[0]["text"], *s[1:])
                                                          for s in asy[1:]]


# ----------------------------------------------------------------------------- NEJM
def test_nejm_native_doctor_never_sees_vignette_or_options(shared_data_dir):
    """Every observation and info of whole native episodes on all 15 NEJM cases: the
    starting information is AgentClinic's fixed question; the vignette and the candidate
    labels (unless the patient's own facts or the test text name them) never appear."""
    env = gym.make("AgentClinic-NEJM-v0").unwrapped
    actions = ["What brings you in?", "REQUEST TEST: skin biopsy", "How long?",
               "REQUEST TEST: Zzz", *["Anything else?"] * 16]
    for index in range(15):
        record = raw_line(NEJM_FILE, index)
        steps = play(env, actions, case_id=index)
        assert steps[0][0]["text"].startswith("# Task\nWhat is the most likely diagnosis?\n")
        labels = [a["text"] for a in record["answers"]
                  if a["text"].lower() not in (record["patient_info"] + " "
                                               + (record["physical_exams"] or "")).lower()]
        first_sentence = record["question"].split(". ")[0]
        for obs, *rest in steps:
            info = rest[-1]
            seen = obs["text"] + json.dumps(info)
            assert record["question"] not in seen and first_sentence not in seen
            assert info["candidates"] is None and info["menu"] == []
            assert not any(label.lower() in seen.lower() for label in labels), index
        assert steps[-1][4]["end_reason"] == "no_diagnosis"


NEJM1_QUESTION = "What is the most likely diagnosis?"
NEJM1_FIRST = ("A 55-year-old woman presented to the dermatology clinic with a 1-year "
               "history of skin darkening on her face.")


@pytest.mark.parametrize(("disclosure", "objective"), [
    ("question", NEJM1_QUESTION),
    ("presentation", f"{NEJM1_FIRST} {NEJM1_QUESTION}"),
    ("vignette", None),
])
def test_nejm_egip_shows_what_the_disclosure_allows(disclosure, objective, shared_data_dir):
    """EGIP shows s0 as the disclosure setting allows (hand-copied from nejm line 1) and
    the candidate labels K; the findings of the vignette only under "vignette"."""
    record = raw_line(NEJM_FILE, 0)
    objective = objective or record["question"]
    env = gym.make("EGIP-NEJM-v0", disclosure=disclosure).unwrapped
    obs, info = env.reset(seed=0, options={"case_id": 0})
    task = obs["text"].split("# Task\n")[1].split("\n\n")[0]
    assert task == objective
    assert info["candidates"] == [a["text"] for a in record["answers"]]
    assert ("banana-shaped bodies" in obs["text"]) == (disclosure == "vignette")


# ------------------------------------------------------------------ EGIP ablation
def test_native_measurement_access_ablation(served):
    """EGIP runtime, measurement agent instead of record lookup O (EGIP Table 3A):
    validated requests reach it with their catalog name; feedback never does."""
    server, model = served
    env = gym.make("EGIP-Demo-v0", preset="egip-native-measurement", examiner="llm",
                   examiner_model=model).unwrapped
    obs, info = env.reset(seed=0, options={"case_id": "demo-01"})
    menu = {m["id"]: m["name"] for m in info["menu"]}
    xray = next(i for i, name in menu.items() if name.startswith("Chest X-Ray"))
    steps = [env.step(f"REQUEST TEST: {xray}"), env.step("REQUEST TEST: T999"),
             env.step("REQUEST TEST: Serum lipase assay")]
    sent = [b["messages"][1]["content"] for b in requests_of(server, "measurement")]
    assert sent[0] == "The doctor's request: Chest X-Ray"
    assert sent[1].endswith("The doctor's request: Serum lipase assay")
    assert len(sent) == 2  # the invalid id got interface feedback only
    events = [e for e in env.episode_record()["events"] if e["source"] == "measurement"]
    assert [e["result_availability"] for e in events] == ["generated", "generated"]
    assert events[0]["exam_id"] == xray and events[1]["exam_id"] is None
    assert f"Measurement agent [{xray} Chest X-Ray" in steps[0][0]["text"]
    evidence = env.unwrapped.runtime.evidence()
    assert [o.content for o in evidence.observations] == [MEASURED, MEASURED]


def test_egip_default_is_unchanged_lookup():
    env = gym.make("EGIP-Demo-v0").unwrapped
    assert env.examiner is None and env.protocol == "egip"
    obs, info = env.reset(seed=0, options={"case_id": "demo-01"})
    assert "protocol" not in info
    obs, *_ = env.step("REQUEST TEST: Serum lipase assay")
    assert "Not recorded" in obs["text"] and "NORMAL" not in obs["text"]


# ----------------------------------------------------------------------- presets, args
def test_presets_resolve():
    assert resolve_preset("egip-no-menu", {}) == {"show_menu": False}
    assert resolve_preset("agentclinic", {"examiner": "llm"}) == {
        "protocol": "agentclinic", "examiner": "llm"}
    assert resolve_preset(None, {"a": 1}) == {"a": 1}
    assert set(PRESETS) == {"egip", "egip-no-menu", "egip-native-measurement",
                            "agentclinic", "medagentsim", "cdeg-30"}
    with pytest.raises(ValueError, match="presets: egip, egip-no-menu"):
        resolve_preset("native", {})
    assert gym.make("EGIP-Demo-v0", preset="egip-no-menu").unwrapped.config.show_menu is False
    assert gym.make("EGIP-Demo-v0", preset="medagentsim").unwrapped.protocol == "medagentsim"
    made = gym.make("EGIP-Demo-v0", preset="egip-native-measurement").unwrapped
    assert isinstance(made.examiner, NativeRecordReader)
    assert gym.make("AgentClinic-Demo-v0", protocol="egip").unwrapped.protocol == "egip"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"protocol": "agentclinic", "examiner": "lookup"}, "cannot answer"),
    ({"protocol": "agentclinic", "acquisition_rounds": 5}, "max_turns"),
    ({"protocol": "native"}, "protocol must be one of"),
    ({"examiner": "llm"}, "examiner_model"),
    ({"examiner": object()}, "measure(view)"),
    ({"preset": "nope"}, "unknown preset"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        EGIPEnv("demo", **kwargs)


@pytest.mark.parametrize("setting", [{"discard_image_reply": False},
                                     {"nejm_ext_images": True}])
def test_image_options_are_explicit_and_text_only(setting):
    """W7: the native runs are text-only; the published image defects are named settings
    that only take their reproduced value."""
    with pytest.raises(pydantic.ValidationError, match=next(iter(setting))):
        EGIPEnv("demo", protocol="agentclinic", **setting)


# ----------------------------------------------------------------------- LLM doctor
def test_llm_doctor_agentclinic_prompt_plays_the_native_loop():
    """The natural native doctor: the agentclinic prompt as system message, the native
    observation as user message; the egip prompt is refused before any model call."""
    from clinenv.agents.llm_doctor import LLMDoctor
    from clinenv.agents.prompts import AGENTCLINIC_DOCTOR_SYSTEM
    from clinenv.llm.scripted import ScriptedChatModel

    seen = []
    script = ["What brings you in?", "REQUEST TEST: Chest X-Ray",
              "DIAGNOSIS READY: Lobar pneumonia"]

    def doctor_model(messages, config, index):
        seen.append(messages)
        return script[index]

    env = gym.make("AgentClinic-Demo-v0")
    doctor = LLMDoctor(ScriptedChatModel(doctor_model), prompt="agentclinic", max_questions=20)
    obs, info = env.reset(seed=0, options={"case_id": "demo-01"})
    done = False
    while not done:
        obs, reward, done, _, info = env.step(doctor.act(obs, info))
    assert info["verdict"] == "correct" and info["turn"] == 3
    assert seen[0][0]["content"].startswith(AGENTCLINIC_DOCTOR_SYSTEM.split("{")[0])
    assert seen[0][1]["content"].startswith("# Task\nEvaluate the patient")
    assert "consistent with lobar pneumonia" in seen[2][1]["content"]
    obs, info = env.reset(seed=0, options={"case_id": "demo-01"})
    with pytest.raises(ValueError, match="prompt='agentclinic'"):
        LLMDoctor(ScriptedChatModel(["x"]), prompt="egip").act(obs, info)


def test_discussion_strategy_decides_the_medagentsim_episode():
    """The decision-phase contract end to end: the doctor's "discussion" strategy gets
    the transcript + instruction and its DIAGNOSIS READY line is judged whole."""
    from clinenv.agents.llm_doctor import LLMDoctor
    from clinenv.llm.scripted import ScriptedChatModel

    decide_inputs = []

    def doctor_model(messages, config, index):
        text = json.dumps(messages)
        if "# Your turn" in messages[-1]["content"]:  # an acquisition view
            return "Any other symptoms?"
        if DISCUSSION_INSTRUCTIONS in messages[-1]["content"]:
            decide_inputs.append(text)
        return "DIAGNOSIS READY: Lobar pneumonia"  # opinions and the summary

    env = gym.make("MedAgentSim-Demo-v0")
    doctor = LLMDoctor(ScriptedChatModel(doctor_model), strategy="discussion",
                       prompt="agentclinic")
    obs, info = env.reset(seed=0, options={"case_id": "demo-01"})
    done = False
    while not done:
        obs, reward, done, _, info = env.step(doctor.act(obs, info))
    assert info["verdict"] == "correct" and info["turn"] == 20 and decide_inputs
    assert all("Consultation transcript" in text for text in decide_inputs)
