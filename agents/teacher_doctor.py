"""A PRIVILEGED teacher doctor: it reads the case's target Y and records M, for SFT rows.

Handed the cases through ``cases`` (EGIP Eq. 1), it demonstrates the protocol under the
tool view's settings; its logs are marked ``"privileged": true`` (docs/teacher.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from clinenv.agents.evidence_reading import TASK_HEADER
from clinenv.agents.scripted_doctor import HISTORY_QUESTIONS, NATIVE_PROTOCOLS
from clinenv.cases import Case
from clinenv.env.retrieval_patient import CAREGIVER_PREFIX, NOT_SURE, RetrievalPatient
from clinenv.protocol.prepared import PreparedCase
from clinenv.protocol.views import PatientView

__all__ = ["DEFAULT_MAX_QUESTIONS", "TEACHER_ENV_SETTINGS", "TEACHER_NAME", "TeacherDoctor",
           "TeacherPlan", "leaked_words", "shares_content"]

#: The environment settings the teacher plays with: the tool view's
#: (:class:`~clinenv.integrations.tools.ToolEpisode`); T stays the environment's own.
TEACHER_ENV_SETTINGS: Mapping[str, str] = MappingProxyType(
    {"observation_format": "delta", "premature_diagnosis": "decide"})
#: The teacher's name in run logs and summaries.
TEACHER_NAME = "privileged-teacher"
#: Default ``max_questions`` (k): every question of the default list may be asked.
DEFAULT_MAX_QUESTIONS = len(HISTORY_QUESTIONS)

_TOKEN = re.compile(r"[a-z0-9]+")
#: Function words that are never "a word of Y" for the leak check.
_FUNCTION_WORDS = frozenset("a an the of and or to in on at by as is with for from".split())
#: Words too generic to make a result "share content" with Y (laterality, course,
#: "disease"...): they would rank half the records first.
_GENERIC_WORDS = _FUNCTION_WORDS | frozenset(
    "disease syndrome disorder acute chronic type due left right bilateral primary "
    "secondary not no without other unspecified".split())
_SUFFIXES = ("ies", "ic", "al", "es", "s", "ed", "ing")
_ROUNDS = re.compile(r"^Round 1 of (\d+)\.", re.MULTILINE)


def _stem(word: str) -> str:
    """A crude stem, so that "alcoholic" meets "alcohol" and "drugs" meets "drug"."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def _words(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def leaked_words(action: str, target: str, opening: str) -> list[str]:
    """The words of ``target`` (Y) that ``action`` holds and ``opening`` does not.

    A word of Y is any lower-cased alphanumeric token but a function word (*of*, *and*,
    *with*...). It is in a text when the same token is, or a token of the same crude
    stem ("alcoholic" / "alcohol"); it counts as held by the opening only when the
    opening has both the token itself and its stem, so the check is at least as strict
    as a plain token comparison.

    Returns:
        The leaked words, in Y's order, without repeats (``[]``: nothing leaks).
    """
    said = _words(action)
    said_stems = {_stem(w) for w in said}
    shown = set(_words(opening))
    shown_stems = {_stem(w) for w in shown}
    leaked = []
    for word in dict.fromkeys(_words(target)):
        if word in _FUNCTION_WORDS:
            continue
        in_action = word in said or _stem(word) in said_stems
        in_opening = word in shown and _stem(word) in shown_stems
        if in_action and not in_opening:
            leaked.append(word)
    return leaked


def shares_content(result: str, target: str) -> bool:
    """Whether a recorded result shares a content word with Y (same crude stem; words
    of three letters or fewer and generic words such as *acute*, *disease*, *left* do
    not count)."""
    wanted = {_stem(w) for w in _words(target) if len(w) > 3 and w not in _GENERIC_WORDS}
    return bool(wanted & {_stem(w) for w in _words(result)})


@dataclass(frozen=True)
class TeacherPlan:
    """One episode's plan (docs/teacher.md).

    Attributes:
        questions: the history questions to ask, in order.
        exams: the exam ids to order, in order.
        answer: the diagnosis submitted (Y's text; with K the listed option).
        dropped: planned actions left out because they would leak a word of Y.
    """

    questions: tuple[str, ...]
    exams: tuple[str, ...]
    answer: str
    dropped: tuple[str, ...] = ()

    @property
    def actions(self) -> tuple[str, ...]:
        """The acquisition actions, as the teacher says them."""
        return self.questions + tuple(f"REQUEST TEST: {exam}" for exam in self.exams)


class TeacherDoctor:
    """PRIVILEGED doctor: reads Y and M of the episode's case (docs/teacher.md).

    Never evaluate it as a doctor; the evaluation commands refuse its logs by default.

    Args:
        cases: a :class:`~clinenv.env.case_pool.CasePool` (e.g. ``env.unwrapped.pool``), a
            mapping ``case_id -> Case`` or an iterable of :class:`~clinenv.cases.Case`;
            looked up by ``info["case_id"]``.
        max_questions: k, the most history questions asked (>= 0).
        questions: the history questions to choose from, in order (default
            :data:`~clinenv.agents.scripted_doctor.HISTORY_QUESTIONS`).

    Raises:
        ValueError: ``max_questions`` not an integer >= 0, an empty or non-string
            question, or two cases with the same ``case_id``.
        TypeError: ``cases`` is none of the accepted kinds.
    """

    #: Read by :class:`clinenv.runlog.RunContext`: every line of its runs is marked.
    privileged = True
    name = TEACHER_NAME

    def __init__(self, cases: Any, *, max_questions: int = DEFAULT_MAX_QUESTIONS,
                 questions: Sequence[str] = HISTORY_QUESTIONS) -> None:
        if isinstance(max_questions, bool) or not isinstance(max_questions, int) \
                or max_questions < 0:
            raise ValueError(f"max_questions must be an integer >= 0, got {max_questions!r}")
        if isinstance(questions, str) or not all(
                isinstance(q, str) and q.strip() for q in questions):
            raise ValueError("questions must be a sequence of non-empty strings")
        self.max_questions = int(max_questions)
        self.questions = tuple(q.strip() for q in questions)
        self._cases = _case_lookup(cases)
        self._prepared: dict[str, PreparedCase] = {}
        self._patient = RetrievalPatient()
        self.reset()

    def config(self) -> dict[str, Any]:
        """The run log's ``doctor.config``: says that the doctor is privileged."""
        return {"agent": "teacher_doctor", "privileged": True,
                "sees": "the case's target Y, records M and patient facts P, looked up "
                        "by info['case_id'] in the cases it was given",
                "max_questions": self.max_questions, "questions": list(self.questions),
                "env_settings": dict(TEACHER_ENV_SETTINGS), "framing": "tool-view"}

    def reset(self, *, seed: int | None = None) -> None:
        """Start an episode (the teacher draws nothing: ``seed`` is ignored)."""
        self.plan_now: TeacherPlan | None = None
        self._queue: list[str] = []
        self._submitted = False
        self._steps = 0

    def plan(self, case: Case, opening: str) -> TeacherPlan:
        """The plan of one episode of ``case`` whose opening text is ``opening`` (a pure
        function of both; :meth:`act` follows it)."""
        prepared = self._prepared_case(case)
        target = case.target.text
        answer = target
        if case.candidates and case.target.option_index is not None:
            answer = case.candidates[case.target.option_index]
        answer = " ".join(answer.split())
        rounds = _rounds(opening)
        dropped: list[str] = []
        questions: list[str] = []
        for question in self.questions:
            if len(questions) >= self.max_questions:
                break
            if leaked_words(question, target, opening):
                dropped.append(question)
            elif self._answers(prepared, case, question):
                questions.append(question)
        if rounds is not None:
            questions = questions[:rounds]
        recorded = [e for e in prepared.menu_order
                    if prepared.results[e.exam_id][1] == "recorded"]
        first = [e for e in recorded if shares_content(prepared.results[e.exam_id][0] or "",
                                                       target)]
        exams: list[str] = []
        for entry in first + [e for e in recorded if e not in first]:
            if leaked_words(f"REQUEST TEST: {entry.exam_id}", target, opening):
                dropped.append(f"REQUEST TEST: {entry.exam_id}")
            else:
                exams.append(entry.exam_id)
        if rounds is not None:
            exams = exams[:max(0, rounds - len(questions))]
        return TeacherPlan(tuple(questions), tuple(exams), answer, tuple(dropped))

    def act(self, observation: Mapping[str, Any], info: Mapping[str, Any]) -> str:
        """The next action of the plan; the diagnosis once the plan is done and in the
        decision phase.

        Raises:
            ValueError: a native protocol, a ``case_id`` the teacher was not given, or
                settings other than :data:`TEACHER_ENV_SETTINGS` (a full view after the
                opening: ``observation_format="view"``; acquisition going on after its
                diagnosis: ``premature_diagnosis="clarify"``).
        """
        if info.get("protocol") in NATIVE_PROTOCOLS:
            raise ValueError(f"{TEACHER_NAME}: plays EGIP environments only (got protocol "
                             f"{info.get('protocol')!r})")
        text = str(observation["text"])
        phase = info.get("phase")
        self._steps += 1
        if self.plan_now is None:
            self.plan_now = self.plan(self._case(info), text)
            self._queue = list(self.plan_now.actions)
        elif phase == "acquire" and text.startswith(TASK_HEADER):
            raise ValueError(f"{TEACHER_NAME} plays with the tool view's settings "
                             f"{dict(TEACHER_ENV_SETTINGS)}; this environment shows the "
                             "full view every step (observation_format='view')")
        if phase == "acquire":
            if self._submitted:
                raise ValueError(f"{TEACHER_NAME} plays with the tool view's settings "
                                 f"{dict(TEACHER_ENV_SETTINGS)}; this environment went on "
                                 "with acquisition after its diagnosis "
                                 "(premature_diagnosis='clarify')")
            if self._queue:
                return self._queue.pop(0)
            self._submitted = True
        return f"DIAGNOSIS READY: {self.plan_now.answer}"

    @staticmethod
    def check_env(env: Any) -> None:
        """Refuse an environment whose settings are not the tool view's.

        Raises:
            ValueError: not an EGIP environment, or ``observation_format`` /
                ``premature_diagnosis`` other than :data:`TEACHER_ENV_SETTINGS`.
        """
        env = getattr(env, "unwrapped", env)
        protocol = getattr(env, "protocol", "egip")
        if protocol != "egip":
            raise ValueError(f"{TEACHER_NAME} plays EGIP environments only, not {protocol!r}")
        found = {"observation_format": getattr(env, "observation_format", None),
                 "premature_diagnosis": getattr(env.config, "premature_diagnosis", None)}
        wrong = {k: v for k, v in found.items() if v != TEACHER_ENV_SETTINGS[k]}
        if wrong:
            raise ValueError(f"{TEACHER_NAME} plays with the tool view's settings "
                             f"{dict(TEACHER_ENV_SETTINGS)}; this environment has {wrong}")

    def _case(self, info: Mapping[str, Any]) -> Case:
        case_id = info.get("case_id")
        case = self._cases.get(str(case_id))
        if case is None:
            raise ValueError(f"{TEACHER_NAME}: case {case_id!r} is not among the "
                             f"{len(self._cases)} cases it was given")
        return case

    def _prepared_case(self, case: Case) -> PreparedCase:
        prepared = self._prepared.get(case.case_id)
        if prepared is None or prepared.case is not case:
            prepared = self._prepared[case.case_id] = PreparedCase.build(case)
        return prepared

    def _answers(self, prepared: PreparedCase, case: Case, question: str) -> bool:
        """The retrieval patient answers ``question`` with a fact of P (docs/teacher.md)."""
        view = PatientView(prepared.patient_facts, (), question,
                           case.flags.caregiver_voice)
        reply = self._patient.reply(view).removeprefix(CAREGIVER_PREFIX).strip()
        return bool(reply) and reply != NOT_SURE


def _rounds(opening: str) -> int | None:
    """T, from the opening's ``Round 1 of T.`` footer (``None`` without one)."""
    found = _ROUNDS.search(opening)
    return int(found.group(1)) if found else None


def _case_lookup(cases: Any) -> dict[str, Case]:
    if hasattr(cases, "cases") and not isinstance(cases, Mapping):  # a CasePool
        cases = cases.cases
    if isinstance(cases, Mapping):
        items: Iterable[Case] = cases.values()
    elif isinstance(cases, Iterable) and not isinstance(cases, str | bytes):
        items = cases
    else:
        raise TypeError("cases must be a CasePool, a mapping case_id -> Case or an "
                        f"iterable of Case, got {type(cases).__name__}")
    lookup: dict[str, Case] = {}
    for case in items:
        if not isinstance(case, Case):
            raise TypeError(f"cases must hold clinenv Case objects, got {type(case).__name__}")
        if case.case_id in lookup:
            raise ValueError(f"cases: case_id {case.case_id!r} appears twice")
        lookup[case.case_id] = case
    return lookup
