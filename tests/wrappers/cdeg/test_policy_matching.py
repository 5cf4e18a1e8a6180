"""CDEG wrapper matching and retrieval details: the strict coverage threshold, attribute-
compatible evidence matching, observations without ids, NaN scores, opt-in global
guidance, and the ``clinenv run --cdeg-*`` options (graph of clinenv.testing.cdeg_policy)."""

from __future__ import annotations

import json

import numpy as np

from clinenv.cli import main
from clinenv.embeddings.lexical import LexicalSimilarity
from clinenv.testing.cdeg_policy import (
    LOW,
    StubSimilarity,
    finals,
    make_graph,
    step_info,
    wrapped,
)
from clinenv.wrappers.cdeg.atoms import EvidenceAtom
from clinenv.wrappers.cdeg.graph import CDEGraph, DiagnosisNode, EvidenceNode, RevisionEdge
from clinenv.wrappers.cdeg.policy import CDEGConfig
from clinenv.wrappers.cdeg.state import NodeMatcher


def test_coverage_threshold_is_strict():
    """CDEG "Implementation Details": edges are retrieved when coverage *exceeds* 0.6:
    R1 at 3/5 = 0.6 is not retrieved, at 4/5 it is."""
    doctor, inner = wrapped("DIAGNOSIS READY: acute bronchitis", config=CDEGConfig())
    doctor.act({"text": "v"}, step_info(3, "fever,cough,crackles"))
    assert finals(doctor)[0]["reason"] == "no_edge" and len(inner.seen) == 1
    doctor, inner = wrapped("DIAGNOSIS READY: acute bronchitis", "Hm?", config=CDEGConfig())
    doctor.act({"text": "v"}, step_info(3, "fever,cough,crackles,consolidation"))
    (entry,) = finals(doctor)
    assert (entry["edge"], entry["coverage"], entry["kind"]) == ("R1", 0.8, "reappraise")


def matcher_graph() -> CDEGraph:
    atoms = [EvidenceAtom(concept="troponin i", direction="high"),
             EvidenceAtom(concept="asthma")]
    return CDEGraph(diagnoses=(DiagnosisNode(node_id="D1", label="x"),),
                    evidence=tuple(EvidenceNode(node_id=f"E{i}", atom=a)
                                   for i, a in enumerate(atoms, start=1)),
                    revisions=(RevisionEdge(edge_id="R1", source="D1", target="D1",
                                            missing=("E1", "E2")),))


def test_opposite_direction_and_past_history_never_match_semantically():
    """Lexical scores above the paper's 0.72 for opposite findings: "low troponin i" vs
    "high troponin i" 0.83, "history of asthma" vs "asthma" 1.0 (rapidfuzz
    token_set_ratio); with attribute matching neither matches, the same atoms match."""
    low = EvidenceAtom(concept="troponin i", direction="low")
    past = EvidenceAtom(concept="asthma", temporal="past")
    scores = LexicalSimilarity().similarity([low.text(), past.text()],
                                            ["high troponin i", "asthma"])
    assert scores[0, 0] > 0.72 and scores[1, 1] == 1.0
    strict = NodeMatcher(matcher_graph(), LexicalSimilarity())
    assert strict.match([low, past]) == []
    loose = NodeMatcher(matcher_graph(), LexicalSimilarity(), match_attributes=False)
    assert [m[1] for m in loose.match([low, past])] == ["E1", "E2"]
    unknown = EvidenceAtom(concept="asthma", temporal="unknown")  # compatible with both
    same = EvidenceAtom(concept="troponin i", direction="high")
    assert [(m[1], m[2]) for m in strict.match([same, unknown])] == [
        ("E1", "exact"), ("E2", "semantic")]


def test_observations_without_obs_id_are_all_taken():
    doctor, _ = wrapped("Q1", "Q2")
    first = step_info(1, "fever")
    second = step_info(2, "cough,crackles")
    for info in (first, second):
        for obs in info["new_observations"]:
            del obs["obs_id"]
    doctor.act({"text": "v"}, first)
    doctor.act({"text": "v"}, second)
    assert doctor.state.ids == {"E1", "E2", "E4"}


def test_nan_scores_never_win_the_arg_max():
    class NaNFirst(StubSimilarity):
        def similarity(self, queries, keys):
            out = np.full((len(queries), len(keys)), 0.9)
            out[:, 0] = np.nan
            return out

    matcher = NodeMatcher(make_graph(), NaNFirst())
    found = matcher.match([EvidenceAtom(concept="pyrexia")])
    assert [(m[1], m[2]) for m in found] == [("E2", "semantic")]


def test_global_guidance_is_opt_in_and_prompts_acquisition_only():
    """A proposal with no diagnosis node ("gout"): by default no intervention; with
    global_guidance the global best edge R1 (3/5 > 0.5) prompts the missing x-ray."""
    info = step_info(3, "fever,cough,crackles")
    doctor, inner = wrapped("DIAGNOSIS READY: gout")
    doctor.act({"text": "v"}, info)
    assert finals(doctor)[0]["reason"] == "no_diagnosis_node" and len(inner.seen) == 1
    config = CDEGConfig(coverage_threshold=LOW, global_guidance=True)
    doctor, inner = wrapped("DIAGNOSIS READY: gout", "REQUEST TEST: T4", config=config)
    assert doctor.act({"text": "v"}, step_info(3, "fever,cough,crackles")) == "REQUEST TEST: T4"
    (entry,) = finals(doctor)
    assert (entry["retrieval"], entry["kind"], entry["edge"]) == ("global", "acquire", "R1")
    # no acquisition left: reappraisal is not prompted from a global edge
    doctor, inner = wrapped("DIAGNOSIS READY: gout", config=config)
    doctor.act({"text": "v"}, step_info(3, "fever,cough,crackles", menu=[]))
    assert finals(doctor)[0]["kind"] == "no_action" and len(inner.seen) == 1
    # the proposal already is R1's D_t
    doctor, inner = wrapped("DIAGNOSIS READY: lobar pneumonia", config=config)
    doctor.act({"text": "v"}, step_info(3, "fever,cough,crackles"))
    assert finals(doctor)[0]["reason"] == "proposes_global_target"


def run_cdeg(tmp_path, graph, *extra):
    path = tmp_path / "graph.json"
    graph.save(path)
    out = tmp_path / f"run{len(list(tmp_path.iterdir()))}.jsonl"
    code = main(["run", "--env", "EGIP-Demo-v0", "--episodes", "1", "--quiet", "--out",
                 str(out), "--cdeg", str(path), *extra])
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()] \
        if out.exists() else []
    return code, lines


def test_cli_cdeg_options_lexical_thresholds_and_notes(tmp_path, capsys):
    graph = make_graph()  # R2 holds only missing evidence (E6); built by "llm:m"
    graph = graph.model_copy(update={"metadata": {"extractor": "llm:m"}})
    code, (line,) = run_cdeg(tmp_path, graph)
    assert code == 0
    config = line["doctor"]["config"]["cdeg"]
    assert (config["evidence_threshold"], config["diagnosis_threshold"]) == (0.9, 0.9)
    err = capsys.readouterr().err
    assert "built with the extractor llm:m" in err
    assert "1 of 2 revision edges" in err and "edge+context" in err
    code, (line,) = run_cdeg(tmp_path, graph, "--cdeg-coverage-basis", "edge+context",
                             "--cdeg-max-deferrals", "5", "--cdeg-evidence-threshold",
                             "0.8", "--cdeg-coverage-threshold", "0.5",
                             "--cdeg-global-guidance", "--cdeg-diagnosis-threshold", "0.7")
    config = line["doctor"]["config"]["cdeg"]
    assert {k: config[k] for k in ("coverage_basis", "max_deferrals", "evidence_threshold",
                                   "diagnosis_threshold", "coverage_threshold",
                                   "global_guidance")} == {
        "coverage_basis": "edge+context", "max_deferrals": 5, "evidence_threshold": 0.8,
        "diagnosis_threshold": 0.7, "coverage_threshold": 0.5, "global_guidance": True}
    assert "revision edges" not in capsys.readouterr().err
    code, _ = run_cdeg(tmp_path, graph, "--cdeg-coverage-threshold", "1")
    assert code == 2
    (msg,) = capsys.readouterr().err.strip().splitlines()
    assert msg.startswith("clinenv run: error: --cdeg-coverage-threshold") or \
        "--cdeg-coverage-threshold" in msg
