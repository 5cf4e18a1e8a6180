"""Line-by-line reading with strict and lenient error handling.

``strict=True`` stops at the first bad line; ``strict=False`` skips it and records
``(line, reason)`` in a :class:`LoadReport`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from clinenv.errors import CaseFormatError


@dataclass
class LoadReport:
    """What a load did.

    Attributes:
        path: the file that was read.
        dataset: the dataset name given to the cases.
        schema: ``"osce"``, ``"nejm"``, ``"mimic_idx"`` or ``"canonical"``.
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
