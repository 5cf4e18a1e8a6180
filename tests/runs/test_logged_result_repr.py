"""A run's result prints as its counts, never its lines (asyncio.run repr()s a main task's
result on the way out; a 10,000-episode run's lines are megabytes)."""

from __future__ import annotations

from pathlib import Path

from clinenv.runs import ReplayResult
from clinenv.runs.logged import RunResult


def test_run_result_repr_is_its_counts():
    lines = [{"case_id": f"c{i}", "text": "x" * 10_000} for i in range(50)]
    result = RunResult(plan=[(i, 0, i) for i in range(50)], lines=lines, n_new=48,
                       n_resumed=2, n_extra=1, partial_bytes=17, n_errors=3, n_retried=1)
    assert repr(result) == ("RunResult(episodes=50, n_new=48, n_resumed=2, n_extra=1, "
                            "n_errors=3, n_retried=1, partial_bytes=17)")


def test_replay_result_repr_is_its_counts():
    result = ReplayResult(out=Path("runs/r.jsonl"), lines=[{"t": "y" * 5000}] * 4, n_new=3,
                          n_resumed=1, n_errors=0, n_skipped=2, partial_bytes=0)
    assert repr(result) == ("ReplayResult(out='runs/r.jsonl', episodes=4, n_new=3, "
                            "n_resumed=1, n_errors=0, n_skipped=2, partial_bytes=0)")
