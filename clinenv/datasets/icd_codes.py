"""ICD code spelling: one canonical form for ICD-9 and ICD-10 codes."""

from __future__ import annotations

import re

__all__ = ["normalize_code"]

_CODE = re.compile(r"[A-Z0-9]{3,7}")


def normalize_code(code: str) -> str | None:
    """The canonical form of an ICD code (upper case, no ``.`` or spaces), or ``None``
    when ``code`` is not 3-7 letters and digits once so cleaned (``"i26.99"`` ->
    ``"I2699"``)."""
    text = re.sub(r"[.\s]", "", code.upper())
    return text if _CODE.fullmatch(text) and any(c.isdigit() for c in text) else None
