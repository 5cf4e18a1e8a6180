"""CDEG held out: the graph records its construction cases, the wrapper never uses an
edge mined from the case it is solving, warns once per run when evaluation cases are
construction cases, and names each intervention's edge and source cases in the log.

Unit tests use a hand-built graph (two edges D1 -> D2 of equal coverage, R1 mined from
case c1 with more support, R2 from c2) and the synthetic construction fixture of
clinenv/testing/cdeg_logs.py; the end-to-end tests build real graphs with ``clinenv cdeg
build`` from scripted-doctor runs of the demo set and run the README's sequences.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv.cli import main
from clinenv.runlog import read_run_log
from clinenv.testing.cdeg_logs import LineJaccard, RuleVerifier, fixture_lines, write_log
from clinenv.wrappers.cdeg.atoms import EvidenceAtom
from clinenv.wrappers.cdeg.build import BuildConfig, build_graph
from clinenv.wrappers.cdeg.extractors import DeterministicExtractor
from clinenv.wrappers.cdeg.graph import (
    ActionEvidenceEdge,
    ActionNode,
    CDEGraph,
    DiagnosisNode,
    EvidenceNode,
    RevisionEdge,
)
from clinenv.wrappers.cdeg.heldout import (
    ConstructionOverlapWarning,
    OverlapWarner,
    own_case_edges,
)
from clinenv.wrappers.cdeg.policy import CDEGConfig, CDEGDoctor

ATOMS = {"fever": EvidenceAtom(concept="fever"),
         "cough": EvidenceAtom(concept="productive cough"),
         "consolidation": EvidenceAtom(concept="consolidation")}


def make_graph(construction=None) -> CDEGraph:
    """R1 (support 3, case c1) and R2 (support 1, case c2): both D1 -> D2 with
    E_{s->t} = {E1 fever, E2 cough, E3 consolidation}; E3 missing, via exam A1."""
    edges = tuple(RevisionEdge(edge_id=f"R{k}", source="D1", target="D2", missing=("E3",),
                               ignored=("E1", "E2"), support=support, cases=cases)
                  for k, support, cases in ((1, 3, ("c1",)), (2, 1, ("c2",))))
    return CDEGraph(
        diagnoses=(DiagnosisNode(node_id="D1", label="acute bronchitis"),
                   DiagnosisNode(node_id="D2", label="lobar pneumonia")),
        evidence=tuple(EvidenceNode(node_id=f"E{i}", atom=ATOMS[k])
                       for i, k in enumerate(ATOMS, start=1)),
        actions=(ActionNode(node_id="A1", kind="exam", name="Chest X-Ray"),),
        action_evidence=(ActionEvidenceEdge(action="A1", evidence="E3"),),
        revisions=edges,
        metadata={} if construction is None else {"construction_cases": construction})


class StubExtractor:
    name = "stub"

    def extract(self, observation):
        return [ATOMS[k.strip()] for k in (observation.get("content") or "").split(",")
                if k.strip() in ATOMS]


class ZeroSimilarity:
    """Exact matches only."""

    name = "zero"

    def similarity(self, queries, keys):
        return np.zeros((len(queries), len(keys)))


class ListDoctor:
    name = "list"

    def __init__(self, *replies):
        self.replies = list(replies)

    def reset(self, *, seed=None):
        pass

    def act(self, observation, info):
        return self.replies.pop(0)


def info(case_id, dataset="demo", turn=2):
    return {"case_id": case_id, "dataset": dataset, "phase": "acquire", "turn": turn,
            "menu": [{"id": "T1", "name": "Chest X-Ray"}], "candidates": None,
            "new_observations": [{"obs_id": "O1", "source": "Patient", "turn": turn,
                                  "context": "q", "content": "fever,cough",
                                  "availability": "stated", "exam_id": None}]}


def assess(case_id, dataset="demo", graph=None, overlap=None):
    """One acquisition step where the doctor proposes D1; the wrapper's log."""
    graph = graph or make_graph()
    doctor = CDEGDoctor(ListDoctor("DIAGNOSIS READY: acute bronchitis", "REQUEST TEST: T1"),
                        graph, similarity=ZeroSimilarity(), extractor=StubExtractor(),
                        config=CDEGConfig(), overlap=overlap)
    doctor.reset(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConstructionOverlapWarning)
        action = doctor.act({"text": "view"}, info(case_id, dataset))
    return doctor, action


# ------------------------------------------------------------------ the wrapper
@pytest.mark.parametrize(("case_id", "dataset", "edge", "excluded"), [
    ("c3", "demo", "R1", []),      # not a source case: the better-supported R1
    ("c1", "demo", "R2", ["R1"]),  # R1 was mined from c1
    ("c2", "demo", "R1", ["R2"]),
])
def test_an_edge_mined_from_the_case_being_solved_is_never_retrieved(case_id, dataset, edge,
                                                                     excluded):
    doctor, action = assess(case_id, dataset)
    assert action == "REQUEST TEST: T1"  # the acquisition guidance was followed
    log = doctor.episode_log()
    own = [e for e in log if e["kind"] == "own_case_edges"]
    assert own == ([{"turn": 2, "phase": "acquire", "kind": "own_case_edges",
                     "case_id": case_id, "edges": excluded}] if excluded else [])
    (entry,) = [e for e in log if e["kind"] == "acquire"]
    # coverage |{E1, E2}| / |{E3, E1, E2}| = 2/3 for both edges; ties go to support
    assert (entry["edge"], entry["coverage"]) == (edge, 0.6667)
    assert entry["edge_cases"] == ["c2" if edge == "R2" else "c1"]
    (glob,) = [e for e in log if e["kind"] == "global"]
    assert (glob["edge"], glob["edge_cases"]) == (entry["edge"], entry["edge_cases"])
    assert doctor.excluded == tuple(excluded)
    assert not any(e.get("edge") in excluded for e in log)


def test_with_every_edge_mined_from_the_case_nothing_is_retrieved():
    graph = make_graph().model_copy(update={"revisions": tuple(
        e.model_copy(update={"cases": ("c1", "c2")}) for e in make_graph().revisions)})
    for case_id in ("c1", "c2"):
        doctor, action = assess(case_id, graph=graph)
        assert action == "DIAGNOSIS READY: acute bronchitis"  # the answer stands
        log = doctor.episode_log()
        assert log[0]["edges"] == ["R1", "R2"]
        (entry,) = [e for e in log if e["kind"] not in ("global", "own_case_edges")]
        assert (entry["kind"], entry["reason"], entry["edge"], entry["edge_cases"]) == (
            "none", "no_edge", None, None)
    # the next episode of another case gets the edges back
    doctor, _ = assess("c9", graph=graph)
    assert doctor.excluded == ()


def test_the_construction_record_decides_which_dataset_an_edge_came_from():
    record = {"demo": ["c1", "c2"], "other": ["c7"]}
    graph = make_graph(record)
    edges = graph.revisions
    construction = {d: frozenset(v) for d, v in record.items()}
    assert own_case_edges(edges, "demo", "c1", construction) == [0]
    assert own_case_edges(edges, "other", "c1", construction) == []  # c1 of another file
    assert own_case_edges(edges, "", "c1", construction) == [0]      # unknown: by id
    assert own_case_edges(edges, "medqa", "c2", None) == [1]         # no record: by id
    doctor, _ = assess("c1", "other", graph=graph)
    assert doctor.excluded == ()
    assert [e["edge"] for e in doctor.episode_log() if e["kind"] == "acquire"] == ["R1"]


def test_the_overlap_warning_comes_once_per_shared_warner():
    graph = make_graph({"demo": ["c1", "c2", "c5"]})
    shared = OverlapWarner(graph, name="g.json")
    doctors = [CDEGDoctor(ListDoctor(*["REQUEST TEST: T1"] * 4), graph,
                          similarity=ZeroSimilarity(), extractor=StubExtractor(),
                          overlap=shared) for _ in range(2)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for case_id in ("c9", "c5", "c1", "c2"):
            for doctor in doctors:
                doctor.reset(seed=0)
                doctor.act({"text": "v"}, info(case_id))
    overlap = [w for w in caught if issubclass(w.category, ConstructionOverlapWarning)]
    assert len(overlap) == 1
    message = str(overlap[0].message)
    assert message.startswith("g.json: case 'c5' of demo is one of the 3 construction cases")
    assert "not a held-out evaluation" in message and "clinenv data split" in message
    assert shared.n_overlapping == 3
    # a wrapper without a shared warner warns for itself; a held-out case never
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        own = CDEGDoctor(ListDoctor("REQUEST TEST: T1"), graph, similarity=ZeroSimilarity(),
                         extractor=StubExtractor())
        own.reset(seed=0)
        own.act({"text": "v"}, info("c4"))
    assert not [w for w in caught if issubclass(w.category, ConstructionOverlapWarning)]


def test_a_graph_without_the_record_is_judged_by_its_edges_source_cases():
    graph = make_graph()
    said = []
    warner = OverlapWarner(graph, emit=said.append)
    assert not warner.check("demo", "c3")
    assert warner.check("medqa", "c2")
    assert warner.check("demo", "c1")
    assert len(said) == 1 and "a source case of its revision edges" in said[0]


def test_a_malformed_construction_record_is_an_error_naming_the_field(tmp_path, capsys):
    graph = make_graph().model_copy(update={"metadata": {"construction_cases": "c1"}})
    with pytest.raises(ValueError, match="'construction_cases' must map each dataset"):
        OverlapWarner(graph)
    graph.save(tmp_path / "g.json")
    assert main(["run", "--quiet", "--env", "EGIP-Demo-v0", "--episodes", "1",
                 "--cdeg", str(tmp_path / "g.json"), "--out", str(tmp_path / "r.jsonl")]) == 2
    assert "'construction_cases' must map each dataset" in capsys.readouterr().err


# ------------------------------------------------------------------ construction
def _fixture_with_c3():
    """The fixture plus case c3: c2's success and its neck-stiffness failure, so c3's
    only pair validates blocking evidence alone (RuleVerifier rule 1) and joins R2."""
    lines = fixture_lines()
    extra = []
    for line in lines:
        if line["case_id"] == "c2" and line["repetition"] in (0, 1):
            extra.append(json.loads(json.dumps(line)) | {"case_id": "c3"})
    return lines[:-1] + extra + lines[-1:]


def test_build_records_the_construction_cases_and_every_source_case_of_an_edge(tmp_path):
    config = BuildConfig(pair_threshold=0.3)
    plain = build_graph([write_log(tmp_path / "a.jsonl", fixture_lines())],
                        extractor=DeterministicExtractor(), verifier=RuleVerifier(),
                        similarity=LineJaccard(), config=config)
    assert plain.graph.metadata["construction_cases"] == {"synthetic": ["c1", "c2"]}
    assert plain.report["construction_cases"] == 2
    assert [(e.edge_id, e.support, e.cases) for e in plain.graph.revisions] == [
        ("R1", 2, ("c1",)), ("R2", 1, ("c2",))]
    path = write_log(tmp_path / "b.jsonl", _fixture_with_c3())
    result = build_graph([path], extractor=DeterministicExtractor(), verifier=RuleVerifier(),
                         similarity=LineJaccard(), config=config)
    graph = result.graph
    assert graph.metadata["construction_cases"] == {"synthetic": ["c1", "c2", "c3"]}
    # c3 adds only blocking evidence to R2: no support, but it is a source case
    assert result.report["pairs_blocking_only"] == 2
    assert [(e.edge_id, e.support, e.cases) for e in graph.revisions] == [
        ("R1", 2, ("c1",)), ("R2", 1, ("c2", "c3"))]
    out = tmp_path / "g.json"
    graph.save(out)
    assert CDEGraph.load(out).metadata["construction_cases"] == {
        "synthetic": ["c1", "c2", "c3"]}


# ------------------------------------------------------------------ end to end (CLI)
@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


CONSTRUCT = ["run", "--quiet", "--env", "EGIP-Demo-v0", "--exploration", "0.5",
             "--exam-budget", "3", "--repetitions", "6", "--premature-diagnosis", "decide"]
EVALUATE = ["run", "--quiet", "--env", "EGIP-Demo-v0", "--exam-budget", "3",
            "--premature-diagnosis", "decide"]
CDEG = ["--cdeg", "graph.json", "--cdeg-coverage-basis", "edge+context"]


def _by_case(path):
    return {x["case_id"]: x for x in read_run_log(path).lines}


def _warnings(err):
    return [x for x in err.splitlines() if x.startswith("warning:")]


def test_the_edge_of_demo_12_is_not_used_on_demo_12(workdir, capsys):
    """The earlier README sequence (construct and evaluate on all 17 demo cases): its one
    edge comes from demo-12 only, so the wrapped run on demo-12 skips it and ends as the
    plain run does; the run warns once, even with concurrent workers."""
    assert main([*CONSTRUCT, "--out", "construct.jsonl"]) == 0
    assert main(["cdeg", "build", "construct.jsonl", "--out", "graph.json"]) == 0
    graph = CDEGraph.load(workdir / "graph.json")
    assert [(e.edge_id, e.cases) for e in graph.revisions] == [("R1", ("demo-12",))]
    assert graph.metadata["construction_cases"] == {
        "demo": [f"demo-{i:02d}" for i in range(1, 18)]}
    (workdir / "pick.txt").write_text("demo-01\ndemo-12\ndemo-14\n")
    capsys.readouterr()
    assert main([*EVALUATE, *CDEG, "--cases", "pick.txt", "--concurrency", "2",
                 "--out", "cdeg.jsonl"]) == 0
    found = _warnings(capsys.readouterr().err)
    assert len(found) == 1
    assert found[0].startswith("warning: graph.json: case 'demo-01' of demo is one of the 17 "
                               "construction cases the graph was built from")
    assert main([*EVALUATE, "--cases", "pick.txt", "--out", "plain.jsonl"]) == 0
    cdeg, plain = _by_case(workdir / "cdeg.jsonl"), _by_case(workdir / "plain.jsonl")
    for case_id in ("demo-01", "demo-12", "demo-14"):
        assert (cdeg[case_id]["answer"], cdeg[case_id]["verdict"]) == (
            plain[case_id]["answer"], plain[case_id]["verdict"])
    log = cdeg["demo-12"]["doctor_log"]
    assert log[0] == {"turn": 0, "phase": "acquire", "kind": "own_case_edges",
                      "case_id": "demo-12", "edges": ["R1"]}
    assert not [e for e in log if e["kind"] in ("acquire", "reappraise")]
    assert plain["demo-12"]["verdict"] != "correct"


def test_an_edge_from_another_case_intervenes_and_the_log_names_its_source(workdir, capsys):
    """The same graph with R1 credited to a case outside the evaluation (demo-99, and
    demo-12 out of the construction cases): on demo-12 the wrapper now asks for the
    vesicle swab PCR, the doctor answers herpes zoster, and the log names R1 and
    demo-99; demo-12 is no construction case, so no warning."""
    assert main([*CONSTRUCT, "--out", "construct.jsonl"]) == 0
    assert main(["cdeg", "build", "construct.jsonl", "--out", "built.json"]) == 0
    built = CDEGraph.load(workdir / "built.json")
    others = [f"demo-{i:02d}" for i in range(1, 18) if i != 12] + ["demo-99"]
    graph = built.model_copy(update={
        "revisions": tuple(e.model_copy(update={"cases": ("demo-99",)})
                           for e in built.revisions),
        "metadata": {**built.metadata, "construction_cases": {"demo": others}}})
    graph.save(workdir / "graph.json")
    (workdir / "ev.txt").write_text("demo-12\n")
    capsys.readouterr()
    assert main([*EVALUATE, *CDEG, "--cases", "ev.txt", "--out", "cdeg.jsonl"]) == 0
    assert not _warnings(capsys.readouterr().err)
    line = _by_case(workdir / "cdeg.jsonl")["demo-12"]
    (entry,) = [e for e in line["doctor_log"] if e["kind"] == "acquire"]
    assert (entry["edge"], entry["edge_cases"]) == ("R1", ["demo-99"])
    assert entry["action"]["name"].startswith("Vesicle Swab PCR")
    assert line["verdict"] == "correct"
    assert not [e for e in line["doctor_log"] if e["kind"] == "own_case_edges"]


def test_the_readme_held_out_sequence_on_the_demo_set(workdir, capsys):
    """README, "CDEG" (offline): split -> build on construction -> run on evaluation ->
    compare. The 9 construction cases give no validated edge (cdeg build exits 1), so
    the wrapped and plain doctors agree on the 8 held-out cases: 0.00 % each."""
    assert main(["data", "split", "demo", "--construction", "0.5", "--seed", "0",
                 "--out", "splits/demo"]) == 0
    assert main([*CONSTRUCT, "--cases", "splits/demo/construction.txt",
                 "--out", "runs/construct.jsonl"]) == 0
    assert main(["cdeg", "build", "runs/construct.jsonl", "--out", "graph.json"]) == 1
    err = capsys.readouterr().err
    assert "graph.json has 0 revisions: nothing validated" in err
    graph = CDEGraph.load(workdir / "graph.json")
    construction = (workdir / "splits/demo/construction.txt").read_text().split()
    assert graph.metadata["construction_cases"] == {"demo": construction}
    evaluation = ["--cases", "splits/demo/evaluation.txt"]
    assert main([*EVALUATE, *evaluation, "--out", "runs/vanilla.jsonl"]) == 0
    assert main([*EVALUATE, *evaluation, *CDEG, "--out", "runs/cdeg.jsonl"]) == 0
    # held out: no overlap warning; only the one line that the graph cannot intervene
    assert _warnings(capsys.readouterr().err) == [
        "warning: --cdeg graph.json has 0 revisions: the CDEG wrapper never intervenes, so "
        "this run is the unwrapped doctor's; `clinenv cdeg build` says which stage left "
        "the graph empty"]
    assert main(["compare", "runs/vanilla.jsonl", "runs/cdeg.jsonl", "--out-dir",
                 "reports"]) == 0
    out = capsys.readouterr().out
    row = next(x for x in out.splitlines() if x.startswith("demo "))
    assert row.split()[:8] == ["demo", "scripted+cdeg", "scripted", "8", "0.00", "0.00",
                               "+0.00", "[0.00,"]
