"""Method labels of ``clinenv eval`` / ``compare`` when logs share a doctor name.

Every log here is written by a real ``clinenv run`` (subprocess) with the LLM doctor
against a real local OpenAI-compatible server (:class:`~clinenv.testing.fake_server.
FakeChatServer` with the deterministic clinic of clinenv/testing/clinic.py), under
different ``--model`` names and temperatures; expected accuracies are recounted from the
logs' own lines.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clinenv.evaluation.labels import doctor_model, model_tags, with_models
from clinenv.testing.cli_calls import main_cli, one_error_line, read_csv, run_cli
from clinenv.testing.clinic import clinic_responder
from clinenv.testing.fake_server import FakeChatServer

QWEN = "Qwen/Qwen2.5-7B-Instruct"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
OTHER_QWEN = "other-org/Qwen2.5-7B-Instruct"


def lines_of(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x]


def accuracy(path: Path) -> float:
    lines = lines_of(path)
    return 100 * sum(x["verdict"] == "correct" for x in lines) / len(lines)


@pytest.fixture(scope="module")
def llm_logs(tmp_path_factory):
    """``clinenv run --doctor llm`` logs on the demo set (2 cases each), run at once:
    Qwen and Llama at temperature 0, Qwen at 0.7, a second model whose name ends like
    Qwen's (``other-org/Qwen2.5-7B-Instruct``), and Qwen and Llama under the
    self-reflection baseline wrapper (its doctor config nests the model under
    ``inner``)."""
    folder = tmp_path_factory.mktemp("llm_logs")
    runs = {"qwen": (QWEN, []), "llama": (LLAMA, []),
            "qwen_t07": (QWEN, ["--temperature", "0.7"]), "other_qwen": (OTHER_QWEN, []),
            "reflect_qwen": (QWEN, ["--baseline", "self-reflection"]),
            "reflect_llama": (LLAMA, ["--baseline", "self-reflection"])}
    env = dict(os.environ, PYTHONIOENCODING="utf-8", XDG_CACHE_HOME=str(folder / "cache"),
               CLINENV_DATA_DIR=str(folder / "no-data"))
    with FakeChatServer(clinic_responder()) as server:
        procs = {name: subprocess.Popen(
            [sys.executable, "-m", "clinenv", "run", "--env", "EGIP-Demo-v0", "--doctor",
             "llm", "--base-url", server.base_url, "--model", model, "--episodes", "2",
             "--quiet", "--out", f"{name}.jsonl", *extra], cwd=folder, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for name, (model, extra) in runs.items()}
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, (name, out, err)
    return folder


def method_rows(stdout: str) -> dict[str, list[str]]:
    """``{method label: the rest of its row}`` of the printed accuracy table."""
    rows = {}
    for line in stdout.splitlines():
        if line.startswith("llm-direct"):
            label, *rest = line.split()
            rows[label] = rest
    return rows


def test_logs_that_differ_by_model_get_the_model_in_their_label(llm_logs):
    proc = run_cli(llm_logs, "eval", "qwen.jsonl", "llama.jsonl", "--out-dir", "out")
    rows = method_rows(proc.stdout)
    assert set(rows) == {"llm-direct[Qwen2.5-7B-Instruct]",
                         "llm-direct[Llama-3.1-8B-Instruct]"}
    csv_rows = read_csv(llm_logs / "out" / "accuracy.csv")
    got = {r["method"]: float(r["accuracy_mean"]) for r in csv_rows}
    assert got == pytest.approx({
        "llm-direct[Qwen2.5-7B-Instruct]": accuracy(llm_logs / "qwen.jsonl"),
        "llm-direct[Llama-3.1-8B-Instruct]": accuracy(llm_logs / "llama.jsonl")})
    # the logs really record the two models (the label is not made up)
    assert {lines_of(llm_logs / f)[0]["doctor"]["config"]["model"]
            for f in ("qwen.jsonl", "llama.jsonl")} == {QWEN, LLAMA}


def test_the_model_labels_work_in_compare_pairs(llm_logs):
    proc = run_cli(llm_logs, "compare", "qwen.jsonl", "llama.jsonl", "--resamples", "200",
                   "--flips", "200", "--out-dir", "cmp")
    (row,) = read_csv(llm_logs / "cmp" / "comparison.csv")
    assert (row["method"], row["baseline"]) == ("llm-direct[Llama-3.1-8B-Instruct]",
                                                "llm-direct[Qwen2.5-7B-Instruct]")
    assert float(row["difference_pp"]) == pytest.approx(
        accuracy(llm_logs / "llama.jsonl") - accuracy(llm_logs / "qwen.jsonl"))
    assert "Holm-adjusted over the 1 comparison(s)" in proc.stdout
    run_cli(llm_logs, "compare", "qwen.jsonl", "llama.jsonl", "--pair",
            "llm-direct[Qwen2.5-7B-Instruct]=llm-direct[Llama-3.1-8B-Instruct]",
            "--resamples", "200", "--flips", "200", "--out-dir", "cmp2")
    (row,) = read_csv(llm_logs / "cmp2" / "comparison.csv")
    assert (row["method"], row["baseline"]) == ("llm-direct[Qwen2.5-7B-Instruct]",
                                                "llm-direct[Llama-3.1-8B-Instruct]")


def test_models_whose_names_end_alike_keep_their_full_names(llm_logs):
    proc = run_cli(llm_logs, "eval", "qwen.jsonl", "other_qwen.jsonl", "llama.jsonl",
                   "--out-dir", "out")
    assert set(method_rows(proc.stdout)) == {f"llm-direct[{QWEN}]",
                                             f"llm-direct[{OTHER_QWEN}]",
                                             f"llm-direct[{LLAMA}]"}


def test_a_wrapped_doctor_is_labelled_by_its_inner_model(llm_logs):
    doctor = lines_of(llm_logs / "reflect_qwen.jsonl")[0]["doctor"]
    assert doctor["name"] == "llm-direct+self-reflection"
    assert "model" not in doctor["config"]
    assert doctor["config"]["inner"]["config"]["model"] == QWEN
    proc = run_cli(llm_logs, "eval", "reflect_qwen.jsonl", "reflect_llama.jsonl",
                   "qwen.jsonl", "--out-dir", "out")
    assert set(method_rows(proc.stdout)) == {
        "llm-direct+self-reflection[Qwen2.5-7B-Instruct]",
        "llm-direct+self-reflection[Llama-3.1-8B-Instruct]",
        "llm-direct"}  # one model under this label: left as it is


def test_same_model_different_settings_names_the_field_in_full(llm_logs):
    proc = main_cli(llm_logs, "eval", "qwen.jsonl", "qwen_t07.jsonl", code=2)
    line = one_error_line(proc)
    assert line == (
        "clinenv: error: qwen_t07.jsonl, line 1: two different runs are labelled "
        "'llm-direct' on dataset 'demo': doctor.config.generation.temperature is 0.7 here "
        "but 0.0 in qwen.jsonl; give each log its own label with LABEL=path, e.g. "
        "llm-direct-1=qwen.jsonl llm-direct-2=qwen_t07.jsonl")
    assert "..." not in line
    # doing what it says works
    proc = run_cli(llm_logs, "eval", "t0=qwen.jsonl", "t0.7=qwen_t07.jsonl", "--out-dir",
                   "named")
    assert [r["method"] for r in read_csv(llm_logs / "named" / "accuracy.csv")] == [
        "t0", "t0.7"]


def test_a_user_label_wins_and_takes_its_log_out_of_the_model_rule(llm_logs):
    run_cli(llm_logs, "eval", "mine=qwen.jsonl", "llama.jsonl", "--out-dir", "user")
    assert [r["method"] for r in read_csv(llm_logs / "user" / "accuracy.csv")] == [
        "mine", "llm-direct"]


def test_one_file_with_two_models_names_the_model_field(llm_logs):
    mixed = llm_logs / "mixed.jsonl"
    mixed.write_text((llm_logs / "qwen.jsonl").read_text(encoding="utf-8")
                     + (llm_logs / "llama.jsonl").read_text(encoding="utf-8"),
                     encoding="utf-8")
    first_llama = len(lines_of(llm_logs / "qwen.jsonl")) + 1
    line = one_error_line(main_cli(llm_logs, "eval", "mixed.jsonl", code=2))
    assert line == (f"clinenv: error: mixed.jsonl, line {first_llama}: mixed runs in one file: "
                    f"doctor.config.model is \"{LLAMA}\" here but \"{QWEN}\" on line 1; "
                    "write each run to its own log")


def test_label_helpers():
    assert model_tags([QWEN, LLAMA, "/models/qwen7b/"]) == {
        QWEN: "Qwen2.5-7B-Instruct", LLAMA: "Llama-3.1-8B-Instruct",
        "/models/qwen7b/": "qwen7b"}
    assert model_tags(["a/x", "b/x", "c/y"]) == {"a/x": "a/x", "b/x": "b/x", "c/y": "c/y"}
    # one label, two models on two datasets: both tagged (one label would read as one
    # method across the table's columns); a label with one model stays as it is
    assert with_models(["llm-direct", "llm-direct", "scripted", "llm-vote", "llm-vote"],
                       ["m/a", "m/b", None, "m/a", "m/a"]) == [
        "llm-direct[a]", "llm-direct[b]", "scripted", "llm-vote", "llm-vote"]
    assert doctor_model({"name": "scripted", "config": {"exploration": 0.3}}) is None
    assert doctor_model({"name": "x", "config": {"wrapper": "cdeg", "inner": {
        "name": "y", "config": {"wrapper": "reask", "inner": {
            "name": "z", "config": {"model": "deep/model"}}}}}}) == "deep/model"
