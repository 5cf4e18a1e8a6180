"""examples/three_seats.py runs offline and drives all three seats with policies."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path("examples", "three_seats.py")


def run(tmp_path: Path, *args: str) -> str:
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONIOENCODING="utf-8")
    env.pop("CLINENV_DATA_DIR", None)
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, encoding="utf-8", timeout=120)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    return proc.stdout


def test_docstring_says_how_to_run_it():
    doc = ast.get_docstring(ast.parse((ROOT / SCRIPT).read_text(encoding="utf-8")))
    assert doc and "python examples/three_seats.py" in doc


def test_all_three_seats_act(tmp_path):
    """demo-01: the patient policy answers the opening with P's primary symptom, the
    examiner policy reports T4's stored record (which names the diagnosis), and the
    scripted doctor answers from it; 19 rounds plus the answer."""
    out = run(tmp_path)
    lines = out.splitlines()
    seats = [line.split(":", 1)[0].strip() for line in lines[:-1]]
    assert seats.count("doctor_0") == 20
    assert seats.count("examiner_0") == 8  # PE1-PE3 and T1-T5: the exam budget of 8
    assert seats.count("patient_0") == 19 - 8  # every other round
    assert " patient_0: Cough with rust-coloured sputum" in lines
    assert ("examiner_0: Findings: Dense right lower lobe consolidation with air "
            "bronchograms, consistent with lobar pneumonia; no pleural effusion.") in out
    assert lines[-1] == ("case demo-01: answer 'lobar pneumonia', verdict correct, returns "
                         "doctor_0 1, patient_0 0, examiner_0 0")


@pytest.mark.parametrize("case_id, answer", [("demo-13", "Pulmonary embolism")])
def test_other_case(tmp_path, case_id, answer):
    assert run(tmp_path, case_id).splitlines()[-1].startswith(
        f"case {case_id}: answer {answer!r}, verdict correct")
