"""Full: Council, Ledger, Consensus, then schema and reference checks (EGIP appendix A.2).

Calls, each seeded with ``call_seed(seed, purpose)``:

1. **Council** (``"council"``): ``n_council`` samples (default 3, at
   ``council_temperature``) of a proposal prompt on e_T; each proposes one diagnosis
   (``DIAGNOSIS: X``), read by the protocol parser. Distinct proposals are kept in order.
2. **Ledger** (``"ledger"``): one call that sees e_T and the proposals and writes an
   evidence summary, support and conflict per proposal, citing ids such as ``S0``, ``O3``.
3. **Consensus** (``"consensus"``): one call that sees the ORIGINAL e_T, the proposals and
   the ledger and returns a JSON object :class:`ConsensusOutput`
   (``{"diagnosis", "support", "conflict", "insufficient"}``).

Checks on the consensus reply (:func:`validate_consensus`):

- schema: one JSON object with the fields' types (pydantic);
- references: the admissible ids are exactly ``S0`` and the ``[O#]`` ids printed in the
  acquired-observations section of e_T (:func:`admissible_ids`); an id that is not
  admissible cannot serve as support or conflict. Proposals and ledger never add ids:
  they are opinions, not observations;
- consistency: a non-empty diagnosis that is not an abstention, with at least one
  admissible support id.

A failed reply gets at most one repair call (``"repair"``: the consensus messages, the
reply, and the list of problems). Declared insufficiency, or a reply that still fails,
gives the abstention :data:`~clinenv.agents.terminal_base.ABSTENTION_ACTION`. The checks
test structure and citations only, not whether the evidence clinically entails the
diagnosis.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from clinenv.agents.prompts import (
    CONSENSUS_SYSTEM,
    COUNCIL_SYSTEM,
    EVIDENCE_HEADING,
    LEDGER_HEADING,
    LEDGER_SYSTEM,
    PROPOSALS_HEADING,
    REPAIR_USER,
)
from clinenv.agents.terminal_base import (
    ABSTENTION_ACTION,
    CallRequest,
    Plan,
    TerminalDecision,
    TerminalStrategy,
    base_seed,
    call_config,
    extract_answer,
)
from clinenv.llm.base import GenerationConfig
from clinenv.protocol.parser import clean_payload, split_reasoning
from clinenv.scoring import is_abstention, normalize_answer
from clinenv.seeding import call_seed

# Section headers of clinenv.protocol.evidence.render_evidence.
_OBSERVATIONS = "# Acquired observations"
_INSTRUCTIONS = "# Instructions"
_OBSERVATION_ID = re.compile(r"^\[(O\d+)\]", re.MULTILINE)
_ID = re.compile(r"^\[?\s*([SO])\s*(\d+)\s*\]?$", re.IGNORECASE)
_FENCE = re.compile(r"```(?:json)?", re.IGNORECASE)


class ConsensusOutput(BaseModel):
    """The consensus reply's JSON object (extra keys are ignored).

    Attributes:
        diagnosis: one diagnosis; empty only with ``insufficient``.
        support: ids of observations supporting it (``"S0"``, ``"O3"``...).
        conflict: ids of observations contradicting it.
        insufficient: the evidence allows no diagnosis (then Full abstains).
    """

    model_config = ConfigDict(extra="ignore", strict=True)

    diagnosis: str = ""
    support: list[str] = []
    conflict: list[str] = []
    insufficient: bool = False


def admissible_ids(evidence_text: str) -> list[str]:
    """``["S0", "O1", ...]``: the objective and the observation ids printed in e_T.

    Only ``[O#]`` at the start of a line of the ``# Acquired observations`` section
    count (the format of :func:`clinenv.protocol.evidence.render_evidence`); without that
    section the whole text is scanned.
    """
    start = evidence_text.find(_OBSERVATIONS)
    section = evidence_text
    if start >= 0:
        end = evidence_text.find(_INSTRUCTIONS, start)
        section = evidence_text[start:end if end >= 0 else None]
    return ["S0", *dict.fromkeys(_OBSERVATION_ID.findall(section))]


def normalize_id(raw: str) -> str | None:
    """``"[o3]"`` / ``"O 3"`` -> ``"O3"``, ``"s0"`` -> ``"S0"``; ``None`` if not an id."""
    match = _ID.match(raw.strip()) if isinstance(raw, str) else None
    return f"{match.group(1).upper()}{int(match.group(2))}" if match else None


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in a reply (``<think>`` blocks and code fences ignored)."""
    visible, _ = split_reasoning(text)
    visible = _FENCE.sub("", visible)
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", visible):
        try:
            value, _ = decoder.raw_decode(visible, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def validate_consensus(text: str, admissible: list[str]) -> tuple[ConsensusOutput | None,
                                                                 list[str]]:
    """Check one consensus reply: ``(output, problems)``.

    ``output`` is ``None`` when the schema check fails; otherwise its ids are normalized
    (:func:`normalize_id`) and its diagnosis cleaned. ``problems`` lists every failed
    check in words (empty: accepted). A reply that declares insufficiency has no
    problems beyond the schema check (it abstains).
    """
    data = parse_json_object(text)
    if data is None:
        return None, ["the reply holds no JSON object"]
    try:
        output = ConsensusOutput.model_validate(data)
    except ValidationError as error:
        return None, [f"field '{'.'.join(map(str, e['loc']))}': {e['msg']}"
                      for e in error.errors()]
    if output.insufficient:
        return output, []
    allowed = set(admissible)
    problems = []
    ids: dict[str, list[str]] = {}
    for field in ("support", "conflict"):
        raw = getattr(output, field)
        normalized = [normalize_id(r) for r in raw]
        unknown = [r for r, n in zip(raw, normalized, strict=True) if n not in allowed]
        if unknown:
            problems.append(f"'{field}' cites ids that are not acquired observations: "
                            + ", ".join(map(str, unknown)))
        ids[field] = list(dict.fromkeys(n for n in normalized if n in allowed))
    diagnosis = clean_payload(output.diagnosis) if output.diagnosis.strip() else ""
    if not diagnosis:
        problems.append("'diagnosis' is empty")
    elif is_abstention(diagnosis):
        problems.append("'diagnosis' names no diagnosis; set 'insufficient' to true instead")
    if not ids["support"]:
        problems.append("'support' cites no admissible observation id")
    output = output.model_copy(update={"diagnosis": diagnosis, **ids})
    return output, problems


def _proposals(texts: list[str]) -> list[str]:
    """Distinct diagnoses proposed by the council, in order (unreadable ones skipped)."""
    seen: dict[str, str] = {}
    for text in texts:
        answer = extract_answer(text)
        if answer and not is_abstention(answer):
            seen.setdefault(normalize_answer(answer), answer)
    return list(seen.values())


def _proposal_block(proposals: list[str]) -> str:
    lines = [f"{i}. {p}" for i, p in enumerate(proposals, 1)] or ["(no usable proposal)"]
    return "\n".join([PROPOSALS_HEADING, *lines])


class Full(TerminalStrategy):
    """Council, Ledger, Consensus and checks (see the module docstring).

    Args:
        n_council: council proposals sampled (>= 1; default 3).
        council_temperature: temperature of the council samples (>= 0).
        repair: allow the one repair call (EGIP: at most one).

    Raises:
        ValueError: an argument out of range.
    """

    name = "full"

    def __init__(self, n_council: int = 3, council_temperature: float = 0.7,
                 repair: bool = True) -> None:
        if isinstance(n_council, bool) or not isinstance(n_council, int) or n_council < 1:
            raise ValueError(f"n_council must be an integer >= 1, got {n_council!r}")
        if isinstance(council_temperature, bool) or not isinstance(
                council_temperature, int | float) or not council_temperature >= 0:
            raise ValueError(f"council_temperature must be a number >= 0, "
                             f"got {council_temperature!r}")
        self.n_council = n_council
        self.council_temperature = float(council_temperature)
        self.repair = bool(repair)

    def describe(self) -> dict[str, Any]:
        """``name``, ``n_council``, ``council_temperature`` and ``repair``."""
        return {"name": self.name, "n_council": self.n_council,
                "council_temperature": self.council_temperature, "repair": self.repair}

    def plan(self, evidence_text: str, *, candidates: list[str] | None, seed: int | None,
             config: GenerationConfig) -> Plan[TerminalDecision]:
        """Yield council, ledger, consensus (and repair) calls; return the decision."""
        base = base_seed(seed, config)
        calls: list[dict[str, Any]] = []

        def request(purpose: str, messages: list[dict[str, str]], **fields: Any) -> CallRequest:
            return CallRequest(purpose, messages, call_config(
                config, seed=call_seed(base, purpose), **{"n": 1, **fields}))

        council = yield request("council", [
            {"role": "system", "content": COUNCIL_SYSTEM},
            {"role": "user", "content": evidence_text}],
            n=self.n_council, temperature=self.council_temperature)
        proposals = _proposals(council.texts)
        calls.append(council.to_log(purpose="council", answers=proposals,
                                    flags=[] if proposals else ["no_proposal"]))
        evidence_block = f"{EVIDENCE_HEADING}\n{evidence_text}"
        proposal_block = _proposal_block(proposals)
        ledger = yield request("ledger", [
            {"role": "system", "content": LEDGER_SYSTEM},
            {"role": "user", "content": f"{evidence_block}\n\n{proposal_block}"}])
        ledger_text = split_reasoning(ledger.text)[0]
        calls.append(ledger.to_log(purpose="ledger", flags=[]))
        messages = [
            {"role": "system", "content": CONSENSUS_SYSTEM},
            {"role": "user", "content": f"{evidence_block}\n\n{proposal_block}\n\n"
                                        f"{LEDGER_HEADING}\n{ledger_text or '(empty)'}"}]
        admissible = admissible_ids(evidence_text)
        detail: dict[str, Any] = {"proposals": proposals, "council": council.texts,
                                  "ledger": ledger_text, "admissible": admissible,
                                  "consensus": [], "errors": []}
        purpose = "consensus"
        while True:
            reply = yield request(purpose, messages)
            output, problems = validate_consensus(reply.text, admissible)
            detail["consensus"].append(reply.text)
            detail["errors"].append(problems)
            calls.append(reply.to_log(purpose=purpose, flags=["invalid"] if problems else []))
            if not problems or purpose == "repair" or not self.repair:
                break
            messages = [*messages, {"role": "assistant", "content": reply.text},
                        {"role": "user", "content": REPAIR_USER.format(
                            errors="\n".join(f"- {p}" for p in problems),
                            admissible=", ".join(admissible))}]
            purpose = "repair"
        if output is not None and output.insufficient:
            detail["outcome"] = "insufficient"
            return TerminalDecision(ABSTENTION_ACTION, None, True, calls, detail)
        if problems or output is None:
            detail["outcome"] = "invalid"
            return TerminalDecision(ABSTENTION_ACTION, None, True, calls, detail)
        detail.update(outcome="accepted", support=output.support, conflict=output.conflict)
        return TerminalDecision(f"DIAGNOSIS READY: {output.diagnosis}", output.diagnosis,
                                False, calls, detail)
