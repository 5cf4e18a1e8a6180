"""The CDEG paper's baselines as policy wrappers, around the LLM doctor (ScriptedChatModel)
and the scripted doctor: each changes the final prompt as its module documents, and the
wrappers forward the LLM doctor's call records and async API."""

from __future__ import annotations

import asyncio
import json

import gymnasium as gym
import numpy as np
import pytest

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv.agents.llm_doctor import LLMDoctor
from clinenv.agents.scripted_doctor import ScriptedDoctor
from clinenv.llm.scripted import ScriptedChatModel
from clinenv.runs import RunSpec, run
from clinenv.wrappers.baselines.experience import (
    TextRetriever,
    Trajectory,
    load_trajectories,
    trajectory_text,
)
from clinenv.wrappers.baselines.flat_experience import (
    FlatExperienceDoctor,
    snippets_from_graph,
    snippets_from_trajectories,
)
from clinenv.wrappers.baselines.self_reflection import REFLECTION_PROMPT, SelfReflectionDoctor
from clinenv.wrappers.baselines.trajectory_rag import TrajectoryRAGDoctor
from clinenv.wrappers.cdeg.atoms import EvidenceAtom
from clinenv.wrappers.cdeg.graph import (
    ActionEvidenceEdge,
    ActionNode,
    CDEGraph,
    DiagnosisNode,
    EvidenceNode,
    RevisionEdge,
)

E_T = ("# Objective (S0)\nEvaluate cough.\n\n# Acquired observations\n(none)\n\n"
       "# Instructions\nReply.")


class KeySimilarity:
    """Scores 1.0 when the key contains the query's first word, else 0 (no model)."""

    name = "key-word"

    def similarity(self, queries, keys):
        return np.array([[float(q.split()[0].lower() in k.lower()) if q.split() else 0.0
                          for k in keys] for q in queries])


def decide_info(case_id="c9", new=()):
    return {"phase": "decide", "turn": 5, "menu": [], "candidates": None,
            "case_id": case_id, "dataset": "demo", "new_observations": list(new)}


def obs(text, source="Patient", context="What brings you in?", n=1):
    return {"obs_id": f"O{n}", "source": source, "turn": n, "context": context,
            "content": text, "availability": "stated", "exam_id": None}


def traj(case_id, text, answer, correct=True):
    observations = (obs(text),)
    return Trajectory(case_id=case_id, repetition=0, dataset="demo", answer=answer,
                      outcome="success" if correct else "failure",
                      history=trajectory_text(observations), observations=observations,
                      source="memory.jsonl:1")


def llm_doctor(*replies):
    model = ScriptedChatModel(list(replies))
    return LLMDoctor(model, strategy="direct"), model


def test_self_reflection_reasks_the_llm_doctor_once_with_the_reflection_prompt():
    inner, model = llm_doctor("DIAGNOSIS READY: bronchitis", "DIAGNOSIS READY: pneumonia")
    doctor = SelfReflectionDoctor(inner)
    doctor.reset(seed=3)
    assert doctor.name == "llm-direct+self-reflection"
    assert doctor.act({"text": E_T}, decide_info()) == "DIAGNOSIS READY: pneumonia"
    first, second = (messages[-1]["content"] for messages, _ in model.calls)
    assert first == E_T
    assert second == E_T + "\n\n# Guidance\n" + REFLECTION_PROMPT.format(
        next="give your final diagnosis")
    assert doctor.episode_log() == [{"turn": 5, "phase": "decide", "kind": "self-reflection",
                                     "proposed": "bronchitis"}]
    calls = doctor.drain_calls()  # forwarded: both model calls are in the run log
    assert [c["purpose"] for c in calls] == ["decide", "decide"]
    # once per episode
    model._replies.append("DIAGNOSIS READY: x")
    assert doctor.act({"text": E_T}, decide_info()) == "DIAGNOSIS READY: x"


def test_wrappers_forward_aact_of_the_llm_doctor():
    inner, model = llm_doctor("DIAGNOSIS READY: bronchitis", "DIAGNOSIS READY: pneumonia")
    doctor = SelfReflectionDoctor(inner)
    doctor.reset(seed=3)
    action = asyncio.run(doctor.aact({"text": E_T}, decide_info()))
    assert action == "DIAGNOSIS READY: pneumonia" and len(model.calls) == 2
    plain = SelfReflectionDoctor(ScriptedDoctor())
    assert not hasattr(plain, "aact") and not hasattr(plain, "drain_calls")


def test_trajectory_rag_gives_the_k_most_similar_successful_trajectories():
    memory = [traj("c1", "cough with sputum", "lobar pneumonia"),
              traj("c2", "cough and wheeze", "asthma", correct=False),  # failed: not kept
              traj("c3", "rash on both legs", "vasculitis"),
              traj("c9", "cough for weeks", "tuberculosis")]  # the episode's own case
    inner, model = llm_doctor("DIAGNOSIS READY: bronchitis", "DIAGNOSIS READY: pneumonia")
    doctor = TrajectoryRAGDoctor(inner, memory, similarity=KeySimilarity(), k=2)
    doctor.reset(seed=0)
    info = decide_info(new=[obs("Cough since Monday")])
    assert doctor.act({"text": E_T}, info) == "DIAGNOSIS READY: pneumonia"
    prompt = model.calls[1][0][-1]["content"]
    guidance = prompt.split("# Guidance\n", 1)[1]
    assert guidance.startswith("Solved cases from earlier consultations")
    # the stub scores every key 1.0 (each contains the query's first word "Patient,"):
    # ties keep memory order, c1 then c3; c9 is the episode's own case, c2 failed
    assert "## Example 1\nPatient, asked \"What brings you in?\": cough with sputum\n" \
           "Final diagnosis: lobar pneumonia" in guidance
    assert "## Example 2" in guidance and "tuberculosis" not in guidance
    assert "asthma" not in guidance
    (entry,) = doctor.episode_log()
    assert [r["case_id"] for r in entry["retrieved"]] == ["c1", "c3"]


def test_text_retriever_ranks_by_similarity_and_excludes_the_own_case():
    retriever = TextRetriever(["rash", "cough and fever", "cough"],
                              [[("d", "a")], [("d", "b")], [("", "c")]], KeySimilarity())
    assert retriever.top("cough now", 2) == [(1, 1.0), (2, 1.0)]
    assert retriever.top("cough now", 3, case=("d", "b")) == [(2, 1.0), (0, 0.0)]
    assert retriever.top("cough now", 3, case=("x", "c")) == [(1, 1.0), (0, 0.0)]


def test_flat_experience_from_a_graph_gives_flattened_edges():
    graph = CDEGraph(
        diagnoses=(DiagnosisNode(node_id="D1", label="acute bronchitis"),
                   DiagnosisNode(node_id="D2", label="lobar pneumonia")),
        evidence=(EvidenceNode(node_id="E1", atom=EvidenceAtom(concept="consolidation")),
                  EvidenceNode(node_id="E2", atom=EvidenceAtom(concept="fever")),
                  EvidenceNode(node_id="E3", atom=EvidenceAtom(concept="wheeze"))),
        actions=(ActionNode(node_id="A1", kind="exam", name="Chest X-Ray"),),
        action_evidence=(ActionEvidenceEdge(action="A1", evidence="E1"),),
        revisions=(RevisionEdge(edge_id="R1", source="D1", target="D2", missing=("E1",),
                                ignored=("E2",), blocking=("E3",), cases=("c7",)),))
    (snippet,) = snippets_from_graph(graph)
    assert snippet.text == (
        "When acute bronchitis was diagnosed, the missing evidence consolidation (acquired "
        "by Chest X-Ray) and the overlooked evidence fever led to revising it to lobar "
        "pneumonia; wheeze favoured keeping it.")
    inner, model = llm_doctor("DIAGNOSIS READY: bronchitis", "DIAGNOSIS READY: pneumonia")
    doctor = FlatExperienceDoctor.from_graph(inner, graph, similarity=KeySimilarity())
    doctor.reset(seed=0)
    doctor.act({"text": E_T}, decide_info(new=[obs("When it started")]))
    guidance = model.calls[1][0][-1]["content"].split("# Guidance\n", 1)[1]
    assert guidance == ("Diagnostic experience from earlier consultations that may be "
                        f"relevant:\n- {snippet.text}\n\nWeigh it against this patient's "
                        "findings. Then give your final diagnosis.")
    # the snippet's only case is c7: an episode of case c7 gets no snippet, no re-ask
    inner, model = llm_doctor("DIAGNOSIS READY: bronchitis")
    own = FlatExperienceDoctor.from_graph(inner, graph, similarity=KeySimilarity())
    own.reset(seed=0)
    assert own.act({"text": E_T}, decide_info("c7")) == "DIAGNOSIS READY: bronchitis"
    assert len(model.calls) == 1 and own.episode_log() == []


def test_flat_experience_snippets_from_run_logs(tmp_path):
    log = tmp_path / "runs.jsonl"
    run(lambda: gym.make("EGIP-Demo-v0"), lambda: ScriptedDoctor(n_questions=1, exam_budget=2),
        RunSpec(out=log, episodes=1))
    run(lambda: gym.make("EGIP-Demo-v0"), lambda: ScriptedDoctor(n_questions=1, exam_budget=7),
        RunSpec(out=tmp_path / "more.jsonl", episodes=1))
    trajectories = load_trajectories([log, tmp_path / "more.jsonl"])
    # two exams miss the chest x-ray (answer "Undetermined": an abstention), seven
    # include it
    assert [(t.case_id, t.outcome) for t in trajectories] == [("demo-01", "abstained"),
                                                              ("demo-01", "success")]
    (snippet,) = snippets_from_trajectories(trajectories)
    assert snippet.owners == (("demo", "demo-01"),)
    assert snippet.text.startswith(
        "In a case with Patient, asked \"What brings you in today?\": I'm here because of "
        "cough with rust-coloured sputum.")
    assert "; Measurement Vital Signs: Temperature: 38.9 °C" in snippet.text
    assert snippet.text.endswith(
        ", acquiring Vital Signs, Respiratory Examination, Cardiovascular Examination, "
        "Complete Blood Count (Blood Tests), C-Reactive Protein (Blood Tests), Urea (Blood "
        "Tests), Chest X-Ray (Imaging) led to the diagnosis lobar pneumonia.")


def test_load_trajectories_names_the_file_and_line_of_a_bad_log(tmp_path):
    from clinenv.runlog import RunLogError

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"case_id": "x", "repetition": 0}\n', encoding="utf-8")
    with pytest.raises(RunLogError, match=r"bad\.jsonl, line 1"):
        load_trajectories([bad])
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        load_trajectories([tmp_path / "missing.jsonl"])


def test_cli_baseline_self_reflection_logs_each_reask(tmp_path):
    """The baselines act through the doctor's prompt: the LLM doctor (the offline
    clinician behind a real local server) gets one self-reflection re-ask per episode;
    the scripted doctor, which has no prompt, is refused."""
    from clinenv.cli import main
    from clinenv.testing.fake_server import FakeChatServer

    out = tmp_path / "run.jsonl"
    with FakeChatServer("clinician") as server:
        assert main(["run", "--env", "EGIP-Demo-v0", "--episodes", "1", "--quiet",
                     "--doctor", "llm", "--model", "fake", "--base-url", server.base_url,
                     "--out", str(out), "--baseline", "self-reflection"]) == 0
    (line,) = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert line["doctor"]["name"] == "llm-direct+self-reflection"
    assert [e["kind"] for e in line["doctor_log"]] == ["self-reflection"]
    assert main(["run", "--env", "EGIP-Demo-v0", "--episodes", "1", "--quiet", "--out",
                 str(tmp_path / "r1.jsonl"), "--baseline", "self-reflection"]) == 2
    assert main(["run", "--env", "EGIP-Demo-v0", "--episodes", "1", "--quiet", "--out",
                 str(tmp_path / "r2.jsonl"), "--baseline", "trajectory-rag"]) == 2
