"""Record digests: a dataset file's identity over its records, not its bytes.

Each line parsed and re-serialised with sorted keys (:func:`canonical_record`); regenerate
the pinned table with ``python -m clinenv.datasets.digests FILE ...``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clinenv.cases import scan_json_lines
from clinenv.errors import CaseFormatError


def canonical_record(obj: Any) -> bytes:
    """The canonical bytes of one parsed JSON record (sorted keys, compact separators,
    UTF-8; no newline)."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False,
                      separators=(",", ":")).encode("utf-8")


@dataclass(frozen=True)
class RecordDigests:
    """The digests of one file's records.

    Attributes:
        sha256: hex sha256 of the canonical form (over every record that parses).
        records: hex sha256 of each canonical record in file order; ``None`` for a line
            that is not UTF-8 JSON.
        lines: the 1-based line number of each record in the file.
        errors: the reason of each ``None`` in ``records``, by line number.
    """

    sha256: str
    records: tuple[str | None, ...]
    lines: tuple[int, ...]
    errors: dict[int, str]


def digest_records(items: Iterable[tuple[int, Any]]) -> RecordDigests:
    """:class:`RecordDigests` of ``(line_number, parsed JSON or CaseFormatError)`` pairs
    (what :func:`clinenv.cases.scan_json_lines` yields)."""
    whole = hashlib.sha256()
    records: list[str | None] = []
    lines: list[int] = []
    errors: dict[int, str] = {}
    for number, obj in items:
        lines.append(number)
        if isinstance(obj, CaseFormatError):
            records.append(None)
            errors[number] = obj.reason
            continue
        data = canonical_record(obj)
        whole.update(data + b"\n")
        records.append(hashlib.sha256(data).hexdigest())
    return RecordDigests(whole.hexdigest(), tuple(records), tuple(lines), errors)


def file_digests(path: str | Path) -> RecordDigests:
    """:class:`RecordDigests` of a JSON Lines file (read like every case file: UTF-8,
    a leading BOM skipped, blank lines skipped, CRLF accepted).

    Raises:
        OSError: the file cannot be read.
    """
    return digest_records(scan_json_lines(path))


def first_difference(found: RecordDigests, pinned: Sequence[str], dataset: str) -> str:
    """Where ``found`` first differs from the pinned per-record digests, in words:
    ``"case medqa-0027 (line 27) differs"``, ``"line 5 (case nejm-0005) is not valid
    JSON: ..."``, ``"the file ends after 106 records: case medqa-0107 is missing"``, or
    ``"the file has 108 records, one more than the 107 pinned: case medqa-0108 (line
    108)"``. Case ids are ``f"{dataset}-{index:04d}"`` (1-based record position), as
    :func:`clinenv.datasets.load_cases` numbers them."""
    for i, (ours, theirs) in enumerate(zip(found.records, pinned, strict=False)):
        case = f"{dataset}-{i + 1:04d}"
        line = found.lines[i]
        if ours is None:
            return f"line {line} (case {case}) is not valid JSON: {found.errors[line]}"
        if ours != theirs:
            return f"case {case} (line {line}) differs from the pinned record"
    n, want = len(found.records), len(pinned)
    if n < want:
        return (f"the file ends after {n} record(s): case {dataset}-{n + 1:04d} and "
                f"{want - n - 1} more are missing" if want - n > 1 else
                f"the file ends after {n} record(s): case {dataset}-{n + 1:04d} is missing")
    if n > want:
        return (f"the file has {n} records, {n - want} more than the {want} pinned, from "
                f"case {dataset}-{want + 1:04d} (line {found.lines[want]})")
    return "the records are in another order or differ in a way no single record shows"


def main(argv: Sequence[str] | None = None) -> int:
    """Print ``{file name: {"records_sha256", "records"}}`` for the files given."""
    table = {}
    for name in argv if argv is not None else sys.argv[1:]:
        digests = file_digests(name)
        table[Path(name).name] = {"records_sha256": digests.sha256,
                                  "records": list(digests.records)}
    print(json.dumps(table, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
