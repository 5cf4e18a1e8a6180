"""Discussion: MedAgentSim's final-turn multi-doctor discussion as a terminal strategy.

Source: MedAgentSim (Almansoori et al., MICCAI 2025); a variant with a marker and one
repair (docs/api/agents.md). The published turn: :mod:`clinenv.agents.terminal_medagentsim`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from clinenv.agents.terminal_base import (
    ABSTENTION_ACTION,
    NO_ANSWER_ACTION,
    CallRequest,
    Plan,
    TerminalDecision,
    TerminalStrategy,
    base_seed,
    call_config,
    extract_answer,
)
from clinenv.agents.terminal_vote import tally, vote_key
from clinenv.llm.base import ChatResult, GenerationConfig
from clinenv.protocol.parser import split_reasoning
from clinenv.scoring import is_abstention, is_placeholder_answer
from clinenv.seeding import call_seed

#: Doctors in MedAgentSim's internal discussion (``DoctorAgent.num_doctors``).
DEFAULT_DOCTORS = 5
#: The team's system prompt (every discussion and summary call).
TEAM_SYSTEM = (
    "You are one of a team of doctors holding a case conference about one patient. Each "
    "doctor gives a professional opinion on the diagnosis, grounded in the symptoms, "
    "history and test results of the case record. The team works toward one consensus "
    "diagnosis, decided by the majority of the doctors' opinions."
)
#: Heading of the case text in a discussion call.
CASE_HEADING = "# Case record"
#: The ask to one persona in round 1.
OPINION_ASK = (
    "The team now discusses this case. {persona}, give your opinion on the most likely "
    "diagnosis and your reasoning in a few sentences, then end with one line: "
    "DIAGNOSIS READY: <single diagnosis>"
)
#: The ask to one persona from round 2 on.
REVISION_ASK = (
    "Opinions of the previous round:\n{opinions}\n\n{persona}, weigh your colleagues' "
    "opinions against the case record and give your revised opinion in a few sentences, "
    "then end with one line: DIAGNOSIS READY: <single diagnosis>"
)
#: The summarizing call's user message.
SUMMARY_ASK = (
    "The team's discussion of the case:\n\n{opinions}\n\nProposals by count: {counts}\n\n"
    "Summarize the discussion and state the team's final diagnosis, following the "
    "majority. Reply with exactly one line: DIAGNOSIS READY: <single diagnosis>"
)
#: The repair call's user message.
REPAIR_ASK = (
    "Your reply names no diagnosis. Reply with exactly one line: "
    "DIAGNOSIS READY: <single diagnosis>"
)


def _opinion_block(opinions: Sequence[dict[str, Any]]) -> str:
    """``"<persona>: <visible opinion text>"`` paragraphs, one per opinion."""
    return "\n\n".join(f"{o['persona']}: {o['text'] or '(no opinion given)'}" for o in opinions)


def _counts_text(counts: dict[str, Any], candidates: Sequence[str] | None) -> str:
    """``"Pneumonia (3), Bronchitis (2)"`` from a :func:`~clinenv.agents.terminal_vote.
    tally`: most frequent first, ties in order of first mention, each proposal under its
    first wording (a candidate letter as its label); ``"none"`` without any."""
    labels: dict[str, str] = {}
    for vote in counts["votes"]:
        if vote["key"]:
            labels.setdefault(vote["key"], vote_key(vote["answer"], candidates)[1])
    ranked = sorted(counts["counts"].items(), key=lambda kv: -kv[1])  # stable sort
    return ", ".join(f"{labels[key]} ({n})" for key, n in ranked) or "none"


def opinion_round(case_block: str, personas: Sequence[str], round_: int, asks: Sequence[str],
                  base: int | None, config: GenerationConfig,
                  calls: list[dict[str, Any]]) -> Plan[list[dict[str, Any]]]:
    """One round of opinions: a ``"discussion"`` call per persona (``asks[i]`` after the
    case text; seed ``call_seed(base, "discussion", round_, i + 1)``), each logged in
    ``calls``; returns ``[{"round", "persona", "text", "answer"}, ...]`` in persona order
    (``text`` without ``<think>`` blocks, ``answer`` the diagnosis it names or ``None``)."""
    current: list[dict[str, Any]] = []
    for i, (persona, ask) in enumerate(zip(personas, asks, strict=True), start=1):
        reply = yield CallRequest("discussion", [
            {"role": "system", "content": TEAM_SYSTEM},
            {"role": "user", "content": f"{case_block}\n\n{ask}"}],
            call_config(config, seed=call_seed(base, "discussion", round_, i), n=1))
        answer = extract_answer(reply.text)
        current.append({"round": round_, "persona": persona,
                        "text": split_reasoning(reply.text)[0].strip(), "answer": answer})
        calls.append(reply.to_log(purpose="discussion", round=round_, persona=persona,
                                  answers=[answer], flags=[] if answer else ["unparsed"]))
    return current


def settle(reply: ChatResult, messages: list[dict[str, str]], *, repair: bool,
           base: int | None, config: GenerationConfig, calls: list[dict[str, Any]],
           detail: dict[str, Any], replies: list[str]) -> Plan[TerminalDecision]:
    """The decision from a final-call ``reply`` to ``messages``: its ``DIAGNOSIS READY:``
    answer (a template placeholder is none); without one and with ``repair``, one
    ``"repair"`` call (seed ``call_seed(base, "repair")``, its text appended to
    ``replies``). Every reply is logged in ``calls``; ``detail["outcome"]`` is set to
    ``"accepted"``, ``"abstained"`` or ``"unparsed"`` (no answer:
    :data:`~clinenv.agents.terminal_base.NO_ANSWER_ACTION`)."""
    purpose = "summary"
    while True:
        answer = extract_answer(reply.text)
        flags = [] if answer else ["unparsed"]
        if answer and is_placeholder_answer(answer):
            answer, flags = None, ["placeholder"]
        calls.append(reply.to_log(purpose=purpose, answers=[answer], flags=flags))
        if answer or purpose == "repair" or not repair:
            break
        messages = [*messages, {"role": "assistant", "content": reply.text},
                    {"role": "user", "content": REPAIR_ASK}]
        purpose = "repair"
        reply = yield CallRequest(purpose, messages, call_config(
            config, seed=call_seed(base, purpose), n=1))
        replies.append(reply.text)
    if answer is None:
        detail["outcome"] = "unparsed"
        return TerminalDecision(NO_ANSWER_ACTION, None, False, calls, detail)
    if is_abstention(answer):
        detail["outcome"] = "abstained"
        return TerminalDecision(ABSTENTION_ACTION, None, True, calls, detail)
    detail["outcome"] = "accepted"
    return TerminalDecision(f"DIAGNOSIS READY: {answer}", answer, False, calls, detail)


class Discussion(TerminalStrategy):
    """MedAgentSim's internal multi-doctor discussion (docs/api/agents.md).

    Args:
        n_doctors: doctors in the discussion (>= 1; MedAgentSim: 5), named ``Doctor 1``
            ... unless ``personas`` is given.
        rounds: discussion rounds (1..5; MedAgentSim: 1).
        personas: explicit persona names (e.g. ``["Cardiologist", "Internist"]``);
            overrides ``n_doctors``.
        repair: allow the one repair call of an unreadable summary.

    Raises:
        ValueError: an argument out of range, or empty or duplicate persona names.
    """

    name = "discussion"

    def __init__(self, n_doctors: int = DEFAULT_DOCTORS, rounds: int = 1,
                 personas: Sequence[str] | None = None, repair: bool = True) -> None:
        for label, value, top in (("n_doctors", n_doctors, 50), ("rounds", rounds, 5)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
                raise ValueError(f"{label} must be an integer in 1..{top}, got {value!r}")
        if personas is None:
            personas = [f"Doctor {i}" for i in range(1, n_doctors + 1)]
        elif isinstance(personas, str) or not all(
                isinstance(p, str) and p.strip() for p in personas):
            raise ValueError(f"personas must be a list of non-empty names, got {personas!r:.80}")
        personas = [p.strip() for p in personas]
        if not personas or len(set(personas)) != len(personas):
            raise ValueError(f"personas must be distinct and at least one, got {personas!r:.80}")
        self.personas = tuple(personas)
        self.rounds = rounds
        self.repair = bool(repair)

    def describe(self) -> dict[str, Any]:
        """``name``, ``personas``, ``rounds`` and ``repair``."""
        return {"name": self.name, "personas": list(self.personas), "rounds": self.rounds,
                "repair": self.repair}

    def plan(self, evidence_text: str, *, candidates: list[str] | None, seed: int | None,
             config: GenerationConfig) -> Plan[TerminalDecision]:
        """Yield the discussion, summary (and repair) calls; return the decision."""
        base = base_seed(seed, config)
        calls: list[dict[str, Any]] = []
        case_block = f"{CASE_HEADING}\n{evidence_text}"
        opinions: list[dict[str, Any]] = []
        rounds: list[list[dict[str, Any]]] = []
        for r in range(1, self.rounds + 1):
            asks = [OPINION_ASK.format(persona=persona) if r == 1 else REVISION_ASK.format(
                persona=persona, opinions=_opinion_block(opinions)) for persona in self.personas]
            opinions = yield from opinion_round(case_block, self.personas, r, asks, base,
                                                config, calls)
            rounds.append(opinions)
        counts = tally([o["text"] for o in opinions], candidates)
        messages = [{"role": "system", "content": TEAM_SYSTEM},
                    {"role": "user", "content": SUMMARY_ASK.format(
                        opinions=_opinion_block(opinions),
                        counts=_counts_text(counts, candidates))}]
        detail: dict[str, Any] = {"opinions": rounds, "counts": counts["counts"],
                                  "majority": counts["label"], "summary": []}
        reply = yield CallRequest("summary", messages, call_config(
            config, seed=call_seed(base, "summary"), n=1))
        detail["summary"].append(reply.text)
        return (yield from settle(reply, messages, repair=self.repair, base=base,
                                  config=config, calls=calls, detail=detail,
                                  replies=detail["summary"]))
