"""AgentClinic's bias conditions in both seats: the texts sit
between each seat's base prompt and the case information in the messages actually sent
(the call records with ``log_messages``), the refusals, the run log's records, the
``target_in_bias`` flag (MedQA 14/107, NEJM 1/15, counted by hand from the targets) and
the audit's placement of what the bias put in the patient's mouth."""
# issue 34 §1

from __future__ import annotations

import gymnasium as gym
import pytest
from pydantic import ValidationError

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv.agents.llm_doctor import LLMDoctor
from clinenv.agents.llm_patient import LLMPatient
from clinenv.agents.patient_cache import CachedPatient
from clinenv.agents.prompts import (
    AGENTCLINIC_BUDGET_KNOWN,
    AGENTCLINIC_DOCTOR_SYSTEM,
    DIRECT_SYSTEM,
    EGIP_DOCTOR_SYSTEM,
    PATIENT_SYSTEM,
    PATIENT_VOICE_SELF,
)
from clinenv.env import EGIPEnv, EnvConfig
from clinenv.llm import ScriptedChatModel
from clinenv.llm.factory import make_chat_model
from clinenv.multiagent.aec import EGIPAECEnv
from clinenv.protocol.biases import (
    BIAS_TEXTS,
    CANCER_BIASES,
    DOCTOR_BIASES,
    PATIENT_BIASES,
)
from clinenv.runlog import RunContext
from clinenv.runs.episode import run_episode
from clinenv.testing.clinic import clinic_responder
from clinenv.testing.data import MEDQA_FILE, NEJM_FILE, needs_shared_data
from clinenv.testing.fake_server import FakeChatServer

#: Written here, from AgentClinic's lists (agentclinic.py, PatientAgent / DoctorAgent).
PATIENT_NAMES = ["recency", "frequency", "false_consensus", "self_diagnosis", "gender",
                 "race", "sexual_orientation", "cultural", "education", "religion",
                 "socioeconomic"]
DOCTOR_NAMES = ["recency", "frequency", "false_consensus", "confirmation", "status_quo",
                "gender", "race", "sexual_orientation", "cultural", "education",
                "religion", "socioeconomic"]
SELF_DIAGNOSIS = ("\nYou have researched your symptoms online at length and concluded that "
                  "you have cancer. Even if the doctor thinks otherwise, you stay sure of "
                  "it. Let this colour how you deal with the doctor.\n")
CONFIRMATION = ("\nFrom the start you are fairly sure that this patient has cancer. Let "
                "this colour how you deal with the patient.\n")
#: The MedQA cases whose target is a malignancy, read by hand from the file's
#: Correct_Diagnosis values (line number = case number).
MEDQA_MALIGNANT = {
    4: "Diffuse large B-cell lymphoma", 23: "Malignant melanoma", 29: "Lung cancer",
    32: "Chronic lymphocytic leukemia", 40: "Essential thrombocythemia",
    53: "Pancreatic adenocarcinoma", 56: "Bowen's Disease", 58: "Pancreatic adenocarcinoma",
    68: "Acute lymphoblastic leukemia", 75: "Granulosa cell tumor",
    88: "Chronic lymphocytic leukemia", 91: "Waldenstrom macroglobulinemia",
    92: "Apical lung tumor", 100: "Acute myelogenous leukemia"}


def patient_model(replies=("It started three days ago.",)):
    model = ScriptedChatModel(list(replies) * 20)
    model.log_messages = True
    return model


def sent_system(env) -> str:
    """The system message of the first model call the environment's seats recorded."""
    calls = env.unwrapped.drain_llm_calls()
    return calls[0]["messages"][0]["content"]


# ------------------------------------------------------------------------ the texts
def test_names_and_cancer_biases_match_agentclinic():
    assert list(PATIENT_BIASES) == PATIENT_NAMES
    assert list(DOCTOR_BIASES) == DOCTOR_NAMES
    assert sorted(name for seat, name in BIAS_TEXTS if seat == "patient") == sorted(PATIENT_NAMES)
    assert sorted(name for seat, name in BIAS_TEXTS if seat == "doctor") == sorted(DOCTOR_NAMES)
    assert CANCER_BIASES == {
        "patient": {"recency", "frequency", "false_consensus", "self_diagnosis"},
        "doctor": {"recency", "frequency", "false_consensus", "confirmation", "status_quo"}}
    assert all(t.startswith("\n") and t.endswith("\n") for t in BIAS_TEXTS.values())
    assert BIAS_TEXTS[("patient", "self_diagnosis")] == SELF_DIAGNOSIS


# -------------------------------------------------------------------- patient seat
@pytest.mark.parametrize("env_id", ["EGIP-Demo-v0", "AgentClinic-Demo-v0"])
def test_patient_bias_sits_between_base_prompt_and_facts(env_id):
    plain = gym.make(env_id, patient="llm", patient_model=patient_model())
    plain.reset(seed=0, options={"case_id": "demo-01"})
    plain.step("What brings you in today?")
    before = sent_system(plain)
    env = gym.make(env_id, patient="llm", patient_model=patient_model(),
                   patient_bias="self_diagnosis")
    env.reset(seed=0, options={"case_id": "demo-01"})
    env.step("What brings you in today?")
    system = sent_system(env)
    base = PATIENT_SYSTEM.split("{voice}")[0] + PATIENT_VOICE_SELF
    assert before.startswith(base) and "\n\nFacts:\n" in before
    head, facts = before.split("\n\nFacts:\n")
    assert system == head + SELF_DIAGNOSIS + "\n\nFacts:\n" + facts
    assert env.unwrapped.patient.config["bias"] == "self_diagnosis"
    assert "bias" not in plain.unwrapped.patient.config


def test_patient_bias_refusals():
    with pytest.raises(ValueError, match="patient_bias='recency' needs the LLM patient"):
        gym.make("EGIP-Demo-v0", patient_bias="recency")
    with pytest.raises(ValueError, match="retrieval patient"):
        EGIPEnv("demo", patient="retrieval", patient_bias="gender")
    with pytest.raises(ValidationError, match="patient_bias"):
        EnvConfig(patient_bias="confirmation")  # a doctor bias
    with pytest.raises(ValidationError, match="patient_bias"):
        EnvConfig(patient_bias="cancer")
    # an object must carry the bias the config records, both ways
    with pytest.raises(ValueError, match="has bias=None"):
        gym.make("EGIP-Demo-v0", patient=LLMPatient(patient_model()), patient_bias="race")
    with pytest.raises(ValueError, match="patient_bias=None"):
        gym.make("EGIP-Demo-v0", patient=LLMPatient(patient_model(), bias="race"))
    cached = CachedPatient(LLMPatient(patient_model(), bias="race"))
    assert gym.make("EGIP-Demo-v0", patient=cached, patient_bias="race").unwrapped.patient \
        is cached
    with pytest.raises(ValueError, match="external patient seat"):
        EGIPAECEnv("demo", patient_bias="recency")
    with pytest.raises(ValueError, match="bias"):
        LLMPatient(patient_model(), bias="status_quo")


def test_patient_bias_in_env_spec_through_the_fake_server():
    """Over the offline OpenAI-compatible fake server: the request the server received
    holds the bias between base prompt and facts, and env_spec records the bias."""
    with FakeChatServer(clinic_responder()) as server:
        model = make_chat_model("openai", "fake-model", base_url=server.base_url)
        with model:
            env = gym.make("EGIP-Demo-v0", patient="llm", patient_model=model,
                           patient_bias="religion")
            env.reset(seed=0, options={"case_id": "demo-01"})
            env.step("What brings you in today?")
            context = RunContext.from_env(env, LLMDoctor(model), seed=0)
        system = server.requests[-1]["messages"][0]["content"]
    assert context.env_spec["kwargs"]["patient_bias"] == "religion"
    assert context.env_spec["kwargs"]["patient_model"]["model"] == "fake-model"
    religion = BIAS_TEXTS[("patient", "religion")]
    assert system.index(PATIENT_VOICE_SELF) < system.index(religion) \
        < system.index("\n\nFacts:\n")
    assert "patient_bias" not in EnvConfig().to_kwargs()


# --------------------------------------------------------------------- doctor seat
def doctor_model():
    model = ScriptedChatModel(
        lambda messages, config, index: "DIAGNOSIS READY: Lobar pneumonia"
        if messages[0]["content"].startswith(DIRECT_SYSTEM) else "Any fever?")
    model.log_messages = True
    return model


def test_doctor_bias_ends_every_system_prompt_before_the_case():
    model = doctor_model()
    doctor = LLMDoctor(model, bias="confirmation")
    env = gym.make("EGIP-Demo-v0", acquisition_rounds=1)
    record = run_episode(env, doctor, case_id="demo-01", seed=3)
    sent = [call["messages"] for call in record["llm"]["calls"]]  # the run log's record
    assert [m[0]["content"] for m in sent] == [EGIP_DOCTOR_SYSTEM + CONFIRMATION,
                                               DIRECT_SYSTEM + CONFIRMATION]
    # the case information follows in the user message
    assert [m[1]["role"] for m in sent] == ["user", "user"]
    assert sent[0][1]["content"].startswith("# Task\nEvaluate the patient presenting with fever")
    assert sent[1][1]["content"].startswith("# Objective (S0)")
    assert doctor.config["bias"] == "confirmation"
    assert "bias" not in LLMDoctor(model).config
    assert "target_in_bias" in record["case_flags"] and not record["case_flags"][
        "target_in_bias"]  # demo-01 is no malignancy


def test_doctor_bias_on_the_native_agentclinic_id():
    model = ScriptedChatModel(["DIAGNOSIS READY: Lobar pneumonia"] * 5)
    doctor = LLMDoctor(model, prompt="agentclinic", max_questions=3, bias="status_quo")
    env = gym.make("AgentClinic-Demo-v0")
    run_episode(env, doctor, case_id="demo-01", seed=0)
    system = model.calls[0][0][0]["content"]
    assert system == AGENTCLINIC_DOCTOR_SYSTEM.format(
        budget=AGENTCLINIC_BUDGET_KNOWN.format(n=3)) + BIAS_TEXTS[("doctor", "status_quo")]
    assert model.calls[0][0][1]["role"] == "user"


def test_doctor_bias_refused_when_unknown():
    with pytest.raises(ValueError, match="'self_diagnosis' is a patient bias"):
        LLMDoctor(doctor_model(), bias="self_diagnosis")


def test_default_episode_has_no_bias_keys():
    record = run_episode(gym.make("EGIP-Demo-v0", acquisition_rounds=1),
                         LLMDoctor(doctor_model()), case_id="demo-01", seed=3)
    assert "target_in_bias" not in record["case_flags"]


# ------------------------------------------------------------------------ the flag
@needs_shared_data(MEDQA_FILE, NEJM_FILE)
def test_target_in_bias_counts(shared_data_dir):
    from clinenv.datasets import load_cases

    medqa = load_cases("medqa")
    flagged = {c.case_id: c.target.text for c in medqa if c.flags.target_in_bias}
    assert len(medqa) == 107 and len(flagged) == 14
    assert flagged == {f"medqa-{n:04d}": t for n, t in MEDQA_MALIGNANT.items()}
    nejm = load_cases("nejm")
    assert [(c.case_id, c.target.text) for c in nejm if c.flags.target_in_bias] == [
        ("nejm-0005", "Intravascular lymphoma")]
    assert len(nejm) == 15


@needs_shared_data(MEDQA_FILE, NEJM_FILE)
def test_line_flag_only_under_a_bias_that_names_cancer(shared_data_dir):
    def flags(case_id, **kwargs):
        env = gym.make("EGIP-MedQA-v0", acquisition_rounds=1, patient="llm",
                       patient_model=patient_model(), **kwargs)
        return run_episode(env, LLMDoctor(doctor_model()), case_id=case_id,
                           seed=0)["case_flags"]

    assert "target_in_bias" not in flags("medqa-0029")
    assert flags("medqa-0029", patient_bias="recency")["target_in_bias"] is True
    assert flags("medqa-0029", patient_bias="gender")["target_in_bias"] is False
    assert flags("medqa-0001", patient_bias="recency")["target_in_bias"] is False
    env = gym.make("EGIP-MedQA-v0", acquisition_rounds=1)
    record = run_episode(env, LLMDoctor(doctor_model(), bias="frequency"),
                         case_id="medqa-0029", seed=0)
    assert record["case_flags"]["target_in_bias"] is True


# ----------------------------------------------------------------------- the audit
@needs_shared_data(MEDQA_FILE, NEJM_FILE)
def test_audit_reports_what_the_bias_said_apart(shared_data_dir):
    from clinenv.audit.runner import run_audit

    plain = run_audit("EGIP-MedQA-v0", patient="llm", case_ids=["medqa-0029"])
    biased = run_audit("EGIP-MedQA-v0", patient="llm", case_ids=["medqa-0029"],
                       patient_bias="self_diagnosis")
    assert plain.passed and not plain.apart
    assert biased.passed
    assert [(f.kind, f.item, f.placement) for f in biased.apart] == [
        ("target_word", "cancer", "bias")]


# ------------------------------------------------------------------------- the CLI
def test_cli_flags_reach_the_run_log(tmp_path):
    import json

    from clinenv.cli import main

    out = tmp_path / "run.jsonl"
    with FakeChatServer(clinic_responder()) as server:
        code = main(["run", "--env", "EGIP-Demo-v0", "--doctor", "llm", "--model",
                     "fake-model", "--base-url", server.base_url, "--patient", "llm",
                     "--patient-bias", "self_diagnosis", "--doctor-bias", "confirmation",
                     "--episodes", "1", "--quiet", "--out", str(out)])
        systems = [r["messages"][0]["content"] for r in server.requests]
    assert code == 0
    line = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert line["env_spec"]["kwargs"]["patient_bias"] == "self_diagnosis"
    assert line["doctor"]["config"]["bias"] == "confirmation"
    assert line["case_flags"]["target_in_bias"] is False  # demo-01: no malignancy
    assert any(s.startswith(EGIP_DOCTOR_SYSTEM + CONFIRMATION) for s in systems)
    assert any(SELF_DIAGNOSIS + "\n\nFacts:\n" in s for s in systems)


@pytest.mark.parametrize(("argv", "message"), [
    (["--patient-bias", "recency"], "needs the LLM patient"),
    (["--doctor-bias", "recency"], "--doctor scripted has no prompt"),
])
def test_cli_refusals(argv, message, capsys, tmp_path):
    from clinenv.cli import main

    code = main(["run", "--env", "EGIP-Demo-v0", "--episodes", "1", "--quiet",
                 "--out", str(tmp_path / "r.jsonl"), *argv])
    assert code == 2 and message in capsys.readouterr().err


def test_cli_audit_with_a_patient_bias(capsys):
    from clinenv.cli import main

    code = main(["audit", "EGIP-Demo-v0", "--patient", "llm", "--patient-bias", "recency",
                 "--limit", "2"])
    assert code == 0 and "PASSED" in capsys.readouterr().out


def test_eval_by_target_in_bias(tmp_path, capsys, shared_data_dir):
    """Flagged cases are reported apart: ``clinenv eval --by target_in_bias`` splits a
    biased run into the flagged case (medqa-0029) and the others."""
    import json

    from clinenv.cli import main

    out = tmp_path / "run.jsonl"
    with FakeChatServer(clinic_responder()) as server:
        assert main(["run", "--env", "EGIP-MedQA-v0", "--doctor", "llm", "--model",
                     "fake-model", "--base-url", server.base_url, "--doctor-bias",
                     "recency", "--episodes", "29", "--quiet", "--out", str(out)]) == 0
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [x["case_id"] for x in lines if x["case_flags"]["target_in_bias"]] == [
        "medqa-0004", "medqa-0023", "medqa-0029"]
    capsys.readouterr()
    assert main(["eval", str(out), "--by", "target_in_bias", "--out-dir",
                 str(tmp_path / "ev")]) == 0
    table = (tmp_path / "ev" / "accuracy_by_target_in_bias.md").read_text(encoding="utf-8")
    assert "True" in table and "False" in table
    plain = tmp_path / "plain.jsonl"
    assert main(["run", "--env", "EGIP-Demo-v0", "--episodes", "1", "--quiet", "--out",
                 str(plain)]) == 0
    assert main(["eval", str(plain), "--by", "target_in_bias"]) == 2
    assert "only runs with --patient-bias or --doctor-bias" in capsys.readouterr().err
