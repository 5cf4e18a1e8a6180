"""The tool view of the doctor's actions, shared by every trainer adapter.

Each tool is one action of the text protocol (EGIP section 3.2); :class:`ToolEpisode`
plays an episode through them and gives the one reward every adapter reports.
"""

from __future__ import annotations

import json
import threading
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym

from clinenv.agents.llm_patient import LLMPatient
from clinenv.agents.patient_cache import CachedPatient, PatientReplyCache
from clinenv.case_list import CaseListError, nearest_id, read_case_list
from clinenv.cases import CaseFlags
from clinenv.datasets.difficulty import (
    DifficultyError,
    DifficultyTable,
    load_difficulty,
    shipped_difficulty,
)
from clinenv.protocol.parser import parse_action
from clinenv.protocol.render import render_menu
from clinenv.protocol.runtime import reads_as_placeholder
from clinenv.reward_components import COMPONENTS, RewardComponents
from clinenv.reward_spec import RewardSpec
from clinenv.seeding import episode_seed

__all__ = ["CASE_FLAG_NAMES", "COMPONENT_METRIC_PREFIX", "LEAK_FLAGS", "TASK_INTRO",
           "TEXT_SYSTEM_PROMPT", "TOOL_NAMES", "TOOL_SCHEMAS", "TOOL_SYSTEM_PROMPT",
           "TaskRows", "ToolCall", "ToolEpisode", "action_to_tool", "check_flags",
           "component_metrics", "task_rows", "tool_docstring", "tool_to_action"]

#: name -> (description, {argument: description}); the one source of the schemas and of
#: the adapters' docstrings (:func:`tool_docstring`). In name order: the order in which
#: TRL lists an environment's tools (``inspect.getmembers``, sorted by name).
_TOOLS: dict[str, tuple[str, dict[str, str]]] = {
    "ask_patient": ("Ask the patient one question and get the reply. Uses one round.",
                    {"question": "One question for the patient, in plain words."}),
    "list_exams": ("List the examinations you can still order (ids and names). Uses no "
                   "round.", {}),
    "order_exam": ("Order one examination and get its result. Uses one round.",
                   {"exam": "The examination's id from the list (such as PE1 or T3) or "
                            "its name."}),
    "submit_diagnosis": ("Give your diagnosis. Before the last round this ends evidence "
                         "gathering and shows the acquired evidence; then call it again "
                         "with your final answer, which is scored and ends the "
                         "consultation.",
                         {"diagnosis": "One diagnosis."}),
}
#: The tools, in this order everywhere (name order, as TRL lists them).
TOOL_NAMES: tuple[str, ...] = tuple(_TOOLS)
#: JSON schemas in OpenAI's function format, exactly the list TRL's ``GRPOTrainer``
#: renders for :func:`clinenv.integrations.trl.make_env_factory`'s tools: the order of
#: :data:`TOOL_NAMES` and, for each, what ``transformers.utils.get_json_schema`` builds
#: from the adapter method (its :func:`tool_docstring` and type hints), keys in that
#: order and its ``"return": {"type": "string"}`` entry included. So a prompt rendered
#: with ``tools=TOOL_SCHEMAS`` (``clinenv export``'s ``tools`` column, SFT rows) is the
#: prompt GRPO renders, token for token (``return`` is transformers' addition to
#: OpenAI's format).
TOOL_SCHEMAS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": name, "description": text,
        "parameters": {"type": "object",
                       "properties": {a: {"type": "string", "description": d}
                                      for a, d in args.items()},
                       **({"required": list(args)} if args else {})},
        "return": {"type": "string"}}}
    for name, (text, args) in _TOOLS.items()
]
#: System prompt of a tool-calling doctor.
TOOL_SYSTEM_PROMPT = (
    "You are the physician in a simulated diagnostic consultation. Act only through tool "
    "calls, one per turn: ask_patient to ask the patient one question, order_exam to "
    "order one examination by its id or name, list_exams to see what can still be "
    "ordered. When you have enough evidence, call submit_diagnosis: you are then shown "
    "the acquired evidence and asked for your final answer; call submit_diagnosis again "
    "with it, and that answer is scored. After the last round only submit_diagnosis is "
    "accepted."
)
#: System prompt of a doctor that writes its actions as text (EGIP section 3.2) in a
#: tool-view episode (:meth:`ToolEpisode.step_text`: ``premature_diagnosis="decide"``,
#: delta observations); the verifiers and SkyRL adapters' doctor.
TEXT_SYSTEM_PROMPT = (
    "You are the physician in a simulated diagnostic consultation. The first message "
    "shows the task and the examinations you can order; each later message shows what "
    "is new: the patient's reply or an examination's result, and the next round. "
    "Results stay hidden until you order them.\n"
    "Reply with exactly one action and nothing else:\n"
    "- a single question for the patient, in plain words; or\n"
    "- REQUEST TEST: <examination id or name> to order one examination; or\n"
    "- DIAGNOSIS READY: <diagnosis> once you have enough evidence. This ends evidence "
    "gathering early: you are then shown the acquired evidence and asked for your final "
    "answer, as you are after the last round.\n"
    "Give the final answer as DIAGNOSIS READY: <one diagnosis>; that answer is scored and "
    "ends the consultation."
)
#: The user message of a trainer's task row (TRL, SkyRL); the episode's opening text is
#: appended to it (TRL: ``reset``'s return value; SkyRL: ``init``).
TASK_INTRO = ("A new patient is here for a diagnostic consultation. The task and the "
              "examinations you can order follow.\n\n")
#: Tool result of the scored ``submit_diagnosis`` (the verdict is not shown).
FINAL_RESULT = "Final answer recorded. The consultation is over."
_KIND_TO_TOOL = {"question": "ask_patient", "test_request": "order_exam",
                 "diagnosis": "submit_diagnosis"}
_TEXT = {"ask_patient": "{}", "order_exam": "REQUEST TEST: {}",
         "submit_diagnosis": "DIAGNOSIS READY: {}"}


@dataclass(frozen=True)
class ToolCall:
    """One tool call: ``name`` in :data:`TOOL_NAMES`, ``arguments`` by parameter name."""

    name: str
    arguments: dict[str, str] = field(default_factory=dict)

    def to_openai(self, call_id: str) -> dict[str, Any]:
        """An OpenAI ``tool_calls`` entry (``arguments`` as a JSON string)."""
        return {"id": call_id, "type": "function",
                "function": {"name": self.name, "arguments": json.dumps(self.arguments)}}


def tool_docstring(name: str) -> str:
    """A Google-style docstring of tool ``name`` (description, ``Args:``), from which
    ``transformers.utils.get_json_schema`` builds that tool's :data:`TOOL_SCHEMAS` entry.

    Raises:
        ValueError: an unknown tool.
    """
    text, args = _TOOLS[_check_name(name)]
    lines = [f"    {a}: {d}" for a, d in args.items()]
    return text + ("\n\nArgs:\n" + "\n".join(lines) if lines else "")


def _check_name(name: str) -> str:
    if name not in _TOOLS:
        raise ValueError(f"unknown tool {name!r}; the tools are {', '.join(TOOL_NAMES)}")
    return name


def tool_to_action(name: str, arguments: dict[str, Any] | None = None) -> str | None:
    """The action text of a tool call (module table); ``None`` for ``list_exams``.

    Args:
        name: a tool name of :data:`TOOL_NAMES`.
        arguments: the call's arguments by name (:data:`TOOL_SCHEMAS`); a JSON object
            string is accepted too (OpenAI's ``function.arguments``).

    Raises:
        ValueError: an unknown tool; a missing, extra or non-string argument; an empty
            or multi-line value; or a value that the text protocol would read as another
            action (a question that is a menu id like ``T3`` or carries ``REQUEST
            TEST:``), so that the environment always performs the action named.
    """
    _check_name(name)
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except json.JSONDecodeError as err:
            raise ValueError(f"{name}: arguments are not JSON ({err})") from None
    arguments = {} if arguments is None else arguments
    if not isinstance(arguments, dict):
        raise ValueError(f"{name}: arguments must be an object, got {arguments!r}")
    expected = list(_TOOLS[name][1])
    if sorted(arguments) != sorted(expected):
        want = ", ".join(expected) or "no argument"
        raise ValueError(f"{name} takes {want}; got {', '.join(arguments) or 'none'}")
    if name == "list_exams":
        return None
    (arg,) = expected
    value = arguments[arg]
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name}: {arg} must be a non-empty string, got {value!r}")
    if "\n" in value.strip():
        raise ValueError(f"{name}: {arg} must be one line")
    text = _TEXT[name].format(value.strip())
    read = parse_action(text)
    if _KIND_TO_TOOL.get(read.kind) != name or (name == "order_exam" and read.test_payload):
        raise ValueError(f"{name}: {arg} {value!r} reads as another action ({read.kind}); "
                         f"use {_KIND_TO_TOOL.get(read.kind, 'another tool')} for that")
    return text


def action_to_tool(text: str, *, phase: Literal["acquire", "decide"] = "acquire",
                   strict: bool = False) -> ToolCall | None:
    """The tool call of an action text, as the runtime reads it in ``phase``.

    In acquisition a reply with both markers is its exam request; in the decision phase
    every reply is the answer (``submit_diagnosis``). An empty reply or a template
    placeholder (``DIAGNOSIS READY: [diagnosis]``, ``N/A``...) gives ``None``, no call
    (:func:`clinenv.protocol.runtime.reads_as_placeholder`).

    Args:
        text: the doctor's reply as written (reasoning blocks are removed).
        phase: ``"acquire"`` or ``"decide"``.
        strict: AgentClinic's case-sensitive markers (``strict_markers``).

    Raises:
        ValueError: an unknown phase.
    """
    if phase not in ("acquire", "decide"):
        raise ValueError(f"phase must be 'acquire' or 'decide', got {phase!r}")
    # parsed as EGIPRuntime.route / submit_answer parse it in this phase
    action = (parse_action(text, strict=strict) if phase == "acquire" else
              parse_action(text, strict=strict, accept_bare_diagnosis=not strict,
                           speaker_lines=False))
    if action.kind == "empty" or reads_as_placeholder(action, phase, strict=strict):
        return None
    if phase == "decide":
        answer = action.payload if action.kind == "diagnosis" else action.text
        return ToolCall("submit_diagnosis", {"diagnosis": answer})
    if action.kind == "diagnosis" and action.test_payload:
        return ToolCall("order_exam", {"exam": action.test_payload})
    name = _KIND_TO_TOOL[action.kind]
    return ToolCall(name, {next(iter(_TOOLS[name][1])): action.payload})


class ToolEpisode:
    """One episode of an EGIP environment played through the tools (docs/training.md).

    The instance owns its environment and a lock, so instances may run in any threads;
    :meth:`reset` makes it reusable.

    Args:
        env_id: an EGIP text environment id (``"EGIP-Demo-v0"``...).
        patient_cache: a :class:`~clinenv.agents.patient_cache.PatientReplyCache` for an
            LLM patient (``patient="llm"``); ``None``: no cache.
        **env_kwargs: passed to ``gym.make``; ``observation_format`` and
            ``premature_diagnosis`` are set here.

    Raises:
        ValueError: a Menu or native-protocol id, other ``observation_format`` /
            ``premature_diagnosis`` values, or CDEG's extra actions, which no tool performs.
        TypeError: ``patient_cache`` is not a PatientReplyCache.
        gymnasium.error.Error: an unknown id; environment errors as ``gym.make``.
    """

    def __init__(self, env_id: str, *, patient_cache: PatientReplyCache | None = None,
                 **env_kwargs: Any) -> None:
        if patient_cache is not None and not isinstance(patient_cache, PatientReplyCache):
            raise TypeError("patient_cache must be a PatientReplyCache, got "
                            f"{type(patient_cache).__name__}")
        spec = gym.spec(env_id)
        if spec.entry_point != "clinenv.env:EGIPEnv" or spec.kwargs.get("preset"):
            raise ValueError(f"{env_id}: the tool view needs an EGIP text environment "
                             "(EGIP-<Dataset>-v0), not a Menu or native-protocol id")
        settings = env_kwargs.get("settings")
        if settings is not None and settings.observation_format != "delta":
            raise ValueError(f"{env_id}: the tool view needs observation_format='delta', "
                             f"got settings with {settings.observation_format!r}")
        fixed = (("premature_diagnosis", "decide"),) if settings is not None else (
            ("observation_format", "delta"), ("premature_diagnosis", "decide"))
        # the tool view's own wording (ProtocolConfig.action_format), recorded in env_spec
        env_kwargs.setdefault("action_format", "tools")
        for key, value in fixed:
            if env_kwargs.setdefault(key, value) != value:
                raise ValueError(f"{env_id}: the tool view needs {key}={value!r}, got "
                                 f"{env_kwargs[key]!r}")
        self.env_id = env_id
        self.env = gym.make(env_id, **env_kwargs).unwrapped
        config = self.env.config
        if config.action_format == "tools" and (config.history_review
                                                or config.knowledge_source is not None):
            raise ValueError(f"{env_id}: the tool view has no tool for REVIEW HISTORY or "
                             "RETRIEVE KNOWLEDGE; turn history_review and knowledge_source "
                             "off, or set action_format='text'")
        if patient_cache is not None and isinstance(self.env.patient, LLMPatient):
            self.env.patient = CachedPatient(self.env.patient, patient_cache)
        self._lock = threading.Lock()
        self._clear()

    def _clear(self) -> None:
        self.started = False
        #: The sum of the step rewards so far: the legacy per-step charges (0 by
        #: default), plus the spec's reward once the final answer is scored; for the
        #: reward of a cut-off episode use :meth:`episode_reward`.
        self.reward = 0.0
        self.done = False
        #: The environment's latest ``info``.
        self.info: dict[str, Any] = {}
        #: The executed calls, as :class:`ToolCall` (calls refused with ValueError are not,
        #: nor replies of :meth:`step_text` that are no call: empty, or a placeholder).
        self.calls: list[ToolCall] = []

    def reset(self, case_id: str | int, seed: int, max_rounds: int | None = None) -> str:
        """Start the episode of ``(case_id, seed)``; returns the opening text (objective,
        candidates, menu and the first round's instructions), the same for the same pair
        in any process or thread. ``max_rounds`` (a row's round budget) caps the
        acquisition rounds at T (the environment's reset option); ``None``: the
        configured T.

        Raises:
            KeyError, IndexError: an unknown case id or index (from the environment).
            ValueError: a bad ``max_rounds`` (not an int in 1..acquisition_rounds).
        """
        with self._lock:  # a refused reset leaves the episode as it was
            obs, info = self.env.reset(seed=int(seed), options={
                "case_id": case_id, "max_rounds": max_rounds})
            self._clear()
            self.info = info
            self.started = True
            return obs["text"]

    def call(self, name: str, arguments: dict[str, Any] | str | None = None) -> str:
        """Execute one tool call; returns its result text (the delta observation, the
        menu for ``list_exams``, :data:`FINAL_RESULT` once scored).

        A call whose argument is a template placeholder (``submit_diagnosis
        ("[diagnosis]")``) reaches the environment as its text would (interface feedback,
        or no answer at the decision step) and is not added to :attr:`calls`.

        Raises:
            ValueError: no episode (call :meth:`reset`), the episode is over, an
                acquisition tool after acquisition ended, or bad arguments
                (:func:`tool_to_action`). A refused call changes nothing.
        """
        text = tool_to_action(name, arguments)
        with self._lock:
            if not self.started:
                raise ValueError("no episode: call reset() first")
            if self.done:
                raise ValueError("the episode is over (the final answer was scored); "
                                 "reset() starts another")
            phase = self.env.runtime.phase
            if text is None:
                result = self._menu_text()
            elif phase != "acquire" and name != "submit_diagnosis":
                raise ValueError("evidence gathering is over: call submit_diagnosis with "
                                 "your final answer")
            else:
                # a template placeholder ("[diagnosis]") is stepped as the text protocol
                # steps it (feedback, or no answer), and like a placeholder text it is no
                # recorded call (action_to_tool)
                refused = action_to_tool(text, phase=phase) is None
                obs, reward, terminated, truncated, self.info = self.env.step(text)
                self.reward += float(reward)
                self.done = terminated or truncated
                result = FINAL_RESULT if self.done else obs["text"]
                if refused:
                    return result
            self.calls.append(ToolCall(name, dict(json.loads(arguments) if isinstance(
                arguments, str) else arguments or {})))
            return result

    def step_text(self, reply: str) -> str:
        """Step with one reply of the text protocol (EGIP section 3.2): a question,
        ``REQUEST TEST: <id or name>`` or ``DIAGNOSIS READY: <diagnosis>``; in the
        decision phase every reply is the answer. Returns the delta observation, or
        :data:`FINAL_RESULT` once the answer is scored. The reply is recorded in
        :attr:`calls` as :func:`action_to_tool` reads it (an empty reply and a template
        placeholder, which the environment refuses, are not).

        Raises:
            TypeError: ``reply`` is not a string.
            ValueError: no episode (call :meth:`reset`) or the episode is over.
        """
        if not isinstance(reply, str):
            raise TypeError(f"reply must be a string, got {type(reply).__name__}")
        with self._lock:
            if not self.started:
                raise ValueError("no episode: call reset() first")
            if self.done:
                raise ValueError("the episode is over (the final answer was scored); "
                                 "reset() starts another")
            call = action_to_tool(reply, phase="decide" if self.env.runtime.phase == "decide"
                                  else "acquire")
            obs, reward, terminated, truncated, self.info = self.env.step(reply)
            self.reward += float(reward)
            self.done = terminated or truncated
            if call is not None:
                self.calls.append(call)
            return FINAL_RESULT if self.done else obs["text"]

    @property
    def reward_spec(self) -> RewardSpec:
        """The environment's reward spec (``reward_spec=`` of ``gym.make``; default
        ``accuracy``)."""
        return self.env.reward_spec

    def reward_components(self) -> RewardComponents:
        """The reward components of the episode so far, finished or not: the
        environment's own (``env.reward_components()``, :mod:`clinenv.reward_components`);
        before the final answer, diagnosis 0, format 0 and the workup over what was
        ordered.

        Raises:
            ValueError: no episode (call :meth:`reset`).
        """
        with self._lock:
            self._need_episode()
            return self.env.reward_components()

    def episode_reward(self) -> float:
        """The episode's reward as every adapter reports it (docs/training.md): finished,
        the sum of its step rewards (the spec's reward plus the legacy per-step
        charges, which are 0 by default); cut off before the final answer, the charges
        so far plus ``reward_spec.reward(reward_components())``. With the legacy terms
        at 0 both are ``env.reward_spec.reward(env.reward_components())``.

        Raises:
            ValueError: no episode (call :meth:`reset`).
        """
        with self._lock:
            self._need_episode()
            if self.done:
                return self.reward
            return self.reward + self.env.reward_spec.reward(self.env.reward_components())

    def text_answer_at_end(self, final_text: str | None) -> bool:
        """Whether the rollout ended with a text answer instead of a ``submit_diagnosis``
        call: ``final_text`` (the last assistant message, when it carries no tool call;
        ``None`` otherwise) is non-empty and no final answer was scored. Such a rollout's
        reward is that of an episode cut off (0 for a wrong answer as for a right one);
        the metric ``text_answer_at_end`` counts them (:class:`clinenv.integrations.trl.
        TextAnswerAtEnd`).

        Raises:
            ValueError: no episode (call :meth:`reset`).
        """
        with self._lock:
            self._need_episode()
            return (not self.done and isinstance(final_text, str)
                    and bool(final_text.strip()))

    def _need_episode(self) -> None:
        if not self.started:
            raise ValueError("no episode: call reset() first")

    def _menu_text(self) -> str:
        """The displayed menu B, as in the round footer (``list_exams``)."""
        rt = self.env.runtime
        if rt.phase != "acquire":
            return "No examinations: evidence gathering is over."
        if not rt.config.show_menu:
            return ("No examination list is offered in this setting; order an examination "
                    "by its name.")
        menu = rt.menu()
        hidden = len(rt.catalog) - len(set(rt.requested)) - len(menu)
        return render_menu(menu, max(0, hidden), len(rt.catalog))

    def ask_patient(self, question: str) -> str:
        """``call("ask_patient", {"question": question})``."""
        return self.call("ask_patient", {"question": question})

    def order_exam(self, exam: str) -> str:
        """``call("order_exam", {"exam": exam})``."""
        return self.call("order_exam", {"exam": exam})

    def submit_diagnosis(self, diagnosis: str) -> str:
        """``call("submit_diagnosis", {"diagnosis": diagnosis})``."""
        return self.call("submit_diagnosis", {"diagnosis": diagnosis})

    def list_exams(self) -> str:
        """``call("list_exams")``."""
        return self.call("list_exams")


#: The prefix of the component metrics (:func:`component_metrics`), as in
#: ``info["reward_components"]``.
COMPONENT_METRIC_PREFIX = "reward_components/"


def component_metrics(components: RewardComponents) -> dict[str, float | None]:
    """The components as named metrics, ``{"reward_components/<name>": value}`` in
    :data:`~clinenv.reward_components.COMPONENTS` order (verifiers' trace metrics,
    SkyRL's ``get_metrics``): numbers as floats, an undefined component as ``None`` (a
    metric to leave out of means, never 0)."""
    return {COMPONENT_METRIC_PREFIX + name: (None if components[name] is None
                                             else float(components[name]))
            for name in COMPONENTS}


#: The flags ``exclude_flags=`` takes: the fields of :class:`clinenv.cases.CaseFlags`
#: (a case has a flag when its value is true, or set for ``near_duplicate_of``).
CASE_FLAG_NAMES: tuple[str, ...] = tuple(CaseFlags.model_fields)
#: The flags of the cases whose data show the doctor the target: a record names it
#: (``target_in_records``: one exam's result gives the answer away) or a menu name does
#: (``target_in_menu``). ``exclude_flags=LEAK_FLAGS`` leaves them out of a trainer's rows.
LEAK_FLAGS: tuple[str, ...] = ("target_in_records", "target_in_menu")


class TaskRows(list):
    """The rows of :func:`task_rows`: a list of row dicts, plus what ``exclude_flags``
    left out.

    Attributes:
        excluded: ``{flag: (case_id, ...)}``, one key per flag of ``exclude_flags`` (in
            its order, empty tuples included), the split's cases with that flag in
            dataset order; a case with two of the flags is under both.
        considered: the number of cases before the exclusion (the split's, or the
            dataset's).
        note: the one-line message ``"<env_id>: exclude_flags left out N of M cases
            (flag: n, ...); K rows remain, `excluded` lists the case ids"``, also given as a
            :class:`UserWarning` when N > 0; ``""`` without ``exclude_flags``.
    """

    def __init__(self, rows: Sequence[dict[str, Any]] = (), *,
                 excluded: dict[str, tuple[str, ...]] | None = None, considered: int = 0,
                 note: str = "") -> None:
        super().__init__(rows)
        self.excluded: dict[str, tuple[str, ...]] = dict(excluded or {})
        self.considered = considered
        self.note = note


def check_flags(exclude_flags: Sequence[str]) -> tuple[str, ...]:
    """``exclude_flags`` as a tuple, checked: each a name of :data:`CASE_FLAG_NAMES`.

    Raises:
        ValueError: a bare string (give a tuple: ``("target_in_records",)``), an unknown
            name (the valid names listed) or a name given twice.
    """
    if isinstance(exclude_flags, str):
        raise ValueError(f"exclude_flags must be a tuple of flag names, e.g. "
                         f"({exclude_flags!r},), not a string")
    flags = tuple(exclude_flags)
    for flag in flags:
        if flag not in CASE_FLAG_NAMES:
            raise ValueError(f"exclude_flags: unknown flag {flag!r}; the flags are "
                             f"{', '.join(CASE_FLAG_NAMES)}")
    repeated = sorted({flag for flag in flags if flags.count(flag) > 1})
    if repeated:
        raise ValueError(f"exclude_flags: {', '.join(repeated)} named twice")
    return flags


def task_rows(env_id: str, split: str | Path | Sequence[str] | None = None, *,
              seed: int = 0, exclude_flags: Sequence[str] = (),
              order: Literal["dataset", "curriculum"] = "dataset",
              difficulty: str | Path | DifficultyTable | None = None,
              **env_kwargs: Any) -> TaskRows:
    """The episodes a trainer's rows pin: one ``{"case_id", "seed", "env_id"}`` per case.

    Args:
        env_id: an EGIP text environment id.
        split: ``None`` (every case), a case-list file, or a sequence of case ids.
        seed: the run seed (>= 0); a row's is ``episode_seed(seed, 0, case index)``.
        exclude_flags: flag names (:data:`CASE_FLAG_NAMES`, e.g. :data:`LEAK_FLAGS`) whose
            cases are left out; ``()`` keeps every case.
        order: ``"dataset"`` (default) or ``"curriculum"`` (easiest first).
        difficulty: the curriculum's table: ``None`` (the shipped one), a file or a table.
        **env_kwargs: as for :class:`ToolEpisode`.

    Raises:
        clinenv.case_list.CaseListError: an unreadable list, a repeated or unknown id.
        ValueError: bad ``exclude_flags`` or ``order``; no case left; ``difficulty``
            without ``order="curriculum"``; as :class:`ToolEpisode`.
        clinenv.datasets.difficulty.DifficultyError: no usable table for this dataset.
        gymnasium.error.Error: as :class:`ToolEpisode`.
    """
    flags = check_flags(exclude_flags)
    if order not in ("dataset", "curriculum"):
        raise ValueError(f"order must be 'dataset' or 'curriculum', got {order!r}")
    if difficulty is not None and order != "curriculum":
        raise ValueError("difficulty= is the table of order='curriculum'; pass both")
    pool = ToolEpisode(env_id, **env_kwargs).env.pool
    ids = [case.case_id for case in pool.cases]
    if split is None:
        indices: Sequence[int] = range(len(ids))
    elif isinstance(split, str | Path):
        indices = read_case_list(split).indices(ids, dataset=env_id)
    else:
        indices = _list_indices([str(case_id) for case_id in split], ids, env_id)
    excluded = {flag: tuple(ids[i] for i in indices if getattr(pool.cases[i].flags, flag))
                for flag in flags}
    left_out = {case_id for found in excluded.values() for case_id in found}
    rows = [{"case_id": ids[i], "seed": episode_seed(seed, 0, i), "env_id": env_id}
            for i in indices if ids[i] not in left_out]
    note = ""
    if flags:
        counts = ", ".join(f"{flag}: {len(found)}" for flag, found in excluded.items())
        note = (f"{env_id}: exclude_flags left out {len(left_out)} of {len(indices)} cases "
                f"({counts}); {len(rows)} rows remain, `excluded` lists the case ids")
    if not rows:
        raise ValueError(f"{env_id}: exclude_flags={flags!r} leaves no case: each of the "
                         f"{len(indices)} cases has one of these flags")
    if order == "curriculum":
        rank = {case_id: r for r, case_id in enumerate(
            _difficulty_table(env_id, pool, difficulty).order(row["case_id"] for row in rows))}
        rows.sort(key=lambda row: rank[row["case_id"]])
    if left_out:
        warnings.warn(note, UserWarning, stacklevel=2)
    return TaskRows(rows, excluded=excluded, considered=len(indices), note=note)


def _difficulty_table(env_id: str, pool: Any,
                      source: str | Path | DifficultyTable | None) -> DifficultyTable:
    """The difficulty table of ``task_rows(order="curriculum")``, checked against the
    pool's records digest.

    Raises:
        DifficultyError: no shipped table for these records, or one of other records.
    """
    if source is None:
        table = shipped_difficulty(pool.sha256)
        if table is None:
            raise DifficultyError(f"{env_id}: no shipped difficulty table for these "
                                  "records (shipped: demo, MedQA, NEJM); build one with "
                                  "clinenv data difficulty DATASET --out FILE and pass "
                                  "difficulty=FILE")
        return table
    table = source if isinstance(source, DifficultyTable) else load_difficulty(source)
    if table.dataset_sha256 not in (None, pool.sha256, *pool.sha256_aliases):
        raise DifficultyError(f"{env_id}: the difficulty table was measured on other "
                              f"records (dataset_sha256 {table.dataset_sha256}, these are "
                              f"{pool.sha256}); rebuild it with clinenv data difficulty")
    return table


def _list_indices(listed: list[str], ids: list[str], env_id: str) -> list[int]:
    """Dataset indices (ascending) of a list of case ids; refuses repeats and unknowns."""
    where = {case_id: i for i, case_id in enumerate(ids)}
    seen: set[str] = set()
    for n, case_id in enumerate(listed):
        if case_id in seen:
            raise CaseListError(f"split item {n}: case id {case_id!r} is listed twice")
        seen.add(case_id)
        if case_id not in where:
            raise CaseListError(f"split item {n}: case id {case_id!r} is not in {env_id} "
                                f"({len(ids)} cases); the nearest id is "
                                f"{nearest_id(case_id, ids)!r}")
    if not listed:
        raise CaseListError("split: an empty list of case ids")
    return sorted(where[case_id] for case_id in listed)


def plain_mapping(config: Any) -> dict[str, Any]:
    """A plain dict of a mapping or an omegaconf config (verl's and SkyRL's settings);
    ``None``: empty.

    Raises:
        TypeError: neither a mapping nor an omegaconf config.
    """
    if config is None:
        return {}
    if type(config).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        return dict(OmegaConf.to_container(config, resolve=True))
    if isinstance(config, Mapping):
        return dict(config)
    raise TypeError(f"expected a mapping, got {type(config).__name__}")
