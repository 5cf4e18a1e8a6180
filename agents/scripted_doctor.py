"""A scripted doctor: the deterministic, LLM-free baseline.

Plan per episode, one utterance per acquisition round:

1. the first ``n_questions`` history questions of :data:`HISTORY_QUESTIONS`;
2. menu examinations in menu order (``REQUEST TEST: <id>``) up to ``exam_budget``, or
   until the menu is empty;
3. the remaining history questions, in :data:`HISTORY_QUESTIONS` order;
4. a diagnosis proposal (``DIAGNOSIS READY: ...``), repeated every round left. Under the
   EGIP default each proposal is replaced by a fixed clarification question; with
   ``premature_diagnosis="decide"`` the first one ends acquisition.

Answers are computed only from evidence the doctor acquired, never from the candidate
list or the menu (the candidate labels are hypotheses, not findings):

- in the acquisition phase, from the doctor-visible history of the view (the
  ``# Interaction so far`` section; in ``observation_format="delta"`` from the new events
  of every step, collected by the doctor);
- in the decision phase, from the ``# Acquired observations`` section of the evidence
  interface e_T.

With candidate labels K the answer is the candidate with the largest share of its content
words present in that evidence (ties: the earlier candidate). Without K it is the phrase a
recorded result names after "consistent with", "suggestive of", "diagnostic of"...;
otherwise it abstains with :data:`NO_ANSWER_GUESS`, which the scorer counts as no
answer ("unscored": it lowers answer coverage, not only accuracy).

Guidance (policy wrappers such as CDEG, :mod:`clinenv.wrappers.cdeg.policy`): when
``info["guidance"]`` is a dict whose ``action`` (``{"id", "name"}``) is an entry of the
current menu, the doctor requests it (``REQUEST TEST: <id>``); when it carries a
``question`` instead, the doctor asks it; both only in the acquisition phase and outside
the exam budget. Other guidance (reappraisal) does not change the answer, which stays a
function of the acquired evidence. A guided call is a re-ask of the same step, so in
``"delta"`` format its text is not recorded as new events.

With ``exploration > 0`` it becomes a seeded *sampling* policy (random menu entries and
a score-weighted candidate draw), which yields successful and failed trajectories of the
same case for CDEG construction; ``reset(seed=...)`` pins every draw.
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
#: The abstention given when no diagnosis is named (see :func:`clinenv.scoring.is_abstention`).
NO_ANSWER_GUESS = "Undetermined"

# Section headers of clinenv.protocol.render (acquisition view) and
# clinenv.protocol.evidence (evidence interface).
_TASK = "# Task"
_HISTORY = "# Interaction so far"
_FOOTERS = ("# Available examinations", "# Your turn")
_OBSERVATIONS = "# Acquired observations"
_INSTRUCTIONS = "# Instructions"

_NAMED = re.compile(
    r"\b(?:consistent with|suggestive of|diagnostic of|indicative of|compatible with|"
    r"characteristic of|confirm(?:s|ing)?)\s+(?:an?\s+|the\s+)?([^.;,\n()]{3,80})",
    re.IGNORECASE,
)
#: A cheap, case-sensitive pre-scan (on lower-cased text) for where _NAMED can first match.
_TRIGGER = re.compile(r"consistent with|suggestive of|diagnostic of|indicative of|"
                      r"compatible with|characteristic of|confirm")
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset({"with", "and", "the", "of", "for", "from", "disease", "syndrome",
                   "acute", "chronic", "type", "due", "to", "in", "on"})


def _content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in _STOP]


def _footer_start(text: str, start: int = 0) -> int:
    """Where the menu / instructions footer of an acquisition view begins (or the end)."""
    if text.startswith(_FOOTERS, start):  # e.g. a delta with no new events
        return start
    ends = [i + 1 for i in (text.find("\n" + h, start) for h in _FOOTERS) if i >= 0]
    return min(ends) if ends else len(text)


def history_section(view: str) -> str:
    """The doctor-visible history of an acquisition view x_t.

    The text between the ``# Interaction so far`` header and the footer (``# Available
    examinations`` or ``# Your turn``); ``""`` when the view has no history yet. The
    task header, the candidate labels and the menu are never part of it.
    """
    start = view.find(_HISTORY)
    if start < 0:
        return ""
    start += len(_HISTORY)
    return view[start:_footer_start(view, start)]


def evidence_text(text: str) -> str:
    """The acquired evidence in a doctor-facing text, without candidates or menu.

    - an evidence interface e_T: its ``# Acquired observations`` section;
    - an acquisition view (starts with ``# Task``): :func:`history_section`;
    - any other text (a ``"delta"`` observation, a hand-written evidence text): the text
      before an acquisition footer, if it has one.
    """
    start = text.find(_OBSERVATIONS)
    if start >= 0:
        end = text.find(_INSTRUCTIONS, start)
        return text[start + len(_OBSERVATIONS):end if end >= 0 else None]
    if text.startswith(_TASK):
        return history_section(text)
    return text[:_footer_start(text)]


def named_diagnosis(evidence: str) -> str | None:
    """The first diagnosis a text names after "consistent with", "suggestive of"..."""
    lower = evidence.lower()
    hit = _TRIGGER.search(lower)
    if hit is None:
        return None
    # str.lower() keeps offsets unless a character changes length (rare): then scan all
    named = _NAMED.search(evidence, hit.start() if len(lower) == len(evidence) else 0)
    return named.group(1).strip() if named else None


def candidate_scores(candidates: Sequence[str], evidence: str) -> list[float]:
    """Share of each candidate's content words found in ``evidence`` (0..1 each)."""
    present = set(_content_words(evidence))
    scores = []
    for cand in candidates:
        words = _content_words(cand) or _WORD.findall(cand.lower())
        scores.append(sum(w in present for w in words) / max(1, len(words)))
    return scores


class ScriptedDoctor:
    """Deterministic (or seeded-sampling) doctor policy; see the module docstring.

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

    def act(self, observation: Mapping[str, Any], info: Mapping[str, Any]) -> str:
        """The next utterance (see the module docstring)."""
        text = observation["text"]
        if info.get("phase") == "decide":
            return f"DIAGNOSIS READY: {self.choose_answer(text, info)}"
        guided = self._guided(info)
        if guided is not None:
            return guided
        if not text.startswith(_TASK) and "guidance" not in info:  # "delta": keep new events
            self._deltas.append(text[:_footer_start(text)])
        if self._asked < self.n_questions:
            return self._ask()
        menu = info.get("menu") or []
        if self._exams < self.exam_budget and menu:
            self._exams += 1
            pick = 0
            if self.exploration and self._rng.random() < self.exploration:
                pick = int(self._rng.integers(len(menu)))
            return f"REQUEST TEST: {menu[pick]['id']}"
        if self._asked < len(HISTORY_QUESTIONS):
            return self._ask()
        if self._proposal is None:  # proposed once; the evidence is final by now
            history = "\n".join(self._deltas) if self._deltas else history_section(text)
            self._proposal = self._answer(history, info.get("candidates"))
        return f"DIAGNOSIS READY: {self._proposal}"

    @staticmethod
    def _guided(info: Mapping[str, Any]) -> str | None:
        """The acquisition that ``info["guidance"]`` asks for, if it is possible now."""
        guidance = info.get("guidance")
        if not isinstance(guidance, Mapping) or info.get("phase") != "acquire":
            return None
        action = guidance.get("action")
        if isinstance(action, Mapping):
            ids = {str(entry.get("id")) for entry in info.get("menu") or ()}
            if str(action.get("id")) in ids:
                return f"REQUEST TEST: {action['id']}"
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
