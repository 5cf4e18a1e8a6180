"""The CDEG policy wrapper: evidence state, retrieval, selective intervention, deferral.

A hand-built graph (:mod:`clinenv.testing.cdeg_policy`) with a stub extractor and a stub
similarity of fixed scores pins each decision of the wrapper; the last tests run real
episodes through EGIPEnv (demo set, scripted inner doctor, the deterministic extractor)
and the CLI.

Graph (coverage basis "edge": E_{s->t} of R1 = {E1, E2, E3, E4, E5}):

- D1 "acute bronchitis" (alias "bronchitis, acute") -> D2 "lobar pneumonia" (R1):
  missing E3 "consolidation (right lower lobe)" (yielded by exam A1 "Chest X-Ray
  (Imaging)"), ignored E1 "fever", E2 "productive cough", E4 "coarse crackles"
  (exam A2 "Respiratory Examination"), blocking E5 "clear lung fields";
- D3 "asthma" -> D2 (R2): missing E6 "pleuritic chest pain" (question A3), context E1.
"""

from __future__ import annotations

import json

import gymnasium as gym

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv.agents.scripted_doctor import ScriptedDoctor
from clinenv.runs.episode import run_episode
from clinenv.testing.cdeg_policy import (
    LOW,
    StubExtractor,
    StubSimilarity,
    finals,
    make_graph,
    step_info,
    wrapped,
)
from clinenv.wrappers.cdeg.atoms import EvidenceAtom
from clinenv.wrappers.cdeg.graph import (
    ActionEvidenceEdge,
    ActionNode,
    CDEGraph,
    DiagnosisNode,
    EvidenceNode,
    RevisionEdge,
    coverage,
)
from clinenv.wrappers.cdeg.policy import CDEGConfig, CDEGDoctor
from clinenv.wrappers.cdeg.retrieval import DiagnosisMatcher, EdgeIndex


# ------------------------------------------------------------------ decisions
def test_acquire_prompts_the_menu_action_that_yields_missing_evidence():
    doctor, inner = wrapped("DIAGNOSIS READY: acute bronchitis", "REQUEST TEST: T4")
    action = doctor.act({"text": "view"}, step_info(3, "fever,cough,crackles"))
    assert action == "REQUEST TEST: T4"
    # re-asked once, with the guidance in the text and in info
    text, info = inner.seen[1]
    assert info["guidance"] == {"kind": "acquire", "edge": "R1",
                                "evidence": ["consolidation (right lower lobe)"],
                                "action": {"id": "T4", "name": "Chest X-Ray (Imaging)"},
                                "question": None}
    assert text.startswith("view\n\n# Guidance\n")
    assert 'request the examination "Chest X-Ray (Imaging)" (REQUEST TEST: T4)' in text
    assert "lobar pneumonia" not in text  # D_t is never named
    (entry,) = finals(doctor)
    # |S_t ∩ E_R1| / |E_R1| = |{E1, E2, E4}| / |{E3, E1, E2, E4, E5}| = 3/5
    assert entry == {"turn": 3, "phase": "acquire", "kind": "acquire", "retrieval": "local",
                     "edge": "R1", "edge_cases": [],
                     "coverage": 0.6, "proposed": "acute bronchitis",
                     "matched": {"id": "D1", "label": "acute bronchitis",
                                 "method": "exact", "score": 1.0},
                     "evidence": ["E3"], "action": {"kind": "exam", "id": "T4",
                                                     "name": "Chest X-Ray (Imaging)"},
                     "deferrals": 1}


def test_reappraise_when_no_action_can_acquire_the_missing_evidence():
    doctor, inner = wrapped("DIAGNOSIS READY: Bronchitis, acute", "What else?")
    menu = [{"id": "PE1", "name": "Vital Signs"}]  # no chest x-ray left to request
    action = doctor.act({"text": "view"}, step_info(3, "fever,cough,crackles", menu=menu))
    assert action == "What else?"
    guidance = inner.seen[1][1]["guidance"]
    assert guidance["kind"] == "reappraise" and guidance["action"] is None
    assert guidance["evidence"] == ["fever [O1, Measurement exam]",
                                    "productive cough [O1, Measurement exam]",
                                    "coarse crackles [O1, Measurement exam]"]
    assert "then give your next action" in inner.seen[1][0]
    (entry,) = finals(doctor)
    assert (entry["kind"], entry["evidence"], entry["matched"]["method"]) == (
        "reappraise", ["E1", "E2", "E4"], "exact")  # matched through the alias


def test_no_intervention_below_the_coverage_threshold():
    doctor, inner = wrapped("DIAGNOSIS READY: acute bronchitis")
    action = doctor.act({"text": "view"}, step_info(3, "fever,cough"))  # 2/5 = 0.4
    assert action == "DIAGNOSIS READY: acute bronchitis" and len(inner.seen) == 1
    (entry,) = finals(doctor)
    assert (entry["kind"], entry["reason"], entry["edge"]) == ("none", "no_edge", None)


def test_no_intervention_without_a_matching_diagnosis_node():
    doctor, inner = wrapped("DIAGNOSIS READY: gout",
                            table={("gout", "acute bronchitis"): 0.64})
    assert doctor.act({"text": "v"}, step_info(3, "fever,cough,crackles")) == \
        "DIAGNOSIS READY: gout"
    (entry,) = finals(doctor)
    assert (entry["kind"], entry["reason"], entry["matched"]) == (
        "none", "no_diagnosis_node", None)


def test_semantic_diagnosis_match_at_the_065_boundary():
    doctor, _ = wrapped("DIAGNOSIS READY: chest cold", "Any fever?",
                        table={("chest cold", "acute bronchitis"): 0.65})
    assert doctor.act({"text": "v"}, step_info(3, "fever,cough,crackles")) == "Any fever?"
    assert finals(doctor)[0]["matched"] == {"id": "D1", "label": "acute bronchitis",
                                            "method": "semantic", "score": 0.65}


def test_blocking_evidence_observed_means_no_intervention():
    doctor, inner = wrapped("DIAGNOSIS READY: acute bronchitis")
    action = doctor.act({"text": "v"}, step_info(3, "fever,cough,crackles,clear"))
    assert action == "DIAGNOSIS READY: acute bronchitis" and len(inner.seen) == 1
    (entry,) = finals(doctor)
    assert (entry["kind"], entry["coverage"], entry["evidence"]) == ("blocked", 0.8, ["E5"])


def test_acquisition_impossible_in_acquisition_only_mode_is_no_action():
    doctor, inner = wrapped("DIAGNOSIS READY: acute bronchitis",
                            config=CDEGConfig(mode="acquisition_only", coverage_threshold=LOW))
    action = doctor.act({"text": "v"}, step_info(3, "fever,cough,crackles", menu=[]))
    assert action == "DIAGNOSIS READY: acute bronchitis" and len(inner.seen) == 1
    (entry,) = finals(doctor)
    assert (entry["kind"], entry["evidence"]) == ("no_action", ["E3"])


def test_reappraisal_only_mode_skips_an_available_acquisition():
    doctor, inner = wrapped("DIAGNOSIS READY: acute bronchitis", "Hmm?",
                            config=CDEGConfig(mode="reappraisal_only", coverage_threshold=LOW))
    doctor.act({"text": "v"}, step_info(3, "fever,cough,crackles"))
    assert inner.seen[1][1]["guidance"]["kind"] == "reappraise"


def test_a_patient_question_is_an_acquisition_action_until_asked():
    # R2 (asthma -> lobar pneumonia): E_{s->t} = {E6}; with the context basis {E6, E1}
    config = CDEGConfig(coverage_basis="edge+context", coverage_threshold=0.4)
    doctor, inner = wrapped("DIAGNOSIS READY: asthma", "Does it hurt when you breathe in?",
                            config=config)
    assert doctor.act({"text": "v"}, step_info(2, "fever")) == \
        "Does it hurt when you breathe in?"
    assert inner.seen[1][1]["guidance"]["question"] == "Does it hurt when you breathe in?"
    assert finals(doctor)[0]["coverage"] == 0.5
    # the literal Eq. 7 gives this edge coverage 0 before E6 is acquired: no retrieval
    literal, _ = wrapped("DIAGNOSIS READY: asthma", config=CDEGConfig(coverage_threshold=0.4))
    literal.act({"text": "v"}, step_info(2, "fever"))
    assert finals(literal)[0]["reason"] == "no_edge"


def test_deferral_limit_lets_the_answer_stand():
    answer = "DIAGNOSIS READY: acute bronchitis"
    doctor, inner = wrapped(answer, answer, answer,
                            config=CDEGConfig(max_deferrals=2, coverage_threshold=LOW))
    menu = [{"id": "PE1", "name": "Vital Signs"}]
    assert doctor.act({"text": "v"}, step_info(3, "fever,cough,crackles", menu=menu)) == answer
    assert len(inner.seen) == 3  # the proposal and two re-asks
    kinds = [(e["kind"], e["deferrals"]) for e in finals(doctor)]
    assert kinds == [("reappraise", 1), ("reappraise", 2), ("deferral_limit", 2)]
    assert finals(doctor)[-1]["intended"] == "reappraise"
    # the limit is per episode: the next proposal is not deferred either
    inner.replies.append(answer)
    assert doctor.act({"text": "v"}, step_info(4, menu=menu, start=9)) == answer
    assert finals(doctor)[-1]["kind"] == "deferral_limit"
    doctor.reset(seed=1)  # a new episode starts with no deferrals and an empty S_t
    assert doctor.episode_log() == [] and doctor.state.ids == set()


def test_decision_phase_reasks_once_with_reappraisal_appended_to_e_T():
    doctor, inner = wrapped("DIAGNOSIS READY: acute bronchitis",
                            "DIAGNOSIS READY: lobar pneumonia")
    e_t = "# Objective (S0)\nx\n\n# Instructions\nReply."
    action = doctor.act({"text": e_t}, step_info(9, "fever,cough,crackles", phase="decide"))
    assert action == "DIAGNOSIS READY: lobar pneumonia"
    text, info = inner.seen[-1]
    assert text.startswith(e_t + "\n\n# Guidance\n") and "give your final diagnosis" in text
    # the x-ray (E3) is missing, but no acquisition is left in the decision phase
    assert info["guidance"]["kind"] == "reappraise"
    assert [(e["phase"], e["kind"]) for e in finals(doctor)] == [("decide", "reappraise")]


def test_decision_phase_keeps_the_first_answer_when_the_reask_is_empty():
    doctor, inner = wrapped("DIAGNOSIS READY: acute bronchitis", "")
    info = step_info(9, "fever,cough,crackles", phase="decide")
    assert doctor.act({"text": "e"}, info) == "DIAGNOSIS READY: acute bronchitis"
    assert len(inner.seen) == 2


# field-bug-reports B01, B05
def test_markdown_and_think_blocks_are_read_as_the_proposal():
    """A marker in markdown is a final answer; a marker inside
    a <think> block is not."""
    doctor, inner = wrapped("<think>DIAGNOSIS READY: asthma</think>Any cough?",
                            "**DIAGNOSIS READY:** **Acute bronchitis.**", "Any fever?")
    first = doctor.act({"text": "v"}, step_info(3, "fever,cough,crackles"))
    assert first == "<think>DIAGNOSIS READY: asthma</think>Any cough?"  # passed on as is
    assert finals(doctor) == [] and len(inner.seen) == 1
    assert doctor.act({"text": "v"}, step_info(4, start=9)) == "Any fever?"
    assert finals(doctor)[0]["proposed"] == "Acute bronchitis"


# ------------------------------------------------------------------ matching
def test_semantic_match_and_exact_match_are_logged():
    extra = {"warm": EvidenceAtom(concept="raised temperature")}
    table = {("raised temperature", "fever"): 0.72, ("fever", "productive cough"): 0.99}
    doctor, _ = wrapped("Q?", table=table, extra=extra)
    doctor.act({"text": "v"}, step_info(1, "warm,cough"))
    assert doctor.state.ids == {"E1", "E2"}
    (entry,) = doctor.episode_log()
    assert entry["kind"] == "global" and entry["edge"] is None  # 2/5 < 0.5
    assert entry["new_evidence"] == [
        {"id": "E1", "obs_id": "O1", "atom": "raised temperature", "method": "semantic",
         "score": 0.72},
        {"id": "E2", "obs_id": "O1", "atom": "productive cough", "method": "exact",
         "score": 1.0}]


def test_below_boundary_and_opposite_polarity_do_not_match():
    extra = {"hot": EvidenceAtom(concept="feels hot"),
             "nofever": EvidenceAtom(concept="fever", polarity="absent")}
    table = {("feels hot", "fever"): 0.7199, ("no fever", "fever"): 0.95}
    doctor, _ = wrapped("Q?", table=table, extra=extra)
    doctor.act({"text": "v"}, step_info(1, "hot,nofever"))
    assert doctor.state.ids == set()
    loose = CDEGConfig(match_polarity=False, match_attributes=False)
    doctor, _ = wrapped("Q?", table=table, extra=extra, config=loose)
    doctor.act({"text": "v"}, step_info(1, "hot,nofever"))
    assert doctor.state.ids == {"E1"}


def test_global_retrieval_is_logged_when_it_changes():
    doctor, _ = wrapped("Q1", "Q2", "Q3")
    doctor.act({"text": "v"}, step_info(1, "fever,cough,crackles"))
    doctor.act({"text": "v"}, step_info(2, start=4))  # nothing new: no entry
    doctor.act({"text": "v"}, step_info(3, "clear", start=5))
    log = doctor.episode_log()
    assert [(e["turn"], e["edge"], e["coverage"]) for e in log] == [(1, "R1", 0.6),
                                                                    (3, "R1", 0.8)]
    assert doctor.last_global.edge.edge_id == "R1"


def test_vectorized_coverage_equals_eq7_and_ties_prefer_support():
    graph = make_graph()
    index = EdgeIndex(graph)
    counter = index.counter()
    for e in ("E1", "E6", "E4", "E1"):
        counter.add(e)
    state = {"E1", "E6", "E4"}
    assert list(counter.coverage()) == [coverage(edge, state) for edge in graph.revisions]
    assert list(counter.coverage()) == [0.4, 1.0]
    tie = CDEGraph(**{**graph.model_dump(), "revisions": [
        {"edge_id": "R1", "source": "D1", "target": "D2", "missing": ["E1"]},
        {"edge_id": "R2", "source": "D1", "target": "D3", "missing": ["E1"], "support": 3}]})
    tied = EdgeIndex(tie)
    counter = tied.counter()
    counter.add("E1")
    assert tied.global_best(counter).edge.edge_id == "R2"
    assert tied.local_best(counter, "D1").edge.edge_id == "R2"
    assert tied.local_best(counter, "D2") is None


def test_option_letters_are_read_as_candidates():
    matcher = DiagnosisMatcher(make_graph(), StubSimilarity())
    assert matcher.match("B", ["Asthma", "Lobar pneumonia"]).node_id == "D2"
    assert matcher.match("(A)", ["Asthma", "Lobar pneumonia"]).node_id == "D3"
    assert matcher.match("A fib", ["Asthma"]) is None  # a word, not an option letter


# ------------------------------------------------------------------ policy API
def test_wrapper_forwards_only_what_the_inner_doctor_has():
    scripted = CDEGDoctor(ScriptedDoctor(), make_graph(), similarity=StubSimilarity(),
                          extractor=StubExtractor())
    assert scripted.name == "scripted+cdeg"
    assert not hasattr(scripted, "drain_calls") and not hasattr(scripted, "aact")
    config = scripted.config()
    assert config["wrapper"] == "cdeg" and config["inner"]["name"] == "scripted"
    assert config["cdeg"] == {"evidence_threshold": 0.72, "diagnosis_threshold": 0.65,
                              "coverage_threshold": 0.6, "max_deferrals": 2,
                              "mode": "both", "coverage_basis": "edge",
                              "match_polarity": True, "match_attributes": True,
                              "global_guidance": False}
    assert config["graph"]["counts"]["revisions"] == 2
    assert json.loads(json.dumps(config)) == config


# ------------------------------------------------------------------ real episodes
def demo_graph() -> CDEGraph:
    """Evidence atoms as the deterministic extractor reads demo-01 (lobar pneumonia)."""
    atom = EvidenceAtom
    evidence = [
        atom(concept="cough with rust-coloured sputum"),                     # E1 (O1)
        atom(concept="fever with shaking chills"),                           # E2 (O1)
        atom(concept="temperature", direction="high"),                       # E3 vitals
        atom(concept="dense consolidation with air bronchograms",
             anatomy="right lower lobe"),                                    # E4 x-ray
    ]
    return CDEGraph(
        diagnoses=(DiagnosisNode(node_id="D1", label="acute bronchitis"),
                   DiagnosisNode(node_id="D2", label="lobar pneumonia")),
        evidence=tuple(EvidenceNode(node_id=f"E{i}", atom=a)
                       for i, a in enumerate(evidence, start=1)),
        actions=(ActionNode(node_id="A1", kind="exam", name="Chest X-Ray (Imaging)"),),
        action_evidence=(ActionEvidenceEdge(action="A1", evidence="E4"),),
        revisions=(RevisionEdge(edge_id="R1", source="D1", target="D2", missing=("E4",),
                                ignored=("E1", "E2", "E3")),))


class BronchitisDoctor(ScriptedDoctor):
    """The scripted doctor, but its proposals name acute bronchitis (a wrong answer)."""

    def _answer(self, evidence, candidates):
        return "acute bronchitis"


def test_real_episode_defers_and_acquires_the_missing_exam():
    env = gym.make("EGIP-Demo-v0", premature_diagnosis="decide")
    inner = BronchitisDoctor(n_questions=1, exam_budget=1)  # asks, vital signs, proposes
    doctor = CDEGDoctor(inner, demo_graph(), similarity=StubSimilarity())
    record = run_episode(env, doctor, case_id="demo-01", seed=0)
    finals_ = [e for e in record["doctor_log"] if e["kind"] != "global"]
    # info turns: 0 question; 1 vital signs (S_t = {E1, E2, E3}: 3/4 > 0.6); 2-5 the
    # other history questions; 6 the proposal is deferred -> REQUEST TEST: T4; 7 with E4
    # in S_t the proposal gets reappraisal guidance, the scripted doctor answers again
    # and the limit (2) lets it stand; 8 the decision-phase answer is not deferred
    assert [(e["turn"], e["phase"], e["kind"], e["coverage"]) for e in finals_] == [
        (6, "acquire", "acquire", 0.75), (7, "acquire", "reappraise", 1.0),
        (7, "acquire", "deferral_limit", 1.0), (8, "decide", "deferral_limit", 1.0)]
    assert finals_[0]["action"] == {"kind": "exam", "id": "T4", "name": "Chest X-Ray (Imaging)"}
    exams = [e for e in record["events"] if e.get("source") == "measurement"]
    assert [e["exam_id"] for e in exams] == ["PE1", "T4"]
    assert finals_[1]["evidence"] == ["E4", "E1", "E2", "E3"]
    assert json.loads(json.dumps(record["doctor_log"])) == record["doctor_log"]
    assert "llm" not in record  # a scripted inner doctor is not an LLM doctor


def test_cli_run_with_cdeg_writes_doctor_log(tmp_path, capsys):
    from clinenv.cli import main

    graph = tmp_path / "graph.json"
    demo_graph().save(graph)
    out = tmp_path / "run.jsonl"
    code = main(["run", "--env", "EGIP-Demo-v0", "--episodes", "2", "--quiet",
                 "--out", str(out), "--cdeg", str(graph), "--cdeg-similarity", "lexical"])
    assert code == 0
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [ln["doctor"]["name"] for ln in lines] == ["scripted+cdeg"] * 2
    assert lines[0]["doctor"]["config"]["inner"]["name"] == "scripted"
    assert all(isinstance(ln["doctor_log"], list) for ln in lines)
    assert any(e["kind"] == "global" for e in lines[0]["doctor_log"])


def test_cli_refuses_a_broken_graph_file(tmp_path, capsys):
    from clinenv.cli import main

    bad = tmp_path / "graph.json"
    bad.write_text('{"format": "clinenv.cdeg/0"}', encoding="utf-8")
    code = main(["run", "--env", "EGIP-Demo-v0", "--episodes", "1", "--quiet",
                 "--out", str(tmp_path / "r.jsonl"), "--cdeg", str(bad)])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "graph.json" in err[0] and "format" in err[0]
    assert not (tmp_path / "r.jsonl").exists()


def test_scripted_doctor_follows_acquisition_guidance_in_its_menu():
    doctor = ScriptedDoctor(n_questions=0, exam_budget=0)
    doctor.reset(seed=0)
    menu = [{"id": "T4", "name": "Chest X-Ray (Imaging)"}]
    info = {"phase": "acquire", "menu": menu, "candidates": None,
            "guidance": {"kind": "acquire", "action": {"id": "T4", "name": "x"},
                         "question": None}}
    assert doctor.act({"text": "delta"}, info) == "REQUEST TEST: T4"
    gone = dict(info, menu=[])  # no longer in the menu: the usual plan
    assert doctor.act({"text": "delta"}, gone) == "What brings you in today?"
    asked = dict(info, guidance={"kind": "acquire", "action": None, "question": "Any rash?"})
    assert doctor.act({"text": "delta"}, asked) == "Any rash?"
    assert doctor._deltas == []  # guided re-asks add no events in "delta" format
    plain = {k: v for k, v in gone.items() if k != "guidance"}
    doctor.act({"text": "new events"}, plain)
    assert doctor._deltas == ["new events"]
    decide = dict(info, phase="decide")  # no acquisition in the decision phase
    assert doctor.act({"text": "# Acquired observations\nx"}, decide).startswith(
        "DIAGNOSIS READY: ")
