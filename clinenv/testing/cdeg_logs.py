"""A hand-checked synthetic CDEG construction fixture (the CDEG construction tests).

Run-log lines (schema ``clinenv.runlog/1``) of two cases, ``c1`` and ``c2``, written as
real JSONL files, with :class:`LineJaccard` (similarity) and :class:`RuleVerifier`
(verifier) as stand-ins. The cases, scores and rules: docs/testing.md, "Hand-built
fixtures".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

TARGETS = {"pulmonary embolism", "migraine"}
Q1 = "What brings you in today?"
Q2 = "Do you have photophobia?"


def obs_spec(source: str, context: str, content: str | None,
             availability: str | None = None) -> tuple[str, str, str | None, str]:
    """One observation: ``(source, context, content, availability)``."""
    return source, context, content, availability or (
        "stated" if source == "Patient" else "recorded")


def log_line(case_id: str, rep: int, answer: str | None, verdict: str,
             observations: Sequence[tuple[str, str, str | None, str]], *,
             objective: str = "", **extra: Any) -> dict[str, Any]:
    """A run-log line with events and ``evidence.observations`` built from the specs."""
    events: list[dict[str, Any]] = []
    obs: list[dict[str, Any]] = []
    for turn, (source, context, content, availability) in enumerate(observations, 1):
        if source == "Patient":
            events += [{"turn": turn, "text": context, "routed_as": "question",
                        "payload": context, "source": "doctor"},
                       {"turn": turn, "question_context": context, "reply": content,
                        "source": "patient"}]
        else:
            events += [{"turn": turn, "text": f"REQUEST TEST: {context}",
                        "routed_as": "test_request", "payload": context, "source": "doctor"},
                       {"turn": turn, "request": context, "exam_id": f"T{turn}",
                        "name": context, "recorded_value": content,
                        "result_availability": availability, "source": "measurement"}]
        obs.append({"obs_id": f"O{turn}", "source": source, "turn": turn, "context": context,
                    "content": content, "availability": availability,
                    "exam_id": None if source == "Patient" else f"T{turn}"})
    if answer is not None:
        events.append({"turn": len(observations) + 1, "text": f"DIAGNOSIS READY: {answer}",
                       "routed_as": "diagnosis", "payload": answer, "source": "doctor"})
    line = {"schema": "clinenv.runlog/1", "case_id": case_id, "repetition": rep,
            "dataset": "synthetic", "answer": answer, "verdict": verdict,
            "correct": verdict == "correct", "events": events,
            "evidence": {"objective": objective, "candidates": None, "observations": obs}}
    line.update(extra)
    return line


def fixture_lines() -> list[dict[str, Any]]:
    """The fixture's lines, in file order (docs/testing.md, "Hand-built fixtures")."""
    sob = obs_spec("Patient", Q1, "Shortness of breath.")
    head = obs_spec("Patient", Q1, "Headache.")
    c1 = {"objective": "Breathless patient."}
    c2 = {"objective": "Headache for a day."}
    return [
        log_line("c1", 0, "Pulmonary embolism", "correct",
                 [sob, obs_spec("Measurement", "D-Dimer", "Elevated"),
                  obs_spec("Measurement", "CT Pulmonary Angiogram", "Filling defect.")], **c1),
        log_line("c1", 1, "Pneumonia", "wrong", [sob], **c1),
        log_line("c1", 2, "Undetermined", "unscored", [sob], abstained=True, **c1),
        log_line("c1", 3, None, "unscored", [sob], error={"type": "BackendError"}, **c1),
        log_line("c2", 0, "Migraine", "correct", [head, obs_spec("Patient", Q2, "Yes.")], **c2),
        log_line("c2", 1, "Subarachnoid hemorrhage", "wrong",
                 [head, obs_spec("Measurement", "Neck Examination", "Neck stiffness.")], **c2),
        log_line("c2", 2, "Subarachnoid hemorrhage.", "wrong", [head], **c2),
        log_line("c1", 3, "Pneumonia", "wrong", [sob], **c1),
    ]


def write_log(path: Path, lines: Sequence[dict[str, Any]]) -> Path:
    """Write ``lines`` as a JSONL file and return its path."""
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines),
                    encoding="utf-8")
    return path


class LineJaccard:
    """Stand-in :class:`~clinenv.embeddings.base.Similarity`: Jaccard index of the
    texts' sets of lines (1.0 for equal texts)."""

    name = "line-jaccard"

    def similarity(self, queries: Sequence[str], keys: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(queries), len(keys)), dtype=np.float32)
        for i, q in enumerate(queries):
            for j, k in enumerate(keys):
                a, b = set(q.splitlines()), set(k.splitlines())
                out[i, j] = len(a & b) / len(a | b) if a | b else 0.0
        return out


class RuleVerifier:
    """The scripted verifier (its rules: docs/testing.md, "Hand-built fixtures"); records
    every call in :attr:`calls`."""

    name = "rules"

    def __init__(self) -> None:
        self.calls: list[tuple[frozenset[str], frozenset[str], str, str]] = []

    def prefer(self, evidence, first, second, *, exposed=()):
        s = frozenset(a.concept for a in evidence)
        x = frozenset(a.concept for a in exposed)
        self.calls.append((s, x, first, second))
        f, g = first.lower().rstrip("."), second.lower().rstrip(".")
        if "neck stiffness" in s:
            want = "subarachnoid hemorrhage"
        elif s & {"filling defect", "photophobia"}:
            want = f if f in TARGETS else g
        elif "shortness of breath" in x and f == "pneumonia":
            want = "pulmonary embolism"
        else:
            want = f if f not in TARGETS else g
        return "first" if f == want else "second"
