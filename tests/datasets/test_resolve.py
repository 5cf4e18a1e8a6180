"""Dataset resolution: explicit path, data_dir, $CLINENV_DATA_DIR, cache, download.

No network: downloads use ``file://`` URLs of files made in tmp_path, and the registry
entry is patched to point at them.
"""

from __future__ import annotations

import dataclasses
import json
import urllib.request
from pathlib import Path

import pytest

from clinenv.datasets import (
    DATASETS,
    load_cases,
    load_cases_with_report,
    resolve_dataset,
    sha256_file,
    verify_dataset,
)
from clinenv.datasets import resolve as resolve_mod
from clinenv.datasets.registry import normalize_name
from clinenv.errors import CaseFormatError, ChecksumError, DataDirError, DatasetNotFoundError
from clinenv.testing.data import SHARED_DATA

SHARED = SHARED_DATA
FILE = "agentclinic_medqa.jsonl"


def osce_line(objective: str) -> str:
    return json.dumps({"OSCE_Examination": {
        "Objective_for_Doctor": objective,
        "Patient_Actor": {"Demographics": "30-year-old woman"},
        "Physical_Examination_Findings": {},
        "Test_Results": {"ECG": "Normal"},
        "Correct_Diagnosis": "Panic disorder",
    }})


def make_file(folder: Path, tag: str, n: int = 2) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / FILE
    path.write_text("\n".join(osce_line(f"{tag} {i}") for i in range(n)) + "\n",
                    encoding="utf-8")
    return path


@pytest.fixture
def cache(monkeypatch, tmp_path) -> Path:
    """An empty user cache and no $CLINENV_DATA_DIR; network access fails loudly."""
    folder = tmp_path / "cache"
    monkeypatch.setattr(resolve_mod, "cache_dir", lambda: folder)
    monkeypatch.delenv("CLINENV_DATA_DIR", raising=False)
    return folder


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("no download may be attempted")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)


def pin(monkeypatch, path: Path, n: int = 2, url: str | None = None) -> None:
    """Point the registry's medqa entry at ``path``'s digest (and optionally a URL)."""
    spec = dataclasses.replace(DATASETS["medqa"], sha256=sha256_file(path), n_records=n,
                               url=url if url is not None else DATASETS["medqa"].url)
    monkeypatch.setitem(DATASETS, "medqa", spec)


def test_name_normalization():
    assert normalize_name("MedQA_Ext") == "medqa_ext"
    assert normalize_name("medqa-ext") == "medqa_ext"
    assert normalize_name("MIMIC-IV") == "mimiciv"
    assert normalize_name(" NEJM Ext ") == "nejm_ext"
    assert normalize_name("NEJM") == "nejm"


def test_unknown_name(cache):
    with pytest.raises(DatasetNotFoundError, match="known datasets: demo, medqa"):
        load_cases("pubmedqa")


def test_explicit_path(cache, tmp_path, no_network):
    path = make_file(tmp_path / "mine", "explicit")
    for arg in (path, str(path)):
        assert resolve_dataset(arg) == path
        assert load_cases(arg)[0].objective == "explicit 0"
    with pytest.raises(DatasetNotFoundError, match="no such dataset file"):
        load_cases(tmp_path / "absent.jsonl")


def test_resolution_order(cache, tmp_path, monkeypatch, no_network):
    arg_dir, env_dir = tmp_path / "arg", tmp_path / "env"
    pin(monkeypatch, make_file(arg_dir, "arg"), n=2)
    make_file(env_dir, "env")
    make_file(cache, "cache")
    monkeypatch.setenv("CLINENV_DATA_DIR", str(env_dir))

    def first_objective(data_dir=None):
        return load_cases("MedQA", data_dir, verify=False)[0].objective

    assert first_objective(arg_dir) == "arg 0"
    assert first_objective() == "env 0"
    assert first_objective(tmp_path / "empty") == "env 0"  # data_dir lacks the file
    monkeypatch.delenv("CLINENV_DATA_DIR")
    assert first_objective() == "cache 0"
    assert resolve_dataset("medqa", verify=False) == cache / FILE


def test_not_found_message(cache, tmp_path, no_network):
    with pytest.raises(DatasetNotFoundError) as info:
        resolve_dataset("medqa", tmp_path / "nowhere")
    text = str(info.value)
    assert FILE in text
    assert str(tmp_path / "nowhere" / FILE) in text
    assert str(cache / FILE) in text
    assert "CLINENV_DATA_DIR" in text
    assert "allow_download=True" in text and "clinenv data download medqa" in text


def test_local_checksum_mismatch(cache, tmp_path):
    path = make_file(tmp_path / "d", "tampered")
    with pytest.raises(ChecksumError) as info:
        load_cases("medqa", tmp_path / "d")
    err = info.value
    assert err.path == str(path)
    assert err.expected == DATASETS["medqa"].sha256
    assert err.actual == sha256_file(path)
    assert FILE in str(err) and err.expected in str(err) and err.actual in str(err)
    # verify=False accepts the file; the record count (2, not 107) then decides
    with pytest.raises(CaseFormatError, match="should hold 107 records, loaded 2"):
        load_cases("medqa", tmp_path / "d", verify=False)
    with pytest.warns(UserWarning, match="should hold 107 records"):
        cases, report = load_cases_with_report("medqa", tmp_path / "d", verify=False,
                                               strict=False)
    assert len(cases) == 2 and report.warnings[1:] == [
        "dataset 'medqa' should hold 107 records, loaded 2"]
    assert "case medqa-0001 (line 1) differs" in report.warnings[0]  # the verify=False warning


def test_download_verified_into_cache(cache, tmp_path, monkeypatch):
    source = make_file(tmp_path / "server", "downloaded", n=3)
    pin(monkeypatch, source, n=3, url=source.as_uri())
    with pytest.raises(DatasetNotFoundError):
        resolve_dataset("medqa")  # downloads only when allowed
    path = resolve_dataset("medqa", allow_download=True)
    assert path == cache / FILE and sha256_file(path) == sha256_file(source)
    assert sorted(p.name for p in cache.iterdir()) == [FILE]
    assert [c.objective for c in load_cases("medqa")] == [
        "downloaded 0", "downloaded 1", "downloaded 2"]


def test_download_with_wrong_checksum_leaves_nothing(cache, tmp_path, monkeypatch):
    source = make_file(tmp_path / "server", "evil")
    spec = dataclasses.replace(DATASETS["medqa"], url=source.as_uri(), sha256="0" * 64)
    monkeypatch.setitem(DATASETS, "medqa", spec)
    with pytest.raises(ChecksumError) as info:
        load_cases("medqa", allow_download=True)
    assert info.value.expected == "0" * 64 and info.value.actual == sha256_file(source)
    assert not cache.exists() or list(cache.iterdir()) == []


def test_failed_download_is_not_found(cache, tmp_path, monkeypatch):
    spec = dataclasses.replace(DATASETS["medqa"], url=(tmp_path / "gone.jsonl").as_uri())
    monkeypatch.setitem(DATASETS, "medqa", spec)
    with pytest.raises(DatasetNotFoundError, match="download of dataset 'medqa'"):
        load_cases("medqa", allow_download=True)
    assert list(cache.iterdir()) == []


@pytest.mark.parametrize("allow_download", [False, True])
def test_mimiciv_without_file(cache, no_network, allow_download):
    with pytest.raises(DatasetNotFoundError) as info:
        load_cases("MIMIC-IV", allow_download=allow_download)
    text = str(info.value)
    assert "agentclinic_mimiciv.jsonl" in text
    assert "PhysioNet" in text and "AgentClinic authors" in text
    assert "CLINENV_DATA_DIR" in text


# issue 29 §3
def test_mimiciv_missing_from_the_data_dir_says_how_to_get_it(cache, tmp_path, monkeypatch,
                                                               no_network):
    """The DataDirError names the folder and, for the credentialed file,
    where it comes from (the registry's access note), on one line."""
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("CLINENV_DATA_DIR", str(folder))
    with pytest.raises(DataDirError) as info:
        load_cases("mimiciv")
    assert str(info.value) == (
        f"$CLINENV_DATA_DIR is set to {folder}, which holds no agentclinic_mimiciv.jsonl, "
        "so dataset 'mimiciv' (MIMIC-IV) cannot be loaded: put agentclinic_mimiciv.jsonl "
        "in it, point $CLINENV_DATA_DIR at another folder that holds it, or unset "
        f"CLINENV_DATA_DIR to use the user cache ({cache}). How to get "
        "agentclinic_mimiciv.jsonl: MIMIC-IV cases are derived from credentialed data and "
        "are not published: complete PhysioNet credentialing for MIMIC-IV "
        "(https://physionet.org/content/mimiciv/), then request agentclinic_mimiciv.jsonl "
        "from the AgentClinic authors (https://github.com/SamuelSchmidgall/AgentClinic, "
        "issue #8), put the file in a folder and set CLINENV_DATA_DIR to that folder (or "
        "pass data_dir=... or the file's path).")
    assert DATASETS["mimiciv"].access_note in str(info.value)
    # a public dataset's message is unchanged: it can be downloaded into the cache
    with pytest.raises(DataDirError) as info:
        load_cases("medqa")
    assert "How to get" not in str(info.value)


@pytest.mark.parametrize(("name", "file_name"), [
    ("medqa_ext", "agentclinic_medqa_extended.jsonl"),
    ("NEJM-Ext", "agentclinic_nejm_extended.jsonl"),
])
def test_extended_sets_absent_from_shared(cache, no_network, name, file_name):
    if (SHARED / file_name).exists():
        pytest.skip(f"{file_name} is present in {SHARED}")
    with pytest.raises(DatasetNotFoundError) as info:
        load_cases(name, SHARED)
    text = str(info.value)
    assert file_name in text and "CLINENV_DATA_DIR" in text
    assert "allow_download=True" in text and str(SHARED / file_name) in text


def test_demo_is_bundled(cache, no_network):
    path = resolve_dataset("demo")
    assert path.name == "demo.jsonl" and path.parent.name == "data"
    cases = load_cases("Demo")
    assert len(cases) >= 12
    assert all(c.dataset == "demo" for c in cases)


def test_verify_dataset_reports_mismatch(cache, tmp_path):
    path = make_file(tmp_path / "d", "x")
    result = verify_dataset("medqa", tmp_path / "d")
    assert result == {
        "name": "medqa", "path": str(path), "sha256": sha256_file(path),
        "expected": DATASETS["medqa"].sha256, "expected_records": 107, "n_records": 2,
        "ok": False, "same_records": False,
        "difference": "case medqa-0001 (line 1) differs from the pinned record",
    }
    with pytest.raises(DatasetNotFoundError):
        verify_dataset("nejm_ext", tmp_path / "d")


def test_verify_dataset_counts_with_the_shared_reader(cache, tmp_path):
    path = make_file(tmp_path / "d", "x", n=3)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes().rstrip(b"\n") + b"\n\n")  # BOM
    assert verify_dataset("medqa", tmp_path / "d")["n_records"] == 3
    path.write_bytes(path.read_bytes() + b'{"OSCE_Examination": \n')
    result = verify_dataset("medqa", tmp_path / "d")
    assert result["n_records"] is None and result["ok"] is False
    assert result["error"].startswith("does not parse as JSON Lines: ")
    assert f"{path}, line 5: invalid JSON" in result["error"]
