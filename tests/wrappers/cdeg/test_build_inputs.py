"""CDEG construction inputs and graph files: native run logs (AgentClinic answers and
abstentions), pairing text, empty builds and their exit codes, the verifier's counters,
graph files that are not graphs, reproducible graph bytes."""

from __future__ import annotations

import hashlib
import json
import os

import gymnasium as gym
import numpy as np
import pytest

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv.agents.scripted_doctor import ScriptedDoctor
from clinenv.cli import main
from clinenv.embeddings.similarity import truncated_texts
from clinenv.llm.base import Choice
from clinenv.llm.scripted import ScriptedChatModel
from clinenv.runlog import RunLogError
from clinenv.runs import RunSpec, run
from clinenv.testing.cdeg_logs import (
    LineJaccard,
    RuleVerifier,
    fixture_lines,
    log_line,
    obs_spec,
    write_log,
)
from clinenv.wrappers.baselines.experience import load_trajectories as memory_trajectories
from clinenv.wrappers.cdeg.atoms import EvidenceAtom
from clinenv.wrappers.cdeg.build import BuildConfig, build_graph
from clinenv.wrappers.cdeg.extractors import DeterministicExtractor
from clinenv.wrappers.cdeg.graph import CDEGraph, GraphFileError
from clinenv.wrappers.cdeg.pairing import pair_trajectories
from clinenv.wrappers.cdeg.trajectories import load_trajectories
from clinenv.wrappers.cdeg.verifier import LLMVerifier

EX = DeterministicExtractor()


def build(path, **config):
    return build_graph([path], extractor=EX, verifier=RuleVerifier(), similarity=LineJaccard(),
                       config=BuildConfig(**{"pair_threshold": 0.3, **config}))


# ------------------------------------------------------------- native run logs (M1)
@pytest.fixture(scope="module")
def agentclinic_log(tmp_path_factory):
    """Real AgentClinic-Demo-v0 run-log lines of a sampling scripted doctor (3 cases, K=4):
    native lines log the whole utterance and score an abstention "wrong"."""
    path = tmp_path_factory.mktemp("ac") / "ac.jsonl"
    run(lambda: gym.make("AgentClinic-Demo-v0"),
        lambda: ScriptedDoctor(n_questions=5, exam_budget=2, exploration=0.5), RunSpec(out=path,
                                                                                       episodes=3,
                                                                                       repetitions=4,
                                                                                       seed=1))
    return path


def test_native_answers_are_parsed_and_abstentions_are_not_failures(agentclinic_log):
    lines = [json.loads(x) for x in agentclinic_log.read_text(encoding="utf-8").splitlines()]
    assert all(ln["answer"].startswith("DIAGNOSIS READY: ") for ln in lines)
    assert any(ln["abstained"] and ln["verdict"] == "wrong" for ln in lines)
    loaded = load_trajectories([agentclinic_log]).trajectories
    # expected from the lines themselves: the payload after the marker; an abstention
    # (flag set) is "abstained" whatever its verdict
    expected = [(ln["answer"].split(": ", 1)[1],
                 "abstained" if ln["abstained"] else
                 {"correct": "success", "wrong": "failure"}[ln["verdict"]]) for ln in lines]
    assert [(t.answer, t.outcome) for t in loaded] == expected
    result = build_graph([agentclinic_log], extractor=EX, verifier=RuleVerifier(),
                         similarity=LineJaccard())
    assert result.report["trajectories"]["abstained"] == sum(ln["abstained"] for ln in lines)
    assert all(d.label != "undetermined" and "diagnosis ready" not in d.label
               for d in result.graph.diagnoses)


def test_unfinished_native_episode_is_an_abstention_and_a_bad_answer_names_its_line(
        agentclinic_log, tmp_path):
    lines = [json.loads(x) for x in agentclinic_log.read_text(encoding="utf-8").splitlines()]
    success = next(ln for ln in lines if ln["verdict"] == "correct")
    unfinished = dict(success, repetition=7, answer=None, verdict="wrong", abstained=False,
                      correct=False)
    empty = dict(success, repetition=8, answer="DIAGNOSIS READY:", verdict="wrong",
                 abstained=False, correct=False)
    marks = dict(success, repetition=9, answer="DIAGNOSIS READY: **", verdict="wrong",
                 abstained=False, correct=False)
    path = write_log(tmp_path / "native.jsonl", [success, unfinished, empty, marks])
    assert [t.outcome for t in load_trajectories([path]).trajectories] == [
        "success", "abstained", "abstained", "abstained"]
    build_graph([path], extractor=EX, verifier=RuleVerifier(), similarity=LineJaccard())


def test_a_diagnosis_that_cannot_be_indexed_names_its_file_and_line(tmp_path, monkeypatch):
    """Should a parsed diagnosis still be empty once normalized, the build names the run
    log and line instead of a bare "cannot index an empty diagnosis"."""
    from clinenv.wrappers.cdeg import consolidate

    def refuse(self, answer):
        raise ValueError("cannot index an empty diagnosis")

    monkeypatch.setattr(consolidate.DiagnosisIndex, "assign", refuse)
    path = write_log(tmp_path / "run.jsonl", fixture_lines())
    with pytest.raises(RunLogError, match=r"run\.jsonl, line 2: field 'answer' 'Pneumonia': "
                                          "cannot index an empty diagnosis"):
        build(path)


def test_bad_repetition_names_file_line_and_field(tmp_path):
    lines = fixture_lines()
    lines[2]["repetition"] = "x"
    path = write_log(tmp_path / "rep.jsonl", lines)
    with pytest.raises(RunLogError, match=r"rep\.jsonl, line 3: field 'repetition' is 'x'"):
        load_trajectories([path])


def test_baselines_read_trajectories_with_the_construction_loader(tmp_path):
    """The fixture's c1 rep 3 is an error line retried at the end of the file: the
    memory holds the retry only (7 episodes, not 8 lines), with the same outcomes."""
    path = write_log(tmp_path / "run.jsonl", fixture_lines())
    memory = memory_trajectories([path])
    assert len(memory) == 7
    assert [(t.case_id, t.repetition, t.outcome) for t in memory] == [
        (t.case_id, t.repetition, t.outcome) for t in load_trajectories([path]).trajectories]


# ----------------------------------------------------------------- pairing (M2)
def test_pairing_text_leaves_out_the_objective_and_nan_never_wins(tmp_path):
    path = write_log(tmp_path / "run.jsonl", fixture_lines())
    loaded = load_trajectories([path]).trajectories
    assert all("Breathless" not in t.history and "Headache for a day" not in t.history
               for t in loaded)
    assert loaded[0].history == ('Patient, asked "What brings you in today?": Shortness of '
                                 'breath.\nMeasurement D-Dimer: Elevated\nMeasurement CT '
                                 'Pulmonary Angiogram: Filling defect.')

    class NaNFirst:
        name = "nan-first"

        def similarity(self, queries, keys):
            out = np.full((len(queries), len(keys)), 0.9)
            out[:, 0] = np.nan
            return out

    c2 = [t for t in loaded if t.case_id == "c2"]
    extra = [t for t in c2 if t.outcome == "success"][0]
    twin = type(extra)(**{**extra.__dict__, "repetition": 5, "source": "x:9"})
    result = pair_trajectories([*c2, twin], NaNFirst(), threshold=0.5)
    assert [p.success.repetition for p in result.pairs] == [5, 5]  # not the NaN column
    assert result.best_scores == (0.9, 0.9)


def test_pair_similarity_is_separate_and_truncation_is_reported(tmp_path):
    path = write_log(tmp_path / "run.jsonl", fixture_lines())

    class Truncating(LineJaccard):
        name = "truncating"

        class encoder:  # noqa: N801  (an encoder stand-in with a truncation count)
            truncated = 3

    class Never:
        name = "never"

        def similarity(self, queries, keys):
            raise AssertionError("pairing must use pair_similarity")

    result = build_graph([path], extractor=EX, verifier=RuleVerifier(), similarity=Never(),
                         pair_similarity=Truncating(),
                         config=BuildConfig(pair_threshold=0.9))
    assert result.report["pairing"]["truncated"] == 3 == truncated_texts(Truncating())
    assert result.graph.metadata["pair_similarity"] == "truncating"
    assert truncated_texts(LineJaccard()) == 0


# ------------------------------------------------------------- empty builds (M5)
def test_cli_build_without_revisions_writes_the_graph_warns_and_exits_1(tmp_path, capsys):
    log = write_log(tmp_path / "run.jsonl", fixture_lines())
    out = tmp_path / "g.json"
    assert main(["cdeg", "build", str(log), "--out", str(out), "--quiet",
                 "--pair-threshold", "1"]) == 1
    err = capsys.readouterr().err
    assert "0 revisions: no pair above the pairing threshold" in err
    assert CDEGraph.load(out).counts()["revisions"] == 0  # written all the same
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    assert main(["cdeg", "build", str(empty), "--out", str(tmp_path / "e.json"),
                 "--quiet"]) == 1
    assert "0 revisions: no trajectories" in capsys.readouterr().err
    only_failures = write_log(tmp_path / "f.jsonl", [ln for ln in fixture_lines()
                                                     if ln["verdict"] != "correct"])
    assert main(["cdeg", "build", str(only_failures), "--out", str(tmp_path / "f.json"),
                 "--quiet"]) == 1
    assert "no case with both a success and a failure" in capsys.readouterr().err


def test_cli_min_overlap_and_summary_counts(tmp_path, capsys):
    log = write_log(tmp_path / "run.jsonl", fixture_lines())
    out = tmp_path / "g.json"
    assert main(["cdeg", "build", str(log), "--out", str(out), "--quiet",
                 "--min-overlap", "0.5", "--pair-threshold", "0.3"]) in (0, 1)
    shown = capsys.readouterr().out
    assert "4 kept of 4 failed" in shown and "; scores min 0." in shown
    assert CDEGraph.load(out).metadata["verifier"] == "lexical(min_overlap=0.5,exposed_weight=2)"
    assert main(["cdeg", "build", str(log), "--out", str(tmp_path / "x.json"),
                 "--verifier-max-tokens", "8"]) == 2
    assert "--verifier-max-tokens is used only with --verifier llm" in capsys.readouterr().err


# ------------------------------------------------------------- the verifier (S3)
# field-bug-reports B04
def test_llm_verifier_counts_truncated_replies():
    """A reply cut by max_tokens is counted, and read only if it
    still parses."""
    atom = EvidenceAtom(concept="fever")
    model = ScriptedChatModel([Choice("FIR", "length"), Choice("FIRST", "length")])
    verifier = LLMVerifier(model)
    assert verifier.prefer([atom], "a", "b") == "first"
    assert (verifier.n_calls, verifier.n_truncated, verifier.n_unparsed) == (2, 2, 1)
    assert model.calls[0][1].max_tokens == 64
    with pytest.raises(ValueError, match="max_tokens"):
        LLMVerifier(model, max_tokens=0)


def test_cli_build_fails_in_one_line_when_every_verifier_call_fails(tmp_path, capsys,
                                                                   fake_server):  # noqa: F811
    """The fake server answers "ok" to every comparison: no call gives a preference."""
    log = write_log(tmp_path / "run.jsonl", fixture_lines())
    out = tmp_path / "g.json"
    code = main(["cdeg", "build", str(log), "--out", str(out), "--quiet", "--verifier", "llm",
                 "--model", "fake-model", "--base-url", fake_server.base_url,
                 "--pair-threshold", "0.3", "--max-retries", "0"])
    assert code == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert "every one of" in line and "verifier calls failed" in line
    assert "unreadable replies" in line and out.exists()
    assert "verifier      " in captured.out and "n_unparsed" not in captured.out


# -------------------------------------------------------------- graph files (M3, S6)
# field-bug-reports B18
def test_non_utf8_graph_file_names_the_file_and_byte(tmp_path, capsys):
    """A file that is not UTF-8 is a GraphFileError naming the file
    and the bad byte, and `clinenv run --cdeg` refuses it in one line."""
    binary = tmp_path / "bin.json"
    binary.write_bytes(b'{"format": "clinenv.cdeg/1", "x": "\x89PNG"}')
    with pytest.raises(GraphFileError, match=r"bin\.json: not UTF-8 text \(byte 0x89 at "
                                             r"offset 35\)"):
        CDEGraph.load(binary)
    code = main(["run", "--env", "EGIP-Demo-v0", "--episodes", "1", "--quiet",
                 "--out", str(tmp_path / "r.jsonl"), "--cdeg", str(binary)])
    assert code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "bin.json" in line and "byte 0x89" in line


def test_a_run_log_given_as_graph_says_so(tmp_path):
    log = write_log(tmp_path / "run.jsonl", fixture_lines())
    with pytest.raises(GraphFileError, match=r"run\.jsonl: this is a run log "
                                             r"\(clinenv\.runlog/1\), not a CDEG graph"):
        CDEGraph.load(log)
    one = write_log(tmp_path / "one.jsonl", fixture_lines()[:1])  # a single line parses
    with pytest.raises(GraphFileError, match="this is a run log"):
        CDEGraph.load(one)


def test_graph_bytes_do_not_depend_on_the_log_path_and_mode_follows_umask(tmp_path,
                                                                          monkeypatch):
    path = write_log(tmp_path / "run.jsonl", fixture_lines())
    absolute = build(path).graph.save(tmp_path / "a.json")
    monkeypatch.chdir(tmp_path)
    relative = build("run.jsonl").graph.save(tmp_path / "r.json")
    assert absolute.read_bytes() == relative.read_bytes()
    mask = os.umask(0o027)
    try:
        saved = build(path).graph.save(tmp_path / "m.json")
    finally:
        os.umask(mask)
    assert saved.stat().st_mode & 0o777 == 0o640  # 0o666 & ~0o027, not mkstemp's 0o600
    assert hashlib.sha256(saved.read_bytes()).hexdigest() == hashlib.sha256(
        absolute.read_bytes()).hexdigest()


def test_st_order_only_counts_shifts_with_d_s_listed_first(tmp_path):
    """The fixture's rule 3 shifts the reappraisal of "shortness of breath" only with
    Pneumonia listed first, in c1's two pairs: 2 (the D_t-first order is then asked and
    fails)."""
    report = build(write_log(tmp_path / "run.jsonl", fixture_lines())).report
    assert report["st_order_only"] == 2 and "one_order_only" not in report


def test_fixture_spec_helpers_still_round_trip(tmp_path):
    line = log_line("c9", 0, "X", "correct", [obs_spec("Patient", "Q", "Yes.")])
    assert load_trajectories([write_log(tmp_path / "l.jsonl", [line])]).trajectories[
        0].history == 'Patient, asked "Q": Yes.'
