"""``clinenv run --doctor llm`` end to end against a real local server.

The server (:class:`~clinenv.llm.fake_server.FakeChatServer`, delay 0) runs in this test
process on 127.0.0.1; the command runs through :func:`clinenv.cli.main` in process, and
once as a real ``python -m clinenv`` subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
from llm_rollout_helpers import clinic_responder, role_of, without_volatile

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.llm_doctor import LLMDoctor
from clinenv.cli import main
from clinenv.llm.fake_server import FakeChatServer
from clinenv.llm.openai_backend import OpenAIChatModel
from clinenv.rollouts import run_logged
from clinenv.runlog import read_run_log

ROOT = Path(__file__).resolve().parents[1]
SECRET = "sk-clinenv-test-never-logged-4711"


@pytest.fixture
def server():
    with FakeChatServer(clinic_responder()) as srv:
        yield srv


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """An empty working folder, no dataset folder, an empty user cache."""
    empty = tmp_path / "no-data"
    empty.mkdir()
    monkeypatch.setenv("CLINENV_DATA_DIR", str(empty))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("CLINENV_TEST_KEY", SECRET)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_cli(capsys, *args):
    code = main(["run", "--env", "EGIP-Demo-v0", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_llm_doctor_concurrent_run_end_to_end(workdir, server, capsys):
    code, out, err = run_cli(
        capsys, "--doctor", "llm", "--base-url", server.base_url, "--model", "fake-model",
        "--concurrency", "4", "--repetitions", "2", "--episodes", "3", "--quiet",
        "--api-key-env", "CLINENV_TEST_KEY", "--out", "run.jsonl")
    assert code == 0, err
    lines = read_run_log(workdir / "run.jsonl").lines
    assert len(lines) == 6
    # the same lines as the library's sequential run with the same doctor
    with OpenAIChatModel("fake-model", base_url=server.base_url) as chat:
        ref = run_logged(gym.make("EGIP-Demo-v0"), LLMDoctor(chat), out=workdir / "ref.jsonl",
                         episodes=3, repetitions=2)
    key = lambda x: (x["repetition"], x["case_index"])  # noqa: E731
    assert without_volatile(sorted(lines, key=key)) == without_volatile(ref.lines)
    doctor = lines[0]["doctor"]
    assert doctor["name"] == "llm-direct"
    assert (doctor["config"]["model"], doctor["config"]["backend"]) == ("fake-model", "openai")
    assert doctor["config"]["generation"]["max_tokens"] == 200
    n_calls = sum(x["llm"]["n_calls"] for x in lines)
    prompt = sum(x["llm"]["prompt_tokens"] for x in lines)
    assert f"  llm calls   {n_calls} (prompt tokens {prompt}, completion tokens " in out
    assert out.startswith("EGIP-Demo-v0 | doctor llm-direct | seed 0 | 3 cases x 2 ")
    assert "errors" not in out
    everything = (workdir / "run.jsonl").read_text(encoding="utf-8") + out + err
    assert SECRET not in everything


def test_the_issue_command_in_a_subprocess(workdir, server):
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "clinenv", "run", "--doctor", "llm", "--base-url",
         server.base_url, "--model", "fake-model", "--concurrency", "64",
         "--repetitions", "3", "--episodes", "4", "--out", "issue.jsonl"],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout.startswith("env: EGIP-Demo-v0 (--env auto: dataset 'medqa' not found")
    lines = read_run_log(workdir / "issue.jsonl").lines
    assert sorted((x["case_index"], x["repetition"]) for x in lines) == [
        (i, r) for i in range(4) for r in range(3)]
    assert "llm calls   " in proc.stdout


def test_llm_patient_and_judge_with_their_own_model(workdir, server, capsys):
    code, out, err = run_cli(
        capsys, "--doctor", "llm", "--base-url", server.base_url, "--model", "fake-model",
        "--patient", "llm", "--judge", "llm", "--judge-model", "judge-model",
        "--episodes", "1", "--repetitions", "2", "--out", "pj.jsonl", "--quiet",
        "--strategy", "vote")
    assert code == 0, err
    lines = read_run_log(workdir / "pj.jsonl").lines
    assert len(lines) == 2
    for line in lines:
        assert line["doctor"]["name"] == "llm-vote"
        assert (line["scorer"], line["judge_verdict"], line["verdict"]) == (
            "llm-judge", "correct", "correct")
        agents = [c["agent"] for c in line["llm"]["calls"]]
        assert agents.count("judge") == 1 and agents.count("patient") >= 1
        kwargs = line["env_spec"]["kwargs"]
        assert (kwargs["patient"], kwargs["judge"]) == ("llm", "llm")
        assert kwargs["judge_model"]["model"] == "judge-model"
        assert kwargs["patient_model"]["model"] == "fake-model"
    by_role = {}
    for body in server.requests:
        by_role.setdefault(role_of(body), set()).add(body["model"])
    assert by_role == {"doctor": {"fake-model"}, "patient": {"fake-model"},
                       "judge": {"judge-model"}}


def test_backend_error_is_counted_in_the_summary(workdir, server, capsys):
    server.inject(status=500, count=1)
    code, out, err = run_cli(
        capsys, "--doctor", "llm", "--base-url", server.base_url, "--model", "fake-model",
        "--max-retries", "0", "--episodes", "3", "--out", "e.jsonl", "--quiet")
    assert code == 0, err
    assert ("  errors      1 episode(s) stopped by a backend error (counted as unscored; "
            "see 'error' in the log)") in out
    first = read_run_log(workdir / "e.jsonl").lines[0]
    assert first["error"]["detail"] == "http_500" and first["verdict"] == "unscored"


def test_scripted_doctor_with_concurrency(workdir, capsys):
    assert run_cli(capsys, "--concurrency", "4", "--out", "c.jsonl", "--quiet")[0] == 0
    assert run_cli(capsys, "--out", "s.jsonl", "--quiet")[0] == 0
    con = read_run_log(workdir / "c.jsonl").lines
    seq = read_run_log(workdir / "s.jsonl").lines
    key = lambda x: x["case_index"]  # noqa: E731
    assert without_volatile(sorted(con, key=key)) == without_volatile(seq)
    assert all("llm" not in line for line in con)


@pytest.mark.parametrize(("args", "message"), [
    (["--doctor", "llm", "--base-url", "http://127.0.0.1:9/v1"], "--doctor llm needs --model M"),
    (["--doctor", "llm", "--model", "m"], "--doctor llm with --backend openai needs --base-url"),
    (["--patient", "llm", "--base-url", "http://127.0.0.1:9/v1"],
     "--patient llm needs --model M (or --patient-model)"),
    (["--model", "m"], "--model is used only with --doctor llm"),
])
def test_missing_llm_arguments_exit_2_with_one_line(workdir, capsys, args, message):
    code, out, err = run_cli(capsys, *args)
    assert code == 2
    assert err.startswith(f"clinenv: error: {message}") and err.count("\n") == 1
    assert not (workdir / "runs").exists()


@pytest.mark.parametrize("args", [
    ["--concurrency", "0"], ["--temperature", "-1"], ["--timeout", "0"],
    ["--max-tokens", "0"], ["--max-retries", "-1"], ["--backend", "llamacpp"],
    ["--strategy", "cot"],
])
def test_bad_llm_option_values_exit_2(workdir, capsys, args):
    with pytest.raises(SystemExit) as stop:
        main(["run", *args])
    assert stop.value.code == 2
    assert not (workdir / "runs").exists()


def test_unavailable_backend_is_one_line(workdir, capsys):
    pytest.importorskip("clinenv.llm.vllm_backend")
    try:
        import vllm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("vLLM is installed here")
    code, out, err = run_cli(capsys, "--doctor", "llm", "--backend", "vllm", "--model", "m")
    assert code == 2
    assert err.strip() == ("clinenv: error: --backend vllm --model m: the in-process vLLM "
                           "backend needs vLLM (CUDA GPU): pip install 'clinenv[vllm]'")
    assert json.dumps(err).count("\\n") == 1
