"""``clinenv run --doctor llm`` end to end against a real local server.

The server (:class:`~clinenv.testing.fake_server.FakeChatServer`, delay 0) runs in this test
process on 127.0.0.1; the command runs through :func:`clinenv.cli.main` in process, and
once as a real ``python -m clinenv`` subprocess.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.llm_doctor import LLMDoctor
from clinenv.agents.prompts import AGENTCLINIC_DOCTOR_SYSTEM
from clinenv.cli import EXIT_RUN_ERRORS, main
from clinenv.llm.openai_backend import OpenAIChatModel
from clinenv.runlog import read_run_log
from clinenv.runs import RunSpec, run
from clinenv.testing.clinic import clinic_responder, role_of, without_volatile
from clinenv.testing.fake_responders import role_of as clinician_role
from clinenv.testing.fake_server import FakeChatServer

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-clinenv-test-never-logged-4711"


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """An empty working folder, no dataset folder, an empty user cache."""
    monkeypatch.delenv("CLINENV_DATA_DIR", raising=False)  # a set one must hold the file
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
        ref = run(lambda: gym.make("EGIP-Demo-v0"), lambda: LLMDoctor(chat),
                  RunSpec(out=workdir / "ref.jsonl", episodes=3, repetitions=2))
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
    assert code == EXIT_RUN_ERRORS == 3, err  # finished, with an error episode
    assert err == ""
    assert ("  errors      1 episode(s) stopped by a backend error (counted as unscored; "
            "see 'error' in the log)") in out
    first = read_run_log(workdir / "e.jsonl").lines[0]
    assert first["error"]["detail"] == "http_500" and first["verdict"] == "unscored"


def test_resume_after_an_outage_retries_the_error_lines_and_eval_counts_them_once(
        workdir, server, capsys):
    """``clinenv run --resume`` reruns the episodes stopped by a backend error; the new
    line supersedes the error line, so ``clinenv eval`` counts each episode once, with
    its new verdict: the report equals a clean run's."""
    llm = ("--doctor", "llm", "--base-url", server.base_url, "--model", "fake-model",
           "--max-retries", "0", "--episodes", "3", "--repetitions", "2", "--quiet")
    code, clean_out, err = run_cli(capsys, *llm, "--out", "clean.jsonl")
    assert code == 0, err
    server.inject(status=500, count=2)  # the first two requests: (demo-01, 0), (demo-02, 0)
    code, out, err = run_cli(capsys, *llm, "--out", "run.jsonl")
    assert code == EXIT_RUN_ERRORS, err
    assert "  errors      2 episode(s) stopped by a backend error" in out
    main(["eval", "run.jsonl", "--out-dir", "outage"])
    # a resume that keeps the error lines changes nothing
    code, out, err = run_cli(capsys, *llm, "--out", "run.jsonl", "--resume",
                             "--no-retry-errors")
    assert code == EXIT_RUN_ERRORS, err
    assert "| 0 run now, 6 resumed" in out and "  errors      2 episode(s)" in out
    assert len(read_run_log(workdir / "run.jsonl").lines) == 6
    code, out, err = run_cli(capsys, *llm, "--out", "run.jsonl", "--resume")
    assert code == 0, err
    assert "| 2 run now (2 after a backend error), 4 resumed" in out
    assert "errors" not in out

    def metrics(text):  # the summary without its title, model-call totals and log path
        return [x for x in text.splitlines()[1:] if not x.startswith(("  llm", "  log"))]

    assert metrics(out) == metrics(clean_out) and len(metrics(out)) >= 6
    lines = read_run_log(workdir / "run.jsonl").lines
    assert [(x["case_id"], x["repetition"], "error" in x) for x in lines[:2] + lines[6:]] == [
        ("demo-01", 0, True), ("demo-02", 0, True), ("demo-01", 0, False),
        ("demo-02", 0, False)]
    capsys.readouterr()
    assert main(["eval", "run.jsonl", "--out-dir", "resumed"]) == 0
    assert main(["eval", "clean.jsonl", "--out-dir", "clean"]) == 0
    capsys.readouterr()
    table = {name: (workdir / name / "accuracy.csv").read_text(encoding="utf-8")
             for name in ("outage", "resumed", "clean")}
    assert table["resumed"] == table["clean"] != table["outage"]
    rows = {name: dict(zip(*[x.split(",") for x in text.splitlines()[:2]], strict=True))
            for name, text in table.items()}
    clean = read_run_log(workdir / "clean.jsonl").lines
    unscored = sum(x["verdict"] == "unscored" for x in clean)
    correct = sum(x["verdict"] == "correct" for x in clean)
    assert clean[0]["verdict"] == "correct"  # so the outage cost a correct answer
    assert (rows["resumed"]["n_episodes"], rows["resumed"]["n_correct"],
            rows["resumed"]["n_unscored"]) == ("6", str(correct), str(unscored))
    lost = [x["verdict"] for x in clean[:2]]
    assert (rows["outage"]["n_episodes"], rows["outage"]["n_correct"],
            rows["outage"]["n_unscored"]) == (
        "6", str(correct - lost.count("correct")),
        str(unscored + 2 - lost.count("unscored")))


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
    ["--strategy", "cot"], ["--max-consecutive-errors", "-1"], ["--max-questions", "0"],
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
                           "backend needs vLLM (CUDA GPU): pip install -e '.[vllm]' in a "
                           "clinenv clone")
    assert json.dumps(err).count("\\n") == 1


# ------------------------------------------------------------------ fail fast
@pytest.fixture
def refused_port():
    """A socket bound to a port on 127.0.0.1 that never listens (connections are refused),
    held by the test so that no other process (a parallel test worker) takes the port;
    ``refused_port.getsockname()[1]`` is the port, ``refused_port.close()`` frees it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock


@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_wrong_url_exits_2_at_once_naming_url_model_and_the_server_message(
        workdir, server, capsys, concurrency):
    """Reviewer's report: a wrong URL used to turn every episode into an error line and
    exit 0. The server answers 404: one line naming the URL, the models and the server's
    message, exit 2, nothing written but whole lines (here none)."""
    wrong = server.base_url[:-len("/v1")] + "/v2"
    code, out, err = run_cli(
        capsys, "--doctor", "llm", "--base-url", wrong, "--model", "fake-model",
        "--judge", "llm", "--judge-model", "judge-model", "--concurrency", concurrency,
        "--out", "wrong.jsonl")
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("clinenv: error: the model server refused a request (http_404: "
                          "a configuration problem, not an outage; check --base-url "
                          f"{wrong}, model fake-model, judge-model and the API key): ")
    assert "no route POST /v2/chat/completions" in err
    assert err.rstrip().endswith("0 episode(s) of this run are in wrong.jsonl; fix it and "
                                 "continue with --resume")
    assert "Traceback" not in err and "accuracy" not in out
    log = read_run_log(workdir / "wrong.jsonl")
    assert (log.lines, log.partial_bytes) == ([], 0)


def test_server_down_stops_after_max_consecutive_errors_and_resume_finishes(
        workdir, capsys, refused_port):
    """Server down (connection refused): after --max-consecutive-errors error episodes
    the run stops with exit 2 and says to --resume; once the server is up on that port,
    --resume runs the error episodes again and the rest (exit 0)."""
    port = refused_port.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    llm = ("--doctor", "llm", "--base-url", url, "--model", "fake-model", "--max-retries",
           "0", "--episodes", "6", "--out", "down.jsonl", "--quiet")
    code, out, err = run_cli(capsys, *llm, "--max-consecutive-errors", "3")
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("clinenv: error: 3 episode(s) in a row stopped by a backend "
                          f"error (connection; --base-url {url}, model fake-model): ")
    assert err.rstrip().endswith("3 episode(s) of this run are in down.jsonl, which now "
                                 "holds 3 episode(s) stopped by a backend error (3 from "
                                 "this run); continue later with --resume (it runs the "
                                 "error episodes again)")
    lines = read_run_log(workdir / "down.jsonl").lines
    assert [(x["case_id"], x["error"]["detail"]) for x in lines] == [
        (f"demo-0{i}", "connection") for i in (1, 2, 3)]
    refused_port.close()
    with FakeChatServer(clinic_responder(), port=port):
        code, out, err = run_cli(capsys, *llm, "--resume")
    assert code == 0, err
    assert "| 6 run now (3 after a backend error), 0 resumed" in out
    assert "errors" not in out


def test_max_consecutive_errors_0_never_stops_and_errors_exit_3(workdir, capsys,
                                                               refused_port):
    url = f"http://127.0.0.1:{refused_port.getsockname()[1]}/v1"
    code, out, err = run_cli(
        capsys, "--doctor", "llm", "--base-url", url, "--model", "fake-model",
        "--max-retries", "0", "--episodes", "6", "--max-consecutive-errors", "0",
        "--out", "all.jsonl", "--quiet")
    assert (code, err) == (EXIT_RUN_ERRORS, "")
    assert "  errors      6 episode(s) stopped by a backend error" in out
    assert len(read_run_log(workdir / "all.jsonl").lines) == 6


# ------------------------------------------------------------------ doctor options
@pytest.fixture
def delta_env_id():
    """A test id: the demo set in ``delta`` format with T = 5 (removed afterwards)."""
    env_id = "clinenv-test/EGIPDelta-v0"
    gym.register(id=env_id, entry_point="clinenv.env:EGIPEnv",
                 kwargs={"dataset": "demo", "observation_format": "delta",
                         "acquisition_rounds": 5})
    yield env_id
    gym.registry.pop(env_id, None)


def doctor_systems(server):
    return {b["messages"][0]["content"] for b in server.requests
            if role_of(b) == "doctor" and "REQUEST TEST:" in b["messages"][0]["content"]}


def test_agentclinic_prompt_states_the_environments_question_budget(workdir, server,
                                                                    capsys, delta_env_id):
    """``--prompt agentclinic`` states T (the environment's acquisition rounds) as the
    question budget unless --max-questions says otherwise, and the LLM doctor takes the
    environment's observation format."""
    base = ("--doctor", "llm", "--base-url", server.base_url, "--model", "fake-model",
            "--prompt", "agentclinic", "--episodes", "1", "--quiet")
    assert main(["run", "--env", "EGIP-Demo-v0", *base, "--out", "a.jsonl"]) == 0
    assert doctor_systems(server) == {AGENTCLINIC_DOCTOR_SYSTEM.format(budget="at most 19")}
    config = read_run_log(workdir / "a.jsonl").lines[0]["doctor"]["config"]
    assert (config["max_questions"], config["observation_format"]) == (19, "view")

    server.requests.clear()
    assert main(["run", "--env", delta_env_id, *base, "--out", "b.jsonl"]) == 0
    assert doctor_systems(server) == {AGENTCLINIC_DOCTOR_SYSTEM.format(budget="at most 5")}
    line = read_run_log(workdir / "b.jsonl").lines[0]
    assert (line["doctor"]["config"]["max_questions"],
            line["doctor"]["config"]["observation_format"], line["turns"]) == (5, "delta", 5)

    server.requests.clear()
    assert main(["run", "--env", "EGIP-Demo-v0", *base, "--max-questions", "7",
                 "--out", "c.jsonl"]) == 0
    assert doctor_systems(server) == {AGENTCLINIC_DOCTOR_SYSTEM.format(budget="at most 7")}
    # the egip prompt has no budget: its config is unchanged
    capsys.readouterr()
    assert main(["run", "--env", "EGIP-Demo-v0", "--doctor", "llm", "--base-url",
                 server.base_url, "--model", "fake-model", "--episodes", "1", "--quiet",
                 "--out", "d.jsonl"]) == 0
    assert read_run_log(workdir / "d.jsonl").lines[0]["doctor"]["config"][
        "max_questions"] is None


def test_max_questions_needs_the_agentclinic_prompt(workdir, capsys):
    code, out, err = run_cli(capsys, "--doctor", "llm", "--base-url", "http://127.0.0.1:9/v1",
                             "--model", "m", "--max-questions", "5")
    assert code == 2
    assert err == ("clinenv: error: --max-questions is used only with --doctor llm --prompt "
                   "agentclinic (the egip prompt has no question budget)\n")
    assert not (workdir / "runs").exists()


# ------------------------------------------------------------------ native ids
def test_native_id_with_every_seat_an_llm_and_the_agentclinic_prompt_by_default(
        workdir, capsys):
    """``--env AgentClinic-Demo-v0`` without ``--prompt``: the LLM doctor states the
    agentclinic rules with the 20-turn budget; ``--examiner llm --examiner-model`` puts
    the measurement agent on its own model; the clinician plays every seat, so the
    chest X-ray's "consistent with lobar pneumonia" is the answer the moderator accepts."""
    with FakeChatServer("clinician") as server:
        code = main(["run", "--env", "AgentClinic-Demo-v0", "--doctor", "llm",
                     "--base-url", server.base_url, "--model", "fake-model", "--patient",
                     "llm", "--judge", "llm", "--examiner", "llm", "--examiner-model",
                     "exam-model", "--episodes", "1", "--quiet", "--out", "ac.jsonl"])
        requests = list(server.requests)
    out, err = capsys.readouterr()
    assert code == 0, err
    (line,) = read_run_log(workdir / "ac.jsonl").lines
    assert (line["answer"], line["verdict"], line["judge_verdict"]) == (
        "DIAGNOSIS READY: lobar pneumonia", "correct", "correct")
    assert line["doctor"]["config"]["prompt"] == "agentclinic"
    assert line["doctor"]["config"]["max_questions"] == 20
    kwargs = line["env_spec"]["kwargs"]
    assert (kwargs["examiner"], kwargs["examiner_model"]["model"]) == ("llm", "exam-model")
    by_role = {}
    for body in requests:
        by_role.setdefault(clinician_role(body), set()).add(body["model"])
    assert by_role == {"doctor": {"fake-model"}, "patient": {"fake-model"},
                       "judge": {"fake-model"}, "measurement": {"exam-model"}}
    assert sum(b["model"] == "exam-model" for b in requests) == line["n_exams_requested"] == 8
    assert {b["messages"][0]["content"] for b in requests if clinician_role(b) == "doctor"} == {
        AGENTCLINIC_DOCTOR_SYSTEM.format(budget="at most 20")}


def test_native_id_keeps_refusing_an_explicit_egip_prompt(workdir, capsys):
    code = main(["run", "--env", "AgentClinic-Demo-v0", "--doctor", "llm", "--base-url",
                 "http://127.0.0.1:9/v1", "--model", "m", "--prompt", "egip"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err == ("clinenv: error: AgentClinic-Demo-v0 ends only on DIAGNOSIS READY, which "
                   "the egip doctor prompt forbids during acquisition: add --prompt "
                   "agentclinic\n")
    assert not (workdir / "runs").exists()


def test_max_questions_is_accepted_on_a_native_id_without_prompt(workdir, server, capsys):
    assert main(["run", "--env", "MedAgentSim-Demo-v0", "--doctor", "llm", "--base-url",
                 server.base_url, "--model", "fake-model", "--max-questions", "7",
                 "--episodes", "1", "--quiet", "--out", "m.jsonl"]) == 0
    config = read_run_log(workdir / "m.jsonl").lines[0]["doctor"]["config"]
    assert (config["prompt"], config["max_questions"]) == ("agentclinic", 7)
