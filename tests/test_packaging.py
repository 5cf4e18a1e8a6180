"""The wheel (``pip install .``) puts agents/ and wrappers/ under clinenv, with demo data."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory) -> set[str]:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        capture_output=True, text=True, timeout=600,
    )
    if proc.returncode != 0:
        pytest.fail(f"pip wheel failed:\n{proc.stderr[-3000:]}")
    (wheel,) = out.glob("clinenv-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        return set(zf.namelist())


def test_wheel_maps_agents_and_wrappers_into_clinenv(wheel_names):
    assert "clinenv/agents/scripted_doctor.py" in wheel_names
    assert "clinenv/agents/patient_retrieval.py" in wheel_names
    assert "clinenv/wrappers/__init__.py" in wheel_names
    assert "clinenv/protocol/runtime.py" in wheel_names
    assert "clinenv/evaluation/stats.py" in wheel_names
    assert not any(n.startswith(("agents/", "wrappers/", "tests/")) for n in wheel_names)


def test_wheel_ships_the_demo_cases(wheel_names):
    assert "clinenv/datasets/data/demo.jsonl" in wheel_names
    assert not any(n.endswith(("agentclinic_medqa.jsonl", "agentclinic_nejm.jsonl"))
                   for n in wheel_names)
