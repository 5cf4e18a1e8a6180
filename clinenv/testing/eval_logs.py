"""Hand-made run logs for the evaluation report tests.

A run is written from a grid ``{case_id: "CWU"}``: one letter per repetition, ``C``
correct, ``W`` wrong, ``U`` unscored, ``-`` missing (no line).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clinenv.runlog import SCHEMA

VERDICT = {"C": "correct", "W": "wrong", "U": "unscored"}

# Dataset "alpha", 4 cases x 3 repetitions.
NATIVE_ALPHA = {"a1": "CCC", "a2": "WWU", "a3": "CWC", "a4": "WWW"}
EGIP_ALPHA = {"a1": "CCC", "a2": "CCW", "a3": "WWW", "a4": "CWU"}
# Dataset "beta", 4 cases x 3 repetitions.
NATIVE_BETA = {"b1": "CCC", "b2": "CCC", "b3": "WWW", "b4": "WWW"}
EGIP_BETA = {"b1": "CCC", "b2": "CCC", "b3": "CCC", "b4": "WWW"}
# NEJM_Ext-style question types of the alpha cases (a4 has two labels).
ALPHA_STRATA = {"a1": ["diagnosis"], "a2": ["diagnosis"], "a3": ["etiology"],
                "a4": ["diagnosis", "other"]}


def log_lines(dataset: str, doctor: str, grid: Mapping[str, str], *,
              strata: Mapping[str, Any] | None = None, exploration: float = 0.0,
              run_seed: int = 0, turns: int = 19, exams: int = 2,
              schedule: bool = True) -> list[dict[str, Any]]:
    """Run-log lines of one run, in repetition-major order like ``clinenv run``.

    With ``schedule`` (the default) the lines record the schedule (``n_cases_scheduled``
    = the grid's cases, ``n_repetitions`` = its longest string) like ``clinenv run``;
    without it they look like a log written before those fields existed.
    """
    lines = []
    n_reps = max(len(v) for v in grid.values())
    for rep in range(n_reps):
        for index, (case_id, letters) in enumerate(grid.items()):
            letter = letters[rep]
            if letter == "-":
                continue
            lines.append({
                "schema": SCHEMA, "case_id": case_id, "case_index": index,
                "repetition": rep, "seed": 1000 * rep + index, "run_seed": run_seed,
                "env_id": f"EGIP-{dataset}-v0", "env_spec": None, "dataset": dataset,
                "dataset_sha256": f"sha-{dataset}", "clinenv_version": "0.1.0",
                "doctor": {"name": doctor, "config": {"exploration": exploration}},
                "turns": turns, "n_exams_requested": exams,
                "answer": None if letter == "U" else f"answer {case_id}",
                "verdict": VERDICT[letter], "correct": letter == "C",
                "case_flags": {}, "case_strata": {"question_type": strata[case_id]}
                if strata else {},
            })
            if schedule:
                lines[-1].update(n_cases_scheduled=len(grid), n_repetitions=n_reps)
    return lines


def write_log(path: Path, *runs: list[dict[str, Any]]) -> Path:
    """Write the lines of one or more runs to ``path`` (one JSON object per line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for lines in runs:
            for line in lines:
                fh.write(json.dumps(line) + "\n")
    return path


def write_fixture_logs(folder: Path) -> dict[str, Path]:
    """The four logs: native/egip on alpha (with strata) and beta (turns differ)."""
    return {
        "native_alpha": write_log(folder / "native_alpha.jsonl", log_lines(
            "alpha", "native", NATIVE_ALPHA, strata=ALPHA_STRATA, turns=19, exams=2)),
        "native_beta": write_log(folder / "native_beta.jsonl", log_lines(
            "beta", "native", NATIVE_BETA, turns=19, exams=2)),
        "egip_alpha": write_log(folder / "egip_alpha.jsonl", log_lines(
            "alpha", "egip", EGIP_ALPHA, strata=ALPHA_STRATA, turns=12, exams=5)),
        "egip_beta": write_log(folder / "egip_beta.jsonl", log_lines(
            "beta", "egip", EGIP_BETA, turns=12, exams=5)),
    }
