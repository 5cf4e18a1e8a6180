"""Line-by-line reading with strict and lenient error handling.

``strict=True`` (the default everywhere) stops at the first bad line with a
:class:`~clinenv.errors.CaseFormatError` naming file, line and field. ``strict=False``
skips bad lines and records ``(line, reason)`` in a :class:`LoadReport`, so a user file
with a trailing comma or a stray markdown fence (AgentClinic issue #7)
still loads its good records and says what it dropped.

Lines are read by :func:`clinenv.cases.scan_json_lines`, the package's one JSON Lines
reader (UTF-8 whatever the locale, byte-order mark accepted), which yields a bad line's
:class:`~clinenv.errors.CaseFormatError` instead of raising it.
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
