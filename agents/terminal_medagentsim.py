"""MedAgentSim's final turn as published: discussion, answer options, consensus.

Source: MedAgentSim (Almansoori et al., MICCAI 2025), the default on the MedAgentSim
ids; its published defects are arguments (docs/protocols.md). No call receives Y.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from clinenv.agents.medagentsim_options import (
    CANDIDATES_ASK,
    CHOICE_SYSTEM,
    OPTION_SAMPLES,
    QUESTION_ASK,
    REASONER_SYSTEM,
    choice_prompt,
    majority,
    option_orders,
    parse_candidates,
    parse_letter,
    shuffled_options,
)
from clinenv.agents.terminal_base import (
    CallRequest,
    Plan,
    TerminalDecision,
    TerminalStrategy,
    base_seed,
    call_config,
)
from clinenv.agents.terminal_discussion import (
    CASE_HEADING,
    DEFAULT_DOCTORS,
    OPINION_ASK,
    TEAM_SYSTEM,
    opinion_round,
    settle,
)
from clinenv.llm.base import ChatResult, GenerationConfig
from clinenv.protocol.native import moderator_answer
from clinenv.protocol.parser import split_reasoning
from clinenv.scoring import is_abstention
from clinenv.seeding import call_seed

#: The consensus call's user message with the pick of the option step.
CONSENSUS_ASK = (
    "The doctors discussed the case:\n\n{opinions}\n\nThe analysis of the answer options "
    "points to: {pick}\n\nFrom this discussion and these findings, give the final "
    "diagnosis. The team's conclusion is written as DIAGNOSIS READY: [final diagnosis by "
    "majority vote]."
)
#: The consensus call's user message without a pick (``answer_options=False``, or no
#: option was picked).
CONSENSUS_ASK_NO_PICK = (
    "The doctors discussed the case:\n\n{opinions}\n\nFrom this discussion and these "
    "findings, give the final diagnosis. The team's conclusion is written as DIAGNOSIS "
    "READY: [final diagnosis by majority vote]."
)


def _opinions(opinions: Sequence[dict[str, Any]]) -> str:
    """``"Doctor i: <visible opinion>"`` lines, one per opinion."""
    return "\n".join(f"{o['persona']}: {o['text'] or '(no opinion given)'}" for o in opinions)


class MedAgentSimDiscussion(TerminalStrategy):
    """MedAgentSim's final turn as published (docs/api/agents.md).

    Args:
        n_doctors: doctors in the discussion (1..50; MedAgentSim: 5).
        answer_options: run the answer-option step (published: yes).
        option_samples: chain-of-thought samples of the choice-shuffle ensemble (1..19;
            published: 5).
        require_marker: normalize the consensus to one ``DIAGNOSIS READY:`` line
            (published: no, the reply stands as it is).
        repair: one repair call of an unreadable consensus; needs ``require_marker``
            (published: no).

    Raises:
        ValueError: an argument out of range, or ``repair`` without ``require_marker``.
    """

    name = "medagentsim"

    def __init__(self, n_doctors: int = DEFAULT_DOCTORS, *, answer_options: bool = True,
                 option_samples: int = OPTION_SAMPLES, require_marker: bool = False,
                 repair: bool = False) -> None:
        for label, value, top in (("n_doctors", n_doctors, 50),
                                  ("option_samples", option_samples, 19)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
                raise ValueError(f"{label} must be an integer in 1..{top}, got {value!r}")
        if repair and not require_marker:
            raise ValueError("repair=True needs require_marker=True (a reply that stands as "
                             "it is is never repaired)")
        self.personas = tuple(f"Doctor {i}" for i in range(1, n_doctors + 1))
        self.answer_options = bool(answer_options)
        self.option_samples = option_samples
        self.require_marker = bool(require_marker)
        self.repair = bool(repair)

    def describe(self) -> dict[str, Any]:
        """``name`` and every argument (``personas`` for ``n_doctors``)."""
        return {"name": self.name, "personas": list(self.personas),
                "answer_options": self.answer_options, "option_samples": self.option_samples,
                "require_marker": self.require_marker, "repair": self.repair}

    def plan(self, evidence_text: str, *, candidates: list[str] | None, seed: int | None,
             config: GenerationConfig) -> Plan[TerminalDecision]:
        """Yield the opinion, option-step and consensus calls; return the decision.
        ``candidates`` (K) are not used: the published step builds its own options."""
        base = base_seed(seed, config)
        calls: list[dict[str, Any]] = []
        case_block = f"{CASE_HEADING}\n{evidence_text}"
        asks = [OPINION_ASK.format(persona=persona) for persona in self.personas]
        opinions = yield from opinion_round(case_block, self.personas, 1, asks, base, config,
                                            calls)
        detail: dict[str, Any] = {"opinions": [opinions]}
        pick = None
        if self.answer_options:
            pick = yield from self._option_step(case_block, _opinions(opinions), base,
                                                config, calls, detail)
        ask = (CONSENSUS_ASK.format(opinions=_opinions(opinions), pick=pick) if pick
               else CONSENSUS_ASK_NO_PICK.format(opinions=_opinions(opinions)))
        messages = [{"role": "system", "content": TEAM_SYSTEM},
                    {"role": "user", "content": ask}]
        reply = yield CallRequest("summary", messages,
                                  call_config(config, seed=call_seed(base, "summary"), n=1))
        detail["consensus"] = [reply.text]
        if not self.require_marker:
            return self._as_published(reply, calls, detail)
        return (yield from settle(reply, messages, repair=self.repair, base=base,
                                  config=config, calls=calls, detail=detail,
                                  replies=detail["consensus"]))

    # ------------------------------------------------------------------ steps
    def _option_step(self, case_block: str, opinions: str, base: int | None,
                     config: GenerationConfig, calls: list[dict[str, Any]],
                     detail: dict[str, Any]) -> Plan[str | None]:
        """The question, candidate and multiple-choice calls; returns the pick's text."""
        reply = yield CallRequest("question", [
            {"role": "system", "content": REASONER_SYSTEM},
            {"role": "user", "content": QUESTION_ASK.format(case=case_block,
                                                            opinions=opinions)}],
            call_config(config, seed=call_seed(base, "question"), n=1))
        question = split_reasoning(reply.text)[0].strip()
        calls.append(reply.to_log(purpose="question"))
        reply = yield CallRequest("candidates", [
            {"role": "system", "content": REASONER_SYSTEM},
            {"role": "user", "content": CANDIDATES_ASK.format(question=question,
                                                              opinions=opinions)}],
            call_config(config, seed=call_seed(base, "candidates"), n=1))
        names = parse_candidates(reply.text)
        calls.append(reply.to_log(purpose="candidates", answers=names))
        rng = random.Random(call_seed(base, "options"))
        options = shuffled_options(names, rng)
        picks: list[str | None] = []
        for k, order in enumerate(option_orders(rng, self.option_samples), start=1):
            user, letters = choice_prompt(question, options, order)
            reply = yield CallRequest("options", [
                {"role": "system", "content": CHOICE_SYSTEM},
                {"role": "user", "content": user}],
                call_config(config, seed=call_seed(base, "options", k), n=1))
            shown = parse_letter(reply.text)
            picks.append(letters["ABCD".index(shown)] if shown else None)
            calls.append(reply.to_log(purpose="options", order=order, answers=[picks[-1]],
                                      flags=[] if shown else ["unparsed"]))
        letter = majority(picks)
        pick = options[letter] if letter else None
        detail.update({"question": question, "options": options, "picks": picks,
                       "pick": pick})
        return pick

    def _as_published(self, reply: ChatResult, calls: list[dict[str, Any]],
                      detail: dict[str, Any]) -> TerminalDecision:
        """The consensus reply as the action; ``answer`` is what the moderator reads in
        it (``None`` without the marker: the runtime ends the episode unfinished)."""
        text = reply.text.strip()
        answer = moderator_answer(text)
        calls.append(reply.to_log(purpose="summary", answers=[answer],
                                  flags=[] if answer else ["unmarked"]))
        detail["outcome"] = "marked" if answer else "unmarked"
        abstained = answer is not None and is_abstention(answer)
        return TerminalDecision(text, None if abstained else answer, abstained, calls, detail)

