"""Reviewer-label files: clinicians' support ratings of run-log outputs (EGIP §4.5, app. E).

CSV, one row per rating of one output by one reviewer; columns and ratings
(:data:`RATINGS`) are in docs/analyses.md. Errors are :class:`ReviewerLabelError`.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from clinenv.errors import ClinenvError

__all__ = ["COLUMNS", "RATINGS", "OutputKey", "ReviewerLabelError", "ReviewerLabels",
           "read_reviewer_labels"]

#: The ratings of EGIP §4.5, in this order: supported, insufficiently supported,
#: contradicted, indeterminate, no final answer.
RATINGS: tuple[str, ...] = ("S", "U", "C", "I", "A")
#: The required columns.
COLUMNS: tuple[str, ...] = ("dataset", "case_id", "method", "repetition", "reviewer",
                            "rating")

#: ``(dataset, case_id, method, repetition)`` of one rated output.
OutputKey = tuple[str, str, str, int]


class ReviewerLabelError(ClinenvError, ValueError):
    """A reviewer-label file that cannot be used.

    Attributes:
        path: the file.
        line: 1-based line (``None`` when the whole file is at fault).
        field: the column at fault (``None`` when the row itself is).
        reason: what is wrong, in words.
    """

    def __init__(self, reason: str, *, path: str | Path, line: int | None = None,
                 field: str | None = None) -> None:
        self.path, self.line, self.field, self.reason = str(path), line, field, reason
        where = self.path
        if line is not None:
            where += f", line {line}"
        if field:
            where += f", field '{field}'"
        super().__init__(f"{where}: {reason}")


@dataclass(frozen=True)
class ReviewerLabels:
    """The ratings of one reviewer-label file.

    Attributes:
        path: the file.
        ratings: ``{output: {reviewer: rating}}``, outputs and reviewers in file order.
        lines: ``{(output, reviewer): 1-based line}`` of every rating.
        reviewers: the reviewers, in order of first appearance.
    """

    path: str
    ratings: Mapping[OutputKey, Mapping[str, str]]
    lines: Mapping[tuple[OutputKey, str], int]
    reviewers: tuple[str, ...]

    def line_of(self, output: OutputKey) -> int:
        """The first line that rates ``output``."""
        return min(n for (key, _), n in self.lines.items() if key == output)


def read_reviewer_labels(path: str | Path) -> ReviewerLabels:
    """Read and check a reviewer-label file (format: docs/analyses.md, "File format").

    Raises:
        ReviewerLabelError: the file is missing, a folder, not UTF-8 or empty; the header
            lacks a column (named) or repeats one; a row has too few or too many cells,
            an empty ``dataset`` / ``case_id`` / ``method`` / ``reviewer``, a
            ``repetition`` that is not an integer ``>= 0``, a rating outside
            :data:`RATINGS`, or rates an output a second time by the same reviewer (both
            lines named).
    """
    where = str(path)
    file = Path(path)
    if file.is_dir():
        raise ReviewerLabelError("is a folder, not a reviewer-label file", path=where)
    try:
        text = file.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ReviewerLabelError("no such reviewer-label file", path=where) from None
    except UnicodeDecodeError as err:
        raise ReviewerLabelError(f"not UTF-8 text ({err.reason} at byte {err.start})",
                                 path=where) from None
    except OSError as err:
        raise ReviewerLabelError(f"cannot read: {err.strerror or err}", path=where) from None
    reader = csv.reader(text.splitlines(keepends=True))
    header: list[str] | None = None
    ratings: dict[OutputKey, dict[str, str]] = {}
    lines: dict[tuple[OutputKey, str], int] = {}
    reviewers: dict[str, None] = {}
    try:
        for row in reader:
            number = reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            if header is None:
                header = _header(row, where, number)
                continue
            key, reviewer, rating = _row(row, header, where, number)
            earlier = lines.get((key, reviewer))
            if earlier is not None:
                raise ReviewerLabelError(
                    f"reviewer {reviewer!r} rates output {_describe(key)} again (first on "
                    f"line {earlier}); each reviewer rates an output once",
                    path=where, line=number, field="reviewer")
            ratings.setdefault(key, {})[reviewer] = rating
            lines[(key, reviewer)] = number
            reviewers.setdefault(reviewer, None)
    except csv.Error as err:
        raise ReviewerLabelError(f"malformed CSV: {err}", path=where,
                                 line=reader.line_num) from None
    if header is None:
        raise ReviewerLabelError("empty file: expected a header row "
                                 f"({','.join(COLUMNS)}) and one row per rating",
                                 path=where)
    if not ratings:
        raise ReviewerLabelError("no ratings: the file has a header but no rows", path=where)
    return ReviewerLabels(path=where, ratings=ratings, lines=lines,
                          reviewers=tuple(reviewers))


def _header(row: list[str], where: str, number: int) -> list[str]:
    names = [cell.strip().lower() for cell in row]
    for name in COLUMNS:
        if name not in names:
            raise ReviewerLabelError(
                f"the header has no column {name!r} (required: {', '.join(COLUMNS)}; "
                f"found: {', '.join(repr(n) for n in names)})", path=where, line=number,
                field=name)
        if names.count(name) > 1:
            raise ReviewerLabelError(f"column {name!r} appears {names.count(name)} times "
                                     "in the header", path=where, line=number, field=name)
    return names


def _row(row: list[str], header: list[str], where: str, number: int
         ) -> tuple[OutputKey, str, str]:
    if len(row) != len(header):
        raise ReviewerLabelError(f"{len(row)} cells but the header has {len(header)} "
                                 "columns", path=where, line=number)
    cells = {name: cell.strip() for name, cell in zip(header, row, strict=True)}
    for name in ("dataset", "case_id", "method", "reviewer"):
        if not cells[name]:
            raise ReviewerLabelError("empty", path=where, line=number, field=name)
    rep_text = cells["repetition"]
    if not (rep_text.isascii() and rep_text.isdigit()):
        raise ReviewerLabelError(f"repetition must be an integer >= 0 (0-based, as in the "
                                 f"run log), got {rep_text!r}", path=where, line=number,
                                 field="repetition")
    rating = cells["rating"].upper()
    if rating not in RATINGS:
        raise ReviewerLabelError(
            f"rating must be one of {', '.join(RATINGS)} (S supported, U insufficiently "
            f"supported, C contradicted, I indeterminate, A no final answer), got "
            f"{cells['rating']!r}", path=where, line=number, field="rating")
    key = (cells["dataset"], cells["case_id"], cells["method"], int(rep_text))
    return key, cells["reviewer"], rating


def _describe(key: OutputKey) -> str:
    dataset, case_id, method, rep = key
    return f"(dataset {dataset!r}, case {case_id!r}, method {method!r}, repetition {rep})"
