"""Direct: one terminal call on the evidence interface e_T (EGIP eq. 5, appendix A.2).

The reply is returned unchanged as the action, for the environment's parser; the
strategy's own reading goes to :attr:`TerminalDecision.answer` (:func:`read_reply`).
"""

from __future__ import annotations

from clinenv.agents.prompts import DIRECT_SYSTEM
from clinenv.agents.terminal_base import (
    CallRequest,
    Plan,
    TerminalDecision,
    TerminalStrategy,
    base_seed,
    call_config,
    extract_answer,
)
from clinenv.llm.base import ChatResult, GenerationConfig
from clinenv.scoring import is_abstention, is_placeholder_answer


def direct_messages(evidence_text: str) -> list[dict[str, str]]:
    """The messages of a Direct call: the Direct system prompt, then e_T."""
    return [{"role": "system", "content": DIRECT_SYSTEM},
            {"role": "user", "content": evidence_text}]


def direct_request(evidence_text: str, *, seed: int | None,
                   config: GenerationConfig) -> CallRequest:
    """The Direct call (``purpose="decide"``): one choice, seeded with the base seed.

    Vote sends this very request as its first sample (EGIP appendix A.2).
    """
    return CallRequest("decide", direct_messages(evidence_text),
                       call_config(config, seed=base_seed(seed, config), n=1))


def read_reply(text: str) -> tuple[str | None, bool, list[str]]:
    """``(answer, abstained, flags)`` of one terminal reply.

    ``answer`` is :func:`~clinenv.agents.terminal_base.extract_answer` of the reply, or
    ``None`` when none could be read (flag ``"unparsed"``) or it is a template
    placeholder (``<single diagnosis>``, ``[diagnosis]``, ``N/A``...;
    :func:`clinenv.scoring.is_placeholder_answer`; flag ``"placeholder"``: no usable
    answer, never an abstention); ``abstained`` says the answer is an explicit decline
    (:func:`clinenv.scoring.is_abstention`).
    """
    answer = extract_answer(text)
    if answer is None:
        return None, False, ["unparsed"]
    if is_placeholder_answer(answer):
        return None, False, ["placeholder"]
    return answer, is_abstention(answer), []


class Direct(TerminalStrategy):
    """One terminal call; the model's reply is the action (docs/api/agents.md)."""

    name = "direct"

    def plan(self, evidence_text: str, *, candidates: list[str] | None, seed: int | None,
             config: GenerationConfig) -> Plan[TerminalDecision]:
        """Yield the Direct request; return the decision on its reply."""
        result: ChatResult = yield direct_request(evidence_text, seed=seed, config=config)
        text = result.text
        answer, abstained, flags = read_reply(text)
        record = result.to_log(purpose="decide", answers=[answer], flags=flags)
        return TerminalDecision(action=text, answer=None if abstained else answer,
                                abstained=abstained, calls=[record],
                                detail={"reply": text})
