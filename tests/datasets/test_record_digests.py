"""Finding and checking data: $CLINENV_DATA_DIR, byte-different copies, changed records,
folders where files should be, and what the run log records as ``dataset_sha256``.

Copies of the shared AgentClinic files are made in ``tmp_path`` only (CRLF line ends, a
BOM, one changed record); the canonical form is recomputed here with plain ``json`` and
``hashlib``, independently of :mod:`clinenv.datasets.digests`.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.cases import read_cases
from clinenv.cli import main
from clinenv.datasets import DATASETS, load_cases, sha256_file, verify_dataset
from clinenv.datasets.record_digests import RECORD_DIGESTS, RECORDS_SHA256
from clinenv.env.case_pool import CasePool
from clinenv.errors import (
    CaseFormatError,
    ChecksumError,
    ChecksumWarning,
    DataDirError,
    DatasetFolderError,
)
from clinenv.runlog import read_run_log
from clinenv.testing.data import MEDQA_FILE, NEJM_FILE, skip_without_shared_data

PINNED_RAW = "d91038a2984f21bb1d43edd88c7958d090ef42ba80f5be487b22b903bf3a35ea"


def canonical_lines(path: Path) -> list[bytes]:
    """Each record parsed and re-serialized with sorted keys (the documented form)."""
    text = path.read_bytes().decode("utf-8-sig")
    return [json.dumps(json.loads(line), sort_keys=True, ensure_ascii=False,
                       separators=(",", ":")).encode("utf-8")
            for line in text.splitlines() if line.strip()]


@pytest.fixture
def shared(monkeypatch, tmp_path) -> Path:
    folder = skip_without_shared_data(MEDQA_FILE, NEJM_FILE)
    monkeypatch.delenv("CLINENV_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return folder


def copy_as(shared: Path, folder: Path, *, crlf=False, bom=False, edit=None, drop_last=False,
            name=MEDQA_FILE) -> Path:
    lines = (shared / name).read_text(encoding="utf-8").splitlines()
    if edit is not None:
        index, change = edit
        record = json.loads(lines[index])
        change(record)
        lines[index] = json.dumps(record)
    if drop_last:
        lines = lines[:-1]
    text = ("\r\n" if crlf else "\n").join(lines) + ("\r\n" if crlf else "\n")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return path


def no_bacteria(record):
    record["OSCE_Examination"]["Test_Results"]["Urinalysis"]["Bacteria"] = "Many"


# ------------------------------------------------------------------ pinned digests
@pytest.mark.parametrize(("name", "file_name", "n"), [("medqa", MEDQA_FILE, 107),
                                                      ("nejm", NEJM_FILE, 15)])
def test_pinned_digests_are_those_of_the_shared_files(shared, name, file_name, n):
    assert sha256_file(shared / file_name) == DATASETS[name].sha256
    lines = canonical_lines(shared / file_name)
    assert len(lines) == n == len(RECORD_DIGESTS[name])
    assert list(RECORD_DIGESTS[name]) == [hashlib.sha256(x).hexdigest() for x in lines]
    whole = hashlib.sha256(b"".join(x + b"\n" for x in lines)).hexdigest()
    assert RECORDS_SHA256[name] == DATASETS[name].records_sha256 == whole
    assert len(RECORD_DIGESTS["medqa_ext"]) == 214 and len(RECORD_DIGESTS["nejm_ext"]) == 120
    assert RECORD_DIGESTS["medqa_ext"][:107] == RECORD_DIGESTS["medqa"]


# ------------------------------------------------------------------ byte-different copies
@pytest.mark.parametrize(("crlf", "bom"), [(True, False), (False, True), (True, True)])
def test_crlf_and_bom_copies_hold_the_same_cases(shared, tmp_path, crlf, bom):
    path = copy_as(shared, tmp_path / "copy", crlf=crlf, bom=bom)
    assert sha256_file(path) != PINNED_RAW
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning either
        cases = load_cases("medqa", tmp_path / "copy")
    assert cases == load_cases("medqa", shared)
    result = verify_dataset("medqa", tmp_path / "copy")
    assert (result["ok"], result["same_records"], result["difference"]) == (True, True, None)
    with gym.make("EGIP-MedQA-v0", data_dir=str(tmp_path / "copy")) as env:
        pool = env.unwrapped.pool
        assert pool.sha256 == DATASETS["medqa"].records_sha256
        assert set(pool.sha256_aliases) == {sha256_file(path), PINNED_RAW}


def test_data_verify_and_list_accept_a_crlf_copy(shared, tmp_path, capsys):
    copy_as(shared, tmp_path / "copy", crlf=True)
    assert main(["data", "verify", "medqa", "--data-dir", str(tmp_path / "copy")]) == 0
    out = capsys.readouterr().out
    assert "medqa  ok      107/107  ok (same records)" in out


# ------------------------------------------------------------------ changed records
def test_a_changed_record_is_refused_naming_the_case(shared, tmp_path):
    copy_as(shared, tmp_path / "bad", edit=(26, no_bacteria))
    with pytest.raises(ChecksumError) as info:
        load_cases("medqa", tmp_path / "bad")
    text = str(info.value)
    assert "case medqa-0027 (line 27) differs from the pinned record" in text
    assert "--no-verify" in text and "verify=False" in text
    assert info.value.expected_records == DATASETS["medqa"].records_sha256
    with pytest.raises(ChecksumError, match="medqa-0027"):
        gym.make("EGIP-MedQA-v0", data_dir=str(tmp_path / "bad"))
    result = verify_dataset("medqa", tmp_path / "bad")
    assert result["ok"] is False
    assert result["difference"] == "case medqa-0027 (line 27) differs from the pinned record"


def test_the_override_uses_it_with_a_warning_everywhere(shared, tmp_path):
    copy_as(shared, tmp_path / "bad", crlf=True, edit=(26, no_bacteria))
    with pytest.warns(ChecksumWarning, match=r"case medqa-0027 \(line 27\)"):
        cases = load_cases("medqa", tmp_path / "bad", verify=False)
    assert cases[26].records.tests["Urinalysis"]["Bacteria"] == "Many"
    with pytest.warns(ChecksumWarning, match="medqa-0027"):
        env = gym.make("EGIP-MedQA-v0", data_dir=str(tmp_path / "bad"), verify=False)
    env.close()


def test_a_missing_record_is_named(shared, tmp_path):
    copy_as(shared, tmp_path / "short", drop_last=True)
    with pytest.raises(ChecksumError, match=r"ends after 106 record\(s\): case medqa-0107 "
                                            "is missing"):
        load_cases("medqa", tmp_path / "short")


def test_clinenv_run_refuses_then_no_verify_runs_with_a_warning(shared, tmp_path, capsys):
    copy_as(shared, tmp_path / "bad", edit=(3, no_bacteria_04))
    base = ["run", "--env", "EGIP-MedQA-v0", "--data-dir", str(tmp_path / "bad"),
            "--episodes", "1", "--quiet"]
    assert main([*base, "--out", "a.jsonl"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("clinenv: error: ") and "case medqa-0004 (line 4)" in err
    assert not (tmp_path / "a.jsonl").exists()
    with pytest.warns(ChecksumWarning, match="medqa-0004"):
        assert main([*base, "--no-verify", "--out", "b.jsonl"]) == 0
    (line,) = read_run_log(tmp_path / "b.jsonl").lines
    records = canonical_lines(tmp_path / "bad" / MEDQA_FILE)
    assert line["dataset_sha256"] == hashlib.sha256(
        b"".join(x + b"\n" for x in records)).hexdigest()


def no_bacteria_04(record):
    record["OSCE_Examination"]["Correct_Diagnosis"] += " (edited)"


# ------------------------------------------------------------------ run log and resume
def test_resume_from_a_crlf_copy_of_the_same_records(shared, tmp_path, capsys):
    copy_as(shared, tmp_path / "crlf", crlf=True)
    run = ["run", "--env", "EGIP-MedQA-v0", "--quiet", "--out", "m.jsonl"]
    assert main([*run, "--data-dir", str(shared), "--episodes", "2"]) == 0
    assert main([*run, "--data-dir", str(tmp_path / "crlf"), "--episodes", "3",
                 "--resume"]) == 0
    assert "| 1 run now, 2 resumed" in capsys.readouterr().out
    lines = read_run_log(tmp_path / "m.jsonl").lines
    assert [x["dataset_sha256"] for x in lines] == [DATASETS["medqa"].records_sha256] * 3


def test_a_log_naming_the_file_by_its_bytes_resumes_and_keeps_that_digest(shared, tmp_path,
                                                                          capsys):
    """Logs of earlier clinenv versions hold the raw sha256 of the pinned file."""
    run = ["run", "--env", "EGIP-MedQA-v0", "--quiet", "--out", "old.jsonl"]
    assert main([*run, "--data-dir", str(shared), "--episodes", "1"]) == 0
    path = tmp_path / "old.jsonl"
    (line,) = read_run_log(path).lines
    path.write_text(json.dumps({**line, "dataset_sha256": PINNED_RAW}) + "\n",
                    encoding="utf-8")
    copy_as(shared, tmp_path / "crlf", crlf=True)
    assert main([*run, "--data-dir", str(tmp_path / "crlf"), "--episodes", "2",
                 "--resume"]) == 0
    assert [x["dataset_sha256"] for x in read_run_log(path).lines] == [PINNED_RAW] * 2
    capsys.readouterr()
    copy_as(shared, tmp_path / "bad", edit=(0, no_bacteria_04))
    assert main([*run, "--data-dir", str(tmp_path / "bad"), "--episodes", "3", "--resume",
                 "--no-verify"]) == 2
    err = capsys.readouterr().err
    assert "dataset_sha256 is" in err and "records differ from those the log" in err


# ------------------------------------------------------------------ $CLINENV_DATA_DIR
@pytest.mark.parametrize("kind", ["missing", "empty", "file"])
def test_a_set_data_dir_that_cannot_supply_the_file_is_an_error(shared, tmp_path, monkeypatch,
                                                                kind, capsys):
    folder = tmp_path / "data"
    if kind == "empty":
        folder.mkdir()
    elif kind == "file":
        folder = copy_as(shared, tmp_path / "d")
    want = {"missing": "which does not exist", "empty": f"which holds no {MEDQA_FILE}",
            "file": "which is a file, not a folder"}[kind]
    monkeypatch.setenv("CLINENV_DATA_DIR", str(folder))
    copy_as(shared, tmp_path / "cache" / "clinenv" / "datasets")  # the cache is not used
    with pytest.raises(DataDirError) as info:
        load_cases("medqa")
    assert f"$CLINENV_DATA_DIR is set to {folder}, {want}" in str(info.value)
    for quiet in ([], ["--quiet"]):
        assert main(["run", *quiet, "--episodes", "1", "--out", "x.jsonl"]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1
        assert err.startswith(f"clinenv: error: --env auto: $CLINENV_DATA_DIR is set to "
                              f"{folder}, {want}")
    assert not (tmp_path / "x.jsonl").exists()


def test_only_an_unset_data_dir_falls_back_to_the_demo_set(shared, tmp_path, capsys):
    assert main(["run", "--episodes", "1", "--out", "demo.jsonl"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("env: EGIP-Demo-v0 (--env auto: dataset 'medqa' not found (set "
                          "CLINENV_DATA_DIR or run `clinenv data download medqa`), so the "
                          "bundled demo set is used)\n")


def test_data_download_with_a_data_dir_lacking_the_file_says_so(shared, tmp_path, monkeypatch,
                                                               capsys):
    """The cached copy satisfies `download`; the note says $CLINENV_DATA_DIR hides it."""
    monkeypatch.setenv("CLINENV_DATA_DIR", str(tmp_path / "nowhere"))
    cache = copy_as(shared, tmp_path / "cache" / "clinenv" / "datasets")
    assert main(["data", "download", "medqa"]) == 0
    out, err = capsys.readouterr()
    assert out == f"medqa: downloaded to {cache} (sha256 verified)\n"
    assert err.startswith(f"note: $CLINENV_DATA_DIR is set to {tmp_path / 'nowhere'}, "
                          "which does not exist")


# ------------------------------------------------------------------ folders and messages
def test_a_folder_where_a_file_should_be_is_called_a_folder(shared, tmp_path, monkeypatch,
                                                            capsys):
    (tmp_path / "d" / MEDQA_FILE).mkdir(parents=True)
    with pytest.raises(DatasetFolderError, match=rf"{tmp_path / 'd' / MEDQA_FILE} is a "
                                                 "folder, not the file of dataset 'medqa'"):
        load_cases("medqa", tmp_path / "d")
    with pytest.raises(DatasetFolderError, match="is a folder, not a dataset file"):
        load_cases(tmp_path / "d" / MEDQA_FILE)
    with pytest.raises(IsADirectoryError, match="is a folder, not a JSON Lines file"):
        read_cases(tmp_path / "d")
    assert main(["run", "--env", "EGIP-MedQA-v0", "--data-dir", str(tmp_path / "d"),
                 "--episodes", "1", "--out", "f.jsonl"]) == 2
    err = capsys.readouterr().err
    assert "is a folder" in err and "Traceback" not in err and "not found" not in err
    monkeypatch.setenv("CLINENV_DATA_DIR", str(tmp_path / "d"))
    assert main(["run", "--quiet", "--episodes", "1", "--out", "f.jsonl"]) == 2
    assert "is a folder, not the file of dataset 'medqa' ($CLINENV_DATA_DIR)" in \
        capsys.readouterr().err


@pytest.mark.parametrize(("text", "reason"), [
    ('{"a": "x\ty"}', "invalid JSON: Invalid control character at column 9"),
    ('{"a": "xy', "invalid JSON: Unterminated string starting at column 7"),
    ('{"a" 1}', "invalid JSON: Expecting ':' delimiter at column 6"),
])
def test_json_errors_read_once(tmp_path, text, reason):
    path = tmp_path / "bad.jsonl"
    path.write_text(text, encoding="utf-8")  # no final newline: it would be in the string
    with pytest.raises(CaseFormatError) as info:
        load_cases(path)
    assert info.value.reason == reason and info.value.line == 1
    assert "at at" not in str(info.value)


def test_the_pool_cache_does_not_skip_the_check(shared, tmp_path):
    """A pool loaded with verify=False is not handed out unchecked to a later call."""
    copy_as(shared, tmp_path / "bad", edit=(5, no_bacteria_04))
    with pytest.warns(ChecksumWarning):
        CasePool.get("medqa", data_dir=str(tmp_path / "bad"), verify=False)
    with pytest.raises(ChecksumError, match="case medqa-0006"):
        CasePool.get("medqa", data_dir=str(tmp_path / "bad"))


def test_an_old_log_pairs_with_a_new_one_on_the_same_records(shared, tmp_path):
    """An older log names MedQA by the pinned file's byte digest, a new one by its records
    digest: they are the same dataset file for pairing."""
    from clinenv.evaluation.runs import align, load_runs

    run = ["run", "--env", "EGIP-MedQA-v0", "--quiet", "--data-dir", str(shared),
           "--episodes", "2"]
    assert main([*run, "--out", "new.jsonl"]) == 0
    assert main([*run, "--seed", "1", "--out", "base.jsonl"]) == 0
    lines = read_run_log(tmp_path / "base.jsonl").lines
    (tmp_path / "old.jsonl").write_text(
        "".join(json.dumps({**x, "dataset_sha256": PINNED_RAW}) + "\n" for x in lines),
        encoding="utf-8")
    base, method = load_runs([f"base={tmp_path / 'old.jsonl'}",
                              f"new={tmp_path / 'new.jsonl'}"])
    assert base.dataset_sha256 == method.dataset_sha256 == DATASETS["medqa"].records_sha256
    assert align(base, method).case_ids == ("medqa-0001", "medqa-0002")
