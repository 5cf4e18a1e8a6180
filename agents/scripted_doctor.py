"""A scripted doctor: the deterministic, LLM-free baseline.

Questions, exams up to a budget, then a diagnosis from acquired evidence only; seeded
sampling with ``exploration > 0``. The plan: docs/api/agents.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from clinenv.agents.evidence_reading import (
    TASK_HEADER,
    candidate_scores,
    evidence_text,
    footer_start,
    history_section,
    last_native_turn,
    named_diagnosis,
    native_evidence,
)

__all__ = [
    "EXAM_NAMES", "HISTORY_QUESTIONS", "NATIVE_PROTOCOLS", "NO_ANSWER_GUESS", "ScriptedDoctor",
    "candidate_scores", "evidence_text", "history_section", "named_diagnosis",
    "native_evidence",
]

HISTORY_QUESTIONS: tuple[str, ...] = (
    "What brings you in today?",
    "When did your symptoms start, and how have they changed since?",
    "Do you have any past medical conditions, and do you take any medications?",
    "Do you smoke, drink alcohol or use any drugs?",
    "Does anyone in your family have similar problems?",
)
#: Examinations requested by name when there is no menu, in this order (at most
#: ``exam_budget`` of them). Common names that resolve, through the EGIP exam matching
#: (:mod:`clinenv.protocol.exam_matching`) and the native record reader, to record keys of
#: the AgentClinic MedQA cases and the demo set: vital signs (recorded in 106 of the 107
#: MedQA cases), the imaging group, chest X-ray, complete blood count, biopsies and
#: ultrasound (where results that name a diagnosis sit), the blood-test group, then
#: physical-examination sections and common tests. A name that a case does not record is
#: answered "not recorded" (EGIP) or with normal readings (native, weakness W1).
EXAM_NAMES: tuple[str, ...] = (
    "Vital signs", "Imaging", "Chest X-ray", "Complete blood count", "Biopsy",
    "Skin biopsy", "Ultrasound", "Blood tests", "Neurological examination",
    "Abdominal examination", "Skin examination", "General examination",
    "Respiratory examination", "Cardiovascular examination", "Urinalysis",
    "Electrocardiogram", "Liver function tests",
)
#: ``info["protocol"]`` values of the native loops (:mod:`clinenv.protocol.native`).
NATIVE_PROTOCOLS = frozenset({"agentclinic", "medagentsim"})
#: The abstention given when no diagnosis is named (see :func:`clinenv.scoring.is_abstention`).
NO_ANSWER_GUESS = "Undetermined"


class ScriptedDoctor:
    """Deterministic (or seeded-sampling) doctor policy; docs/api/agents.md.

    Args:
        n_questions: history questions asked before the examinations
            (0..len(HISTORY_QUESTIONS)); the rest are asked after them.
        exam_budget: examinations requested after the first questions (>= 0).
        exploration: probability (0..1) of a random choice at each exam pick and of a
            score-weighted (instead of arg-max) candidate choice; 0 is deterministic.

    Raises:
        ValueError: an argument out of range or of the wrong type.
    """

    def __init__(self, n_questions: int = 3, exam_budget: int = 8,
                 exploration: float = 0.0) -> None:
        for arg, value in (("n_questions", n_questions), ("exam_budget", exam_budget)):
            if isinstance(value, bool) or not isinstance(value, int | np.integer):
                raise ValueError(f"{arg} must be an integer, got {value!r}")
        if isinstance(exploration, bool) or not isinstance(exploration, int | float):
            raise ValueError(f"exploration must be a number, got {exploration!r}")
        if not 0 <= n_questions <= len(HISTORY_QUESTIONS):
            raise ValueError(f"n_questions must be in 0..{len(HISTORY_QUESTIONS)}, "
                             f"got {n_questions}")
        if exam_budget < 0:
            raise ValueError(f"exam_budget must be >= 0, got {exam_budget}")
        if not 0.0 <= exploration <= 1.0:  # also rejects NaN
            raise ValueError(f"exploration must be in [0, 1], got {exploration}")
        self.n_questions = int(n_questions)
        self.exam_budget = int(exam_budget)
        self.exploration = float(exploration)
        self.name = "scripted" if exploration == 0 else f"scripted-explore{exploration:g}"
        self.reset()

    def reset(self, *, seed: int | None = None) -> None:
        """Start an episode; ``seed`` pins the sampling when ``exploration > 0``."""
        self._rng = np.random.default_rng(seed)
        self._asked = 0
        self._exams = 0
        self._proposal: str | None = None
        self._deltas: list[str] = []  # new events per step, "delta" observations only
        self._by_name: bool | None = None  # decided at the first acquisition step
        self._names = list(EXAM_NAMES)  # by-name requests not made yet

    @property
    def by_name(self) -> bool | None:
        """Whether this episode's examinations are requested by name (no menu; module
        docstring); ``None`` before the first acquisition step."""
        return self._by_name

    def act(self, observation: Mapping[str, Any], info: Mapping[str, Any]) -> str:
        """The next utterance (docs/api/agents.md)."""
        text = observation["text"]
        if info.get("phase") == "decide":
            return f"DIAGNOSIS READY: {self.choose_answer(text, info)}"
        native = info.get("protocol") in NATIVE_PROTOCOLS
        if self._by_name is None:
            self._by_name = native or not info.get("menu")
        guided = self._guided(info, self._by_name)
        if guided is not None:
            self._proposal = None  # a guided acquisition adds evidence: propose anew
            return guided
        if not text.startswith(TASK_HEADER) and "guidance" not in info:  # "delta": keep new events
            self._deltas.append(text[:footer_start(text)])
        if native and last_native_turn(text):
            return self._propose(text, info)
        if self._asked < self.n_questions:
            return self._ask()
        request = self._request(info.get("menu") or [])
        if request is not None:
            return request
        if self._asked < len(HISTORY_QUESTIONS):
            return self._ask()
        return self._propose(text, info)

    def _request(self, menu: Sequence[Mapping[str, Any]]) -> str | None:
        """The next examination request of the plan, or ``None`` when there is none."""
        if self._exams >= self.exam_budget:
            return None
        explore = bool(self.exploration)
        if self._by_name:
            if not self._names:
                return None
            self._exams += 1
            pick = 0
            if explore and self._rng.random() < self.exploration:
                pick = int(self._rng.integers(len(self._names)))
            return f"REQUEST TEST: {self._names.pop(pick)}"
        if not menu:
            return None
        self._exams += 1
        pick = 0
        if explore and self._rng.random() < self.exploration:
            pick = int(self._rng.integers(len(menu)))
        return f"REQUEST TEST: {menu[pick]['id']}"

    def _propose(self, text: str, info: Mapping[str, Any]) -> str:
        """The diagnosis proposal, computed once from the evidence when the plan is done
        and again after a guided acquisition (a policy wrapper such as CDEG asked for
        more evidence; :meth:`act` then clears the cached proposal)."""
        if self._proposal is None:
            if self._deltas:
                evidence = "\n".join(self._deltas)
            elif info.get("protocol") in NATIVE_PROTOCOLS:
                evidence = native_evidence(text)
            else:
                evidence = history_section(text)
            self._proposal = self._answer(evidence, info.get("candidates"))
        return f"DIAGNOSIS READY: {self._proposal}"

    @staticmethod
    def _guided(info: Mapping[str, Any], by_name: bool = False) -> str | None:
        """The acquisition that ``info["guidance"]`` asks for, if it is possible now:
        a menu entry by id, or (without a menu) the guided action by name."""
        guidance = info.get("guidance")
        if guidance is None or not isinstance(guidance, Mapping) \
                or info.get("phase") != "acquire":
            return None
        action = guidance.get("action")
        if isinstance(action, Mapping):
            ids = {str(entry.get("id")) for entry in info.get("menu") or ()}
            if str(action.get("id")) in ids:
                return f"REQUEST TEST: {action['id']}"
            name = action.get("name")
            if by_name and isinstance(name, str) and name.strip():
                return f"REQUEST TEST: {name.strip()}"
        question = guidance.get("question")
        if isinstance(question, str) and question.strip():
            return question.strip()
        return None

    def _ask(self) -> str:
        self._asked += 1
        return HISTORY_QUESTIONS[self._asked - 1]

    def choose_answer(self, view: str, info: Mapping[str, Any]) -> str:
        """The diagnosis to give from a doctor view, evidence interface or evidence text.

        Only :func:`evidence_text` of ``view`` is read; candidates come from
        ``info["candidates"]``.
        """
        return self._answer(evidence_text(view), info.get("candidates"))

    def _answer(self, evidence: str, candidates: Sequence[str] | None) -> str:
        if candidates:
            scores = np.asarray(candidate_scores(candidates, evidence))
            if self.exploration and self._rng.random() < self.exploration:
                weights = scores + 0.05
                return candidates[int(self._rng.choice(len(candidates),
                                                       p=weights / weights.sum()))]
            return candidates[int(np.argmax(scores))]
        return named_diagnosis(evidence) or NO_ANSWER_GUESS
