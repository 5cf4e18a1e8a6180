"""The text-similarity interfaces shared by CDEG, retrieval baselines and evaluation.

:class:`Encoder` (texts to unit vectors) and :class:`Similarity` (a score matrix:
cosines in ``[-1, 1]``, lexical scores in ``[0, 1]``), for CDEG's hybrid matching and
pairing (CDEG Eq. 4, "Evidence-State Intervention").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Encoder(Protocol):
    """Anything that embeds texts.

    Attributes:
        name: a stable description for logs and graph metadata (e.g. the model id and
            pooling: ``"cambridgeltl/SapBERT-from-PubMedBERT-fulltext:cls"``).
    """

    name: str

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``.

        Returns:
            ``float32`` array of shape ``(len(texts), dim)`` whose rows have unit L2 norm
            (an all-zero row only for a text that has no representation); ``(0, dim)``
            for no texts.
        """


@runtime_checkable
class Similarity(Protocol):
    """Anything that scores query texts against key texts.

    Attributes:
        name: a stable description for logs and graph metadata.
    """

    name: str

    def similarity(self, queries: Sequence[str], keys: Sequence[str]) -> np.ndarray:
        """Scores of every query against every key.

        Returns:
            ``float`` array of shape ``(len(queries), len(keys))``; higher is more similar.
        """


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` (shape ``(n, d)``) with each row scaled to unit L2 norm, as float32.

    All-zero rows stay zero (their cosine with anything is 0).

    Raises:
        ValueError: ``vectors`` is not two-dimensional.
    """
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim != 2:
        raise ValueError(f"expected a 2-D array of vectors, got shape {v.shape}")
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return np.divide(v, norms, out=np.zeros_like(v), where=norms > 0)
