"""Cosine similarity over an encoder's unit vectors (a :class:`Similarity`).

CDEG's pairing (0.7, Eq. 4) and hybrid matching (0.72, 0.65; "Implementation
Details"); pre-encode fixed keys for :meth:`EncoderSimilarity.similarity_to_matrix`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from clinenv.embeddings.base import Encoder, Similarity, unit_rows
from clinenv.embeddings.cache import CachedEncoder


def cosine_matrix(query_vectors: np.ndarray, key_matrix: np.ndarray, *,
                  keys_normalized: bool = False) -> np.ndarray:
    """Cosine of every query vector with every key vector.

    Args:
        query_vectors: ``(n_q, dim)`` array; L2-normalized here (a zero row scores 0).
        key_matrix: ``(n_k, dim)`` array; L2-normalized here unless ``keys_normalized``.
        keys_normalized: the key rows already have unit norm (or are zero), e.g. they
            come from :meth:`EncoderSimilarity.encode`; skips re-normalizing a large
            key matrix on every call.

    Returns:
        ``float32`` array ``(n_q, n_k)`` with values in ``[-1, 1]``.

    Raises:
        ValueError: an input is not two-dimensional, or the dimensions differ.
    """
    q = unit_rows(query_vectors)
    k = np.asarray(key_matrix, dtype=np.float32) if keys_normalized else unit_rows(key_matrix)
    if k.ndim != 2:
        raise ValueError(f"key_matrix must be (n_keys, dim), got shape {k.shape}")
    if q.shape[1] != k.shape[1]:
        raise ValueError(f"query vectors have dimension {q.shape[1]} but the key matrix "
                         f"has {k.shape[1]}")
    return np.clip(q @ k.T, -1.0, 1.0)


class EncoderSimilarity:
    """Turn an :class:`~clinenv.embeddings.base.Encoder` into a :class:`Similarity`.

    Args:
        encoder: any object with ``name`` and ``encode(texts) -> (n, dim)``.
        cache: wrap ``encoder`` in a :class:`~clinenv.embeddings.cache.CachedEncoder`
            (unless it already is one) so each distinct text is embedded once.

    Attributes:
        name: the encoder's name, e.g.
            ``"cambridgeltl/SapBERT-from-PubMedBERT-fulltext:cls"``.
        encoder: the (possibly cached) encoder used.
    """

    def __init__(self, encoder: Encoder, *, cache: bool = True) -> None:
        if cache and not isinstance(encoder, CachedEncoder):
            encoder = CachedEncoder(encoder)
        self.encoder = encoder
        self.name = encoder.name

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts``: ``float32`` ``(len(texts), dim)``.

        Rows are re-normalized here, so an encoder that does not normalize (e.g. a
        bag-of-words counter) still gives cosines; an all-zero row stays zero.
        """
        return unit_rows(self.encoder.encode(list(texts)))

    def similarity(self, queries: Sequence[str], keys: Sequence[str]) -> np.ndarray:
        """Cosine of every query with every key: ``float32`` ``(n_q, n_k)`` in [-1, 1]."""
        queries, keys = list(queries), list(keys)
        if not queries or not keys:
            return np.zeros((len(queries), len(keys)), dtype=np.float32)
        vectors = self.encode(queries + keys)  # one batch for the texts not cached
        return cosine_matrix(vectors[:len(queries)], vectors[len(queries):])

    def similarity_to_matrix(self, queries: Sequence[str],
                             key_matrix: np.ndarray) -> np.ndarray:
        """Cosine of every query with pre-encoded keys.

        Args:
            queries: texts, encoded (through the cache) here.
            key_matrix: ``(n_k, dim)`` unit vectors from :meth:`encode` of the same
                encoder (not re-normalized here: this is the per-step fast path).

        Returns:
            ``float32`` array ``(len(queries), n_k)`` in [-1, 1].

        Raises:
            ValueError: ``key_matrix`` is not ``(n_k, dim)`` for this encoder's ``dim``.
        """
        queries = list(queries)
        key_matrix = np.asarray(key_matrix, dtype=np.float32)
        if key_matrix.ndim != 2:
            raise ValueError(f"key_matrix must be (n_keys, dim), got shape {key_matrix.shape}")
        if not queries or key_matrix.shape[0] == 0:
            return np.zeros((len(queries), key_matrix.shape[0]), dtype=np.float32)
        return cosine_matrix(self.encode(queries), key_matrix, keys_normalized=True)


def finite_scores(scores: np.ndarray) -> np.ndarray:
    """``scores`` as a new ``float64`` array with NaN (and -inf) as ``-inf`` and +inf as
    the largest finite float, so that an arg-max never picks a NaN score (NumPy's
    ``argmax`` returns the first NaN)."""
    out = np.array(scores, dtype=np.float64, copy=True)
    return np.nan_to_num(out, nan=-np.inf, posinf=np.finfo(np.float64).max, neginf=-np.inf)


class KeyIndex:
    """A fixed set of key texts scored against queries, keys encoded once.

    With a similarity that has ``encode`` and ``similarity_to_matrix`` (an
    :class:`EncoderSimilarity`), the keys' unit vectors are computed here once and each
    :meth:`scores` call is one cached query encoding and one matrix product; any other
    :class:`~clinenv.embeddings.base.Similarity` (the lexical fallback, a test stub) is
    called with the key texts. Used for CDEG's hybrid matching of evidence and diagnosis
    nodes (CDEG "Evidence-State Intervention") and the retrieval baselines' memories.

    Args:
        similarity: the similarity.
        keys: the key texts.

    Attributes:
        keys: the key texts (a tuple).
    """

    def __init__(self, similarity: Similarity, keys: Sequence[str]) -> None:
        self.similarity = similarity
        self.keys = tuple(keys)
        self._to_matrix = getattr(similarity, "similarity_to_matrix", None)
        encode = getattr(similarity, "encode", None)
        self._vectors: np.ndarray | None = None
        if callable(self._to_matrix) and callable(encode) and self.keys:
            self._vectors = np.asarray(encode(list(self.keys)), dtype=np.float32)

    def __len__(self) -> int:
        """Number of keys."""
        return len(self.keys)

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        """Scores of every query against every key.

        Returns:
            ``float64`` array ``(len(queries), len(keys))`` with NaN scores as ``-inf``
            (:func:`finite_scores`).

        Raises:
            ValueError: the similarity returned another shape.
        """
        queries = list(queries)
        if not queries or not self.keys:
            return np.zeros((len(queries), len(self.keys)), dtype=np.float64)
        if self._vectors is not None:
            raw = self._to_matrix(queries, self._vectors)
        else:
            raw = self.similarity.similarity(queries, list(self.keys))
        out = finite_scores(np.asarray(raw))
        if out.shape != (len(queries), len(self.keys)):
            raise ValueError(f"{getattr(self.similarity, 'name', self.similarity)!r} "
                             f"returned scores of shape {out.shape}, expected "
                             f"{(len(queries), len(self.keys))}")
        return out


def truncated_texts(similarity: object) -> int:
    """Texts truncated so far by the encoder behind ``similarity`` (its
    ``encoder.truncated``, through any :class:`~clinenv.embeddings.cache.CachedEncoder`);
    0 for a similarity without an encoder (the lexical fallback)."""
    seen = 0
    obj = getattr(similarity, "encoder", None)
    while obj is not None and seen < 8:
        count = getattr(obj, "truncated", None)
        if isinstance(count, int):
            return count
        obj = getattr(obj, "encoder", None)
        seen += 1
    return 0
