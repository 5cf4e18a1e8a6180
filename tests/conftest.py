"""Shared fixtures and the one place that says where the AgentClinic test files are.

The files are never copied into the repository. :data:`SHARED_DATA` is the folder named
by the environment variable ``CLINENV_TEST_DATA`` when it is set, else the sibling
``../shared/datasets/agentclinic`` of the repository. Test modules use the
:func:`shared_data_dir` fixture, or ``from conftest import SHARED_DATA`` (this works under
pytest's default ``prepend`` import mode, which puts ``tests/`` on ``sys.path``) together
with :func:`needs_shared_data` / :func:`skip_without_shared_data`, so that a test whose
data is absent skips with a message saying where it looked.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: Environment variable naming a folder that holds the AgentClinic files.
TEST_DATA_ENV = "CLINENV_TEST_DATA"


def _shared_data() -> Path:
    override = os.environ.get(TEST_DATA_ENV, "").strip()
    if override:
        return Path(override).expanduser().resolve()
    return Path(__file__).resolve().parents[2] / "shared" / "datasets" / "agentclinic"


#: Folder of the AgentClinic files used by the tests (see the module docstring).
SHARED_DATA = _shared_data()

MEDQA_FILE = "agentclinic_medqa.jsonl"
NEJM_FILE = "agentclinic_nejm.jsonl"


def missing_shared_data(*file_names: str) -> str | None:
    """Skip reason when a file (default: the MedQA file) is absent from :data:`SHARED_DATA`,
    else ``None``."""
    missing = [name for name in file_names or (MEDQA_FILE,)
               if not (SHARED_DATA / name).is_file()]
    if not missing:
        return None
    return (f"AgentClinic test data not found: looked for {', '.join(missing)} in "
            f"{SHARED_DATA}; set {TEST_DATA_ENV} to a folder that holds them")


def needs_shared_data(*file_names: str) -> pytest.MarkDecorator:
    """``skipif`` marker for tests that read these files from :data:`SHARED_DATA`."""
    reason = missing_shared_data(*file_names)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def skip_without_shared_data(*file_names: str) -> Path:
    """Skip the running test unless the files are present; return :data:`SHARED_DATA`."""
    reason = missing_shared_data(*file_names)
    if reason is not None:
        pytest.skip(reason)
    return SHARED_DATA


@pytest.fixture
def shared_data_dir(monkeypatch, tmp_path) -> Path:
    """CLINENV_DATA_DIR pointed at the shared AgentClinic files; an empty user cache.

    Skips the test when the MedQA or NEJM file is absent from :data:`SHARED_DATA`.
    """
    skip_without_shared_data(MEDQA_FILE, NEJM_FILE)
    monkeypatch.setenv("CLINENV_DATA_DIR", str(SHARED_DATA))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return SHARED_DATA


def leaves(tree, *, strings_only: bool = False):
    """Every leaf of a JSON tree, depth first (written here, independently of clinenv's
    own tree walkers, so tests do not check the package against itself)."""
    if isinstance(tree, dict):
        for value in tree.values():
            yield from leaves(value, strings_only=strings_only)
    elif isinstance(tree, list):
        for value in tree:
            yield from leaves(value, strings_only=strings_only)
    elif not strings_only or isinstance(tree, str):
        yield tree
