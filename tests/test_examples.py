"""Every example runs as a script from the repository root and prints what it promises."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import MEDQA_FILE, SHARED_DATA, needs_shared_data

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def run_example(name: str, tmp_path: Path, data_dir: Path | None = None,
                *args: str) -> subprocess.CompletedProcess:
    """``python examples/NAME ARGS`` from the repository root, offline and hermetic."""
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONIOENCODING="utf-8")
    env.pop("CLINENV_DATA_DIR", None)
    if data_dir is not None:
        env["CLINENV_DATA_DIR"] = str(data_dir)
    proc = subprocess.run([sys.executable, str(Path("examples", name)), *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, encoding="utf-8",
                          timeout=120)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    return proc


@pytest.mark.parametrize("name", ["one_episode.py", "plug_in_policy.py", "load_cases.py"])
def test_example_has_a_docstring_saying_how_to_run_it(name):
    doc = ast.get_docstring(ast.parse((EXAMPLES / name).read_text(encoding="utf-8")))
    assert doc and f"python examples/{name}" in doc


def test_one_episode(tmp_path):
    out = run_example("one_episode.py", tmp_path).stdout
    assert "===== doctor's final view (evidence interface) =====" in out
    view = out.split("=====")[2]
    assert "# Acquired observations" in view and "# Objective (S0)" in view
    assert "consistent with lobar pneumonia" in view
    assert "case demo-01: answer 'lobar pneumonia', verdict correct, reward 1.0" in out
    other = run_example("one_episode.py", tmp_path, None, "demo-13").stdout
    assert "# Candidate labels" in other and "case demo-13: answer " in other


def test_plug_in_policy(tmp_path):
    out = run_example("plug_in_policy.py", tmp_path).stdout
    assert "two-test-doctor on demo-01: 4 turns, 2 exams" in out
    assert "accuracy of two-test-doctor: " in out
    assert "accuracy of scripted: 3/6 = 50.0 %" in out


def test_load_cases_demo_only(tmp_path):
    out = run_example("load_cases.py", tmp_path).stdout
    assert "== demo: 17 cases" in out
    assert "demo-01: catalog 9 exams (3 PE, 6 T), no K, flags: target_in_records" in out
    assert "demo-08: catalog 4 exams (4 PE, 0 T), no K, flags: no_recorded_tests" in out
    assert "demo-11: catalog 9 exams (5 PE, 4 T), K=5, flags: -" in out
    assert "== medqa" not in out and "set CLINENV_DATA_DIR" in out


@needs_shared_data(MEDQA_FILE)
def test_load_cases_with_medqa(tmp_path):
    out = run_example("load_cases.py", tmp_path, SHARED_DATA).stdout
    assert "== demo: 17 cases" in out and "== medqa: 107 cases" in out
    assert sum(line.startswith("medqa-") for line in out.splitlines()) == 107
