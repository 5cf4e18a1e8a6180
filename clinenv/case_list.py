"""Case lists: the cases a run is restricted to (``clinenv run --cases FILE``).

One ``case_id`` per line (``#`` comments and blank lines ignored), as ``clinenv data
split`` writes them; a run records the list's path, sha256 and ids as ``case_list``.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clinenv.errors import ClinenvError

__all__ = ["CaseList", "CaseListError", "nearest_id", "read_case_list", "write_case_list"]


class CaseListError(ClinenvError, ValueError):
    """A case list cannot be used; the message names the file and, for one id, its
    1-based line."""


@dataclass(frozen=True)
class CaseList:
    """The ids of a case-list file.

    Attributes:
        path: the file as given.
        sha256: hex sha256 of the file's bytes.
        case_ids: the ids in file order (no repeats).
        lines: the 1-based line of each id.
    """

    path: str
    sha256: str
    case_ids: tuple[str, ...]
    lines: tuple[int, ...]

    def indices(self, dataset_ids: Sequence[str], *, dataset: str = "the dataset",
                ) -> list[int]:
        """The dataset indices of the listed cases, ascending (dataset order).

        Args:
            dataset_ids: ``case_id`` of every case of the dataset, in dataset order.
            dataset: the dataset's name, for the message.

        Raises:
            CaseListError: a listed id is not in ``dataset_ids`` (file, line, the id and
                the nearest id of the dataset named).
        """
        where = {case_id: i for i, case_id in enumerate(dataset_ids)}
        out = []
        for case_id, line in zip(self.case_ids, self.lines, strict=True):
            if case_id not in where:
                near = nearest_id(case_id, list(where))
                hint = f"; the nearest id of {dataset} is {near!r}" if near else ""
                raise CaseListError(f"{self.path}, line {line}: case id {case_id!r} is not "
                                    f"in {dataset} ({len(where)} cases){hint}")
            out.append(where[case_id])
        return sorted(out)

    def to_log(self, dataset_ids: Sequence[str]) -> dict[str, Any]:
        """The run-log field ``case_list``: ``{"path", "sha256", "case_ids"}``, the ids in
        dataset order (``--resume`` refuses a list of another digest).

        Raises:
            CaseListError: as :meth:`indices`.
        """
        return {"path": self.path, "sha256": self.sha256,
                "case_ids": [dataset_ids[i] for i in self.indices(dataset_ids)]}


def _unpadded(case_id: str) -> str:
    return re.sub(r"\d+", lambda m: str(int(m.group())), case_id.strip().lower())


def nearest_id(case_id: str, ids: Sequence[str]) -> str | None:
    """The id of ``ids`` nearest to ``case_id``: one equal to it but for letter case and
    the leading zeros of its numbers (``"demo-7"`` -> ``"demo-07"``), else the best
    :func:`difflib.get_close_matches` match; ``None`` when ``ids`` is empty."""
    key = _unpadded(case_id)
    for other in ids:
        if _unpadded(other) == key:
            return other
    near = difflib.get_close_matches(case_id, list(ids), n=1, cutoff=0.0)
    return near[0] if near else None


def read_case_list(path: str | Path) -> CaseList:
    """Read a case-list file (UTF-8; one id per line, ``#`` comments and blank lines ignored).

    Raises:
        FileNotFoundError: no such file.
        IsADirectoryError: ``path`` is a folder.
        CaseListError: not UTF-8 text, no id at all, or an id listed twice (both lines
            named).
    """
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise CaseListError(f"{path}: not UTF-8 text (byte offset {err.start}); a case "
                            "list has one case id per line") from None
    ids: list[str] = []
    lines: list[int] = []
    first: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        case_id = line.strip()
        if not case_id or case_id.startswith("#"):
            continue
        if case_id in first:
            raise CaseListError(f"{path}, line {number}: case id {case_id!r} is listed "
                                f"twice (also on line {first[case_id]})")
        first[case_id] = number
        ids.append(case_id)
        lines.append(number)
    if not ids:
        raise CaseListError(f"{path}: no case id (a case list has one case id per line; "
                            "`clinenv data split` writes them)")
    return CaseList(path=str(path), sha256=hashlib.sha256(raw).hexdigest(),
                    case_ids=tuple(ids), lines=tuple(lines))


def write_case_list(path: str | Path, case_ids: Sequence[str]) -> Path:
    """Write ``case_ids`` one per line (UTF-8, ``\\n`` line ends); returns the path."""
    path = Path(path)
    path.write_text("".join(f"{c}\n" for c in case_ids), encoding="utf-8", newline="\n")
    return path
