"""MedAgentSim's middle step: answer options built from the discussion, then a pick.

Source: MedAgentSim's ``DoctorAgent.internal_discussion``: a structured question, four
candidates as options A-D, a choice-shuffle ensemble; never built from Y.
"""

from __future__ import annotations

import ast
import json
import random
import re
from collections import Counter
from collections.abc import Sequence

from clinenv.protocol.parser import clean_payload, split_reasoning

#: Letters of the four options.
LETTERS = "ABCD"
#: Chain-of-thought samples of the choice-shuffle ensemble (MedAgentSim: 5).
OPTION_SAMPLES = 5
#: Option orders the published run never draws (its ``used_order`` seed list).
EXCLUDED_ORDERS = frozenset({"ACDB", "ADBC", "BCDA", "CBAD", "CDAB"})
#: Padding of a candidate list shorter than four (as published).
PADDING = "Undetermined diagnosis {k}"

#: System prompt of the question and candidate calls.
REASONER_SYSTEM = (
    "You are a careful medical reasoning assistant. You read clinical case material "
    "and doctors' discussions and answer exactly in the format asked."
)
#: The structured-question call's user message.
QUESTION_ASK = (
    "{case}\n\n# Doctors' discussion\n{opinions}\n\nWrite one structured diagnostic "
    "question about this patient that uses as much of the material above as possible, "
    "in this shape: \"Provide the most likely final diagnosis for the following patient. "
    "A ___ year old [man/woman] presents with [duration] of [symptoms], associated with "
    "[other symptoms]. Laboratory results show [lab findings]. Imaging revealed "
    "[imaging findings]. What is the final diagnosis for this patient?\""
)
#: The candidate call's user message.
CANDIDATES_ASK = (
    "Question: {question}\n\n# Doctors' discussion\n{opinions}\n\nList the four most "
    "likely diagnoses the doctors are considering, only ones they name or clearly "
    "imply, each once. Reply with a list such as [\"Diagnosis 1\", \"Diagnosis 2\", "
    "\"Diagnosis 3\", \"Diagnosis 4\"]."
)
#: System prompt of the multiple-choice calls.
CHOICE_SYSTEM = (
    "The exam question has one best answer based on the information given. End your "
    "reply with Answer: [X], where X is A, B, C or D."
)
#: One multiple-choice call's user message (``options``: ``"A. ..."`` lines).
CHOICE_ASK = (
    "## Question\n{question}\n{options}\n\nExplain step by step in one paragraph, then "
    "give your answer in the format \"Answer: [X]\"."
)

_LIST = re.compile(r"\[[^\[\]]*\]", re.DOTALL)
_ITEM_LINE = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(.+)$", re.MULTILINE)
#: ``Answer: [X]`` and its variants: any case inside brackets; bare, a capital, or b-d,
#: or an "a" that no word follows (not the article of "Answer: a 45-year-old man").
_ANSWER = re.compile(r"(?i:answer)\s*(?:(?i:is)\s*)?[:\-]?\s*\**\s*"
                     r"(?:[\[(]\s*([A-Da-d])\s*[\])]|([A-D]|[b-d]|a(?!\s+\w))(?![A-Za-z]))")


def parse_candidates(text: str) -> list[str]:
    """The diagnoses of a candidate reply, in order, at most four, padded to four.

    Read from the first bracketed list (JSON or Python literal; else its comma-separated
    items), else from bullet or numbered lines, else from the comma-separated reply;
    quotes, markdown and end stops are removed, empty items dropped. ``<think>`` blocks
    are ignored. A list shorter than four is padded with :data:`PADDING` (``k`` = its
    1-based position), as published; items are not deduplicated (neither are they
    there).

    Returns:
        Exactly four strings. ``parse_candidates('["Pneumonia", "Bronchitis"]')`` is
        ``["Pneumonia", "Bronchitis", "Undetermined diagnosis 3", "Undetermined
        diagnosis 4"]``. Never raises.
    """
    visible = split_reasoning(text if isinstance(text, str) else "")[0]
    items: list[str] = []
    found = _LIST.search(visible)
    if found:
        block = found.group(0)
        for reader in (json.loads, ast.literal_eval):
            try:
                value = reader(block)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if isinstance(value, list):
                items = [str(v) for v in value]
                break
        else:
            items = block[1:-1].split(",")
    elif _ITEM_LINE.search(visible):
        items = _ITEM_LINE.findall(visible)
    else:
        items = visible.replace("\n", ",").split(",")
    names = [name for name in (clean_payload(str(i).strip().strip("'\"")) for i in items)
             if name][:len(LETTERS)]
    while len(names) < len(LETTERS):
        names.append(PADDING.format(k=len(names) + 1))
    return names


def shuffled_options(candidates: Sequence[str], rng: random.Random) -> dict[str, str]:
    """The candidates shuffled by ``rng`` onto the letters A-D (``{"A": ..., ...}``).

    Args:
        candidates: exactly four names (:func:`parse_candidates` gives four).
        rng: the episode's option generator.

    Raises:
        ValueError: not four candidates.
    """
    pool = list(candidates)
    if len(pool) != len(LETTERS):
        raise ValueError(f"answer options need exactly {len(LETTERS)} candidates, got "
                         f"{len(pool)}: {pool!r}")
    rng.shuffle(pool)
    return dict(zip(LETTERS, pool, strict=True))


def option_orders(rng: random.Random, n: int = OPTION_SAMPLES) -> list[str]:
    """``n`` distinct orders of the letters A-D (e.g. ``"BADC"``), drawn by ``rng``, none
    in :data:`EXCLUDED_ORDERS` (as the published ensemble draws them).

    Raises:
        ValueError: ``n`` outside 1..19 (there are 19 admissible orders).
    """
    if not 1 <= n <= 24 - len(EXCLUDED_ORDERS):
        raise ValueError(f"option samples must be in 1..19, got {n!r}")
    orders: list[str] = []
    while len(orders) < n:
        order = "".join(rng.sample(LETTERS, len(LETTERS)))
        if order not in EXCLUDED_ORDERS and order not in orders:
            orders.append(order)
    return orders


def choice_prompt(question: str, options: dict[str, str], order: str) -> tuple[str, str]:
    """``(user message, letters)`` of one multiple-choice call: the options of ``order``
    (a permutation of ``"ABCD"``, :func:`option_orders`) shown relabelled A, B, C, D in
    that order; ``letters[i]`` is the original letter shown as ``LETTERS[i]``.

    Raises:
        KeyError: ``order`` names a letter ``options`` lacks.
    """
    lines = "\n".join(f"{shown}. {options[original]}"
                      for shown, original in zip(LETTERS, order, strict=True))
    return CHOICE_ASK.format(question=question, options=lines), order


def parse_letter(text: str) -> str | None:
    """The letter of the last ``Answer: [X]`` (also ``Answer: X``, ``answer is (x)``,
    through markdown) in ``text`` without ``<think>`` blocks; ``None`` if none.
    ``parse_letter("... so Answer: [C]")`` is ``"C"``; ``parse_letter("Answer: a viral
    cause")`` is ``None`` (an article, not option A)."""
    visible = split_reasoning(text if isinstance(text, str) else "")[0]
    found = [bracketed or bare for bracketed, bare in _ANSWER.findall(visible)]
    return found[-1].upper() if found else None


def majority(picks: Sequence[str | None]) -> str | None:
    """The most frequent original letter among ``picks`` (unparsed ``None`` left out),
    ties to the one picked first; ``None`` when nothing was parsed."""
    counts = Counter(p for p in picks if p is not None)
    return counts.most_common(1)[0][0] if counts else None
