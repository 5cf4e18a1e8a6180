"""``clinenv data list | verify | download | split | difficulty | dedupe``: the dataset
files, their checks, held-out case lists, case difficulty for curricula, and the repair
of a run log holding an episode twice.

``verify`` and ``difficulty --check`` exit 1 on a mismatch; existing outputs are kept
unless ``--force``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clinenv.cli.argtypes import count
from clinenv.cli.errors import EXIT_VERIFY_FAILED, CLIError


def add_data_parser(sub: Any) -> None:
    """Add the ``data`` sub-command (``list``, ``verify``, ``download``, ``split``,
    ``difficulty``, ``dedupe``) to ``sub``."""
    data = sub.add_parser("data", help="list, verify, download or split datasets; repair "
                                       "run logs")
    dsub = data.add_subparsers(dest="data_command",
                               metavar="{list,verify,download,split,difficulty,dedupe}")
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
    dsplit = dsub.add_parser("split", help="write disjoint construction / evaluation case "
                                           "lists (held-out CDEG and baseline runs)")
    dsplit.add_argument("dataset", metavar="DATASET",
                        help="a dataset name (clinenv data list) or a case file")
    dsplit.add_argument("--construction", type=fraction, required=True, metavar="FRAC",
                        help="share of the cases for construction, in (0, 1); "
                             "near-duplicate cases stay on one side")
    dsplit.add_argument("--seed", type=count(0), default=0, metavar="S",
                        help="split seed (default: 0); the same seed gives the same lists")
    dsplit.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="folder for construction.txt, evaluation.txt and split.json")
    dsplit.add_argument("--force", action="store_true", help="overwrite existing lists")
    dsplit.add_argument("--data-dir", type=Path, default=None, metavar="DIR")
    dsplit.add_argument("--allow-download", action="store_true",
                        help="download a missing public dataset (pinned URL and sha256)")
    dsplit.set_defaults(func=cmd_data_split)
    ddiff = dsub.add_parser("difficulty", help="measure case difficulty (the scripted "
                                               "doctor's sampled episodes) for curricula")
    ddiff.add_argument("dataset", metavar="DATASET",
                       help="a dataset name (clinenv data list) or a case file")
    add_difficulty_arguments(ddiff)
    ddiff.add_argument("--out", type=Path, default=None, metavar="FILE",
                       help="write the table (JSON) here")
    ddiff.add_argument("--force", action="store_true", help="overwrite --out")
    ddiff.add_argument("--check", action="store_true",
                       help="compare with the shipped table; exit 1 when they differ")
    ddiff.add_argument("--data-dir", type=Path, default=None, metavar="DIR")
    ddiff.add_argument("--allow-download", action="store_true",
                       help="download a missing public dataset (pinned URL and sha256)")
    ddiff.set_defaults(func=cmd_data_difficulty)
    ddedupe = dsub.add_parser("dedupe", help="repair a run log that holds an episode twice: "
                                             "keep the first line of each episode")
    ddedupe.add_argument("log", type=Path, metavar="LOG", help="the run log (JSON Lines)")
    ddedupe.add_argument("--dry-run", action="store_true",
                         help="say what would be dropped; change nothing")
    ddedupe.set_defaults(func=cmd_data_dedupe)


#: Format tag of the ``split.json`` manifest of ``clinenv data split``.
SPLIT_FORMAT = "clinenv.split/1"
#: File names ``clinenv data split`` writes in ``--out``.
SPLIT_FILES = {"construction": "construction.txt", "evaluation": "evaluation.txt",
               "manifest": "split.json"}


def fraction(text: str) -> float:
    """argparse type of ``--construction``: a number strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}") from None
    if not 0.0 < value < 1.0:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1) (the share of cases "
                                         f"for construction), got {text}")
    return value


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)


def cmd_data_list(args: argparse.Namespace) -> int:
    """``clinenv data list``: name, file, records (the pinned count, or the count of a
    present file without one, e.g. the demo set), where found, checksum."""
    from clinenv.datasets import DATASETS, dataset_mismatch, resolve_dataset, sha256_file
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
            elif sha256_file(path) == spec.sha256:
                sha = "ok"
            else:
                sha = "MISMATCH" if dataset_mismatch(path, spec) else "ok (same records)"
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
        elif result["sha256"] == expected_sha:
            sha = "ok"
        else:
            sha = "ok (same records)" if result["same_records"] else "MISMATCH"
        n, want = result.get("n_records"), result.get("expected_records")
        records = "unparsable" if n is None else (f"{n}" if want is None else f"{n}/{want}")
        status = "ok" if result["ok"] else "FAILED"
        failed |= not result["ok"]
        rows.append((name, status, records, sha, result["path"]))
        if not result["ok"]:
            problems = []
            if sha == "MISMATCH":
                problems.append(f"sha256 {result['sha256']}, expected {expected_sha}"
                                + (f"; {result['difference']}" if result.get("difference")
                                   else ""))
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
    from clinenv.datasets import download_dataset, resolve_dataset
    from clinenv.datasets.registry import get_spec
    from clinenv.errors import ClinenvError, DataDirError, DatasetNotFoundError

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
            print(f"{spec.name}: already available at {path} (records verified)")
        except DataDirError as err:  # $CLINENV_DATA_DIR lacks it: download to the cache
            path = download_dataset(spec.name)
            print(f"{spec.name}: downloaded to {path} (sha256 verified)")
            print(f"note: {err}", file=sys.stderr)
        except DatasetNotFoundError:
            path = resolve_dataset(spec.name, args.data_dir, allow_download=True)
            print(f"{spec.name}: downloaded to {path} (sha256 verified)")
    except ClinenvError as err:
        raise CLIError(str(err)) from None
    return 0


def cmd_data_split(args: argparse.Namespace) -> int:
    """``clinenv data split``: write the two case lists and the manifest
    (:data:`SPLIT_FORMAT`); exit 0.

    Raises:
        CLIError: the dataset cannot be loaded, ``--out`` is a file, a list exists
            without ``--force``, or ``--construction`` leaves one side empty (the
            message names the flag).
    """
    from clinenv.case_list import write_case_list
    from clinenv.datasets import load_cases_with_report, sha256_file
    from clinenv.datasets.case_split import split_cases
    from clinenv.datasets.registry import get_spec
    from clinenv.datasets.resolve import dataset_identity, is_path_like
    from clinenv.errors import ClinenvError

    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise CLIError(f"--out {out} is a file; give a folder for the case lists")
    targets = {k: out / name for k, name in SPLIT_FILES.items()}
    existing = [str(p) for p in targets.values() if p.exists()]
    if existing and not args.force:
        raise CLIError(f"--out {out}: {', '.join(existing)} exist(s); use --force to "
                       "overwrite")
    try:
        cases, report = load_cases_with_report(args.dataset, args.data_dir,
                                               allow_download=args.allow_download)
        # the digest run logs record as dataset_sha256 (clinenv.env.case_pool.CasePool.get)
        identity = dataset_identity(report.path, None if is_path_like(args.dataset)
                                    else get_spec(args.dataset))
    except ClinenvError as err:
        raise CLIError(str(err)) from None
    try:
        split = split_cases(cases, args.construction, args.seed)
    except ValueError as err:
        raise CLIError(f"--construction {args.construction:g}: {err}") from None
    out.mkdir(parents=True, exist_ok=True)
    write_case_list(targets["construction"], split.construction)
    write_case_list(targets["evaluation"], split.evaluation)
    manifest = {
        "format": SPLIT_FORMAT,
        "dataset": cases[0].dataset,
        "dataset_file": Path(report.path).name,
        "dataset_sha256": identity.records_sha256,
        "dataset_file_sha256": identity.file_sha256,
        "construction_fraction": split.fraction,
        "seed": split.seed,
        "counts": {"cases": len(cases), "construction": len(split.construction),
                   "evaluation": len(split.evaluation),
                   "near_duplicate_groups": split.n_duplicate_groups},
        "files": {k: SPLIT_FILES[k] for k in ("construction", "evaluation")},
        "sha256": {k: sha256_file(targets[k]) for k in ("construction", "evaluation")},
    }
    targets["manifest"].write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    print(f"{manifest['dataset']}: {len(cases)} cases -> {len(split.construction)} "
          f"construction ({targets['construction']}), {len(split.evaluation)} evaluation "
          f"({targets['evaluation']}); seed {split.seed}; "
          f"{split.n_duplicate_groups} near-duplicate group(s) kept on one side; manifest "
          f"{targets['manifest']}")
    return 0


def budget_list(text: str) -> tuple[int, ...]:
    """argparse type of ``--exam-budgets``: comma-separated integers >= 0 (``1,2,4,8``)."""
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, e.g. "
                                         f"1,2,4,8, got {text!r}") from None
    if any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"each budget must be >= 0, got {text}")
    return values


def add_difficulty_arguments(parser: Any) -> None:
    """The measurement flags of ``clinenv data difficulty`` (:func:`difficulty_method`)."""
    from clinenv.cli.doctors import exploration
    from clinenv.datasets.difficulty import DifficultyMethod

    default = DifficultyMethod()
    parser.add_argument("--episodes", type=count(1), default=None, metavar="K",
                        help=f"seeded episodes per case (default: {default.episodes})")
    parser.add_argument("--exploration", type=exploration, default=None, metavar="X",
                        help="the scripted doctor's sampling probability, in (0, 1] "
                             f"(default: {default.exploration:g})")
    parser.add_argument("--exam-budgets", type=budget_list, default=None, metavar="B,B..",
                        help="exam budgets cycled over the episodes (default: "
                             f"{','.join(map(str, default.exam_budgets))})")
    parser.add_argument("--seed", type=count(0), default=None, metavar="S",
                        help=f"run seed of the episode seeds (default: {default.seed})")


def difficulty_method(args: argparse.Namespace) -> Any:
    """The :class:`~clinenv.datasets.difficulty.DifficultyMethod` of the parsed flags
    (a flag not given keeps its default).

    Raises:
        CLIError: a value the method refuses (the flag named).
    """
    from pydantic import ValidationError

    from clinenv.datasets.difficulty import DifficultyMethod

    given = {key: getattr(args, key, None)
             for key in ("episodes", "exploration", "exam_budgets", "seed")}
    try:
        return DifficultyMethod(**{k: v for k, v in given.items() if v is not None})
    except ValidationError as err:
        first = err.errors()[0]
        flag = "--" + str(first["loc"][0]).replace("_", "-") if first["loc"] else "--exam-budgets"
        raise CLIError(f"{flag}: {first['msg']}") from None


def cmd_data_difficulty(args: argparse.Namespace) -> int:
    """``clinenv data difficulty``: measure, then write (``--out``) or compare with the
    shipped table (``--check``: exit 1 on a difference); print a summary.

    Raises:
        CLIError: neither ``--out`` nor ``--check``, ``--out`` exists without
            ``--force``, a bad flag value, the dataset cannot be loaded, or ``--check``
            on a dataset with no shipped table.
    """
    import time
    from collections import Counter

    from clinenv.datasets.difficulty import DifficultyError, load_difficulty
    from clinenv.errors import ClinenvError
    from clinenv.integrations.curriculum import measure_difficulty

    if args.out is None and not args.check:
        raise CLIError("clinenv data difficulty: give --out FILE (write the table) or "
                       "--check (compare with the shipped one)")
    if args.out is not None and args.out.exists() and not args.force:
        raise CLIError(f"--out {args.out} exists; use --force to overwrite")
    method = difficulty_method(args)
    shipped = None
    if args.check:
        try:
            shipped = load_difficulty(args.dataset)
        except DifficultyError as err:
            raise CLIError(f"--check: {err}") from None
    start = time.perf_counter()
    try:
        table = measure_difficulty(args.dataset, method, data_dir=args.data_dir,
                                   allow_download=args.allow_download)
    except ClinenvError as err:
        raise CLIError(str(err)) from None
    seconds = time.perf_counter() - start
    counts = Counter(c.difficulty for c in table.cases)
    spread = ", ".join(f"{d:g}: {n}" for d, n in sorted(counts.items()))
    print(f"{table.dataset}: {len(table.cases)} cases x {method.episodes} episodes "
          f"(exploration {method.exploration:g}, exam budgets "
          f"{','.join(map(str, method.exam_budgets))}, seed {method.seed}) in "
          f"{seconds:.1f} s; difficulty -> cases: {spread}; target_in_records: "
          f"{sum(c.target_in_records for c in table.cases)}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table.to_json(), encoding="utf-8")
        print(f"wrote {args.out}")
    if shipped is not None:
        if shipped.to_json() != table.to_json():
            differ = [c.case_id for c, s in zip(table.cases, shipped.cases, strict=False)
                      if c != s]
            print(f"--check: differs from the shipped {args.dataset} table"
                  + (f" (cases {', '.join(differ[:5])}{' ...' if len(differ) > 5 else ''})"
                     if differ else " (header or case count)"), file=sys.stderr)
            return EXIT_VERIFY_FAILED
        print(f"--check: identical to the shipped {args.dataset} table")
    return 0


#: Dropped lines listed one by one at most (the rest are counted).
DEDUPE_LISTED = 5


def cmd_data_dedupe(args: argparse.Namespace) -> int:
    """``clinenv data dedupe LOG``: keep the first line of each episode
    (:func:`clinenv.runlog_dedupe.dedupe_run_log`); say what was dropped and where it went.

    Raises:
        CLIError: no such log, a run is writing it, or a line is not a run-log line.
    """
    from clinenv.runlog import RunLogError
    from clinenv.runlog_dedupe import dedupe_run_log, dropped_path

    try:
        result = dedupe_run_log(args.log, dry_run=args.dry_run)
    except (FileNotFoundError, RunLogError) as err:
        raise CLIError(str(err)) from None
    if not result.dropped:
        print(f"{args.log}: {result.n_lines} line(s), no episode twice; nothing changed")
        return 0
    for d in result.dropped[:DEDUPE_LISTED]:
        print(f"line {d.line}: case {d.key[0]!r} repetition {d.key[1]}, already on line "
              f"{d.kept_line}" + ("" if d.same else " (differs beyond timing and llm)"))
    if len(result.dropped) > DEDUPE_LISTED:
        print(f"... and {len(result.dropped) - DEDUPE_LISTED} more")
    differing = (f"; {result.n_differing} of them differ from the kept line beyond timing "
                 "and llm" if result.n_differing else "")
    if args.dry_run:
        print(f"{args.log}: would drop {len(result.dropped)} of {result.n_lines} line(s) "
              f"and keep {result.n_kept}{differing}; nothing changed (--dry-run)")
    else:
        print(f"{args.log}: dropped {len(result.dropped)} of {result.n_lines} line(s), kept "
              f"{result.n_kept}{differing}; the dropped lines are in "
              f"{result.dropped_path if args.log.is_symlink() else dropped_path(args.log)}")
    return 0
