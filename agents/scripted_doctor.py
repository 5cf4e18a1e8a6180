"""A scripted doctor: the deterministic, LLM-free baseline.

Plan per episode: ask a fixed set of history questions, then request menu examinations
in menu order up to a budget, then propose a diagnosis (under the EGIP default the
proposal is replaced by clarification questions until the decision phase). In the
decision phase it answers from the evidence interface:

- with candidate labels K: the candidate whose content words occur most often in the
  acquired observations (ties: the earlier candidate);
- without K: the phrase a recorded result names after "consistent with", "suggestive
  of", "diagnostic of"...; otherwise :data:`NO_ANSWER_GUESS`.

With ``exploration > 0`` it becomes a seeded *sampling* policy (random menu entries and
a score-weighted candidate draw), which yields successful and failed trajectories of the
same case for CDEG construction.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

HISTORY_QUESTIONS: tuple[str, ...] = (
    "What brings you in today?",
    "When did your symptoms start, and how have they changed since?",
    "Do you have any past medical conditions, and do you take any medications?",
    "Do you smoke, drink alcohol or use any drugs?",
    "Does anyone in your family have similar problems?",
)
NO_ANSWER_GUESS = "Undetermined"

_NAMED = re.compile(
    r"\b(?:consistent with|suggestive of|diagnostic of|indicative of|compatible with|"
    r"characteristic of|confirm(?:s|ing)?)\s+(?:an?\s+|the\s+)?([^.;,\n()]{3,80})",
    re.IGNORECASE,
)
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset({"with", "and", "the", "of", "for", "from", "disease", "syndrome",
                   "acute", "chronic", "type", "due", "to", "in", "on"})


def _content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in _STOP]


def _observation_text(view: str) -> str:
    marker = "# Acquired observations"
    start = view.find(marker)
    end = view.find("# Instructions")
    return view[start:end if end > start else None] if start >= 0 else view


def candidate_scores(candidates: Sequence[str], evidence: str) -> list[float]:
    """Share of each candidate's content words found in ``evidence`` (0..1 each)."""
    present = set(_content_words(evidence))
    scores = []
    for cand in candidates:
        words = _content_words(cand) or _WORD.findall(cand.lower())
        scores.append(sum(w in present for w in words) / max(1, len(words)))
    return scores


class ScriptedDoctor:
    """Deterministic (or seeded-sampling) doctor policy.

    Args:
        n_questions: history questions asked first (0..len(HISTORY_QUESTIONS)).
        exam_budget: examinations requested after the questions (>= 0).
        exploration: probability (0..1) of a random choice at each exam pick and of a
            score-weighted (instead of arg-max) candidate choice; 0 is deterministic.

    Raises:
        ValueError: an argument out of range.
    """

    def __init__(self, n_questions: int = 3, exam_budget: int = 8,
                 exploration: float = 0.0) -> None:
        if not 0 <= n_questions <= len(HISTORY_QUESTIONS):
            raise ValueError(f"n_questions must be in 0..{len(HISTORY_QUESTIONS)}")
        if exam_budget < 0 or not 0.0 <= exploration <= 1.0:
            raise ValueError("exam_budget must be >= 0 and exploration in [0, 1]")
        self.n_questions = n_questions
        self.exam_budget = exam_budget
        self.exploration = exploration
        self.name = "scripted" if exploration == 0 else f"scripted-explore{exploration:g}"
        self.reset()

    def reset(self, *, seed: int | None = None) -> None:
        """Start an episode; ``seed`` pins the sampling when ``exploration > 0``."""
        self._rng = np.random.default_rng(seed)
        self._asked = 0
        self._exams = 0
        self._proposal: str | None = None

    def act(self, observation: Mapping[str, Any], info: Mapping[str, Any]) -> str:
        """The next utterance (see the module docstring)."""
        if info.get("phase") == "decide":
            return f"DIAGNOSIS READY: {self.choose_answer(observation['text'], info)}"
        if self._asked < self.n_questions:
            self._asked += 1
            return HISTORY_QUESTIONS[self._asked - 1]
        menu = info.get("menu") or []
        if self._exams < self.exam_budget and menu:
            self._exams += 1
            pick = 0
            if self.exploration and self._rng.random() < self.exploration:
                pick = int(self._rng.integers(len(menu)))
            return f"REQUEST TEST: {menu[pick]['id']}"
        if self._proposal is None:  # proposed once; the evidence is final by now
            self._proposal = self.choose_answer(observation["text"], info)
        return f"DIAGNOSIS READY: {self._proposal}"

    def choose_answer(self, view: str, info: Mapping[str, Any]) -> str:
        """The diagnosis to give from the doctor view or evidence text."""
        evidence = _observation_text(view)
        candidates = info.get("candidates")
        if candidates:
            scores = np.asarray(candidate_scores(candidates, evidence))
            if self.exploration and self._rng.random() < self.exploration:
                weights = scores + 0.05
                return candidates[int(self._rng.choice(len(candidates),
                                                       p=weights / weights.sum()))]
            return candidates[int(np.argmax(scores))]
        named = _NAMED.search(evidence)
        return named.group(1).strip() if named else NO_ANSWER_GUESS
