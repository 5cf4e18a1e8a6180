"""The LLM patient simulator: a chat model answers the doctor from the patient view only.

It sees P (target sentences withheld) and the dialogue, never M or Y (EGIP section 3.2);
messages, cleanup and flags: docs/api/agents.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import JsonValue

from clinenv.agents.chat_seat import ChatSeat
from clinenv.agents.prompts import (
    PATIENT_FACTS_START,
    PATIENT_OPENING,
    PATIENT_SYSTEM,
    PATIENT_VOICE_CAREGIVER,
    PATIENT_VOICE_SELF,
)
from clinenv.agents.terminal_base import CallRequest, Plan, arun_plan, run_plan
from clinenv.env.retrieval_patient import NOT_SURE
from clinenv.llm.base import ChatModel, GenerationConfig
from clinenv.protocol.biases import bias_text, check_bias
from clinenv.protocol.parser import split_reasoning
from clinenv.protocol.turns import cut_turn
from clinenv.protocol.views import PatientView

#: A speaker label at a line start: "Patient:", "**Doctor:**", "Parent (mother):".
_ROLE_LABEL = re.compile(r"^[ \t>*_#]*(doctor|patient|parent|caregiver)[*_]*[ \t]*"
                         r"(?:\([^)\n]{0,40}\))?[*_ \t]*:[*_ \t]*", re.IGNORECASE | re.MULTILINE)
_SPACE = re.compile(r"\s+")


def render_facts(facts: Mapping[str, JsonValue], indent: int = 0) -> str:
    """The facts tree P as indented ``Key: value`` lines (``_`` in keys read as spaces;
    list items as ``- item``; empty branches left out)."""
    pad = "  " * indent
    lines = []
    for key, value in facts.items():
        label = str(key).replace("_", " ").strip()
        if isinstance(value, Mapping):
            inner = render_facts(value, indent + 1)
            if inner:
                lines += [f"{pad}{label}:", inner]
        elif isinstance(value, list):
            items = [_leaf(v) for v in value if _leaf(v)]
            if items:
                lines += [f"{pad}{label}:", *(f"{pad}  - {item}" for item in items)]
        elif _leaf(value):
            lines.append(f"{pad}{label}: {_leaf(value)}")
    return "\n".join(lines)


def _leaf(value: JsonValue) -> str:
    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {_leaf(v)}" for k, v in value.items() if _leaf(v))
    if isinstance(value, list):
        return "; ".join(_leaf(v) for v in value if _leaf(v))
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "" if value is None else str(value).strip()


def _same(a: str, b: str) -> bool:
    return _SPACE.sub(" ", a).strip().casefold() == _SPACE.sub(" ", b).strip().casefold()


def clean_reply(text: str, earlier: list[str]) -> tuple[str, list[str]]:
    """``(reply, flags)`` from a raw model reply (docs/api/agents.md).

    Args:
        text: the model's reply.
        earlier: the patient's earlier replies in this episode.
    """
    visible, _ = split_reasoning(text or "")
    flags = []
    parts = _ROLE_LABEL.split(visible)  # [before, role, text, role, text, ...]
    reply = parts[0].strip()
    roles = [role.lower() for role in parts[1::2]]
    if "doctor" in roles:
        flags.append("speaks_as_doctor")
    if not reply:
        reply = next((said.strip() for role, said in zip(roles, parts[2::2], strict=True)
                      if role != "doctor" and said.strip()), "")
    if not reply:
        flags.append("empty_reply")
        return NOT_SURE, flags
    if any(_same(reply, said) for said in earlier):
        flags.append("repeats_own_reply")
    return reply, flags


def read_patient_reply(text: str, earlier: list[str], *,
                       raw: str | None = None) -> tuple[str, list[str]]:
    """``(reply, flags)`` of a model reply: ``<think>`` blocks removed, cut to the
    patient's turn, then :func:`clean_reply` (docs/api/agents.md).

    Args:
        text: the reply (a choice's text, possibly cut by the backend at a stop string).
        earlier: the patient's earlier replies in this episode.
        raw: the reply before the backend's cut (:attr:`~clinenv.llm.base.Choice.raw`),
            when it differs from ``text``.

    Returns:
        :func:`clean_reply`'s reply and flags, with ``"speaks_as_doctor"`` first when a
        cut-off part holds a ``Doctor:`` line, and ``"wrote_past_turn"`` last when the
        reply was cut (here or by the backend).
    """
    visible, _ = split_reasoning(text or "")
    cut = cut_turn(visible, "patient")
    reply, flags = clean_reply(cut.text if cut.wrote_past_turn else visible, earlier)
    written = split_reasoning(raw)[0] if raw is not None else visible
    if "speaks_as_doctor" not in flags and any(
            m.group(1).lower() == "doctor" for m in _ROLE_LABEL.finditer(written)):
        flags.insert(0, "speaks_as_doctor")
    if cut.wrote_past_turn or (raw is not None and raw != text):
        flags.append("wrote_past_turn")
    return reply, flags


class LLMPatient(ChatSeat):
    """A patient simulator backed by a chat model, the ``patient=`` of :class:`clinenv.env.EGIPEnv`.

    Model, settings, seeds and call records come from
    :class:`~clinenv.agents.chat_seat.ChatSeat`; each call record has
    ``purpose="patient"``, ``agent="patient"``, ``question_index`` (0-based) and ``flags``.

    Args:
        model: the chat model.
        config: generation settings (default ``model.config``).
        bias: ``None`` or a name of :data:`~clinenv.protocol.biases.PATIENT_BIASES`.

    Attributes:
        last_flags: the flags of the latest reply (:func:`clean_reply`; ``[]`` before it).

    Raises:
        TypeError: ``model`` is not a :class:`~clinenv.llm.base.ChatModel`.
        ValueError: an unknown ``bias``.
    """

    name = "llm_patient"
    seat = "patient"

    def __init__(self, model: ChatModel, *, config: GenerationConfig | None = None,
                 bias: str | None = None) -> None:
        super().__init__(model, config=config)
        self.bias = check_bias("patient", bias, "bias")
        self.last_flags: list[str] = []

    @property
    def config(self) -> dict[str, Any]:
        """JSON-ready description for run logs: :attr:`ChatSeat.config
        <clinenv.agents.chat_seat.ChatSeat.config>`, plus ``bias`` when one is set."""
        out = super().config
        if self.bias is not None:
            out["bias"] = self.bias
        return out

    def reset(self, *, seed: int | None = None) -> None:
        """Start an episode; ``seed`` (>= 0) is the base of every per-call seed.

        Raises:
            ValueError: a negative or non-integer seed.
        """
        super().reset(seed=seed)
        self.last_flags = []

    def messages_for(self, view: PatientView) -> list[dict[str, str]]:
        """The exact messages sent for ``view`` (layout: docs/api/agents.md).

        Raises:
            TypeError: ``view`` is not a :class:`~clinenv.protocol.views.PatientView`.
        """
        if not isinstance(view, PatientView):
            raise TypeError(f"view must be a PatientView, got {type(view).__name__}")
        voice = PATIENT_VOICE_CAREGIVER if view.caregiver_voice else PATIENT_VOICE_SELF
        system = PATIENT_SYSTEM.format(voice=voice, facts=render_facts(view.facts) or "(none)")
        if self.bias is not None:
            base, start, facts = system.partition(PATIENT_FACTS_START)
            system = base + bias_text("patient", self.bias) + start + facts
        messages = [{"role": "system", "content": system}]
        questions = view.heard_questions()
        replies = [r for _, r in view.dialogue]
        for i, question in enumerate(questions):
            content = f"{PATIENT_OPENING}\n{question}" if i == 0 else question
            messages.append({"role": "user", "content": content})
            if i < len(replies):
                messages.append({"role": "assistant", "content": replies[i]})
        return messages

    def reply(self, view: PatientView) -> str:
        """The patient's reply to ``view.question``.

        Raises:
            TypeError: ``view`` is not a PatientView.
            clinenv.llm.base.BackendError: the model call failed.
        """
        return run_plan(self._plan(view), self.model)

    async def areply(self, view: PatientView) -> str:
        """:meth:`reply` with the asynchronous model API."""
        return await arun_plan(self._plan(view), self.model)

    def _plan(self, view: PatientView) -> Plan[str]:
        messages = self.messages_for(view)
        index = len(view.dialogue)
        self.last_flags = []  # a failed call leaves no stale flags
        result = yield CallRequest("patient", messages, self.call_config(index, "patient"))
        choice = result.choices[0]
        reply, flags = read_patient_reply(choice.text, [r for _, r in view.dialogue],
                                          raw=choice.raw_text)
        self.last_flags = list(flags)
        self._calls.append(result.to_log(purpose="patient", agent="patient",
                                         question_index=index, flags=flags))
        return reply
