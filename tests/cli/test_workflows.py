"""Command-line workflows a new user follows: method labels of native and
ablation runs, the offline CDEG sequence (``--exploration``, ``--exam-budget``), the
one-line refusals and hints, and the help texts."""

from __future__ import annotations

import json

import pytest

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv.cli import main
from clinenv.evaluation.labels import environment_variant, method_label
from clinenv.evaluation.runs import load_runs
from clinenv.runlog import read_run_log
from clinenv.testing.fake_responders import FALLBACK_QUESTION, clinician_responder
from clinenv.testing.fake_server import FakeChatServer


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(*args: str) -> int:
    return main(["run", "--quiet", "--episodes", "3", *args])


def _error(capsys) -> str:
    """The stderr of the last command, asserting it is one line."""
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


# ------------------------------------------------------------------ labels (finding 1)
def _line(env_id: str, **kwargs) -> dict:
    return {"env_id": env_id, "env_spec": {"id": env_id, "kwargs": kwargs},
            "doctor": {"name": "scripted", "config": {}}}


@pytest.mark.parametrize(("line", "label"), [
    (_line("EGIP-Demo-v0", dataset="demo"), "scripted"),
    (_line("EGIP-Demo-v0", dataset="demo", preset="egip"), "scripted"),
    (_line("AgentClinic-Demo-v0", dataset="demo", preset="agentclinic"),
     "scripted@agentclinic"),
    (_line("AgentClinic-Demo-v0"), "scripted@agentclinic"),  # the id's own preset
    ({"env_id": "MedAgentSim-Demo-v0", "doctor": {"name": "scripted"}},
     "scripted@medagentsim"),  # no env_spec at all
    (_line("EGIP-Demo-v0", preset="egip-no-menu"), "scripted@egip-no-menu"),
    (_line("EGIP-Demo-v0", protocol="medagentsim"), "scripted@medagentsim"),
    (_line("EGIP-Demo-v0", protocol="egip", preset="egip-native-measurement"),
     "scripted@egip-native-measurement"),
])
def test_method_label_adds_the_protocol_or_preset_unless_plain_egip(line, label):
    assert method_label(line) == label
    assert environment_variant(line) == (label.split("@")[1] if "@" in label else None)


def test_eval_and_compare_keep_native_and_ablation_runs_apart(workdir, capsys):
    """Finding 1: EGIP, AgentClinic and no-menu runs of the scripted doctor on the demo
    set used to collide as 'scripted'; now each has its own label, compare pairs the
    native run with the EGIP run without LABEL=, and LABEL=path still wins."""
    assert _run("--env", "EGIP-Demo-v0", "--out", "egip.jsonl") == 0
    assert _run("--env", "AgentClinic-Demo-v0", "--out", "ac.jsonl") == 0
    assert _run("--env", "EGIP-Demo-v0", "--preset", "egip-no-menu", "--out", "nm.jsonl") == 0
    runs = load_runs(["egip.jsonl", "ac.jsonl", "nm.jsonl"])
    assert [r.label for r in runs] == ["scripted", "scripted@agentclinic",
                                      "scripted@egip-no-menu"]
    assert [r.label for r in load_runs(["mine=ac.jsonl"])] == ["mine"]
    assert main(["eval", "egip.jsonl", "ac.jsonl", "nm.jsonl", "--out-dir", "rep"]) == 0
    capsys.readouterr()
    assert main(["compare", "egip.jsonl", "ac.jsonl", "--out-dir", "rep"]) == 0
    rows = (workdir / "rep" / "comparison.csv").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 2 and ",scripted@agentclinic,scripted," in rows[1]


# ------------------------------------------------ offline CDEG sequence (findings 2, 3)
def test_exploration_names_the_doctor_and_is_refused_with_other_doctors(workdir, capsys):
    assert _run("--env", "EGIP-Demo-v0", "--exploration", "0.5") == 0
    (path,) = (workdir / "runs").iterdir()
    assert path.name == "EGIP-Demo-v0_scripted-explore0.5_seed0.jsonl"
    line = read_run_log(path).lines[0]
    assert line["doctor"]["name"] == "scripted-explore0.5"
    assert line["doctor"]["config"]["exploration"] == 0.5
    capsys.readouterr()
    assert _run("--doctor", "llm", "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                "--exploration", "0.5") == 2
    assert "--exploration is used only with --doctor scripted" in _error(capsys)
    with pytest.raises(SystemExit) as exit_info:
        _run("--exploration", "1.5")
    assert exit_info.value.code == 2


def test_cdeg_built_and_run_on_the_same_cases_skips_each_cases_own_edges(workdir, capsys):
    """Construction and wrapped run on all 17 demo cases (not held out): the graph's one
    revision comes from demo-12, so the wrapper never uses it there and no case changes
    (the held-out README sequence is tests/wrappers/cdeg/test_heldout.py)."""
    assert main(["run", "--env", "EGIP-Demo-v0", "--exploration", "0.5", "--exam-budget", "3",
                 "--repetitions", "6", "--premature-diagnosis", "decide", "--quiet",
                 "--out", "runs/construct.jsonl"]) == 0
    assert main(["cdeg", "build", "runs/construct.jsonl", "--out", "graph.json",
                 "--quiet"]) == 0
    counts = json.loads((workdir / "graph.json").read_text(encoding="utf-8"))
    assert len(counts["revisions"]) == 1 and counts["revisions"][0]["cases"] == ["demo-12"]
    assert main(["cdeg", "inspect", "graph.json"]) == 0
    assert "herpes zoster" in capsys.readouterr().out
    for name, extra in (("plain", []), ("cdeg", ["--cdeg", "graph.json",
                                                  "--cdeg-coverage-basis", "edge+context"])):
        assert main(["run", "--env", "EGIP-Demo-v0", "--exam-budget", "3", "--quiet",
                     "--premature-diagnosis", "decide", "--out", f"runs/{name}.jsonl",
                     *extra]) == 0
    lines = {n: {x["case_id"]: x for x in read_run_log(f"runs/{n}.jsonl").lines}
             for n in ("plain", "cdeg")}
    kinds = [(case, e["kind"]) for case, x in lines["cdeg"].items()
             for e in x["doctor_log"] if e["kind"] in ("acquire", "reappraise")]
    assert kinds == []
    assert [e["kind"] for e in lines["cdeg"]["demo-12"]["doctor_log"]][0] == "own_case_edges"
    assert (lines["plain"]["demo-12"]["verdict"], lines["cdeg"]["demo-12"]["verdict"]) == (
        "wrong", "wrong")


def test_cdeg_build_of_single_runs_says_k_must_exceed_1(workdir, capsys):
    assert _run("--env", "EGIP-Demo-v0", "--out", "k1.jsonl") == 0
    capsys.readouterr()
    assert main(["cdeg", "build", "k1.jsonl", "--out", "g.json", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "no case with both a success and a failure; every case has 1 repetition; CDEG " \
           "needs K > 1 sampled runs per case" in err


# ------------------------------------------------------------- wrappers (findings 4, 5)
def test_baseline_with_the_scripted_doctor_is_refused(workdir, capsys):
    assert _run("--baseline", "self-reflection", "--out", "x.jsonl") == 2
    assert "acts through the doctor's prompt" in _error(capsys)
    assert not (workdir / "x.jsonl").exists()


def test_replay_refuses_a_wrapped_log_in_one_line(workdir, capsys):
    assert main(["run", "--env", "EGIP-Demo-v0", "--exploration", "0.5", "--repetitions",
                 "6", "--exam-budget", "3", "--premature-diagnosis", "decide", "--quiet",
                 "--out", "c.jsonl"]) == 0
    assert main(["cdeg", "build", "c.jsonl", "--out", "g.json", "--quiet"]) == 0
    assert _run("--env", "EGIP-Demo-v0", "--cdeg", "g.json", "--out", "w.jsonl") == 0
    capsys.readouterr()
    assert main(["replay", "w.jsonl", "--ablation", "full", "--doctor", "scripted"]) == 2
    err = _error(capsys)
    assert "this log's doctor is wrapped (scripted+cdeg); replay rebuilds plain doctors " \
           "only" in err
    assert not (workdir / "w_full.jsonl").exists()


def test_replay_collapses_doctor_differences_into_one_warning(workdir, capsys):
    """Two differing fields (exploration and exam budget of the scripted doctor: the
    source ran with --exploration 0.5 --exam-budget 3) give ONE warning line naming
    both."""
    assert _run("--env", "EGIP-Demo-v0", "--exploration", "0.5", "--exam-budget", "3",
                "--out", "s.jsonl") == 0
    capsys.readouterr()
    assert main(["replay", "s.jsonl", "--ablation", "full", "--doctor", "scripted",
                 "--quiet"]) == 0
    warnings = [x for x in capsys.readouterr().err.splitlines() if x.startswith("warning:")]
    assert len(warnings) == 1
    assert "in 3 field(s)" in warnings[0]
    for field in ("name: 'scripted' here, 'scripted-explore0.5'",
                  "config.exam_budget: 8 here, 3 in the source run",
                  "config.exploration: 0.0 here, 0.5 in the source run"):
        assert field in warnings[0]


# ------------------------------------------------- MedAgentSim strategy (finding 6)
def test_llm_doctor_strategy_defaults_to_medagentsim_on_medagentsim(workdir):
    with FakeChatServer("clinician") as server:
        common = ["--doctor", "llm", "--base-url", server.base_url, "--model", "fake",
                  "--episodes", "1", "--quiet"]
        assert main(["run", "--env", "MedAgentSim-Demo-v0", *common, "--out", "d.jsonl"]) == 0
        assert main(["run", "--env", "MedAgentSim-Demo-v0", *common, "--strategy", "direct",
                     "--out", "x.jsonl"]) == 0
        assert main(["run", "--env", "AgentClinic-Demo-v0", *common, "--out", "a.jsonl"]) == 0
        assert main(["run", "--env", "MedAgentSim-Demo-v0", *common]) == 0
    names = [read_run_log(f).lines[0]["doctor"]["name"]
             for f in ("d.jsonl", "x.jsonl", "a.jsonl")]
    assert names == ["llm-medagentsim", "llm-direct", "llm-direct"]
    assert [p.name for p in (workdir / "runs").iterdir()] == [
        "MedAgentSim-Demo-v0_llm-medagentsim-fake_seed0.jsonl"]


# ------------------------------------------------------------------------------ nits
def _help(*command: str) -> None:
    with pytest.raises(SystemExit):
        main([*command, "--help"])


def test_help_texts(capsys):
    _help("replay")
    replay = capsys.readouterr().out
    assert "--patient" not in replay and "--strategy" in replay
    _help("run")
    run = capsys.readouterr().out
    assert "(--doctor llm, --patient llm, --judge llm, --examiner llm)" in run
    assert "LEXICAL_THRESHOLDS" not in run and "0.9 thresholds" in run
    assert "--exploration X" in run
    _help("cdeg", "build")
    build = " ".join(capsys.readouterr().out.split())
    for text in ("--backend {openai,vllm,transformers} chat-model backend",
                 "--base-url URL server URL", "--model M model name",
                 "--temperature T verifier and extractor sampling temperature",
                 "--api-key-env NAME environment variable", "--timeout S seconds per HTTP",
                 "--max-retries N retries per request", "(default: deterministic)"):
        assert text in build


def test_cdeg_graph_file_errors_are_one_line(workdir, capsys):
    (workdir / "folder").mkdir()
    assert _run("--cdeg", "nope.json") == 2
    assert _error(capsys).endswith("--cdeg nope.json: no such graph file; build one with "
                                   "`clinenv cdeg build`")
    assert _run("--cdeg", "folder") == 2
    assert "--cdeg folder: is a folder" in _error(capsys)
    (workdir / "noformat.json").write_text('{"diagnoses": []}', encoding="utf-8")
    assert _run("--cdeg", "noformat.json") == 2
    assert "noformat.json: field 'format' is missing" in _error(capsys)
    (workdir / "graph.json").write_text('{\n  "format": "clinenv.cdeg/1",\n  "diagnoses": []}',
                                        encoding="utf-8")
    assert main(["cdeg", "build", "graph.json", "--out", "g2.json"]) == 2
    assert "graph.json: this is a CDEG graph (clinenv.cdeg/1), not a run log" in _error(capsys)
    assert not (workdir / "g2.json").exists()


@pytest.mark.parametrize(("typed", "meant"), [
    ("EGIP-MedQa-v0", "EGIP-MedQA-v0"), ("egip-medqa", "EGIP-MedQA-v0"),
    ("AgentClinc-NEJM-v0", "AgentClinic-NEJM-v0"), ("EGIP-MIMIC-v0", "EGIP-MIMIC-IV-v0"),
    ("foo", None)])
def test_unknown_env_suggests_the_nearest_id(workdir, capsys, typed, meant):
    assert _run("--env", typed) == 2
    err = _error(capsys)
    assert f"unknown environment id {typed!r}" in err
    if meant is None:
        assert "did you mean" not in err
    else:
        assert f"did you mean {meant}?" in err


def test_fake_clinician_requests_by_name_without_a_menu():
    """Under egip-no-menu the clinician used to ask "Any other symptoms?" every round; now
    it requests the scripted doctor's by-name exams, in order, then falls back."""
    import gymnasium as gym

    env = gym.make("EGIP-Demo-v0", preset="egip-no-menu")
    obs, _ = env.reset(seed=0, options={"case_id": "demo-01"})
    messages = [{"role": "system", "content": "You are a doctor."}]
    said = []
    for _ in range(10):
        messages.append({"role": "user", "content": obs["text"]})
        reply = clinician_responder({"messages": messages}, 0)
        said.append(reply)
        messages.append({"role": "assistant", "content": reply})
        obs, *_ = env.step(reply)
    assert said[:3] == ["REQUEST TEST: Vital signs", "REQUEST TEST: Imaging",
                        "REQUEST TEST: Chest X-ray"]
    assert said[8:] == [FALLBACK_QUESTION] * 2
