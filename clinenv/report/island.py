"""The report's data island: every value taken from run logs, as escaped JSON.

:class:`StringTable` stores each distinct string once; :func:`island_json` writes JSON
that cannot end the ``<script>`` element (docs/report.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["ISLAND_ID", "StringTable", "island_json"]

#: ``id`` of the page's ``<script type="application/json">`` element.
ISLAND_ID = "report-data"

#: ``(character, JSON escape)``; applied with ``str.replace`` (C speed on large pages).
_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
            ("\u2029", "\\u2029"))


class StringTable:
    """Distinct strings, each stored once; :meth:`ref` gives a string's index.

    ``None`` stays ``None`` (JSON ``null``); any other value is stored as ``str(value)``.
    :attr:`strings` is the list the page looks indices up in.
    """

    def __init__(self) -> None:
        self._index: dict[str, int] = {}
        self.strings: list[str] = []

    def ref(self, value: Any) -> int | None:
        """The index of ``str(value)`` (added on first use), or ``None`` for ``None``."""
        if value is None:
            return None
        text = value if isinstance(value, str) else str(value)
        index = self._index.get(text)
        if index is None:
            index = self._index[text] = len(self.strings)
            self.strings.append(text)
        return index

    def refs(self, values: Sequence[Any] | None) -> list[int | None] | None:
        """:meth:`ref` of each value; ``None`` for ``None``."""
        return None if values is None else [self.ref(v) for v in values]

    def __len__(self) -> int:
        return len(self.strings)


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, ±inf) replaced by ``None``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def island_json(data: Any) -> str:
    """``data`` as compact JSON safe inside ``<script type="application/json">``.

    Args:
        data: JSON-ready values (dicts, lists, strings, numbers, booleans, ``None``).

    Returns:
        JSON text without a raw ``<``, ``>``, ``&``, U+2028 or U+2029 (each written as a
        ``\\uXXXX`` escape, which ``JSON.parse`` reads back as the same character).

    Raises:
        TypeError: a value JSON cannot hold.
    """
    try:
        text = _dumps(data)
    except ValueError:  # a NaN or infinity somewhere: walk the data once to drop them
        text = _dumps(_finite(data))
    for raw, escape in _ESCAPES:
        text = text.replace(raw, escape)
    return text


def _dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
