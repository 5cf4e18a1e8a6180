"""Every example runs as a script from the repository root and prints what it promises."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clinenv.testing.data import MEDQA_FILE, SHARED_DATA, needs_shared_data

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def run_example(name: str, tmp_path: Path, data_dir: Path | None = None,
                *args: str, returncode: int = 0) -> subprocess.CompletedProcess:
    """``python examples/NAME ARGS`` from the repository root, offline and hermetic."""
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONIOENCODING="utf-8")
    env.pop("CLINENV_DATA_DIR", None)
    if data_dir is not None:
        env["CLINENV_DATA_DIR"] = str(data_dir)
    proc = subprocess.run([sys.executable, str(Path("examples", name)), *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, encoding="utf-8",
                          timeout=120)
    assert proc.returncode == returncode, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    return proc


@pytest.mark.parametrize("name", ["one_episode.py", "plug_in_policy.py", "load_cases.py",
                                  "plug_in_ten_lines.py", "llm_doctor_server.py",
                                  "llm_doctor_engine.py", "train_menu_policy.py"])
def test_example_has_a_docstring_saying_how_to_run_it(name):
    doc = ast.get_docstring(ast.parse((EXAMPLES / name).read_text(encoding="utf-8")))
    assert doc and f"python examples/{name}" in doc


def test_one_episode(tmp_path):
    out = run_example("one_episode.py", tmp_path).stdout
    assert "===== doctor's final view (evidence interface) =====" in out
    view = out.split("=====")[2]
    assert "# Acquired observations" in view and "# Objective (S0)" in view
    assert "consistent with lobar pneumonia" in view
    assert "case demo-01: answer 'lobar pneumonia', verdict correct, reward 1.0" in out
    other = run_example("one_episode.py", tmp_path, None, "demo-13").stdout
    assert "# Candidate labels" in other and "case demo-13: answer " in other


def test_plug_in_policy(tmp_path):
    out = run_example("plug_in_policy.py", tmp_path).stdout
    assert "two-test-doctor on demo-01: 4 turns, 2 exams" in out
    assert "accuracy of two-test-doctor: " in out
    assert "accuracy of scripted: 3/6 = 50.0 %" in out


def test_load_cases_demo_only(tmp_path):
    out = run_example("load_cases.py", tmp_path).stdout
    assert "== demo: 17 cases" in out
    assert "demo-01: catalog 9 exams (3 PE, 6 T), no K, flags: target_in_records" in out
    assert "demo-08: catalog 4 exams (4 PE, 0 T), no K, flags: no_recorded_tests" in out
    assert "demo-11: catalog 9 exams (5 PE, 4 T), K=5, flags: -" in out
    assert "== medqa" not in out and "set CLINENV_DATA_DIR" in out


@needs_shared_data(MEDQA_FILE)
def test_load_cases_with_medqa(tmp_path):
    out = run_example("load_cases.py", tmp_path, SHARED_DATA).stdout
    assert "== demo: 17 cases" in out and "== medqa: 107 cases" in out
    assert sum(line.startswith("medqa-") for line in out.splitlines()) == 107


def test_plug_in_ten_lines(tmp_path):
    tree = ast.parse((EXAMPLES / "plug_in_ten_lines.py").read_text(encoding="utf-8"))
    (policy,) = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    lines = ast.get_source_segment((EXAMPLES / "plug_in_ten_lines.py").read_text(
        encoding="utf-8"), policy).splitlines()
    assert len([ln for ln in lines if ln.strip() and not ln.strip().startswith("#")]) == 10
    out = run_example("plug_in_ten_lines.py", tmp_path).stdout
    # demo-01's and demo-05's imaging reports name the target; demo-13's adds "acute",
    # which the deterministic scorer does not forgive; demo-03 has no imaging
    assert out.splitlines() == [
        "demo-01: 1 exams, answer 'lobar pneumonia' -> correct (target: Lobar pneumonia)",
        "demo-05: 1 exams, answer 'acute appendicitis' -> correct (target: Acute "
        "appendicitis)",
        "demo-13: 2 exams, answer 'acute pulmonary embolism' -> wrong (target: Pulmonary "
        "embolism)",
        "demo-03: 0 exams, answer 'Undetermined' -> unscored (target: Guillain\u2013Barr\u00e9 "
        "syndrome)",
    ]


def test_llm_doctor_server_against_a_local_server(tmp_path):
    from clinenv.testing.clinic import clinic_responder
    from clinenv.testing.fake_server import FakeChatServer

    with FakeChatServer(clinic_responder()) as server:
        out = run_example("llm_doctor_server.py", tmp_path, None, "--base-url",
                          server.base_url, "--model", "fake-model", "--episodes", "3",
                          "--out", str(tmp_path / "run.jsonl")).stdout
        n_requests = server.stats()["n_requests"]
    assert out.startswith("note: MedQA data is not configured")
    assert "demo-01: 'lobar pneumonia' -> correct" in out
    assert sum(line.startswith("demo-0") for line in out.splitlines()) == 3
    assert (f"EGIP-Demo-v0: accuracy 33.3 % over 3 episodes, coverage 33.3 %, 0 backend "
            f"errors; {n_requests} model calls") in out
    assert len((tmp_path / "run.jsonl").read_text(encoding="utf-8").splitlines()) == 3


def run_server_example(cwd: Path, data_dir: Path | None, *args: str
                       ) -> subprocess.CompletedProcess:
    """``python .../examples/llm_doctor_server.py ARGS`` run from ``cwd`` as a user would
    (the default ``--out`` then lands in ``cwd/runs/``), offline and hermetic."""
    env = dict(os.environ, XDG_CACHE_HOME=str(cwd / "cache"), PYTHONIOENCODING="utf-8")
    env.pop("CLINENV_DATA_DIR", None)
    if data_dir is not None:
        env["CLINENV_DATA_DIR"] = str(data_dir)
    proc = subprocess.run([sys.executable, str(EXAMPLES / "llm_doctor_server.py"), *args],
                          cwd=cwd, env=env, capture_output=True, text=True,
                          encoding="utf-8", timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@needs_shared_data(MEDQA_FILE)
def test_llm_doctor_server_rerun_on_other_data(tmp_path):
    """Run on the demo cases, then again with MedQA configured: the default log names
    the environment and the model, so the second run starts its own log; pointed at the
    first run's log, it refuses in one line (exit 2) and leaves that log alone."""
    from clinenv.testing.clinic import clinic_responder
    from clinenv.testing.fake_server import FakeChatServer

    demo_log = tmp_path / "runs" / "llm_doctor_server_EGIP-Demo-v0_fake-model.jsonl"
    medqa_log = tmp_path / "runs" / "llm_doctor_server_EGIP-MedQA-v0_fake-model.jsonl"
    with FakeChatServer(clinic_responder()) as server:
        common = ("--base-url", server.base_url, "--model", "fake-model", "--episodes", "2")
        first = run_server_example(tmp_path, None, *common)
        second = run_server_example(tmp_path, SHARED_DATA, *common)
        before = demo_log.read_text(encoding="utf-8")
        third = run_server_example(tmp_path, SHARED_DATA, *common, "--out",
                                   str(demo_log))
    assert first.returncode == second.returncode == 0, (first.stderr, second.stderr)
    assert first.stdout.splitlines()[-1].endswith(f"log {demo_log.relative_to(tmp_path)}")
    assert second.stdout.splitlines()[-1].startswith("EGIP-MedQA-v0: accuracy ")
    assert second.stdout.splitlines()[-1].endswith(
        f"log {medqa_log.relative_to(tmp_path)}")
    assert len(before.splitlines()) == 2
    assert len(medqa_log.read_text(encoding="utf-8").splitlines()) == 2
    assert third.returncode == 2
    assert third.stderr == (f"error: {demo_log}, line 1: env_id is \"EGIP-Demo-v0\" but "
                            "this run has \"EGIP-MedQA-v0\"; refusing to resume a "
                            "different run into the same log (use another --out file)\n")
    assert demo_log.read_text(encoding="utf-8") == before


def test_llm_doctor_server_rerun_with_another_model(tmp_path):
    """The same log with another --model: one line naming the field that differs, in
    full (exit 2); without --out, the other model gets its own default log."""
    from clinenv.testing.clinic import clinic_responder
    from clinenv.testing.fake_server import FakeChatServer

    log = tmp_path / "run.jsonl"
    with FakeChatServer(clinic_responder()) as server:
        url = ("--base-url", server.base_url, "--episodes", "1")
        first = run_server_example(tmp_path, None, *url, "--model", "org/fake-model",
                                   "--out", str(log))
        refused = run_server_example(tmp_path, None, *url, "--model", "other-model",
                                     "--out", str(log))
        own = run_server_example(tmp_path, None, *url, "--model", "other-model")
        folder = run_server_example(tmp_path, None, *url, "--model", "m", "--out",
                                    str(tmp_path))
    assert first.returncode == 0 and len(log.read_text(encoding="utf-8").splitlines()) == 1
    assert refused.returncode == 2
    assert refused.stderr == (f"error: {log}, line 1: doctor.config.model is "
                              "\"org/fake-model\" but this run has \"other-model\"; "
                              "refusing to resume a different run into the same log (use "
                              "another --out file)\n")
    assert own.returncode == 0, own.stderr
    assert (tmp_path / "runs" / "llm_doctor_server_EGIP-Demo-v0_other-model.jsonl").is_file()
    assert folder.returncode == 2
    assert folder.stderr == f"error: {tmp_path}: Is a directory\n"


def test_llm_doctor_server_stops_on_a_refused_request(tmp_path):
    """A server that answers 404 (a wrong --base-url or --model): the run stops at the
    first refused request (fail fast) and the example prints the reason on stderr, one
    line, exit 2, no traceback; the log holds no line."""
    from clinenv.testing.clinic import clinic_responder
    from clinenv.testing.fake_server import FakeChatServer

    log = tmp_path / "run.jsonl"
    with FakeChatServer(clinic_responder()) as server:
        server.inject(status=404, count=3)  # enough to refuse all 3 episodes
        proc = run_example("llm_doctor_server.py", tmp_path, None, "--base-url",
                           server.base_url, "--model", "fake-model", "--episodes", "3",
                           "--concurrency", "1", "--out", str(log), returncode=2)
        stats = server.stats()
    assert (stats["n_requests"], stats["n_errors"]) == (1, 1)  # stopped at once
    assert proc.stdout.splitlines() == [
        "note: MedQA data is not configured (set CLINENV_DATA_DIR to a folder with "
        "agentclinic_medqa.jsonl); running the bundled demo cases instead"]
    (line,) = proc.stderr.splitlines()
    assert line.startswith("the model backend refused a request (http_404; a configuration "
                           "problem, not an outage): ")
    assert "injected fault" in line
    assert line.endswith(f"the run stopped, {log} keeps the 0 episode(s) it wrote; resume it "
                         "to continue (resume=True, or clinenv run --resume)")
    assert log.read_text(encoding="utf-8") == ""


def test_llm_doctor_engine_stops_after_backend_errors_in_a_row(tmp_path, monkeypatch, capsys):
    """The engine example with a stand-in for the vLLM model whose every call fails like
    a failing engine (``BackendError(detail="engine_error")``): after 5 error episodes
    in a row (the fail-fast default) the run stops; the example prints the reason on
    stderr and returns 2 instead of a traceback. The 5 error lines stay in the log."""
    from clinenv.llm.base import BackendError
    from clinenv.llm.scripted import ScriptedChatModel

    def fail(messages, config, index):
        raise BackendError("vLLM engine call failed: RuntimeError: CUDA error",
                           backend="vllm", detail="engine_error")

    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.delenv("CLINENV_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    engine = importlib.import_module("llm_doctor_engine")  # it imports without vLLM
    monkeypatch.setattr(engine, "VLLMChatModel", lambda name: ScriptedChatModel(fail))
    log = tmp_path / "run.jsonl"
    code = engine.main(["--model", "some/model", "--episodes", "8", "--out", str(log)])
    out, err = capsys.readouterr()
    assert code == 2
    assert err == ("5 episode(s) in a row stopped by a backend error (last: engine_error); "
                   "the model server seems to be down: vLLM engine call failed: "
                   f"RuntimeError: CUDA error; the run stopped, {log} keeps the 5 "
                   f"episode(s) it wrote; {log} holds 5 episode(s) stopped by a backend "
                   "error (5 of them from this run); resume it to continue (resume=True, "
                   "or clinenv run --resume)\n")
    assert out.splitlines()[1:] == [f"demo-0{i}: None -> unscored" for i in range(1, 6)]
    lines = log.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 5 and all('"engine_error"' in line for line in lines)


def test_llm_doctor_engine_needs_vllm(tmp_path):
    pytest.importorskip("clinenv.llm.vllm_backend")
    try:
        import vllm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("vLLM is installed here; the engine example would load a model")
    proc = run_example("llm_doctor_engine.py", tmp_path, None, "--model", "some/model",
                       returncode=2)
    assert proc.stderr.strip() == ("error: the in-process vLLM backend needs vLLM (CUDA "
                                   "GPU): pip install -e '.[vllm]' in a clinenv clone")
    assert proc.stdout == ""
    usage = run_example("llm_doctor_engine.py", tmp_path, None, "--help").stdout
    assert "--model" in usage and "--episodes" in usage


def test_cdeg_end_to_end(tmp_path):
    doc = ast.get_docstring(ast.parse((EXAMPLES / "cdeg_end_to_end.py").read_text(
        encoding="utf-8")))
    assert "python examples/cdeg_end_to_end.py" in doc
    out = run_example("cdeg_end_to_end.py", tmp_path).stdout
    # held out: 9 construction cases x 6 repetitions; they validate no revision edge
    assert "split: 9 construction cases, 8 held-out evaluation cases" in out
    assert "construction runs: 54 episodes" in out
    assert "'revisions': 0" in out
    assert ("no intervention on the 8 held-out cases in 10 seeds each: the construction "
            "cases gave no validated revision edge") in out
