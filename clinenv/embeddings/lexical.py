"""A model-free :class:`Similarity`: fuzzy string matching with rapidfuzz.

It sees spelling, not meaning ("heart attack" vs "myocardial infarction": 0.30), so
CDEG's encoder thresholds do not fit it; use :data:`LEXICAL_THRESHOLDS`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rapidfuzz import fuzz, process, utils

#: rapidfuzz scorers accepted by :class:`LexicalSimilarity` (``rapidfuzz.fuzz`` names).
SCORERS = ("ratio", "partial_ratio", "token_sort_ratio", "token_set_ratio",
           "partial_token_sort_ratio", "partial_token_set_ratio", "token_ratio", "WRatio",
           "QRatio")

#: Recommended thresholds for ``token_set_ratio`` scores in place of CDEG's encoder
#: thresholds (pair: trajectory pairing, Eq. 4; evidence / diagnosis: hybrid matching).
LEXICAL_THRESHOLDS = {"pair": 0.7, "evidence": 0.9, "diagnosis": 0.9}


def normalize_text(text: str) -> str:
    """Lower case, every non-alphanumeric character a space, whitespace collapsed.

    ``"Chest-Pain (LEFT) arm!"`` -> ``"chest pain left arm"``.
    """
    return " ".join(utils.default_process(text).split())


class LexicalSimilarity:
    """Fuzzy-match scores of normalized texts, in ``[0, 1]``.

    Each text is normalized by :func:`normalize_text`; the score is the rapidfuzz
    ``scorer``'s value divided by 100. A text that is empty after normalization scores
    0 against everything (rapidfuzz's ``ratio`` would call two empty texts identical).

    Args:
        scorer: one of :data:`SCORERS`; default ``"token_set_ratio"`` (word order and
            repeated words do not matter).

    Attributes:
        name: ``"lexical:<scorer>"``.

    Raises:
        ValueError: unknown ``scorer``.
    """

    def __init__(self, scorer: str = "token_set_ratio") -> None:
        if scorer not in SCORERS:
            raise ValueError(f"unknown lexical scorer {scorer!r}; expected one of {SCORERS}")
        self.scorer = scorer
        self.name = f"lexical:{scorer}"
        self._score = getattr(fuzz, scorer)

    def similarity(self, queries: Sequence[str], keys: Sequence[str]) -> np.ndarray:
        """Scores of every query against every key.

        Returns:
            ``float32`` array ``(len(queries), len(keys))`` in ``[0, 1]``.

        Raises:
            TypeError: an item is not a string (its list and index named).
        """
        q = _normalized(queries, "queries")
        k = _normalized(keys, "keys")
        if not q or not k:
            return np.zeros((len(q), len(k)), dtype=np.float32)
        scores = process.cdist(q, k, scorer=self._score, dtype=np.float32) / 100.0
        scores[[i for i, t in enumerate(q) if not t], :] = 0.0
        scores[:, [j for j, t in enumerate(k) if not t]] = 0.0
        return scores.astype(np.float32, copy=False)


def _normalized(texts: Sequence[str], what: str) -> list[str]:
    out = []
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{what}[{i}] is {type(text).__name__}, not str: {text!r}")
        out.append(normalize_text(text))
    return out
