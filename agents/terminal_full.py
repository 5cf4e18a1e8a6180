"""Full: Council, Ledger, Consensus, then schema and reference checks (EGIP appendix A.2).

The consensus JSON (:class:`ConsensusOutput`) may cite only ``S0`` and known observations
(:func:`admissible_ids`); a failed reply gets one repair (docs/api/agents.md).
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
    NO_ANSWER_ACTION,
    CallRequest,
    Plan,
    TerminalDecision,
    TerminalStrategy,
    base_seed,
    call_config,
    extract_answer,
)
from clinenv.agents.terminal_direct import read_reply
from clinenv.agents.terminal_vote import vote_key
from clinenv.llm.base import GenerationConfig
from clinenv.protocol.parser import clean_payload, split_reasoning
from clinenv.scoring import is_abstention, is_placeholder_answer, normalize_answer
from clinenv.seeding import call_seed

# The layout of clinenv.protocol.evidence.render_evidence: section headings, entry heads
# and the endings of the entries of unknown measurements.
_OBSERVATIONS = re.compile(r"^# Acquired observations[ \t]*$", re.MULTILINE)
_INSTRUCTIONS = re.compile(r"^# Instructions[ \t]*$", re.MULTILINE)
_ENTRY = re.compile(r"^\[(O\d+)\] (.*)$")
_PATIENT_HEAD = 'Patient, asked "'
_MEASUREMENT_HEAD = "Measurement "
_UNKNOWN_ENDINGS = (": not recorded (unknown)", ": result not available (unknown)")
_RESULT_INDENT = "    "
#: Observation statuses that may be cited (:func:`observation_status`).
KNOWN_STATUSES = ("stated", "recorded")
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


def _observation_lines(evidence_text: str) -> list[str]:
    """The lines of e_T's ``# Acquired observations`` section (up to ``# Instructions``);
    all lines when the text has no such section."""
    start = _OBSERVATIONS.search(evidence_text)
    if start is None:
        return evidence_text.splitlines()
    end = _INSTRUCTIONS.search(evidence_text, start.end())
    return evidence_text[start.end():end.start() if end else None].splitlines()


def _entry_status(head: str, next_line: str | None) -> str:
    """The status an entry's first line (after ``[O#] ``) shows; see
    :func:`observation_status`."""
    if head.startswith(_PATIENT_HEAD):
        return "stated"
    if head.startswith(_MEASUREMENT_HEAD):
        if head.endswith(_UNKNOWN_ENDINGS):
            return "unknown"
        if head.endswith(":") and next_line is not None and next_line.startswith(
                _RESULT_INDENT):
            return "recorded"
    return "unreadable"


def observation_status(evidence_text: str) -> dict[str, str]:
    """``{"O1": status, ...}``: each observation printed in e_T and what it holds.

    Reads the ``# Acquired observations`` layout of
    :func:`clinenv.protocol.evidence.render_evidence` (the whole text when absent); each line
    starting ``[O<n>] `` opens an entry, in order of first appearance. Statuses:
    ``"stated"`` (a patient statement), ``"recorded"`` (a measurement with an indented result
    line), ``"unknown"`` (``not recorded (unknown)`` or ``result not available (unknown)``),
    ``"unreadable"`` (any other entry, or an id whose lines disagree). An imitated entry with
    a new id in a patient reply cannot be told from a real one.
    """
    lines = _observation_lines(evidence_text)
    statuses: dict[str, set[str]] = {}
    for i, line in enumerate(lines):
        match = _ENTRY.match(line)
        if match:
            following = lines[i + 1] if i + 1 < len(lines) else None
            statuses.setdefault(match.group(1), set()).add(
                _entry_status(match.group(2), following))
    return {obs_id: next(iter(found)) if len(found) == 1 else "unreadable"
            for obs_id, found in statuses.items()}


def admissible_ids(evidence_text: str) -> list[str]:
    """``["S0", "O1", ...]``: the ids that may serve as support or conflict.

    ``S0`` (the objective) and the observations of e_T whose
    :func:`observation_status` is ``"stated"`` or ``"recorded"``, in order; unknown
    observations (not recorded, or a placeholder result) are excluded (EGIP appendix
    A.2).
    """
    return ["S0", *(obs_id for obs_id, status in observation_status(evidence_text).items()
                    if status in KNOWN_STATUSES)]


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


def _why_not(raw: Any, obs_id: str | None, statuses: dict[str, str]) -> str:
    """``raw`` with the reason it is not admissible, for the problem list."""
    status = statuses.get(obs_id) if obs_id else None
    if obs_id is None:
        reason = "not an observation id"
    elif status == "unknown":
        reason = "an unknown observation"
    elif status is not None:
        reason = "an unreadable entry"
    else:
        reason = "not in the evidence"
    return f"{raw} ({reason})"


def validate_consensus(text: str, admissible: list[str],
                       statuses: dict[str, str] | None = None) -> tuple[
                           ConsensusOutput | None, list[str]]:
    """Check one consensus reply: ``(output, problems)``.

    Args:
        text: the consensus model's reply.
        admissible: the ids that may be cited (:func:`admissible_ids`).
        statuses: :func:`observation_status` of e_T, used only to say why a cited id is
            not admissible (``"O3 (an unknown observation)"``); optional.

    Returns:
        ``output`` is ``None`` when the schema check fails; otherwise its ids are
        normalized (:func:`normalize_id`), inadmissible ones dropped, and its diagnosis
        cleaned. ``problems`` lists every failed check in words (empty: accepted). A
        reply that declares insufficiency has no problems beyond the schema check (it
        abstains).
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
        rejected = [_why_not(r, n, statuses or {})
                    for r, n in zip(raw, normalized, strict=True) if n not in allowed]
        if rejected:
            problems.append(f"'{field}' cites ids that cannot serve as evidence (only S0 and "
                            "stated or recorded observations can): " + ", ".join(rejected))
        ids[field] = list(dict.fromkeys(n for n in normalized if n in allowed))
    diagnosis = clean_payload(output.diagnosis) if output.diagnosis.strip() else ""
    if not diagnosis:
        problems.append("'diagnosis' is empty")
    elif is_placeholder_answer(diagnosis):
        problems.append("'diagnosis' is the template's placeholder, not a diagnosis")
    elif is_abstention(diagnosis):
        problems.append("'diagnosis' names no diagnosis; set 'insufficient' to true instead")
    if not ids["support"]:
        problems.append("'support' cites no admissible observation id")
    output = output.model_copy(update={"diagnosis": diagnosis, **ids})
    return output, problems


def _proposals(texts: list[str]) -> list[str]:
    """Distinct diagnoses proposed by the council, in order (unreadable ones, template
    placeholders and abstentions skipped)."""
    seen: dict[str, str] = {}
    for text in texts:
        answer = extract_answer(text)
        if answer and not is_placeholder_answer(answer) and not is_abstention(answer):
            seen.setdefault(normalize_answer(answer), answer)
    return list(seen.values())


def _declined(output: ConsensusOutput | None, reply: str) -> bool:
    """Whether a consensus reply that gave no accepted diagnosis explicitly declines:
    it declares insufficiency, its diagnosis is an abstention phrase, or the reply read
    as a plain terminal reply (:func:`~clinenv.agents.terminal_direct.read_reply`) is
    an abstention."""
    if output is not None and (output.insufficient or (
            output.diagnosis and is_abstention(output.diagnosis))):
        return True
    return read_reply(reply)[1]


def _proposal_block(proposals: list[str]) -> str:
    lines = [f"{i}. {p}" for i, p in enumerate(proposals, 1)] or ["(no usable proposal)"]
    return "\n".join([PROPOSALS_HEADING, *lines])


class Full(TerminalStrategy):
    """Council, Ledger, Consensus and checks (docs/api/agents.md).

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
        statuses = observation_status(evidence_text)
        admissible = admissible_ids(evidence_text)
        proposal_keys = {vote_key(p, candidates)[0] for p in proposals}
        detail: dict[str, Any] = {"proposals": proposals, "council": council.texts,
                                  "ledger": ledger_text, "admissible": admissible,
                                  "consensus": [], "errors": []}
        purpose = "consensus"
        while True:
            reply = yield request(purpose, messages)
            output, problems = validate_consensus(reply.text, admissible, statuses)
            detail["consensus"].append(reply.text)
            detail["errors"].append(problems)
            flags = ["invalid"] if problems else []
            if output is not None and output.diagnosis and not output.insufficient:
                detail["in_proposals"] = (
                    vote_key(output.diagnosis, candidates)[0] in proposal_keys)
                if not detail["in_proposals"]:
                    flags.append("not_a_proposal")
            calls.append(reply.to_log(purpose=purpose, flags=flags))
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
            if _declined(output, reply.text):
                return TerminalDecision(ABSTENTION_ACTION, None, True, calls, detail)
            return TerminalDecision(NO_ANSWER_ACTION, None, False, calls, detail)
        detail.update(outcome="accepted", support=output.support, conflict=output.conflict)
        return TerminalDecision(f"DIAGNOSIS READY: {output.diagnosis}", output.diagnosis,
                                False, calls, detail)
