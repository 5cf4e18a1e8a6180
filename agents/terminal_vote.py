"""Vote: majority over five Direct samples on the same e_T (EGIP appendix A.2).

Samples are read by the protocol parser and counted by :func:`vote_key`; ties keep the
first key. At temperature 0 it returns the Direct answer (docs/api/agents.md).
"""

from __future__ import annotations

import re
from collections import Counter
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
)
from clinenv.agents.terminal_direct import direct_request, read_reply
from clinenv.llm.base import GenerationConfig
from clinenv.protocol.evidence import option_letter
from clinenv.scoring import normalize_answer
from clinenv.seeding import call_seed

_LETTER = re.compile(r"^(?:(?:option|choice|answer)\s*[:\-]?\s*)?\(?([a-z])\)?[.):]?$",
                     re.IGNORECASE)
_LETTER_PREFIX = re.compile(r"^\(?([a-z])[.):]\s+(\S.*)$", re.IGNORECASE)


def vote_key(answer: str, candidates: Sequence[str] | None) -> tuple[str, str]:
    """``(key, label)`` of one answer: what it counts as, and how it is reported.

    - a candidate letter (``"B"``, ``"(B)"``, ``"Option B"``) of an existing option, or
      ``"B. <that option's text>"``, or the text of an option: key and label are that
      option (its :func:`clinenv.scoring.normalize_answer` form and its text);
    - anything else: key :func:`~clinenv.scoring.normalize_answer` of the answer, label
      the answer itself. ``"C. difficile colitis"`` stays free text unless option C
      reads so.
    """
    options = list(candidates or [])
    letters = {option_letter(i): i for i in range(len(options))}
    text = answer.strip()
    letter = _LETTER.match(text)
    if letter and letter.group(1).upper() in letters:
        option = options[letters[letter.group(1).upper()]]
        return normalize_answer(option), option
    key = normalize_answer(text)
    prefixed = _LETTER_PREFIX.match(text)
    if prefixed and prefixed.group(1).upper() in letters:
        option = options[letters[prefixed.group(1).upper()]]
        if normalize_answer(prefixed.group(2)) == normalize_answer(option):
            return normalize_answer(option), option
    for option in options:
        if key == normalize_answer(option):
            return key, option
    return key, text


def tally(texts: Sequence[str], candidates: Sequence[str] | None) -> dict[str, Any]:
    """Count the eligible answers of ``texts`` (replies in sample order).

    Returns:
        ``{"votes": [{"answer", "key", "status"}...], "counts": {key: n}, "winner":
        key or None, "label": the winner's label or None}``; ``status`` is
        ``"eligible"``, ``"abstention"`` (an explicit decline), ``"placeholder"`` (a
        template placeholder; ``answer`` ``None``) or ``"unparsed"``. Ties keep the key
        that was encountered first; ``counts`` is in first-encounter order.
    """
    votes, labels = [], {}
    for text in texts:
        answer, abstained, flags = read_reply(text)
        if answer is None or abstained:
            status = ("abstention" if abstained else
                      "placeholder" if "placeholder" in flags else "unparsed")
            votes.append({"answer": answer, "key": None, "status": status})
            continue
        key, label = vote_key(answer, candidates)
        if not key:
            votes.append({"answer": answer, "key": None, "status": "unparsed"})
            continue
        labels.setdefault(key, label)
        votes.append({"answer": answer, "key": key, "status": "eligible"})
    counts = Counter(v["key"] for v in votes if v["status"] == "eligible")
    ordered = {key: counts[key] for key in labels}
    winner = None
    for key, count in ordered.items():  # first encountered wins a tie
        if winner is None or count > ordered[winner]:
            winner = key
    return {"votes": votes, "counts": ordered, "winner": winner,
            "label": labels.get(winner) if winner else None}


class Vote(TerminalStrategy):
    """Majority vote over Direct samples (docs/api/agents.md).

    Args:
        n_samples: samples in all, the Direct call included (>= 1; EGIP: 5).
        temperature: sampling temperature of the extra samples (>= 0), or ``None``
            (default): the temperature of the config the strategy is given (the run's
            decoding settings, as the Direct call).

    Raises:
        ValueError: an argument out of range.
    """

    name = "vote"

    def __init__(self, n_samples: int = 5, temperature: float | None = None) -> None:
        if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < 1:
            raise ValueError(f"n_samples must be an integer >= 1, got {n_samples!r}")
        if temperature is not None and (isinstance(temperature, bool) or not isinstance(
                temperature, int | float) or not temperature >= 0):
            raise ValueError(f"temperature must be a number >= 0 or None, got {temperature!r}")
        self.n_samples = n_samples
        self.temperature = None if temperature is None else float(temperature)

    def describe(self) -> dict[str, Any]:
        """``name``, ``n_samples`` and ``temperature`` (``None``: the run's)."""
        return {"name": self.name, "n_samples": self.n_samples,
                "temperature": self.temperature}

    def plan(self, evidence_text: str, *, candidates: list[str] | None, seed: int | None,
             config: GenerationConfig) -> Plan[TerminalDecision]:
        """Yield the Direct call and the extra samples; return the majority decision."""
        first_request = direct_request(evidence_text, seed=seed, config=config)
        first = yield first_request
        texts = [first.text]
        first_answer, _, first_flags = read_reply(first.text)
        calls = [first.to_log(purpose="decide", answers=[first_answer], flags=first_flags)]
        extra = self.n_samples - 1
        if extra:
            temperature = config.temperature if self.temperature is None else self.temperature
            request = CallRequest("vote", first_request.messages, call_config(
                config, seed=call_seed(base_seed(seed, config), "vote"), n=extra,
                temperature=temperature))
            more = yield request
            more_texts = more.texts[:extra]
            flags = [] if len(more_texts) == extra else ["fewer_choices"]
            calls.append(more.to_log(purpose="vote",
                                     answers=[read_reply(t)[0] for t in more_texts],
                                     flags=flags))
            texts += more_texts
        detail = tally(texts, candidates)
        if detail["winner"] is None:
            if any(v["status"] == "abstention" for v in detail["votes"]):
                return TerminalDecision(ABSTENTION_ACTION, None, True, calls, detail)
            return TerminalDecision(NO_ANSWER_ACTION, None, False, calls, detail)
        label = detail["label"]
        return TerminalDecision(f"DIAGNOSIS READY: {label}", label, False, calls, detail)
