"""Observation -> evidence atoms (CDEG "Candidate Evidence Mining").

:class:`DeterministicExtractor` (offline rules) and :class:`LLMExtractor` (a chat model
that falls back to them); unknown observations give no atoms (EGIP A.2).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from pydantic import TypeAdapter, ValidationError

from clinenv.config_model import first_error
from clinenv.llm.base import BackendError, ChatModel, GenerationConfig
from clinenv.protocol.parser import split_reasoning
from clinenv.seeding import call_seed
from clinenv.wrappers.cdeg.atoms import EvidenceAtom
from clinenv.wrappers.cdeg.rules import (
    ANATOMY,
    DIRECTION_WORDS,
    NO_EVIDENCE,
    VITAL_RANGES,
    DeterministicExtractor,
    exam_name,
    has_evidence,
)

__all__ = ["ANATOMY", "DIRECTION_WORDS", "NO_EVIDENCE", "VITAL_RANGES", "AtomExtractor",
           "DeterministicExtractor", "LLMExtractor", "exam_name", "has_evidence",
           "parse_atoms"]


@runtime_checkable
class AtomExtractor(Protocol):
    """Anything that maps one observation dict to evidence atoms.

    An observation: ``{"obs_id", "source", "turn", "context", "content", "availability",
    "exam_id"}``, as in ``info["new_observations"]`` and the run log.
    """

    def extract(self, observation: Mapping[str, Any]) -> list[EvidenceAtom]:
        """The observation's atoms, in text order, without repeated keys; ``[]`` for an
        observation without evidence."""



# ---------------------------------------------------------------------------- LLM
EXTRACT_SYSTEM = (
    "You map one clinical observation to evidence atoms. Reply with a JSON list only. "
    "Each atom is an object with keys: concept (a short normalized clinical concept, "
    "e.g. \"fever\", \"troponin i\", \"lobar consolidation\"), polarity (\"present\" or "
    "\"absent\"), temporal (\"current\", \"past\" or \"unknown\"), direction (\"high\", "
    "\"low\", \"normal\", \"abnormal\" or null), anatomy (string or null), cui (a UMLS "
    "CUI such as \"C0015967\" or null). Reply [] when the observation holds no finding.")
EXTRACT_USER = "Source: {source}\nContext: {context}\nObservation:\n{content}"
EXTRACT_REPAIR = ("That reply is not a valid JSON list of atoms ({error}). Reply again "
                  "with the JSON list only.")
_FENCE = re.compile(r"```(?:json)?", re.IGNORECASE)
_ATOMS = TypeAdapter(list[EvidenceAtom])


def parse_atoms(reply: str) -> list[EvidenceAtom]:
    """Read an LLM reply as a JSON list of atoms (``<think>`` blocks and code fences are
    ignored).

    Raises:
        ValueError: no JSON list, or an atom with a missing, unknown or invalid field.
    """
    visible, _ = split_reasoning(reply)
    visible = _FENCE.sub("", visible).strip()
    start = visible.find("[")
    if start < 0:
        raise ValueError("no JSON list found")
    try:
        data, _ = json.JSONDecoder().raw_decode(visible, start)
    except json.JSONDecodeError as err:
        raise ValueError(f"not JSON: {err.msg}") from None
    try:
        atoms = _ATOMS.validate_python(data)
    except ValidationError as err:
        where, message = first_error(err)
        raise ValueError(f"atom field {where}: {message}") from None
    return list({a.key(): a for a in atoms}.values())


class LLMExtractor:
    """Evidence atoms from a chat model (CDEG "Implementation Details").

    One call per observation (temperature 0, seed ``call_seed(seed, "extract", <sha256 of
    the text>)``); an invalid reply (:func:`parse_atoms`) gets one repair; a second failure,
    a :class:`~clinenv.llm.base.BackendError` or a cut reply falls back to
    :class:`DeterministicExtractor` (``n_fallbacks``).

    Args:
        model: the chat model.
        seed: base seed of the calls (>= 0).
        max_tokens: reply budget per call.

    Attributes:
        n_calls, n_repairs, n_fallbacks: counters for the build report.
    """

    def __init__(self, model: ChatModel, *, seed: int = 0, max_tokens: int = 400) -> None:
        self.model = model
        self.seed = int(seed)
        self.max_tokens = int(max_tokens)
        self.name = f"llm:{model.model}"
        self.n_calls = self.n_repairs = self.n_fallbacks = 0
        self._fallback = DeterministicExtractor()

    def extract(self, observation: Mapping[str, Any]) -> list[EvidenceAtom]:
        """Atoms of ``observation`` (see :class:`AtomExtractor`)."""
        if not has_evidence(observation):
            return []
        user = EXTRACT_USER.format(source=observation.get("source") or "",
                                   context=observation.get("context") or "",
                                   content=observation["content"])
        digest = int(hashlib.sha256(user.encode("utf-8")).hexdigest()[:8], 16)
        messages = [{"role": "system", "content": EXTRACT_SYSTEM},
                    {"role": "user", "content": user}]
        for attempt in range(2):
            config = GenerationConfig(temperature=0.0, max_tokens=self.max_tokens,
                                      seed=call_seed(self.seed, "extract", digest, attempt))
            try:
                self.n_calls += 1
                result = self.model.generate(messages, config)
            except BackendError:
                break
            choice = result.choices[0]
            try:
                if choice.truncated:
                    raise ValueError("reply cut by max_tokens")
                return parse_atoms(choice.text)
            except ValueError as err:
                if attempt == 0:
                    self.n_repairs += 1
                    messages += [{"role": "assistant", "content": choice.text},
                                 {"role": "user", "content": EXTRACT_REPAIR.format(error=err)}]
        self.n_fallbacks += 1
        return self._fallback.extract(observation)
