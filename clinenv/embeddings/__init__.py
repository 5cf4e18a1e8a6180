"""Text embeddings and similarity: encoders, a cache, and a lexical fallback.

Main exports: :class:`TransformersEncoder`, :class:`CachedEncoder`,
:class:`EncoderSimilarity`, :class:`LexicalSimilarity`, :func:`make_similarity`.
"""

from clinenv.embeddings.base import Encoder, Similarity, unit_rows
from clinenv.embeddings.cache import CachedEncoder
from clinenv.embeddings.factory import make_similarity, minilm_encoder, minilm_path
from clinenv.embeddings.lexical import LEXICAL_THRESHOLDS, LexicalSimilarity, normalize_text
from clinenv.embeddings.similarity import EncoderSimilarity, cosine_matrix
from clinenv.embeddings.transformers_encoder import (
    SAPBERT_ID,
    EncoderLoadError,
    TransformersEncoder,
)

__all__ = [
    "LEXICAL_THRESHOLDS",
    "SAPBERT_ID",
    "CachedEncoder",
    "Encoder",
    "EncoderLoadError",
    "EncoderSimilarity",
    "LexicalSimilarity",
    "Similarity",
    "TransformersEncoder",
    "cosine_matrix",
    "make_similarity",
    "minilm_encoder",
    "minilm_path",
    "normalize_text",
    "unit_rows",
]
