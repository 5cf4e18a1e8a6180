"""Text embeddings and similarity: encoders, a cache, and a lexical fallback.

- :class:`TransformersEncoder`: any BERT-style model, CLS or mean pooling (extra ``hf``;
  torch and transformers are imported only when one is built);
- :class:`CachedEncoder`: exact-text LRU cache in front of any encoder;
- :class:`EncoderSimilarity`: cosine of cached unit vectors, with a fast path against
  pre-encoded keys (:meth:`EncoderSimilarity.similarity_to_matrix`);
- :class:`LexicalSimilarity`: the model-free rapidfuzz fallback;
- :func:`make_similarity`: ``"lexical"``, ``"sapbert"``, ``"minilm"``, a hub id or a
  local model folder.
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
