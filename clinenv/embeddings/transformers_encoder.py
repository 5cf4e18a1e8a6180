"""An :class:`~clinenv.embeddings.base.Encoder` over any BERT-style transformers model.

CLS pooling (SapBERT, CDEG "Implementation Details") or mean pooling; rows are
L2-normalised float32 (extra ``hf``, imported only when an encoder is built).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clinenv.embeddings.base import unit_rows
from clinenv.errors import install_hint

#: Hub id of SapBERT (PubMedBERT fine-tuned on UMLS synonyms); use it with CLS pooling.
SAPBERT_ID = "cambridgeltl/SapBERT-from-PubMedBERT-fulltext"

POOLINGS = ("cls", "mean")

_log = logging.getLogger(__name__)


class EncoderLoadError(OSError):
    """A model or tokenizer could not be loaded; the message names the model and the fix."""


def import_hf() -> tuple[Any, Any]:
    """``(torch, transformers)``.

    Raises:
        ImportError: either is missing; the message names the ``hf`` extra.
    """
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise ImportError("text encoders need torch and transformers: "
                          + install_hint("hf")) from exc
    return torch, transformers


class TransformersEncoder:
    """Embed texts with a BERT-style model: one unit-length float32 vector per text.

    Args:
        model: a local model folder (``str`` or ``Path``) or a hub id.
        pooling: ``"cls"`` (first token) or ``"mean"`` (attention-mask-weighted mean).
        batch_size: texts per forward pass (>= 1).
        max_length: tokens per text, special tokens included (>= 2); longer texts are
            truncated and counted in :attr:`truncated`.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``...; ``None``: CUDA if available.
        trust_remote_code: passed to the ``from_pretrained`` calls.
        name: the reported :attr:`name`; default ``"<model>:<pooling>"``.

    Attributes:
        dim: vector dimension (the model's hidden size).
        truncated: number of texts truncated so far.

    Raises:
        ValueError: unknown pooling, or ``batch_size`` / ``max_length`` out of range.
        ImportError: torch or transformers is missing (names the ``hf`` extra).
        EncoderLoadError: the model or its tokenizer cannot be loaded.
    """

    def __init__(self, model: str | Path, *, pooling: str = "cls", batch_size: int = 32,
                 max_length: int = 64, device: str | None = None,
                 trust_remote_code: bool = False, name: str | None = None) -> None:
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if int(max_length) < 2:
            raise ValueError(f"max_length must be >= 2, got {max_length}")
        torch, transformers = import_hf()
        self._torch = torch
        self.model_id = str(model)
        self.pooling = pooling
        self.batch_size = int(batch_size)
        self.max_length = int(max_length)
        self.name = name or f"{self.model_id}:{pooling}"
        self.truncated = 0
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(
                self.model_id, trust_remote_code=trust_remote_code)
            self.model = transformers.AutoModel.from_pretrained(
                self.model_id, trust_remote_code=trust_remote_code)
        except (OSError, ValueError) as exc:
            raise EncoderLoadError(_load_hint(self.model_id, exc)) from exc
        if self.tokenizer.pad_token is None:
            raise EncoderLoadError(f"tokenizer of {self.model_id!r} has no pad token; "
                                   "batched encoding needs one")
        self.tokenizer.padding_side = "right"  # [CLS] at position 0 in every row
        self.model.to(self.device)
        self.model.eval()
        self.dim = int(self.model.config.hidden_size)
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` (strings; ``""`` is allowed and gives a finite unit vector).

        Returns:
            ``float32`` array ``(len(texts), dim)`` with unit-L2-norm rows; ``(0, dim)``
            for no texts.

        Raises:
            TypeError: an item is not a string (its index named).
        """
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"text {i} is {type(text).__name__}, not str: {text!r}")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:  # fast tokenizers are not safe to call from several threads
            parts = [self._encode_batch(texts[i:i + self.batch_size])
                     for i in range(0, len(texts), self.batch_size)]
        return unit_rows(np.concatenate(parts, axis=0))

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        torch = self._torch
        self._count_truncated(texts)
        batch = self.tokenizer(texts, padding=True, truncation=True,
                               max_length=self.max_length, return_tensors="pt")
        batch = {k: v.to(self.device) for k, v in batch.items()}
        with torch.no_grad():
            hidden = self.model(**batch).last_hidden_state  # (n, tokens, dim)
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        return pooled.float().cpu().numpy()

    def _count_truncated(self, texts: list[str]) -> None:
        lengths = [len(ids) for ids in self.tokenizer(texts, truncation=False,
                                                      verbose=False)["input_ids"]]
        over = [i for i, n in enumerate(lengths) if n > self.max_length]
        if over and self.truncated == 0:
            _log.warning("%s: truncating texts longer than max_length=%d tokens (first: "
                         "%d tokens, %r...)", self.name, self.max_length,
                         lengths[over[0]], texts[over[0]][:60])
        self.truncated += len(over)


def _load_hint(model: str, exc: BaseException) -> str:
    """The message of a failed load: which model, why, and how to fix it."""
    if Path(model).exists():
        fix = ("the folder must hold config.json, the tokenizer files and the weights "
               "(save them with save_pretrained)")
    else:
        fix = ("give an existing local model folder, or a hub id that can be downloaded; "
               "offline (HF_HUB_OFFLINE=1 or no network), download the model once where "
               "there is network and point to that local folder")
    return f"cannot load encoder model {model!r}: {exc}. Fix: {fix}"
