"""Shared fixtures: the AgentClinic files in ../shared/datasets/agentclinic (never copied)."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "agentclinic"


@pytest.fixture
def shared_data_dir(monkeypatch, tmp_path) -> Path:
    """CLINENV_DATA_DIR pointed at the shared AgentClinic files; an empty user cache."""
    if not (SHARED_DATA / "agentclinic_medqa.jsonl").exists():
        pytest.skip(f"AgentClinic files not found in {SHARED_DATA}")
    monkeypatch.setenv("CLINENV_DATA_DIR", str(SHARED_DATA))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return SHARED_DATA
