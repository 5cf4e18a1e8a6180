"""Spaces for clinical text.

:class:`UnicodeText` accepts any ``str`` within its length bounds (Gymnasium's ``Text``
rejects spaces, newlines and "°"); ``sample()`` draws printable ASCII.
"""

from __future__ import annotations

import string
from typing import Any

from gymnasium.spaces import Text


class UnicodeText(Text):
    """A text space that accepts any Unicode string of ``min_length..max_length`` chars.

    Args:
        max_length: maximum number of characters (the environment clips to it).
        min_length: minimum number of characters (default 0: empty strings allowed).
        seed: seed of the space's own sampler (independent of the environment's RNG).
    """

    def __init__(self, max_length: int, *, min_length: int = 0, seed: Any = None) -> None:
        super().__init__(max_length, min_length=min_length, charset=string.printable,
                         seed=seed)

    def contains(self, x: Any) -> bool:
        """``True`` iff ``x`` is a ``str`` of ``min_length..max_length`` characters."""
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"


def clip_text(text: str, max_length: int) -> tuple[str, bool]:
    """Clip ``text`` to ``max_length`` characters, keeping its head and its tail.

    Returns:
        ``(text, clipped)``. When clipped, the first quarter and the last part are kept
        around a ``[... N characters clipped ...]`` marker, so both the task header and
        the latest turn survive.
    """
    if len(text) <= max_length:
        return text, False
    marker = "\n[... {} characters clipped ...]\n"
    room = max_length - len(marker.format(len(text)))
    if room <= 0:
        return text[:max_length], True
    head = room // 4
    tail = room - head
    cut = len(text) - head - tail
    return text[:head] + marker.format(cut) + text[len(text) - tail:], True
