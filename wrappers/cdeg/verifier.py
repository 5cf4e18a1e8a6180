"""Verifiers: which of two diagnoses does an evidence set support better? (CDEG
"Counterfactual Validation")

``prefer`` returns ``"first"``, ``"second"`` or ``None``; an LLM and a lexical verifier.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Literal, Protocol, runtime_checkable

from rapidfuzz import fuzz

from clinenv.llm.base import BackendError, ChatModel, GenerationConfig
from clinenv.protocol.parser import split_reasoning
from clinenv.seeding import call_seed
from clinenv.wrappers.cdeg.atoms import EvidenceAtom

#: A verifier's answer: the first- or second-listed diagnosis, or ``None``.
Preference = Literal["first", "second"] | None


@runtime_checkable
class Verifier(Protocol):
    """Compares two diagnoses on an evidence set.

    Attributes:
        name: a stable description for the graph metadata.
    """

    name: str

    def prefer(self, evidence: Sequence[EvidenceAtom], first: str, second: str, *,
               exposed: Sequence[EvidenceAtom] = ()) -> Preference:
        """The diagnosis better supported by ``evidence``.

        Args:
            evidence: the evidence set (E_s, E_s + e, E_t + e...).
            first: the diagnosis shown first.
            second: the diagnosis shown second.
            exposed: atoms of ``evidence`` to pay particular attention to (the
                reappraisal test exposes e ∈ C_I this way).

        Returns:
            ``"first"``, ``"second"`` or ``None`` (no preference / unparsable).
        """


# ------------------------------------------------------------------------ lexical
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset({"and", "the", "with", "for", "from", "due", "type", "acute", "chronic",
                   "disease", "syndrome", "infection", "disorder", "of", "to", "in", "on"})


def _content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in _STOP]


#: Default ``min_overlap`` of :class:`LexicalVerifier`. Measured on runs of a sampling
#: scripted doctor (5 questions, 2 sampled exams, exploration 0.5, seed 1, lexical
#: similarity and thresholds): demo set, K = 6 — revisions 1 / 1 / 1 / 0 at min_overlap
#: 0.1 / 0.2 / 0.3 / 0.5 (the edge at 0.2: allergic contact dermatitis -> herpes zoster,
#: missing "varicella-zoster virus dna"); MedQA (107 cases, K = 4) — 0 revisions at
#: every value (3 pairs with 2 exams, 5 with 4: the sampled doctor mostly abstains).
#: At 0.5 a two-word diagnosis needs one of its words in
#: the evidence, which the demo records rarely give; 0.2 keeps a single shared word of a
#: diagnosis of up to five content words.
MIN_OVERLAP = 0.2


class LexicalVerifier:
    """A deterministic verifier: lexical support of each diagnosis among the evidence.

    support(D) = Σ_e w(e) · sign(e) · overlap(D, e): overlap is the share of D's content
    words found (rapidfuzz ``ratio`` >= ``word_score``) in the atom's text or its examples,
    0 below ``min_overlap``; sign is -1 for an absent finding; w is ``exposed_weight`` for
    exposed atoms, else 1. Ties go to the first-listed diagnosis, never ``None``.

    Args:
        examples: observation texts per atom key; see :meth:`with_examples`.
        min_overlap: smallest share that counts (0..1]; default :data:`MIN_OVERLAP`.
        word_score: rapidfuzz ``ratio`` (0..100) for two words to match.
        exposed_weight: weight of exposed atoms (>= 1).
    """

    def __init__(self, examples: Mapping[str, Sequence[str]] | None = None, *,
                 min_overlap: float = MIN_OVERLAP, word_score: float = 85.0,
                 exposed_weight: float = 2.0) -> None:
        if not 0.0 < min_overlap <= 1.0:
            raise ValueError(f"min_overlap must be in (0, 1], got {min_overlap}")
        if exposed_weight < 1.0:
            raise ValueError(f"exposed_weight must be >= 1, got {exposed_weight}")
        self.examples = {k: tuple(v) for k, v in (examples or {}).items()}
        self.min_overlap = float(min_overlap)
        self.word_score = float(word_score)
        self.exposed_weight = float(exposed_weight)
        self.name = f"lexical(min_overlap={min_overlap:g},exposed_weight={exposed_weight:g})"

    def with_examples(self, examples: Mapping[str, Sequence[str]]) -> LexicalVerifier:
        """A copy that also reads these example texts (by atom key); the construction
        pipeline passes the observation texts behind every atom this way."""
        merged = {**self.examples, **{k: tuple(v) for k, v in examples.items()}}
        return LexicalVerifier(merged, min_overlap=self.min_overlap,
                               word_score=self.word_score, exposed_weight=self.exposed_weight)

    def overlap(self, diagnosis: str, atom: EvidenceAtom) -> float:
        """overlap(D, e) of the class docstring, in [0, 1]."""
        wanted = _content_words(diagnosis)
        if not wanted:
            return 0.0
        texts = (atom.text(), *self.examples.get(atom.key(), ()))
        words = set(_content_words(" ".join(texts)))
        hits = sum(1 for w in wanted
                   if w in words or any(fuzz.ratio(w, x) >= self.word_score for x in words))
        share = hits / len(wanted)
        return share if share >= self.min_overlap else 0.0

    def support(self, diagnosis: str, evidence: Sequence[EvidenceAtom],
                exposed: Sequence[EvidenceAtom] = ()) -> float:
        """support(D) of the class docstring."""
        exposed_keys = {a.key() for a in exposed}
        total = 0.0
        for atom in evidence:
            sign = -1.0 if atom.polarity == "absent" else 1.0
            weight = self.exposed_weight if atom.key() in exposed_keys else 1.0
            total += weight * sign * self.overlap(diagnosis, atom)
        return total

    def prefer(self, evidence: Sequence[EvidenceAtom], first: str, second: str, *,
               exposed: Sequence[EvidenceAtom] = ()) -> Preference:
        """See :class:`Verifier`; ties go to ``"first"``."""
        a = self.support(first, evidence, exposed)
        b = self.support(second, evidence, exposed)
        return "second" if b > a else "first"


# ---------------------------------------------------------------------------- LLM
VERIFY_SYSTEM = (
    "You are a careful clinician. You are given a set of clinical evidence and two "
    "candidate diagnoses. Decide which diagnosis the evidence supports better. Use only "
    "the evidence listed. Reply with exactly one word: FIRST or SECOND.")
VERIFY_ATTENTION = "Pay particular attention to this evidence:\n{exposed}\n\n"
VERIFY_USER = ("Evidence:\n{evidence}\n\n{attention}Which diagnosis is better supported by "
               "the evidence?\nFIRST: {first}\nSECOND: {second}\n"
               "Reply with FIRST or SECOND only.")
#: Default reply budget of :class:`LLMVerifier`: room for "FIRST" / "SECOND" or an
#: "Answer: FIRST" line after a short explanation (a reasoning model needs more).
VERIFY_MAX_TOKENS = 64
_ANSWER_LINE = re.compile(r"^(?:final answer|answer)\s*:\s*(first|second)$")


def parse_preference(reply: str) -> Preference:
    """Read a verifier reply strictly.

    ``<think>`` blocks, markdown (``*``, ``_``, ``#``, backticks), surrounding
    whitespace and a final ``.``/``!`` are removed; then the reply must be exactly
    ``first`` or ``second`` (any case), or end with a line ``Answer: FIRST|SECOND``.
    Anything else ("Firstly, ...", "first or second", an empty reply) is ``None``: an
    unreadable reply is never counted as a preference.
    """
    visible, _ = split_reasoning(reply or "")
    lines = [re.sub(r"[*_#`]", "", ln).strip().rstrip(".!").strip().lower()
             for ln in visible.splitlines()]
    lines = [ln for ln in lines if ln]
    if not lines:
        return None
    if len(lines) == 1 and lines[0] in ("first", "second"):
        return lines[0]  # type: ignore[return-value]
    match = _ANSWER_LINE.match(lines[-1])
    return match.group(1) if match else None  # type: ignore[return-value]


def evidence_lines(atoms: Sequence[EvidenceAtom]) -> str:
    """The evidence as a bullet list of atom texts (``"(none)"`` when empty)."""
    return "\n".join(f"- {a.text()}" for a in atoms) or "(none)"


class LLMVerifier:
    """A chat model as the verifier (CDEG "Implementation Details").

    Seed ``call_seed(seed, "verify", <sha256 of the prompt>, attempt)``; an unreadable reply
    is retried ``retries`` times, then gives ``None``, as does a backend error.

    Args:
        model: the chat model.
        seed: base seed (>= 0).
        temperature: sampling temperature.
        max_tokens: reply budget (>= 1; default :data:`VERIFY_MAX_TOKENS`).
        retries: extra attempts after an unreadable reply (>= 0).

    Attributes:
        n_calls, n_unparsed, n_backend_errors, n_truncated: counters for the build report.

    Raises:
        ValueError: ``retries`` < 0 or ``max_tokens`` < 1.
    """

    def __init__(self, model: ChatModel, *, seed: int = 0, temperature: float = 0.0,
                 max_tokens: int | None = None, retries: int = 1) -> None:
        max_tokens = VERIFY_MAX_TOKENS if max_tokens is None else max_tokens
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        self.model = model
        self.seed = int(seed)
        self.temperature = float(temperature)
        self.max_tokens = int(max_tokens)
        self.retries = int(retries)
        self.name = f"llm:{model.model}"
        self.n_calls = self.n_unparsed = self.n_backend_errors = self.n_truncated = 0

    def prompt(self, evidence: Sequence[EvidenceAtom], first: str, second: str,
               exposed: Sequence[EvidenceAtom] = ()) -> list[dict[str, str]]:
        """The chat messages of one comparison."""
        attention = VERIFY_ATTENTION.format(exposed=evidence_lines(exposed)) if exposed else ""
        user = VERIFY_USER.format(evidence=evidence_lines(evidence), attention=attention,
                                  first=first, second=second)
        return [{"role": "system", "content": VERIFY_SYSTEM}, {"role": "user", "content": user}]

    def prefer(self, evidence: Sequence[EvidenceAtom], first: str, second: str, *,
               exposed: Sequence[EvidenceAtom] = ()) -> Preference:
        """See :class:`Verifier`."""
        messages = self.prompt(evidence, first, second, exposed)
        digest = int(hashlib.sha256(messages[1]["content"].encode("utf-8")).hexdigest()[:8], 16)
        for attempt in range(self.retries + 1):
            config = GenerationConfig(temperature=self.temperature, max_tokens=self.max_tokens,
                                      seed=call_seed(self.seed, "verify", digest, attempt))
            self.n_calls += 1
            try:
                result = self.model.generate(messages, config)
            except BackendError:
                self.n_backend_errors += 1
                return None
            if any(choice.truncated for choice in result.choices[:1]):
                self.n_truncated += 1
            answer = parse_preference(result.text)
            if answer is not None:
                return answer
            self.n_unparsed += 1
        return None
