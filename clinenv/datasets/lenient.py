"""Line-by-line reading with strict and lenient error handling.

``strict=True`` (the default everywhere) stops at the first bad line with a
:class:`~clinenv.errors.CaseFormatError` naming file, line and field. ``strict=False``
skips bad lines and records ``(line, reason)`` in a :class:`LoadReport`, so a user file
with a trailing comma or a stray markdown fence (AgentClinic issue #7, bug report B19)
still loads its good records and says what it dropped.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clinenv.errors import CaseFormatError

_BOM = b"\xef\xbb\xbf"


@dataclass
class LoadReport:
    """What a load did.

    Attributes:
        path: the file that was read.
        dataset: the dataset name given to the cases.
        schema: ``"osce"``, ``"nejm"`` or ``"canonical"``.
        n_loaded: number of cases returned.
        skipped: ``(line, reason)`` for every line skipped in lenient mode.
        warnings: other problems that did not stop the load (e.g. a record count that
            differs from the registry's).
    """

    path: str
    dataset: str
    schema: str
    n_loaded: int = 0
    skipped: list[tuple[int, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def n_skipped(self) -> int:
        """Number of skipped lines."""
        return len(self.skipped)

    def skip(self, err: CaseFormatError, *, strict: bool) -> None:
        """Raise ``err`` in strict mode, else record it as a skipped line."""
        if strict:
            raise err
        reason = f"field '{err.field}': {err.reason}" if err.field else err.reason
        self.skipped.append((err.line or 0, reason))

    def warn(self, message: str, *, strict: bool) -> None:
        """Raise a whole-file :class:`CaseFormatError` in strict mode, else warn."""
        if strict:
            raise CaseFormatError(message, path=self.path)
        self.warnings.append(message)
        warnings.warn(f"{self.path}: {message}", UserWarning, stacklevel=3)


def iter_lines(path: str | Path) -> Iterator[tuple[int, Any | CaseFormatError]]:
    """Yield ``(line_number, parsed JSON or CaseFormatError)`` for each non-blank line.

    Unlike :func:`clinenv.cases.iter_json_lines` this never raises on a bad line, so a
    lenient caller can go on reading. Bytes are decoded as UTF-8 whatever the locale
    (bug report B18); a leading byte-order mark is accepted; a missing final newline is
    fine.

    Args:
        path: a JSON Lines file.

    Raises:
        FileNotFoundError: the file does not exist.
    """
    path = Path(path)
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if number == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM):]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                yield number, CaseFormatError(
                    f"invalid UTF-8 byte 0x{raw[err.start]:02x} at column {err.start + 1}",
                    path=path,
                    line=number,
                )
                continue
            if not text.strip():
                continue
            try:
                yield number, json.loads(text)
            except json.JSONDecodeError as err:
                yield number, CaseFormatError(
                    f"invalid JSON: {err.msg} at column {err.colno}", path=path, line=number
                )
