"""An exact-text LRU cache in front of any :class:`~clinenv.embeddings.base.Encoder`.

Keys are the exact strings, so each text costs one model call (CDEG's evidence-state
matching embeds the same texts over and over).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from clinenv.embeddings.base import Encoder


class CachedEncoder:
    """Wrap ``encoder`` with a bounded least-recently-used cache keyed by exact text.

    Texts not cached go to ``encoder.encode`` in one batch, each once; rows come back
    in the order of ``texts``. Thread-safe; the encoder runs outside the lock.

    Args:
        encoder: any object with ``name`` and ``encode(texts) -> (n, dim)`` array.
        max_items: most texts kept (>= 1); the least recently used go first.

    Attributes:
        name: the wrapped encoder's name (caching does not change the vectors).
        hits: positions of ``texts`` served from the cache, over all calls.
        misses: texts sent to the wrapped encoder, over all calls.

    Raises:
        ValueError: ``max_items`` < 1.
    """

    def __init__(self, encoder: Encoder, max_items: int = 100_000) -> None:
        if int(max_items) < 1:
            raise ValueError(f"max_items must be >= 1, got {max_items}")
        self.encoder = encoder
        self.name = encoder.name
        self.max_items = int(max_items)
        self.hits = 0
        self.misses = 0
        self._store: OrderedDict[str, np.ndarray] = OrderedDict()
        self._dim: int | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Number of texts cached now."""
        return len(self._store)

    def clear(self) -> None:
        """Drop every cached vector (the counters stay)."""
        with self._lock:
            self._store.clear()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """The wrapped encoder's vectors of ``texts``, in order.

        Returns:
            ``float32`` array ``(len(texts), dim)``, a new array (changing it leaves the
            cache intact); ``(0, dim)`` for no texts.

        Raises:
            TypeError: an item is not a string (its index named).
            ValueError: the wrapped encoder returned the wrong shape, or a dimension that
                differs from earlier calls.
        """
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"text {i} is {type(text).__name__}, not str: {text!r}")
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for text in texts:
                if text not in found and text in self._store:
                    self._store.move_to_end(text)
                    found[text] = self._store[text]
        new = list(dict.fromkeys(t for t in texts if t not in found))
        if new or (not texts and self._dim is None):
            found.update(zip(new, self._call_encoder(new), strict=True))
        with self._lock:
            self.misses += len(new)
            self.hits += len(texts) - len(new)
            for text in new:
                self._store[text] = found[text]
                self._store.move_to_end(text)
            while len(self._store) > self.max_items:
                self._store.popitem(last=False)
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        return np.stack([found[t] for t in texts]).astype(np.float32, copy=False)

    def _call_encoder(self, texts: list[str]) -> list[np.ndarray]:
        vectors = np.asarray(self.encoder.encode(texts), dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise ValueError(f"encoder {self.name!r} returned shape {vectors.shape} for "
                             f"{len(texts)} texts; expected ({len(texts)}, dim)")
        if self._dim is not None and vectors.shape[1] != self._dim:
            raise ValueError(f"encoder {self.name!r} returned dimension {vectors.shape[1]}, "
                             f"earlier {self._dim}")
        self._dim = vectors.shape[1]
        rows = [row.copy() for row in vectors]  # own memory: evicting frees it
        for row in rows:
            row.setflags(write=False)
        return rows
