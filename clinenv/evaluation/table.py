"""The :class:`Table` of the reports: Markdown, CSV and plain-text rendering."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["DASH", "Table"]

DASH = "–"
_ASCII = str.maketrans({"±": "+/-", "Δ": "Delta", "–": "-", "−": "-", "×": "x"})


def _num(value: Any) -> str:
    """A CSV number: empty for None / NaN, ints as is, floats rounded to 6 decimals."""
    if value is None:
        return ""
    if isinstance(value, bool | int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        return "" if math.isnan(value) else repr(round(float(value), 6))
    return str(value)


@dataclass(frozen=True)
class Table:
    """A report table in two shapes: a display grid and tidy CSV records.

    Attributes:
        title: one line saying what the table shows.
        header: display column names.
        rows: display cells (strings), one tuple per row.
        notes: footnotes (definitions, sample sizes, dropped cases...).
        csv_header: CSV column names.
        csv_rows: CSV values (numbers unrounded, written by :func:`_num`).
        data: the objects the rows were built from (:class:`AccuracyCell` or
            :class:`Comparison`), for plots and further analysis.
    """

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...] = ()
    csv_header: tuple[str, ...] = ()
    csv_rows: tuple[tuple[Any, ...], ...] = ()
    data: tuple[Any, ...] = field(default=(), repr=False)

    def numeric(self) -> list[bool]:
        """Per column: every cell looks like a number, interval or dash (right-aligned)."""
        def number(text: str) -> bool:
            return text[:1] in "+-[0123456789" or text == DASH

        return [bool(self.rows) and all(number(row[i]) for row in self.rows)
                for i in range(len(self.header))]

    def to_markdown(self) -> str:
        """GitHub-flavoured Markdown: bold title, pipe table, notes as a list."""
        def cell(text: str) -> str:
            return text.replace("|", "\\|")

        lines = [f"**{self.title}**", "",
                 "| " + " | ".join(cell(h) for h in self.header) + " |",
                 "|" + "|".join("---:" if n else ":---" for n in self.numeric()) + "|"]
        lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in self.rows]
        if self.notes:
            lines += [""] + [f"- {note}" for note in self.notes]
        return "\n".join(lines) + "\n"

    def to_csv(self) -> str:
        """CSV (``csv`` module, ``\\n`` line ends): :attr:`csv_header` then the records."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(self.csv_header)
        writer.writerows([_num(v) for v in row] for row in self.csv_rows)
        return buf.getvalue()

    def to_text(self) -> str:
        """Plain ASCII for a terminal: aligned columns, then the notes."""
        grid = [tuple(c.translate(_ASCII) for c in self.header)]
        grid += [tuple(c.translate(_ASCII) for c in row) for row in self.rows]
        widths = [max(len(r[i]) for r in grid) for i in range(len(self.header))]

        numeric = self.numeric()

        def line(row: Sequence[str]) -> str:
            return "  ".join(c.rjust(w) if n else c.ljust(w)
                             for c, w, n in zip(row, widths, numeric, strict=True)).rstrip()

        out = [self.title.translate(_ASCII), line(grid[0]),
               "  ".join("-" * w for w in widths)]
        out += [line(row) for row in grid[1:]]
        out += [f"  {note.translate(_ASCII)}" for note in self.notes]
        return "\n".join(out)

    def write(self, out_dir: str | Path, stem: str) -> tuple[Path, Path]:
        """Write ``<stem>.md`` and ``<stem>.csv`` (UTF-8) in ``out_dir`` (created).

        Returns:
            The two paths.
        """
        folder = Path(out_dir)
        folder.mkdir(parents=True, exist_ok=True)
        md, cs = folder / f"{stem}.md", folder / f"{stem}.csv"
        md.write_text(self.to_markdown(), encoding="utf-8")
        cs.write_text(self.to_csv(), encoding="utf-8", newline="")
        return md, cs


def _pct(value: float, digits: int = 2) -> str:
    return DASH if value is None or math.isnan(value) else f"{value:.{digits}f}"
