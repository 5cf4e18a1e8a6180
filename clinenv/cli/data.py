"""``clinenv data list | verify | download``: the dataset files and their checks.

``verify`` exits 1 when a present file has a wrong checksum or record count; an unknown
dataset name, or a dataset that cannot be downloaded, is a :class:`CLIError` (exit 2).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clinenv.cli.errors import EXIT_VERIFY_FAILED, CLIError


def add_data_parser(sub: Any) -> None:
    """Add the ``data`` sub-command (``list``, ``verify``, ``download``) to ``sub``."""
    data = sub.add_parser("data", help="list, verify or download datasets")
    dsub = data.add_subparsers(dest="data_command", metavar="{list,verify,download}")
    dsub.required = True
    dlist = dsub.add_parser("list", help="known datasets and where their files are")
    dlist.add_argument("--data-dir", type=Path, default=None, metavar="DIR")
    dlist.set_defaults(func=cmd_data_list)
    dverify = dsub.add_parser("verify", help="check checksums and record counts "
                                             "(exit 1 on a mismatch)")
    dverify.add_argument("names", nargs="*", metavar="NAME",
                         help="datasets to check (default: all)")
    dverify.add_argument("--data-dir", type=Path, default=None, metavar="DIR")
    dverify.set_defaults(func=cmd_data_verify)
    ddown = dsub.add_parser("download", help="download a public dataset into the user cache")
    ddown.add_argument("name", metavar="NAME")
    ddown.add_argument("--data-dir", type=Path, default=None, metavar="DIR",
                       help="a folder checked first for an existing copy")
    ddown.set_defaults(func=cmd_data_download)


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)


def cmd_data_list(args: argparse.Namespace) -> int:
    """``clinenv data list``: name, file, records (the pinned count, or the count of a
    present file without one, e.g. the demo set), where found, checksum."""
    from clinenv.datasets import DATASETS, resolve_dataset, sha256_file
    from clinenv.datasets.resolve import count_records
    from clinenv.errors import ClinenvError

    rows = [("name", "file", "records", "found", "sha256")]
    for name, spec in DATASETS.items():
        expected = "-" if spec.n_records is None else str(spec.n_records)
        try:
            path = resolve_dataset(name, args.data_dir, verify=False)
        except ClinenvError:
            where, sha = "absent", "-"
        else:
            if spec.n_records is None:
                try:
                    expected = str(count_records(path))
                except (OSError, ClinenvError):
                    expected = "?"
            where = str(path)
            if spec.sha256 is None:
                sha = "not pinned"
            else:
                sha = "ok" if sha256_file(path) == spec.sha256 else "MISMATCH"
        rows.append((name, spec.file_name, expected, where, sha))
    print(_table(rows))
    return 0


def cmd_data_verify(args: argparse.Namespace) -> int:
    """``clinenv data verify``: exit 1 when a present file fails its checks.

    Raises:
        CLIError: an unknown dataset name.
    """
    from clinenv.datasets import DATASETS, verify_dataset
    from clinenv.datasets.registry import get_spec
    from clinenv.errors import DatasetNotFoundError

    try:
        names = [get_spec(n).name for n in args.names] if args.names else list(DATASETS)
    except DatasetNotFoundError as err:
        raise CLIError(str(err)) from None
    failed = False
    rows = [("name", "status", "records", "sha256", "path")]
    for name in names:
        try:
            result = verify_dataset(name, args.data_dir)
        except DatasetNotFoundError:
            rows.append((name, "absent", "-", "-", "-"))
            continue
        expected_sha = result.get("expected")
        if expected_sha is None:
            sha = "not pinned"
        else:
            sha = "ok" if result["sha256"] == expected_sha else "MISMATCH"
        n, want = result.get("n_records"), result.get("expected_records")
        records = "unparsable" if n is None else (f"{n}" if want is None else f"{n}/{want}")
        status = "ok" if result["ok"] else "FAILED"
        failed |= not result["ok"]
        rows.append((name, status, records, sha, result["path"]))
        if not result["ok"]:
            problems = []
            if sha == "MISMATCH":
                problems.append(f"sha256 {result['sha256']}, expected {expected_sha}")
            if result.get("error"):
                problems.append(str(result["error"]))
            elif n is not None and want is not None and n != want:
                problems.append(f"{n} records, expected {want}")
            print(f"{name}: {result['path']}: " + "; ".join(problems or ["check failed"]),
                  file=sys.stderr)
    print(_table(rows))
    return EXIT_VERIFY_FAILED if failed else 0


def cmd_data_download(args: argparse.Namespace) -> int:
    """``clinenv data download NAME``: fetch a public dataset into the user cache.

    Raises:
        CLIError: an unknown name, a dataset without a public URL (credentialed), or a
            failed download or checksum.
    """
    from clinenv.datasets import resolve_dataset
    from clinenv.datasets.registry import get_spec
    from clinenv.errors import ClinenvError, DatasetNotFoundError

    try:
        spec = get_spec(args.name)
    except DatasetNotFoundError as err:
        raise CLIError(str(err)) from None
    if spec.bundled:
        path = resolve_dataset(spec.name)
        print(f"{spec.name}: bundled with clinenv at {path}; nothing to download")
        return 0
    if spec.url is None:
        raise CLIError(f"dataset {spec.name!r} cannot be downloaded. {spec.access_note}")
    try:
        try:
            path = resolve_dataset(spec.name, args.data_dir)
            print(f"{spec.name}: already available at {path} (sha256 verified)")
        except DatasetNotFoundError:
            path = resolve_dataset(spec.name, args.data_dir, allow_download=True)
            print(f"{spec.name}: downloaded to {path} (sha256 verified)")
    except ClinenvError as err:
        raise CLIError(str(err)) from None
    return 0
