"""The speed benchmarks run and print their figures (speed itself is not asserted)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "CLINENV_DATA_DIR"}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args],
                          capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_bench_env_prints_every_figure_on_the_demo_set():
    out = _run("bench_env.py", "--episodes", "3", "--envs", "3", "--repeat", "1")
    assert out.startswith("EGIP-Demo-v0") and "NOTE: MedQA not found" in out
    for row in ("doctor steps/s (env + doctor)", "env.step, question",
                "env.step, exam request", "env.step, invalid/feedback", "env.step, answer",
                "  doctor steps/s (env + doctor)", "  env.step, question", "per env, RSS"):
        assert re.search(rf"^  {re.escape(row)}\s+[\d,.]+", out, re.M), row
    assert "memo emptied each episode:" in out
    # 3 episodes; the per-kind counts add up to the steps of the pass
    steps = int(re.search(r"3 x (\d+) steps", out).group(1))
    kinds = re.findall(r"^  env\.step, (?:question|exam request|invalid/feedback|answer)"
                       r"\s+[\d.]+ us\s+([\d,]+) steps", out, re.M)
    assert len(kinds) == 4 and sum(int(k.replace(",", "")) for k in kinds) == steps
