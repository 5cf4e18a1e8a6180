"""Where the tests find the AgentClinic files, markers that skip a test without them, and
:func:`leaves` (a JSON-tree walker the tests share).

:data:`SHARED_DATA` is the first of ``$CLINENV_TEST_DATA``, ``$CLINENV_DATA_DIR`` and
``../shared/datasets/agentclinic`` beside a source checkout (docs/testing.md, "The
AgentClinic files"). pytest is imported only by the two functions that need it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

#: Environment variable naming a folder that holds the AgentClinic files, for the tests
#: only; it wins over :data:`DATA_DIR_ENV`.
TEST_DATA_ENV = "CLINENV_TEST_DATA"
#: The data-folder variable of runs (``clinenv.datasets.resolve.ENV_VAR``); the tests read
#: it too when :data:`TEST_DATA_ENV` is unset.
DATA_DIR_ENV = "CLINENV_DATA_DIR"


def _shared_data() -> Path:
    for name in (TEST_DATA_ENV, DATA_DIR_ENV):
        folder = os.environ.get(name, "").strip()
        if folder:
            return Path(folder).expanduser().resolve()
    return Path(__file__).resolve().parents[3] / "shared" / "datasets" / "agentclinic"


def _data_source() -> str:
    """Where :data:`SHARED_DATA` came from, for skip messages."""
    for name in (TEST_DATA_ENV, DATA_DIR_ENV):
        if os.environ.get(name, "").strip():
            return f"${name}"
    return f"the default (neither {TEST_DATA_ENV} nor {DATA_DIR_ENV} is set)"


#: Folder of the AgentClinic files used by the tests (docs/testing.md, "The AgentClinic
#: files").
SHARED_DATA = _shared_data()
_DATA_SOURCE = _data_source()

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
            f"{SHARED_DATA} (from {_DATA_SOURCE}); set {DATA_DIR_ENV} (or "
            f"{TEST_DATA_ENV}, which wins for the tests) to a folder that holds them")


def needs_shared_data(*file_names: str) -> Any:
    """``pytest.mark.skipif`` marker for tests that read these files from
    :data:`SHARED_DATA`."""
    import pytest

    reason = missing_shared_data(*file_names)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def skip_without_shared_data(*file_names: str) -> Path:
    """Skip the running test unless the files are present; return :data:`SHARED_DATA`."""
    reason = missing_shared_data(*file_names)
    if reason is not None:
        import pytest

        pytest.skip(reason)
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
