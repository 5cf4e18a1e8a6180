"""CDEG construction: extractors, verifiers, pairing, validation, consolidation, the
``clinenv cdeg`` command (CDEG "Counterfactual Diagnostic Evidence Graph Construction").

The synthetic fixture and its hand-checked expectations are in clinenv/testing/cdeg_logs.py.
"""

from __future__ import annotations

import hashlib
import json

import gymnasium as gym
import pytest

from clinenv.cli import main
from clinenv.llm.base import BackendError, Choice
from clinenv.llm.scripted import ScriptedChatModel
from clinenv.runlog import RunLogError
from clinenv.runs import RunSpec, run
from clinenv.testing.cdeg_logs import (
    Q1,
    LineJaccard,
    RuleVerifier,
    fixture_lines,
    log_line,
    obs_spec,
    write_log,
)
from clinenv.testing.data import MEDQA_FILE, skip_without_shared_data
from clinenv.wrappers.cdeg.atoms import EvidenceAtom
from clinenv.wrappers.cdeg.build import BuildConfig, build_graph
from clinenv.wrappers.cdeg.candidates import CandidateSets, MergedAtom
from clinenv.wrappers.cdeg.consolidate import DiagnosisIndex
from clinenv.wrappers.cdeg.extractors import DeterministicExtractor, LLMExtractor
from clinenv.wrappers.cdeg.graph import CDEGraph
from clinenv.wrappers.cdeg.validation import validate_pair
from clinenv.wrappers.cdeg.verifier import LexicalVerifier, LLMVerifier, parse_preference

EX = DeterministicExtractor()


def keys(atoms):
    return [a.key() for a in atoms]


def measurement(context, content, availability="recorded"):
    return {"source": "Measurement", "context": context, "content": content,
            "availability": availability}


def patient(question, reply):
    return {"source": "Patient", "context": question, "content": reply,
            "availability": "stated"}


# ------------------------------------------------------------------ extractors
def test_extractor_medqa_vital_signs_and_negated_review_of_systems():
    """MedQA case 1 (myasthenia gravis): vital signs within adult ranges are "normal";
    "denies ... chest pain, palpitations, shortness of breath, or recent infections"
    negates every item of the list."""
    data = skip_without_shared_data(MEDQA_FILE)
    with open(data / MEDQA_FILE, encoding="utf-8") as fh:
        osce = json.loads(fh.readline())["OSCE_Examination"]
    vitals = osce["Physical_Examination_Findings"]["Vital_Signs"]
    content = "\n".join(f"{k.replace('_', ' ')}: {v}" for k, v in vitals.items())
    assert keys(EX.extract(measurement("Vital Signs", content))) == [
        "temperature|present|current|normal|",        # 36.6 °C in [35, 38)
        "blood pressure|present|current|normal|",     # systolic 125 in [90, 140)
        "heart rate|present|current|normal|",         # 72 in [60, 100]
        "respiratory rate|present|current|normal|"]   # 16 in [12, 20]
    ros = osce["Patient_Actor"]["Review_of_Systems"]
    assert keys(EX.extract(patient("Any other symptoms?", ros))) == [
        "chest pain|absent|current||", "palpitations|absent|current||",
        "shortness of breath|absent|current||", "recent infections|absent|current||"]
    assert keys(EX.extract(measurement("Acetylcholine Receptor Antibodies (Blood Tests)",
                                       "Present (elevated)"))) == [
        "acetylcholine receptor antibodies|present|current|high|"]
    assert keys(EX.extract(measurement("Chest CT (Imaging)",
                                       "Findings: Normal, no thymoma or other masses "
                                       "detected."))) == [
        "chest ct|present|current|normal|", "thymoma|absent|current||",
        "other masses|absent|current||"]


def test_extractor_vital_directions_temporal_anatomy_and_yes_no():
    content = ("Temperature: 102.2 °F\nHeart Rate: 108 bpm\nOxygen Saturation: 91% on "
               "room air\nBlood Pressure: 85/50 mmHg")
    assert keys(EX.extract(measurement("Vital Signs", content))) == [
        "temperature|present|current|high|",   # 102.2 °F = 39 °C
        "heart rate|present|current|high|", "oxygen saturation|present|current|low|",
        "blood pressure|present|current|low|"]
    text = ("History of hypertension. I have a 2-week history of cough. WBC ↑; "
            "tenderness in the right lower quadrant.")
    assert keys(EX.extract(patient(Q1, text))) == [
        "hypertension|present|past||", "cough|present|current||",
        "wbc|present|current|high|", "tenderness|present|current||right lower quadrant"]
    assert keys(EX.extract(patient("Do you have chest pain?", "No."))) == [
        "chest pain|absent|current||"]
    assert keys(EX.extract(patient("Have you had any fever?", "Yes."))) == [
        "fever|present|current||"]


def test_unknown_is_not_evidence():
    """EGIP A.2: unavailable / not recorded results and "not sure" replies give no atom."""
    assert EX.extract(measurement("Urinalysis", "Pending", "unavailable")) == []
    assert EX.extract(measurement("MRI", None, "not_recorded")) == []
    assert EX.extract(patient(Q1, "I'm not sure.")) == []
    assert EX.extract(measurement("Sputum Culture", "Culture: result not available")) == []


# field-bug-reports B01
def test_llm_extractor_validates_repairs_and_falls_back():
    """A think block and a code fence around the JSON are ignored."""
    obs = patient(Q1, "Fever and cough.")
    good = ('<think>two findings</think>```json\n[{"concept": "Fever", "polarity": '
            '"present", "temporal": "current", "direction": null, "anatomy": null, '
            '"cui": "C0015967"}]\n```')
    ext = LLMExtractor(ScriptedChatModel([good]))
    assert ext.extract(obs) == [EvidenceAtom(concept="fever", cui="C0015967")]
    assert (ext.n_calls, ext.n_repairs, ext.n_fallbacks) == (1, 0, 0)
    model = ScriptedChatModel(['[{"concept": "fever", "polarity": "maybe"}]', good])
    ext = LLMExtractor(model)
    assert keys(ext.extract(obs)) == ["fever|present|current||"]
    assert (ext.n_calls, ext.n_repairs, ext.n_fallbacks) == (2, 1, 0)
    assert "polarity" in model.calls[1][0][-1]["content"]  # the repair names the field
    ext = LLMExtractor(ScriptedChatModel(["no idea"]))
    assert ext.extract(obs) == EX.extract(obs)
    assert (ext.n_calls, ext.n_repairs, ext.n_fallbacks) == (2, 1, 1)

    def down(messages, config, index):
        raise BackendError("server down", backend="scripted", detail="http_503")

    ext = LLMExtractor(ScriptedChatModel(down))
    assert ext.extract(obs) == EX.extract(obs) and ext.n_fallbacks == 1
    assert LLMExtractor(ScriptedChatModel([good])).extract(
        measurement("MRI", None, "not_recorded")) == []


# -------------------------------------------------------------------- verifiers
# field-bug-reports B07, B01, B05
@pytest.mark.parametrize("reply, expected", [
    ("FIRST", "first"), ("second", "second"), ("**Second**", "second"), ("First.", "first"),
    ("<think>maybe second?</think>\nFIRST", "first"), ("Reasoning...\nAnswer: SECOND", "second"),
    ("Firstly, the rash...", None), ("first or second", None), ("", None),
    ("<think>first</think>", None)])
def test_parse_preference_is_strict(reply, expected):
    """An unreadable verdict is never a preference; think blocks and markdown are read."""
    assert parse_preference(reply) == expected


def test_llm_verifier_prompt_seed_and_retry():
    fever = EvidenceAtom(concept="fever")
    rash = EvidenceAtom(concept="malar rash")
    model = ScriptedChatModel(["unsure", Choice(text="**SECOND**")])
    verifier = LLMVerifier(model, seed=7)
    assert verifier.prefer([fever, rash], "Parvovirus", "Lupus", exposed=[rash]) == "second"
    assert verifier.n_calls == 2 and verifier.n_unparsed == 1
    (first_msgs, first_cfg), (_, second_cfg) = model.calls
    user = first_msgs[1]["content"]
    assert "- fever\n- malar rash" in user and "FIRST: Parvovirus\nSECOND: Lupus" in user
    assert "Pay particular attention to this evidence:\n- malar rash" in user
    assert first_cfg.seed is not None and first_cfg.seed != second_cfg.seed
    again = ScriptedChatModel(["unsure", "FIRST"])
    LLMVerifier(again, seed=7).prefer([fever, rash], "Parvovirus", "Lupus", exposed=[rash])
    assert again.calls[0][1].seed == first_cfg.seed  # same prompt, same seed
    assert LLMVerifier(ScriptedChatModel(["?"]), retries=0).prefer([fever], "a", "b") is None


def test_lexical_verifier_support_and_first_listed_tie():
    v = LexicalVerifier()
    cxr = EvidenceAtom(concept="consistent with lobar pneumonia")
    no_igm = EvidenceAtom(concept="parvovirus b19 igm", polarity="absent")
    assert v.support("Lobar pneumonia", [cxr]) == 1.0
    assert v.support("Parvovirus B19 infection", [no_igm]) == -1.0  # "infection" generic
    assert v.support("Lobar pneumonia", [cxr], exposed=[cxr]) == 2.0
    assert v.prefer([cxr], "Pulmonary embolism", "Lobar pneumonia") == "second"
    assert v.prefer([], "Pulmonary embolism", "Lobar pneumonia") == "first"  # tie
    assert v.prefer([], "Lobar pneumonia", "Pulmonary embolism") == "first"
    lupus = LexicalVerifier(min_overlap=0.5).with_examples(
        {no_igm.key(): ["Anti-dsDNA positive, consistent with lupus"]})
    assert lupus.overlap("Systemic lupus erythematosus", no_igm) == 0.0  # 1/3 < 0.5
    # the default min_overlap (0.2, measured on demo runs) counts one word of three
    assert v.min_overlap == 0.2 and v.with_examples(lupus.examples).overlap(
        "Systemic lupus erythematosus", no_igm) == 1 / 3
    assert LexicalVerifier(min_overlap=0.3).with_examples(
        {no_igm.key(): ["consistent with lupus"]}).overlap("Systemic lupus", no_igm) == 0.5


def test_order_bias_alone_validates_nothing():
    """A verifier that always prefers the first-listed diagnosis shifts in one order only:
    the both-orders rule drops every candidate."""
    a, b = EvidenceAtom(concept="a"), EvidenceAtom(concept="b")
    e_s = {a.key(): MergedAtom(a)}
    e_t = {a.key(): MergedAtom(a), b.key(): MergedAtom(b)}

    class FirstListed:
        name = "first"

        def prefer(self, evidence, first, second, *, exposed=()):
            return "first"

    result = validate_pair("X", "Y", e_s, e_t, CandidateSets((b.key(),), (a.key(),), ()),
                           FirstListed())
    assert (result.missing, result.ignored, result.n_skipped) == ([], [], 2)
    lexical = validate_pair("X", "Y", e_s, e_t, CandidateSets((b.key(),), (a.key(),), ()),
                            LexicalVerifier())
    assert not lexical.promoting


# ------------------------------------------------------------------ the fixture
def build(tmp_path, config=None, verifier=None):
    path = write_log(tmp_path / "run.jsonl", fixture_lines())
    return build_graph([path], extractor=EX, verifier=verifier or RuleVerifier(),
                       similarity=LineJaccard(),
                       config=config or BuildConfig(pair_threshold=0.3))


def edge_view(graph):
    """Revisions as (source, target, {role: [atom texts]}, support, cases)."""
    label = {d.node_id: d.label for d in graph.diagnoses}
    text = {e.node_id: e.atom.text() for e in graph.evidence}
    return [(label[r.source], label[r.target],
             {role: [text[i] for i in getattr(r, role)]
              for role in ("missing", "ignored", "blocking", "context")}, r.support, r.cases)
            for r in graph.revisions]


def test_fixture_yields_exactly_the_hand_checked_graph(tmp_path):
    result = build(tmp_path)
    g = result.graph
    assert [(d.node_id, d.label, d.aliases) for d in g.diagnoses] == [
        ("D1", "pneumonia", ("Pneumonia",)), ("D2", "pulmonary embolism", ("Pulmonary embolism",)),
        ("D3", "subarachnoid hemorrhage", ("Subarachnoid hemorrhage", "Subarachnoid hemorrhage.")),
        ("D4", "migraine", ("Migraine",))]
    assert [(e.node_id, e.atom.key()) for e in g.evidence] == [
        ("E1", "filling defect|present|current||"), ("E2", "shortness of breath|present|current||"),
        ("E3", "neck stiffness|present|current||"), ("E4", "headache|present|current||"),
        ("E5", "photophobia|present|current||")]
    assert [(a.node_id, a.kind, a.name) for a in g.actions] == [
        ("A1", "exam", "CT Pulmonary Angiogram"), ("A2", "question", Q1),
        ("A3", "exam", "Neck Examination"), ("A4", "question", "Do you have photophobia?")]
    assert [(x.action, x.evidence, x.count) for x in g.action_evidence] == [
        ("A1", "E1", 1), ("A2", "E2", 3), ("A3", "E3", 1), ("A2", "E4", 3), ("A4", "E5", 1)]
    assert [(x.evidence, x.diagnosis, x.role, x.count) for x in g.evidence_diagnosis] == [
        ("E1", "D2", "missing", 2), ("E3", "D3", "blocking", 1), ("E5", "D4", "missing", 1)]
    assert [r.model_dump() for r in g.revisions] == [
        {"edge_id": "R1", "source": "D1", "target": "D2", "missing": ("E1",), "ignored": (),
         "blocking": (), "context": ("E2",), "support": 2, "cases": ("c1",)},
        {"edge_id": "R2", "source": "D3", "target": "D4", "missing": ("E5",), "ignored": (),
         "blocking": ("E3",), "context": ("E4",), "support": 1, "cases": ("c2",)}]
    r = result.report
    assert r["trajectories"] == {"success": 2, "failure": 4, "abstained": 1, "unscored": 0}
    assert (r["errors_skipped"], r["superseded_lines"]) == (0, 1)
    # τ_pre without the objective: line-Jaccard 1/3 for c1 reps 1, 3 and c2 rep 1, 1/2
    # for c2 rep 2 (fixture docstring)
    assert r["pairing"] == {"failed": 4, "no_success": 0, "below_threshold": 0, "pairs": 4,
                            "same_diagnosis": 0, "truncated": 0,
                            "scores": {"min": 0.3333, "median": 0.3333, "max": 0.5}}
    assert r["candidates"] == {"missing": 6, "ignored": 4, "blocking": 1}
    assert r["validated"] == {"missing": 3, "ignored": 0, "blocking": 1}
    assert (r["st_order_only"], r["pairs_promoting"], r["pairs_blocking_only"]) == (2, 3, 1)
    assert sum(sum(v.values()) for v in r["verifier_calls"].values()) == 27 == len(result.calls)
    assert r["verifier_calls"]["reappraisal"] == {"D_s": 4, "D_t": 2, "none": 0}
    meta = g.metadata
    assert meta["config"]["pair_threshold"] == 0.3 and meta["verifier"] == "rules"
    assert meta["similarity"] == "line-jaccard" and meta["extractor"] == "deterministic"
    assert meta["sources"] == [{"name": "run.jsonl",
                                "sha256": hashlib.sha256((tmp_path / "run.jsonl").read_bytes())
                                .hexdigest()}]


def test_order_reversal_drops_one_order_shift(tmp_path):
    """Exposing "shortness of breath" shifts Pneumonia -> Pulmonary embolism only when
    Pneumonia is listed first: asked in both orders, then dropped."""
    result = build(tmp_path)
    reapp = [(c.order, c.preferred) for c in result.calls if c.test == "reappraisal"
             and c.candidate == "shortness of breath|present|current||"]
    assert reapp == [("st", "D_t"), ("ts", "D_s")] * 2
    assert not any(r.ignored for r in result.graph.revisions)


def test_graph_json_round_trips(tmp_path):
    graph = build(tmp_path).graph
    path = graph.save(tmp_path / "graph.json")
    assert CDEGraph.load(path) == graph
    assert json.loads(path.read_text(encoding="utf-8"))["format"] == "clinenv.cdeg/1"


def test_pairing_threshold_is_respected(tmp_path):
    """Line-Jaccard scores: c1 pairs 1/3, c2 rep 1 1/3, c2 rep 2 1/2: at 0.4 only the
    last pair is kept, at 0.5 none (strictly greater than the threshold)."""
    r = build(tmp_path, BuildConfig(pair_threshold=0.4)).report
    assert r["pairing"]["pairs"] == 1 and r["pairing"]["below_threshold"] == 3
    assert build(tmp_path, BuildConfig(pair_threshold=0.5)).report["pairing"]["pairs"] == 0


def test_standing_error_line_and_unscored_verdict(tmp_path):
    lines = fixture_lines()[:-1]  # c1 rep 3 stays an error line
    lines.append(log_line("c2", 3, "Cluster headache", "unscored", [obs_spec("Patient", Q1,
                                                                              "Headache.")]))
    path = write_log(tmp_path / "run.jsonl", lines)
    r = build_graph([path], extractor=EX, verifier=RuleVerifier(), similarity=LineJaccard(),
                    config=BuildConfig(pair_threshold=0.3)).report
    assert r["trajectories"] == {"success": 2, "failure": 3, "abstained": 1, "unscored": 1}
    assert (r["errors_skipped"], r["superseded_lines"], r["pairing"]["pairs"]) == (1, 0, 3)


def test_ablation_switches(tmp_path):
    full = edge_view(build(tmp_path).graph)
    # C_I validated nothing here: without it the graph is the same and no reappraisal ran
    no_ignored = build(tmp_path, BuildConfig(pair_threshold=0.3, use_ignored=False))
    assert edge_view(no_ignored.graph) == full
    assert not any(c.test == "reappraisal" for c in no_ignored.calls)
    # without blocking: R2 loses "neck stiffness" and nothing else changes
    no_blocking = edge_view(build(tmp_path, BuildConfig(pair_threshold=0.3,
                                                        use_blocking=False)).graph)
    full[1][2]["blocking"] = []
    assert no_blocking == full
    # without missing: no completion test, and no pair is left with promoting evidence
    no_missing = build(tmp_path, BuildConfig(pair_threshold=0.3, use_missing=False))
    assert not any(c.test == "completion" for c in no_missing.calls)
    assert no_missing.graph.counts()["revisions"] == 0
    # without validation: every candidate kept, the verifier never asked
    verifier = RuleVerifier()
    raw = build(tmp_path, BuildConfig(pair_threshold=0.3, validate=False), verifier)
    assert verifier.calls == [] and raw.calls == ()
    assert edge_view(raw.graph)[0][2] == {
        "missing": ["high d-dimer", "filling defect"], "ignored": ["shortness of breath"],
        "blocking": [], "context": ["shortness of breath"]}


def test_diagnosis_index_merges_at_threshold():
    class Table:
        name = "table"

        def similarity(self, queries, keys):
            import numpy as np
            score = {("mi", "myocardial infarction"): 0.8, ("stemi", "myocardial infarction"): 0.6}
            return np.array([[score.get((q, k), 0.0) for k in keys] for q in queries])

    index = DiagnosisIndex(Table(), threshold=0.65)
    assert [index.assign(x) for x in ("Myocardial infarction", "MI", "STEMI", "**mi**")] == [
        0, 0, 1, 0]
    assert index.aliases[0] == ["Myocardial infarction", "MI", "**mi**"]


def test_corrupt_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(fixture_lines()[0]) + "\n{not json\n" + "\n", encoding="utf-8")
    with pytest.raises(RunLogError, match=r"bad\.jsonl, line 2"):
        build_graph([path], extractor=EX, verifier=RuleVerifier(), similarity=LineJaccard())
    broken = fixture_lines()[0]
    del broken["evidence"]
    write_log(path, [broken])
    with pytest.raises(RunLogError, match=r"line 1: field 'evidence.observations'"):
        build_graph([path], extractor=EX, verifier=RuleVerifier(), similarity=LineJaccard())


# ----------------------------------------------------------------------- CLI
def test_cli_build_inspect_and_refusals(tmp_path, capsys):
    log = write_log(tmp_path / "run.jsonl", fixture_lines())
    out = tmp_path / "graph.json"
    argv = ["cdeg", "build", str(log), "--out", str(out), "--no-validation",
            "--pair-threshold", "0", "--quiet"]
    assert main(argv) == 0
    assert "2 revisions" in capsys.readouterr().out
    graph = CDEGraph.load(out)
    assert [(r.source, r.target) for r in graph.revisions] == [("D1", "D2"), ("D3", "D4")]
    before = out.read_bytes()
    assert main(argv) == 2
    assert "use --force" in capsys.readouterr().err and out.read_bytes() == before
    assert main(["cdeg", "inspect", str(out), "--top", "1"]) == 0
    shown = capsys.readouterr().out
    assert "revisions: 2" in shown and "pneumonia -> pulmonary embolism  support 2" in shown
    assert "missing  filling defect  [via exam CT Pulmonary Angiogram]" in shown
    bad = tmp_path / "bad.jsonl"
    bad.write_text(log.read_text(encoding="utf-8").replace('"c2"', "oops", 1), encoding="utf-8")
    assert main(["cdeg", "build", str(bad), "--out", str(tmp_path / "g2.json")]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl, line 5" in err and len(err.strip().splitlines()) == 1
    assert main(["cdeg", "inspect", str(tmp_path / "missing.json")]) == 2


# --------------------------------------------------------------- real-data smoke
def test_demo_smoke_with_sampling_scripted_doctor(tmp_path):
    """Runs of a seeded sampling scripted doctor on the demo set (K = 8): pairs are
    found; with the lexical verifier nothing validates (the demo records never name the
    paired targets, so the before/after preferences are ties or already D_t); without
    validation the graph is non-empty, and both graphs save and load."""
    from clinenv.agents.scripted_doctor import ScriptedDoctor
    from clinenv.embeddings.lexical import LexicalSimilarity

    log = tmp_path / "demo.jsonl"
    run(lambda: gym.make("EGIP-Demo-v0"), lambda: ScriptedDoctor(exploration=0.5), RunSpec(out=log,
                                                                                           seed=0,
                                                                                           repetitions=8))
    for validate in (True, False):
        result = build_graph([log], extractor=EX, verifier=LexicalVerifier(),
                             similarity=LexicalSimilarity(),
                             config=BuildConfig(diagnosis_threshold=0.9, validate=validate))
        assert result.report["pairing"]["pairs"] > 0
        loaded = CDEGraph.load(result.graph.save(tmp_path / f"g{validate}.json"))
        assert loaded == result.graph
        if not validate:
            assert loaded.counts()["revisions"] > 0
