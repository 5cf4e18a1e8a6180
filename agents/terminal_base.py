"""The terminal decision strategy F (EGIP eq. 5) and the call plans every LLM agent runs.

A call plan yields :class:`CallRequest` and receives results; :func:`run_plan` and
:func:`arun_plan` drive it, so sync and async share one logic (docs/api/agents.md).
"""

from __future__ import annotations

import abc
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from clinenv.llm.base import ChatModel, ChatResult, GenerationConfig, cut_at_stop
from clinenv.protocol.parser import clean_payload, parse_action, split_reasoning
from clinenv.protocol.turns import TURN_TOKENS, Seat, cut_turn, stop_strings

T = TypeVar("T")

#: The abstention answer of Vote, Full and Discussion when the model explicitly declined
#: (:func:`clinenv.scoring.is_abstention` is True for it, so the environment scores it
#: "unscored" with ``abstained=True``).
ABSTENTION = "Undetermined"
#: The terminal action line that abstains (the model explicitly declined).
ABSTENTION_ACTION = f"DIAGNOSIS READY: {ABSTENTION}"
#: The terminal action that gives no answer (no usable answer came back): the empty
#: action, which the runtime reads as no answer (``answer`` ``None``, ``abstained``
#: false).
NO_ANSWER_ACTION = ""
#: A bare reply line up to this length counts as the answer (as in the runtime's lenient
#: decision-phase rule, :meth:`clinenv.protocol.runtime.EGIPRuntime.submit_answer`).
MAX_BARE_ANSWER_CHARS = 120


@dataclass(frozen=True)
class CallRequest:
    """One model call a plan asks for.

    Attributes:
        purpose: what the call is for, copied into its log record (``"acquire"``,
            ``"decide"``, ``"vote"``, ``"council"``, ``"ledger"``, ``"consensus"``,
            ``"discussion"``, ``"summary"``, ``"repair"``, ``"patient"``, ``"judge"``).
        messages: the chat messages, sent exactly as given.
        config: the complete generation config of the call (seed included).
    """

    purpose: str
    messages: list[dict[str, str]]
    config: GenerationConfig


#: A call plan: yields requests, receives results, returns ``T``.
Plan = Generator[CallRequest, ChatResult, T]


def run_plan(plan: Plan[T], model: ChatModel) -> T:
    """Drive ``plan`` with ``model.generate``; return what the plan returns.

    Raises:
        clinenv.llm.base.BackendError: a call failed after the backend's own retries.
    """
    try:
        request = next(plan)
        while True:
            request = plan.send(model.generate(request.messages, request.config))
    except StopIteration as stop:
        return stop.value


async def arun_plan(plan: Plan[T], model: ChatModel) -> T:
    """Drive ``plan`` with ``await model.agenerate``; same result and errors as
    :func:`run_plan`."""
    try:
        request = next(plan)
        while True:
            result = await model.agenerate(request.messages, request.config)
            request = plan.send(result)
    except StopIteration as stop:
        return stop.value


#: Doctor call purposes that answer in the doctor's turn format (they send the doctor's
#: stop strings and are cut at any turn boundary); the others (``"ledger"``,
#: ``"consensus"``: summaries and JSON) are cut at chat-template tokens only.
TURN_PURPOSES = frozenset({"acquire", "decide", "vote", "council", "discussion", "summary",
                           "repair"})
#: Stop strings a seat sends at most (the OpenAI API's limit); all are cut client-side.
SEAT_STOPS = 4


def turn_stops(config: GenerationConfig, seat: Seat) -> GenerationConfig:
    """``config`` with ``seat``'s turn stop strings (``stop_strings(seat, limit=4)``)
    after its own configured ones, duplicates dropped."""
    stops = tuple(dict.fromkeys((*config.stop, *stop_strings(seat, limit=SEAT_STOPS))))
    return config if stops == config.stop else config.model_copy(update={"stop": stops})


def cut_result(result: ChatResult, seat: Seat, *, turn: bool = True) -> ChatResult:
    """``result`` with every choice cut to ``seat``'s own turn.

    With ``turn`` (default), :func:`~clinenv.protocol.turns.cut_turn` on the text
    without ``<think>`` blocks; otherwise a cut at the first chat-template token only
    (:data:`~clinenv.protocol.turns.TURN_TOKENS`). A cut choice holds the kept text
    (reasoning dropped), ``raw_text`` (the reply before the cut) and
    ``wrote_past_turn=True``, so its :meth:`~ChatResult.to_log` record is flagged
    ``"wrote_past_turn"``; choices that were not cut are unchanged (the same object is
    returned when none was).
    """
    choices, changed = [], False
    for choice in result.choices:
        if turn:
            cut = cut_turn(split_reasoning(choice.text)[0], seat)
            kept, was_cut = cut.text, cut.wrote_past_turn
        else:
            kept, was_cut = cut_at_stop(choice.text, TURN_TOKENS)
            kept = kept.strip()
        choices.append(choice.cut(kept) if was_cut else choice)
        changed |= was_cut
    return result.with_choices(choices) if changed else result


def turn_plan(plan: Plan[T], seat: Seat = "doctor", *, stops: bool = True) -> Plan[T]:
    """``plan`` with every reply cut to ``seat``'s turn before the plan reads it
    (:func:`cut_result`; at any boundary for :data:`TURN_PURPOSES`, at chat-template
    tokens for the others) and, with ``stops``, the seat's stop strings added to each
    :data:`TURN_PURPOSES` call (:func:`turn_stops`). Returns what ``plan`` returns."""
    try:
        request = next(plan)
        while True:
            in_turn = request.purpose in TURN_PURPOSES
            if stops and in_turn:
                request = CallRequest(request.purpose, request.messages,
                                      turn_stops(request.config, seat))
            result = yield request
            request = plan.send(cut_result(result, seat, turn=in_turn))
    except StopIteration as stop:
        return stop.value


def call_config(config: GenerationConfig, *, seed: int | None, **fields: Any) -> GenerationConfig:
    """``config`` with ``seed`` set exactly (``None`` included) and ``fields`` replaced.

    Unlike :meth:`GenerationConfig.merged`, a ``None`` seed clears the config's seed, so
    one seed is never reused for several calls.

    Raises:
        pydantic.ValidationError: a field out of range (e.g. ``n=0``).
    """
    data = config.model_dump()
    data.update(fields)
    data["seed"] = seed
    return GenerationConfig(**data)


def base_seed(seed: int | None, config: GenerationConfig) -> int | None:
    """The seed per-call seeds derive from: ``seed``, else the config's seed, else None."""
    return seed if seed is not None else config.seed


def extract_answer(text: str) -> str | None:
    """The diagnosis a terminal reply gives, by the protocol parser; ``None`` if none.

    Lenient decision-phase rules (:func:`clinenv.protocol.parser.parse_action` with
    ``accept_bare_diagnosis=True``): ``DIAGNOSIS READY: X`` in any case and through
    markdown, ``Diagnosis: X`` / ``Final diagnosis: X`` lines, or a reply that is one
    short line (at most :data:`MAX_BARE_ANSWER_CHARS` characters). ``<think>`` blocks are
    ignored; an empty reply has no answer.
    """
    action = parse_action(text if isinstance(text, str) else "", accept_bare_diagnosis=True)
    if action.kind == "diagnosis":
        return action.payload or None
    if action.kind == "question":
        lines = [line for line in action.text.splitlines() if line.strip()]
        if len(lines) == 1 and len(lines[0]) <= MAX_BARE_ANSWER_CHARS:
            return clean_payload(lines[0]) or None
    return None


def check_evidence(evidence_text: Any, candidates: Any) -> list[str] | None:
    """Validate a strategy's inputs; return the candidates as a list (or ``None``).

    Raises:
        ValueError: ``evidence_text`` is not a non-empty string, or ``candidates`` is
            not a sequence of strings.
    """
    if not isinstance(evidence_text, str) or not evidence_text.strip():
        raise ValueError("evidence_text must be the non-empty text of the evidence "
                         f"interface e_T, got {evidence_text!r:.80}")
    if candidates is None:
        return None
    if isinstance(candidates, str) or not isinstance(candidates, Sequence) or not all(
            isinstance(c, str) for c in candidates):
        raise ValueError(f"candidates must be a list of strings or None, got {candidates!r:.80}")
    return list(candidates)


@dataclass
class TerminalDecision:
    """The outcome of a terminal strategy on e_T.

    An answer: ``answer`` set, ``abstained`` false. An explicit decline
    (:func:`clinenv.scoring.is_abstention`): ``answer`` ``None``, ``abstained`` true, action
    :data:`ABSTENTION_ACTION`. No usable answer (a placeholder, a failed check): ``answer``
    ``None``, ``abstained`` false, action :data:`NO_ANSWER_ACTION`. Direct returns the reply.

    Attributes:
        action: ``"DIAGNOSIS READY: <diagnosis>"``, :data:`ABSTENTION_ACTION`,
            :data:`NO_ANSWER_ACTION`, or (Direct) the model's reply unchanged.
        answer: the diagnosis extracted, or ``None``.
        abstained: the model explicitly declined.
        calls: one :meth:`~clinenv.llm.base.ChatResult.to_log` record per model call.
        detail: strategy-specific JSON-ready record (Vote: ``votes``; Full: ``proposals``,
            ``ledger``, ``errors``...).
    """

    action: str
    answer: str | None
    abstained: bool
    calls: list[dict[str, Any]] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)


class TerminalStrategy(abc.ABC):
    """A terminal decision procedure F over the evidence interface e_T (EGIP eq. 5).

    Subclasses implement :meth:`plan`; :meth:`decide` and :meth:`adecide` drive it.
    Generated opinions (samples, proposals, ledgers) never become observations.
    """

    name: ClassVar[str]

    @abc.abstractmethod
    def plan(self, evidence_text: str, *, candidates: list[str] | None, seed: int | None,
             config: GenerationConfig) -> Plan[TerminalDecision]:
        """The strategy's call plan (docs/api/agents.md)."""

    def decide(self, model: ChatModel, evidence_text: str, *,
               candidates: list[str] | None = None, seed: int | None = None,
               config: GenerationConfig | None = None) -> TerminalDecision:
        """Decide on ``evidence_text``, each reply cut to the doctor's turn (no stops added).

        Args:
            model: the chat model.
            evidence_text: e_T (:func:`clinenv.protocol.evidence.render_evidence`).
            candidates: the candidate labels K, or ``None``.
            seed: the decision's base seed, sent by the first call; later calls derive theirs
                (:func:`clinenv.seeding.call_seed`). ``None``: ``config.seed``.
            config: generation settings (default ``model.config``).

        Raises:
            ValueError: invalid ``evidence_text`` or ``candidates``.
            clinenv.llm.base.BackendError: a model call failed.
        """
        candidates = check_evidence(evidence_text, candidates)
        return run_plan(turn_plan(self.plan(evidence_text, candidates=candidates, seed=seed,
                                            config=config or model.config), stops=False),
                        model)

    async def adecide(self, model: ChatModel, evidence_text: str, *,
                      candidates: list[str] | None = None, seed: int | None = None,
                      config: GenerationConfig | None = None) -> TerminalDecision:
        """:meth:`decide` with the asynchronous model API (same arguments and errors)."""
        candidates = check_evidence(evidence_text, candidates)
        return await arun_plan(turn_plan(self.plan(
            evidence_text, candidates=candidates, seed=seed, config=config or model.config),
            stops=False), model)

    def describe(self) -> dict[str, Any]:
        """JSON-ready description for run logs: ``name`` and the strategy's parameters."""
        return {"name": self.name}
