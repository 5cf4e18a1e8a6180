"""The ``clinenv`` command line, run as a real subprocess (``python -m clinenv``); argument
errors, and ids registered by a test, through :func:`clinenv.cli.main` in this process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from clinenv.runs.logged import episode_seed
from clinenv.testing.data import SHARED_DATA, needs_shared_data

SHARED = SHARED_DATA
MEDQA_FILE = SHARED / "agentclinic_medqa.jsonl"
needs_medqa = needs_shared_data("agentclinic_medqa.jsonl")
N_DEMO = 17
LINE_KEYS = {
    "schema", "case_id", "case_index", "repetition", "seed", "env_id", "env_spec",
    "dataset", "dataset_sha256", "clinenv_version", "doctor", "events", "evidence",
    "answer", "verdict", "correct", "reward", "turns", "n_exams_requested",
    "invalid_actions", "timing",
}


def clinenv(tmp_path: Path, *args: str, data_dir: Path | None = None,
            check: int | None = 0) -> subprocess.CompletedProcess:
    """Run ``python -m clinenv ARGS`` in ``tmp_path`` with a hermetic data setup.

    ``CLINENV_DATA_DIR`` is ``data_dir`` or unset (a set one must hold the file); the
    user cache is in tmp.
    """
    env = dict(os.environ)
    env.pop("CLINENV_DATA_DIR", None)
    if data_dir is not None:
        env["CLINENV_DATA_DIR"] = str(data_dir)
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    env["PYTHONIOENCODING"] = "utf-8"
    proc = subprocess.run([sys.executable, "-m", "clinenv", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, encoding="utf-8", timeout=300)
    if check is not None:
        assert proc.returncode == check, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.fixture
def clinenv_main(tmp_path, monkeypatch, capsys):
    """``clinenv ARGS`` through :func:`clinenv.cli.main` in this process, with the set-up
    of :func:`clinenv` (``tmp_path`` as the current folder, ``CLINENV_DATA_DIR`` unset, the
    user cache in tmp). The fixture's value runs it: ``(exit code, stdout, stderr)``; an
    argparse error's ``SystemExit`` gives its code."""
    from clinenv.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CLINENV_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def run(*args: str) -> tuple[int, str, str]:
        try:
            code = main(list(args))
        except SystemExit as exit_:
            code = exit_.code
        out, err = capsys.readouterr()
        return code, out, err

    return run


def read_lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def without_timing(lines):
    return [{k: v for k, v in x.items() if k != "timing"} for x in lines]


def printed(stdout: str, label: str) -> float:
    match = re.search(rf"^\s+{label}\s+([0-9.]+)", stdout, re.MULTILINE)
    assert match, (label, stdout)
    return float(match.group(1))


def check_summary(stdout: str, lines: list[dict], n_scheduled: int) -> None:
    """The printed summary equals values recomputed here from the log lines."""
    correct = sum(x["verdict"] == "correct" for x in lines)
    answered = sum(x["verdict"] != "unscored" for x in lines)
    assert printed(stdout, "scheduled") == n_scheduled
    assert printed(stdout, "accuracy") == round(100 * correct / n_scheduled, 2)
    assert printed(stdout, "coverage") == round(100 * answered / n_scheduled, 2)
    assert printed(stdout, "mean turns") == round(
        sum(x["turns"] for x in lines) / len(lines), 2)
    assert printed(stdout, "mean exams") == round(
        sum(x["n_exams_requested"] for x in lines) / len(lines), 2)
    assert f"({correct} correct, " in stdout


# ------------------------------------------------------------------------------ run
def test_demo_run_writes_one_line_per_case_and_repetition(tmp_path):
    proc = clinenv(tmp_path, "run", "--env", "EGIP-Demo-v0", "--repetitions", "2",
                   "--seed", "3", "--out", "out/log.jsonl", "--quiet")
    lines = read_lines(tmp_path / "out" / "log.jsonl")
    assert len(lines) == 2 * N_DEMO
    keys = {(x["case_id"], x["repetition"]) for x in lines}
    assert keys == {(f"demo-{i:02d}", r) for i in range(1, N_DEMO + 1) for r in (0, 1)}
    for line in lines:
        assert LINE_KEYS <= set(line)
        assert line["env_id"] == "EGIP-Demo-v0" and line["dataset"] == "demo"
        assert line["doctor"]["name"] == "scripted"
        assert line["seed"] == episode_seed(3, line["repetition"], line["case_index"])
        assert set(line["timing"]) >= {"env_s", "doctor_s"}
    check_summary(proc.stdout, lines, 2 * N_DEMO)
    per_rep = [100 * sum(x["verdict"] == "correct" for x in lines if x["repetition"] == r)
               / N_DEMO for r in (0, 1)]
    assert f"{sum(per_rep) / 2:.2f} +/- " in proc.stdout
    assert proc.stdout.startswith("EGIP-Demo-v0 | doctor scripted | seed 3 | 17 cases x 2")
    assert "env:" not in proc.stdout  # --quiet drops the note on the chosen environment
    assert proc.stderr.strip() == ""  # --quiet, and no progress bar off a TTY


def test_same_seed_twice_identical_except_timing(tmp_path):
    for name in ("a.jsonl", "b.jsonl"):
        clinenv(tmp_path, "run", "--env", "EGIP-Demo-v0", "--seed", "9", "--out", name,
                "--quiet")
    a, b = read_lines(tmp_path / "a.jsonl"), read_lines(tmp_path / "b.jsonl")
    assert len(a) == N_DEMO and without_timing(a) == without_timing(b)
    clinenv(tmp_path, "run", "--env", "EGIP-Demo-v0", "--seed", "10", "--out", "c.jsonl",
            "--quiet")
    assert [x["seed"] for x in read_lines(tmp_path / "c.jsonl")] != [x["seed"] for x in a]


def test_refuses_to_overwrite_without_resume(tmp_path):
    clinenv(tmp_path, "run", "--env", "EGIP-Demo-v0", "--episodes", "2", "--out", "l.jsonl")
    before = (tmp_path / "l.jsonl").read_bytes()
    proc = clinenv(tmp_path, "run", "--env", "EGIP-Demo-v0", "--out", "l.jsonl", check=2)
    assert "--resume" in proc.stderr and "l.jsonl" in proc.stderr
    assert (tmp_path / "l.jsonl").read_bytes() == before


def test_resume_after_crash_completes_exactly_the_missing_keys(tmp_path):
    args = ("run", "--env", "EGIP-Demo-v0", "--repetitions", "2", "--seed", "4")
    clinenv(tmp_path, *args, "--out", "ref.jsonl", "--quiet")
    reference = {(x["case_id"], x["repetition"]): x
                 for x in without_timing(read_lines(tmp_path / "ref.jsonl"))}
    raw = (tmp_path / "ref.jsonl").read_bytes().splitlines(keepends=True)
    deleted = {2, 17, 25}
    kept = [x for i, x in enumerate(raw) if i not in deleted]
    crashed = kept[:-1] + [kept[-1][:57]]  # the last line cut mid-JSON
    (tmp_path / "log.jsonl").write_bytes(b"".join(crashed))

    proc = clinenv(tmp_path, *args, "--out", "log.jsonl", "--resume")
    assert "4 run now, 30 resumed" in proc.stdout
    assert "partial last line (57 bytes)" in proc.stderr
    final = read_lines(tmp_path / "log.jsonl")
    keys = [(x["case_id"], x["repetition"]) for x in final]
    assert len(keys) == len(set(keys)) == 2 * N_DEMO
    assert {(x["case_id"], x["repetition"]): x for x in without_timing(final)} == reference
    new_keys = set(keys[-4:])
    assert new_keys == {(json.loads(raw[i])["case_id"], json.loads(raw[i])["repetition"])
                        for i in (*deleted, len(raw) - 1)}
    check_summary(proc.stdout, final, 2 * N_DEMO)

    again = clinenv(tmp_path, *args, "--out", "log.jsonl", "--resume", "--quiet")
    assert "0 run now, 34 resumed" in again.stdout
    assert len(read_lines(tmp_path / "log.jsonl")) == 2 * N_DEMO


def test_resume_refuses_a_log_from_a_different_env_id(tmp_path):
    clinenv(tmp_path, "run", "--env", "EGIP-Demo-v0", "--episodes", "3", "--out", "l.jsonl")
    log = tmp_path / "l.jsonl"
    lines = read_lines(log)
    lines[1]["env_id"] = "EGIP-NEJM-v0"  # a line written by another environment
    log.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines),
                   encoding="utf-8")
    before = log.read_bytes()
    proc = clinenv(tmp_path, "run", "--env", "EGIP-Demo-v0", "--episodes", "4",
                   "--out", "l.jsonl", "--resume", check=2)
    assert re.search(r"l\.jsonl, line 2: env_id is \"EGIP-NEJM-v0\" but this run has "
                     r"\"EGIP-Demo-v0\"; refusing", proc.stderr), proc.stderr
    assert log.read_bytes() == before


@needs_medqa
def test_resume_refuses_a_demo_log_for_medqa(tmp_path):
    clinenv(tmp_path, "run", "--env", "EGIP-Demo-v0", "--episodes", "2", "--out", "l.jsonl")
    proc = clinenv(tmp_path, "run", "--env", "EGIP-MedQA-v0", "--episodes", "2",
                   "--out", "l.jsonl", "--resume", data_dir=SHARED, check=2)
    assert "line 1: env_id" in proc.stderr and "EGIP-MedQA-v0" in proc.stderr
    assert len(read_lines(tmp_path / "l.jsonl")) == 2


# ----------------------------------------------------------------------- env choice
@needs_medqa
def test_env_auto_picks_medqa_when_it_resolves(tmp_path):
    proc = clinenv(tmp_path, "run", "--episodes", "2", "--out", "l.jsonl", data_dir=SHARED)
    assert proc.stdout.startswith("env: EGIP-MedQA-v0 (--env auto: dataset 'medqa' found at")
    assert str(MEDQA_FILE) in proc.stdout
    assert {x["env_id"] for x in read_lines(tmp_path / "l.jsonl")} == {"EGIP-MedQA-v0"}


def test_env_auto_falls_back_to_demo(tmp_path):
    proc = clinenv(tmp_path, "run", "--env", "auto", "--episodes", "2", "--out", "l.jsonl")
    assert proc.stdout.startswith("env: EGIP-Demo-v0 (--env auto: dataset 'medqa' not found")
    assert {x["env_id"] for x in read_lines(tmp_path / "l.jsonl")} == {"EGIP-Demo-v0"}


def test_missing_dataset_exits_2_with_how_to(tmp_path):
    proc = clinenv(tmp_path, "run", "--env", "EGIP-MedQA_Ext-v0", "--out", "l.jsonl",
                   check=2)
    assert proc.stderr.startswith("clinenv: error: dataset 'medqa_ext'")
    assert "How to get it" in proc.stderr
    assert "clinenv data download medqa_ext" in proc.stderr
    assert not (tmp_path / "l.jsonl").exists()


BAD_ARGUMENTS = [
    (("--env", "EGIP-Nope-v0"), "unknown environment id 'EGIP-Nope-v0'"),
    (("--env", "CartPole-v1"), "'CartPole-v1' is not an EGIP environment; clinenv ids: "),
    (("--env", "CartPole-v1", "--data-dir", "."), "'CartPole-v1' is not an EGIP environment"),
    (("--env", "EGIP-Demo-v0", "--episodes", "500"), "episodes must be in 1..17"),
    (("--episodes", "0"), "must be >= 1"),
    (("--seed", "-1"), "must be >= 0"),
    (("--doctor", "oracle"), "invalid choice"),
    (("--env", "AgentClinic-Demo-v0", "--examiner", "lookup"),
     "--examiner lookup: the agentclinic protocol has no seat for record lookup"),
    (("--env", "MedAgentSim-Demo-v0", "--examiner", "lookup"),
     "--examiner lookup: the medagentsim protocol has no seat for record lookup"),
    (("--examiner-model", "m"), "--examiner-model is used only with --examiner llm"),
    (("--examiner", "llm", "--base-url", "http://127.0.0.1:9/v1"),
     "--examiner llm needs --model M (or --examiner-model)"),
    (("--examiner", "reader"), "invalid choice"),
]


@pytest.mark.parametrize("args, message", BAD_ARGUMENTS)
def test_bad_arguments_exit_2(clinenv_main, tmp_path, args, message):
    """Every refusal is short: an argparse error is its line and where help is (no usage
    block), any other refusal the one ``clinenv: error:`` line."""
    code, out, err = clinenv_main("run", *args, "--out", "l.jsonl")
    assert code == 2 and message in err
    lines = err.splitlines()
    if lines[0].startswith("clinenv run: error: "):  # argparse's (a type or a choice)
        assert lines == [lines[0], "Run 'clinenv run --help' for usage."], err
    else:
        assert len(lines) == 1 and lines[0].startswith("clinenv: error: "), err
    assert "usage:" not in err
    assert not (tmp_path / "l.jsonl").exists()


@pytest.mark.parametrize("args, message", BAD_ARGUMENTS)
def test_bad_arguments_create_no_runs_folder(clinenv_main, tmp_path, args, message):
    """With the default --out (runs/...), nothing is created before the arguments pass."""
    code, out, err = clinenv_main("run", *args)
    assert code == 2 and message in err
    assert not (tmp_path / "runs").exists()


def test_version_prints_the_package_version(clinenv_main):
    import clinenv as package

    assert clinenv_main("--version") == (0, f"clinenv {package.__version__}\n", "")


def test_non_egip_env_is_one_line_error(tmp_path):
    proc = clinenv(tmp_path, "run", "--env", "CartPole-v1", "--quiet", check=2)
    assert proc.stderr.splitlines() == [
        "clinenv: error: 'CartPole-v1' is not an EGIP environment; clinenv ids: "
        "EGIP-Demo-v0, EGIP-MedQA-v0, EGIP-MedQA_Ext-v0, EGIP-NEJM-v0, EGIP-NEJM_Ext-v0, "
        "EGIP-MIMIC-IV-v0, AgentClinic-Demo-v0, AgentClinic-MedQA-v0, "
        "AgentClinic-MedQA_Ext-v0, AgentClinic-NEJM-v0, AgentClinic-NEJM_Ext-v0, "
        "AgentClinic-MIMIC-IV-v0, MedAgentSim-Demo-v0, MedAgentSim-MedQA-v0, "
        "MedAgentSim-MedQA_Ext-v0, MedAgentSim-NEJM-v0, MedAgentSim-NEJM_Ext-v0, "
        "MedAgentSim-MIMIC-IV-v0 (or 'auto')"]
    assert proc.stdout == ""


def test_refuses_to_overwrite_the_default_log(tmp_path):
    clinenv(tmp_path, "run", "--env", "EGIP-Demo-v0", "--episodes", "1", "--quiet")
    log = tmp_path / "runs" / "EGIP-Demo-v0_scripted_seed0.jsonl"
    before = log.read_bytes()
    proc = clinenv(tmp_path, "run", "--env", "EGIP-Demo-v0", "--episodes", "1", check=2)
    assert proc.stderr == (f"clinenv: error: {Path('runs', log.name)} exists and is not "
                           "empty; pass --resume to continue it, or choose another --out "
                           "file\n")
    assert log.read_bytes() == before


# In-process: ids registered by a test (a subprocess would not see them).
def _not_egip_factory(**kwargs):
    import gymnasium as gym

    return gym.make("CartPole-v1")


def _egip_factory(**kwargs):
    from clinenv.env import EGIPEnv

    return EGIPEnv(**kwargs)


@pytest.fixture
def registered(monkeypatch, tmp_path):
    """Register test ids whose entry points are factory functions; removed afterwards."""
    import gymnasium as gym

    monkeypatch.chdir(tmp_path)
    ids = {"clinenv-test/NotEGIP-v0": (_not_egip_factory, {}),
           "clinenv-test/EGIPFactory-v0": (_egip_factory, {"dataset": "demo"})}
    for env_id, (entry, kwargs) in ids.items():
        gym.register(id=env_id, entry_point=entry, kwargs=kwargs)
    yield
    for env_id in ids:
        gym.registry.pop(env_id, None)


def test_factory_ids_are_checked_after_make(registered, tmp_path, capsys):
    from clinenv.cli import main

    assert main(["run", "--env", "clinenv-test/NotEGIP-v0", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("clinenv: error: 'clinenv-test/NotEGIP-v0' is not an EGIP "
                          "environment") and len(err.splitlines()) == 1
    assert not (tmp_path / "runs").exists()
    # a future EGIP id (any entry point that builds an EGIPEnv) runs
    assert main(["run", "--env", "clinenv-test/EGIPFactory-v0", "--episodes", "1",
                 "--out", "l.jsonl", "--quiet"]) == 0
    assert "clinenv-test/EGIPFactory-v0 | doctor scripted" in capsys.readouterr().out
    assert len(read_lines(tmp_path / "l.jsonl")) == 1


@needs_medqa
def test_medqa_all_107_cases(tmp_path):
    proc = clinenv(tmp_path, "run", "--env", "EGIP-MedQA-v0", "--out", "medqa.jsonl",
                   data_dir=SHARED)
    lines = read_lines(tmp_path / "medqa.jsonl")
    assert len(lines) == 107 == len({x["case_id"] for x in lines})
    assert [x["case_index"] for x in lines] == list(range(107))
    check_summary(proc.stdout, lines, 107)


# ----------------------------------------------------------------------------- data
@needs_medqa
def test_data_list_on_the_shared_folder(tmp_path):
    out = clinenv(tmp_path, "data", "list", data_dir=SHARED).stdout
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert out.splitlines()[0].split() == ["name", "file", "records", "found", "sha256"]
    assert rows["medqa"] == ["medqa", "agentclinic_medqa.jsonl", "107", str(MEDQA_FILE), "ok"]
    assert rows["medqa_ext"][3:] == ["absent", "-"]
    assert rows["mimiciv"][2:] == ["-", "absent", "-"]
    assert rows["demo"][-2:] == ["not", "pinned"]
    # no pinned count: a present file's records are counted (the demo set has 17)
    assert rows["demo"][2] == "17"
    if (SHARED / "agentclinic_nejm.jsonl").exists():
        assert rows["nejm"][2:] == ["15", str(SHARED / "agentclinic_nejm.jsonl"), "ok"]


@needs_medqa
def test_data_verify_on_the_shared_folder(tmp_path):
    proc = clinenv(tmp_path, "data", "verify", data_dir=SHARED)
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines()[1:]}
    assert rows["medqa"] == ["medqa", "ok", "107/107", "ok", str(MEDQA_FILE)]
    assert rows["medqa_ext"][1] == "absent"
    assert rows["demo"][1] == "ok"
    one = clinenv(tmp_path, "data", "verify", "MedQA", "mimic-iv", data_dir=SHARED).stdout
    assert [line.split()[:2] for line in one.splitlines()[1:]] == [
        ["medqa", "ok"], ["mimiciv", "absent"]]


@needs_medqa
def test_data_verify_exits_1_on_a_wrong_checksum(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    data = MEDQA_FILE.read_bytes()
    edited = data.replace(b"year-old", b"year-OLD", 1)  # still valid JSON, in tmp only
    assert edited != data
    (bad / MEDQA_FILE.name).write_bytes(edited)
    proc = clinenv(tmp_path, "data", "verify", "medqa", data_dir=bad, check=1)
    assert proc.stdout.splitlines()[1].split()[:4] == ["medqa", "FAILED", "107/107", "MISMATCH"]
    assert f"medqa: {bad / MEDQA_FILE.name}: sha256 " in proc.stderr
    (bad / MEDQA_FILE.name).write_bytes(data[:-200])  # truncated mid-record
    proc = clinenv(tmp_path, "data", "verify", "medqa", data_dir=bad, check=1)
    assert "MISMATCH" in proc.stdout and "unparsable" in proc.stdout
    assert "does not parse as JSON Lines" in proc.stderr
    listed = clinenv(tmp_path, "data", "list", data_dir=bad).stdout
    assert "MISMATCH" in listed


def test_data_download_refusals(tmp_path):
    proc = clinenv(tmp_path, "data", "download", "mimiciv", check=2)
    assert "cannot be downloaded" in proc.stderr and "PhysioNet" in proc.stderr
    assert "CLINENV_DATA_DIR" in proc.stderr
    proc = clinenv(tmp_path, "data", "download", "nope", check=2)
    assert "unknown dataset 'nope'" in proc.stderr
    assert "bundled" in clinenv(tmp_path, "data", "download", "demo").stdout
    assert clinenv(tmp_path, "data", "verify", "nope", check=2).stderr.startswith(
        "clinenv: error: unknown dataset")


@needs_medqa
def test_data_download_finds_an_existing_copy(tmp_path):
    proc = clinenv(tmp_path, "data", "download", "medqa", data_dir=SHARED)
    assert f"already available at {MEDQA_FILE}" in proc.stdout
