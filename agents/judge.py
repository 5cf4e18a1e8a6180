"""The LLM judge: does a free-text answer name the reference diagnosis?

The opt-in alternative to :mod:`clinenv.scoring`, in the role of AgentClinic's moderator;
it sees the answer and the reference only (reading rules: :func:`parse_verdict`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from clinenv.agents.prompts import JUDGE_RETRY_USER, JUDGE_SYSTEM, JUDGE_USER
from clinenv.agents.terminal_base import (
    CallRequest,
    Plan,
    arun_plan,
    base_seed,
    call_config,
    run_plan,
    turn_stops,
)
from clinenv.llm.base import ChatModel, GenerationConfig
from clinenv.protocol.parser import parse_action, split_reasoning
from clinenv.protocol.turns import cut_turn
from clinenv.seeding import call_seed

JudgeLabel = Literal["correct", "wrong", "unparsed"]

_MARKDOWN = re.compile(r"[*_#`]+")
#: ``no`` as an answer word: not followed on its line by a word (then it is a determiner,
#: as in "no doubt"; a hyphen in between counts as the same word, "no-brainer").
_NO_WORD = r"\bno\b(?![ \t]*-?[^\W\d_])"
_FINAL = re.compile(r"\b(?:final\s+answer|final\s+verdict|answer|verdict)(?:\s*[:\-]|\s+is\b)"
                    rf"\s*(yes\b|{_NO_WORD})", re.IGNORECASE)
_OPENING = re.compile(r"^\W*(yes|no)\s*(?:$|[.,;:!?)\u2013\u2014]|-(?![^\W\d_]))",
                      re.IGNORECASE)
_YES = re.compile(r"\byes\b", re.IGNORECASE)
_NO = re.compile(_NO_WORD, re.IGNORECASE)
_NEGATIVE = re.compile(
    r"\b(?:not\s+(?:the\s+)?same|not\s+equivalent|not\s+a\s+match|no\s+match|do\s+not\s+match"
    r"|don't\s+match|does\s+not\s+match|doesn't\s+match|different|differ|distinct"
    r"|incorrect)\b", re.IGNORECASE)


def parse_verdict(text: str, *, strict: bool = False) -> JudgeLabel:
    """The verdict a judge reply gives: ``"correct"``, ``"wrong"`` or ``"unparsed"``.

    Lenient (default), in order: drop ``<think>`` blocks and markdown (nothing left:
    unparsed); the last ``Final answer:``/``Answer:``/``Verdict: Yes|No`` decides; a reply
    opening with ``Yes``/``No`` before its end or punctuation decides; otherwise only
    negative evidence (``no`` not followed by a word on its line, ``not the same``,
    ``different``...) is wrong, only ``yes`` correct, both or neither unparsed.
    Strict: correct iff the whole lower-cased reply is ``"yes"``, else wrong.

    Args:
        text: the judge model's reply (``None`` reads as ``""``).
        strict: AgentClinic's exact ``"yes"`` rule.
    """
    text = text if isinstance(text, str) else ""
    if strict:
        return "correct" if text.lower() == "yes" else "wrong"
    visible, _ = split_reasoning(text)
    visible = _MARKDOWN.sub("", visible).strip()
    if not visible:
        return "unparsed"
    finals = _FINAL.findall(visible)
    if finals:
        return "correct" if finals[-1].lower() == "yes" else "wrong"
    opening = _OPENING.match(visible)
    if opening:
        return "correct" if opening.group(1).lower() == "yes" else "wrong"
    positive = bool(_YES.search(visible))
    negative = bool(_NO.search(visible) or _NEGATIVE.search(visible))
    if positive == negative:
        return "unparsed"
    return "correct" if positive else "wrong"


def answer_only(answer: str) -> str:
    """The diagnosis of ``answer`` without an answer marker, as the judge receives it.

    A text with a diagnosis marker (``DIAGNOSIS READY: X`` anywhere, any case, through
    markdown; or a ``Diagnosis: X`` / ``Final diagnosis: X`` line) gives the payload
    after the marker (its first line, :func:`clinenv.protocol.parser.parse_action`);
    any other text is returned stripped. ``answer_only("DIAGNOSIS READY: Myasthenia
    gravis")`` is ``"Myasthenia gravis"``; ``answer_only("Myasthenia gravis")`` is
    unchanged.
    """
    action = parse_action(answer, accept_bare_diagnosis=True)
    if action.kind == "diagnosis" and action.payload.strip():
        return action.payload.strip()
    return answer.strip()


def judge_reply(text: str, *, strict: bool = False) -> tuple[str, list[str]]:
    """``(reply, flags)``: the judge's own turn of a model reply, read before the verdict.

    A reply that goes past a turn boundary (:func:`~clinenv.protocol.turns.cut_turn`,
    seat ``"judge"``, on the text without ``<think>`` blocks) is cut there, flagged
    ``["wrote_past_turn"]``; otherwise it is kept unchanged (strict mode reads it as
    sent), flags ``[]``.
    """
    text = text if isinstance(text, str) else ""
    cut = cut_turn(split_reasoning(text)[0], "judge")
    return (cut.text, cut.flags) if cut.wrote_past_turn else (text, [])


@dataclass(frozen=True)
class JudgeVerdict:
    """The judge's decision on one answer.

    Attributes:
        verdict: ``"correct"``, ``"wrong"`` or ``"unparsed"``.
        reply: the judge model's last reply, cut to its own turn (:func:`judge_reply`).
        n_attempts: model calls made (1 + retries used).
    """

    verdict: JudgeLabel
    reply: str
    n_attempts: int


class LLMJudge:
    """A chat model that judges answers against the reference diagnosis.

    Args:
        model: the chat model.
        strict: AgentClinic's exact ``"yes"`` rule instead of the lenient parser.
        retries: re-asks after an unparsed reply (>= 0; lenient mode only).
        config: generation settings (default ``model.config``).

    Raises:
        TypeError: ``model`` is not a :class:`~clinenv.llm.base.ChatModel`.
        ValueError: a negative or non-integer ``retries``.
    """

    name = "llm_judge"

    def __init__(self, model: ChatModel, *, strict: bool = False, retries: int = 1,
                 config: GenerationConfig | None = None) -> None:
        if not isinstance(model, ChatModel):
            raise TypeError(f"model must be a clinenv.llm.ChatModel, got {type(model).__name__}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be an integer >= 0, got {retries!r}")
        self.model = model
        self.strict = bool(strict)
        self.retries = retries
        self.generation = config or model.config
        self._calls: list[dict[str, Any]] = []

    @property
    def config(self) -> dict[str, Any]:
        """JSON-ready description for run logs (never an API key)."""
        return {"agent": self.name, "backend": self.model.backend, "model": self.model.model,
                "generation": self.generation.model_dump(mode="json"),
                "strict": self.strict, "retries": self.retries}

    @staticmethod
    def messages_for(answer: str, target: str) -> list[dict[str, str]]:
        """The first attempt's messages: the judge prompt, the answer (without its marker,
        :func:`answer_only`) and the target.

        Raises:
            ValueError: ``answer`` or ``target`` is not a non-empty string.
        """
        for field, value in (("answer", answer), ("target", target)):
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{field} must be a non-empty string, got {value!r:.80}")
        return [{"role": "system", "content": JUDGE_SYSTEM},
                {"role": "user", "content": JUDGE_USER.format(target=target.strip(),
                                                               answer=answer_only(answer))}]

    def judge(self, answer: str, target: str, *, seed: int | None = None) -> JudgeVerdict:
        """Judge ``answer`` against the reference diagnosis ``target``.

        Args:
            answer: the doctor's answer text.
            target: the reference diagnosis Y.
            seed: seed of the first call (default the config's); retries derive theirs.

        Raises:
            ValueError: an empty ``answer`` or ``target``.
            clinenv.llm.base.BackendError: a model call failed.
        """
        return run_plan(self._plan(answer, target, seed), self.model)

    async def ajudge(self, answer: str, target: str, *,
                     seed: int | None = None) -> JudgeVerdict:
        """:meth:`judge` with the asynchronous model API."""
        return await arun_plan(self._plan(answer, target, seed), self.model)

    def drain_calls(self) -> list[dict[str, Any]]:
        """Call records since the last drain (then cleared): :meth:`~clinenv.llm.base.
        ChatResult.to_log` with ``purpose="judge"``, ``agent="judge"``, ``attempt``
        (0-based), ``verdict`` and ``flags`` (``["wrote_past_turn"]`` for a reply cut
        to the judge's turn, else ``[]``)."""
        calls, self._calls = self._calls, []
        return calls

    def _plan(self, answer: str, target: str, seed: int | None) -> Plan[JudgeVerdict]:
        messages = self.messages_for(answer, target)
        base = base_seed(seed, self.generation)
        attempts = 1 if self.strict else 1 + self.retries
        for attempt in range(attempts):
            call = base if attempt == 0 else call_seed(base, "judge", attempt)
            result = yield CallRequest("judge", messages, turn_stops(
                call_config(self.generation, seed=call, n=1), "judge"))
            reply, flags = judge_reply(result.text, strict=self.strict)
            verdict = parse_verdict(reply, strict=self.strict)
            self._calls.append(result.to_log(purpose="judge", agent="judge",
                                             attempt=attempt, verdict=verdict, flags=flags))
            if verdict != "unparsed":
                break
            messages = [*messages, {"role": "assistant", "content": reply},
                        {"role": "user", "content": JUDGE_RETRY_USER}]
        return JudgeVerdict(verdict, reply, attempt + 1)
