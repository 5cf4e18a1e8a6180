"""The ``clinenv`` command line.

Usage::

    clinenv run [--env ID|auto] [--doctor scripted] [--episodes N] [--repetitions R]
                [--seed S] [--out FILE] [--resume] [--data-dir DIR] [--allow-download]
                [--quiet]
    clinenv data list [--data-dir DIR]
    clinenv data verify [NAME ...] [--data-dir DIR]
    clinenv data download NAME
    clinenv eval RUN.jsonl [LABEL=RUN.jsonl ...] [--out-dir DIR] [--plot] [--by STRATUM]
                [--resamples N] [--seed S]
    clinenv compare BASE.jsonl METHOD.jsonl [METHOD2.jsonl ...] [--pair METHOD=BASE ...]
                [--by STRATUM] [--resamples N] [--flips N] [--seed S] [--intersect]
                [--out-dir DIR] [--plot]

``python -m clinenv`` is the same program. ``clinenv run`` prints a note on the chosen
environment (``env: ID (why)``), a progress bar on a terminal, and the summary;
``--quiet`` keeps only the summary. Nothing is created (not even the ``runs/`` folder of
the default ``--out``) until every argument has been checked.

``clinenv eval`` prints the accuracy table (methods × datasets, mean ± SD over
repetitions, coverage; EGIP Table 1) of run logs and writes ``accuracy.md`` /
``accuracy.csv`` (``--by``: also ``accuracy_by_<STRATUM>.md/.csv``; ``--plot``:
``accuracy.png``, and ``accuracy_by_<STRATUM>.png`` with ``--by``) in ``--out-dir``
(default ``reports/``). ``clinenv compare`` pairs every method log with the baseline log
of the same dataset (the baseline is the first log's method label) or, with repeatable
``--pair METHOD=BASE`` (labels), each method with its own baseline; p values are
Holm-adjusted over every comparison of the call. It prints and writes ``comparison.md`` /
``comparison.csv`` (``--by``: also ``comparison_by_<STRATUM>.md/.csv``, one row per
stratum and pair; ``--plot``: ``correction_regression.png``). A log is named
``LABEL=path`` to override (or supply) its ``doctor.name``; see :mod:`clinenv.evaluation`.
Scheduled episodes missing from a log count as not correct, and the tables say how many.

Exit codes: 0 success; 1 ``data verify`` found a present file with a wrong checksum or
record count; 2 bad arguments (including an ``--env`` id that is not an EGIP
environment), a missing or corrupt dataset, a run log that cannot be continued, or an
``--out`` file that would be overwritten; 130 interrupted (Ctrl-C; the
log keeps every finished episode, continue with ``--resume``); 141 stdout closed early
(e.g. piped into ``head``), quietly. Errors are one message on stderr, never a
traceback.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: Environment chosen by ``--env auto`` when the MedQA file resolves, and the fallback.
AUTO_PREFERRED = "EGIP-MedQA-v0"
AUTO_FALLBACK = "EGIP-Demo-v0"


class CLIError(Exception):
    """A user-facing error: printed as ``clinenv: error: <message>``, exit ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


# ------------------------------------------------------------------------- doctors
def _scripted() -> Any:
    from clinenv.agents.scripted_doctor import ScriptedDoctor

    return ScriptedDoctor()


#: ``--doctor`` choices: name -> factory of a fresh policy.
DOCTORS: dict[str, Callable[[], Any]] = {"scripted": _scripted}


# ----------------------------------------------------------------------- arguments
def _count(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``clinenv`` (sub-commands ``run`` and ``data``)."""
    parser = argparse.ArgumentParser(
        prog="clinenv",
        description="Clinical diagnosis cases as EGIP environments: run doctor policies, "
                    "manage datasets and report on run logs.")
    sub = parser.add_subparsers(dest="command", metavar="{run,data,eval,compare}")
    sub.required = True

    run = sub.add_parser("run", help="run a doctor policy over a dataset, writing a run log",
                         description="Run a doctor policy over the first N cases of an EGIP "
                                     "environment, R times each; one JSON line per episode.")
    run.add_argument("--env", default="auto", metavar="ID|auto",
                     help=f"environment id, or 'auto' (default): {AUTO_PREFERRED} when the "
                          f"medqa file resolves, else {AUTO_FALLBACK}")
    run.add_argument("--doctor", default="scripted", choices=sorted(DOCTORS),
                     help="doctor policy (default: scripted)")
    run.add_argument("--episodes", type=_count(1), default=None, metavar="N",
                     help="use the first N cases in dataset order (default: all)")
    run.add_argument("--repetitions", type=_count(1), default=1, metavar="R",
                     help="repetitions per case (default: 1)")
    run.add_argument("--seed", type=_count(0), default=0, metavar="S",
                     help="run seed; episode seeds derive from it (default: 0)")
    run.add_argument("--out", type=Path, default=None, metavar="FILE",
                     help="run log (JSON Lines); must be new or empty unless --resume "
                          "(default: runs/<env id>_<doctor>_seed<S>.jsonl)")
    run.add_argument("--resume", action="store_true",
                     help="continue an existing run log: run only the missing episodes")
    run.add_argument("--data-dir", type=Path, default=None, metavar="DIR",
                     help="folder holding the dataset files (before $CLINENV_DATA_DIR)")
    run.add_argument("--allow-download", action="store_true",
                     help="download a missing public dataset (pinned URL and sha256)")
    run.add_argument("--quiet", action="store_true",
                     help="print only the summary: no environment note, progress bar or notes")
    run.set_defaults(func=cmd_run)

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
    _add_eval_parsers(sub)
    return parser


def _add_eval_parsers(sub: Any) -> None:
    """The ``eval`` and ``compare`` sub-commands."""
    logs_help = "run log (JSON Lines from clinenv run); LABEL=path names its method"
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out-dir", type=Path, default=Path("reports"), metavar="DIR",
                        help="folder for the Markdown, CSV and PNG files (default: reports)")
    common.add_argument("--plot", action="store_true",
                        help="also write PNG figures (needs matplotlib: "
                             "pip install 'clinenv[plot]')")
    common.add_argument("--resamples", type=_count(1), default=10_000, metavar="N",
                        help="case-cluster bootstrap resamples of the CIs (eval: of the "
                             "--plot error bars; default: 10000)")
    common.add_argument("--seed", type=_count(0), default=0, metavar="S",
                        help="seed of the bootstrap and randomization streams (default: 0)")

    ev = sub.add_parser("eval", parents=[common],
                        help="accuracy table (methods x datasets) of run logs",
                        description="Accuracy mean +/- SD over repetitions and answer "
                                    "coverage, methods x datasets (EGIP Table 1).")
    ev.add_argument("logs", nargs="+", metavar="RUN.jsonl", help=logs_help)
    ev.add_argument("--by", default=None, metavar="STRATUM",
                    help="also report per stratum of this case_strata key "
                         "(e.g. question_type; with --plot also plotted)")
    ev.add_argument("--similarity", choices=sorted(SIMILARITY_ENCODERS), default=None,
                    help="add answer-reference similarity columns (CDEG 'Sim.'); "
                         "'lexical' is a hashing bag-of-words stand-in, not a clinical "
                         "encoder (model encoders come with the embeddings layer)")
    ev.set_defaults(func=cmd_eval)

    cmp = sub.add_parser("compare", parents=[common],
                         help="paired comparisons of methods against a baseline",
                         description="Paired differences with case-cluster bootstrap CIs, "
                                     "Holm-adjusted sign-flip p values, unscored counts, "
                                     "correction and regression (EGIP Tables 5/8, CDEG "
                                     "Table 2). The first log's method is the baseline; "
                                     "each other log is compared with the baseline log of "
                                     "its dataset.")
    cmp.add_argument("base", metavar="BASE.jsonl",
                     help="the baseline's run log; LABEL=path names its method, and every "
                          "log with that label is the baseline of its dataset")
    cmp.add_argument("methods", nargs="*", metavar="METHOD.jsonl",
                     help=logs_help + "; compared with the baseline of its dataset")
    cmp.add_argument("--pair", action="append", default=None, metavar="METHOD=BASE",
                     help="compare the runs labelled METHOD with those labelled BASE "
                          "(repeatable, e.g. one pair per framework); without it every "
                          "log is compared with the first log's label")
    cmp.add_argument("--by", default=None, metavar="STRATUM",
                     help="also compare per stratum of this case_strata key "
                          "(e.g. question_type; EGIP Table 7)")
    cmp.add_argument("--flips", type=_count(1), default=20_000, metavar="N",
                     help="sign-flip randomizations per comparison (default: 20000)")
    cmp.add_argument("--intersect", action="store_true",
                     help="compare the cases both logs hold instead of refusing different "
                          "case sets")
    cmp.set_defaults(func=cmd_compare)


# ----------------------------------------------------------------------------- run
def choose_env(requested: str, data_dir: Path | None, allow_download: bool) -> tuple[str, str]:
    """The environment id to run and why it was chosen.

    Args:
        requested: an environment id or ``"auto"``.
        data_dir: ``--data-dir``.
        allow_download: ``--allow-download`` (``auto`` may then download MedQA).

    Returns:
        ``(env_id, reason)``.

    Raises:
        CLIError: an unknown id, an id registered by another package whose entry point is
            not an EGIP environment class, or (``auto``) a MedQA file with a wrong checksum.
    """
    import gymnasium as gym

    from clinenv.datasets import resolve_dataset
    from clinenv.errors import ChecksumError, DatasetNotFoundError
    from clinenv.registration import EGIP_IDS

    if requested != "auto":
        if requested not in gym.registry:
            raise CLIError(f"unknown environment id {requested!r}; {_ids_hint()}")
        _reject_foreign_entry_point(requested)
        return requested, "requested with --env"
    dataset = EGIP_IDS[AUTO_PREFERRED]
    try:
        path = resolve_dataset(dataset, data_dir, allow_download=allow_download)
    except DatasetNotFoundError:
        return AUTO_FALLBACK, (f"--env auto: dataset {dataset!r} not found (set "
                               "CLINENV_DATA_DIR or run `clinenv data download medqa`), "
                               "so the bundled demo set is used")
    except ChecksumError as err:
        raise CLIError(f"--env auto: {err}") from None
    return AUTO_PREFERRED, f"--env auto: dataset {dataset!r} found at {path}"


def _ids_hint() -> str:
    from clinenv.registration import EGIP_IDS

    return "clinenv ids: " + ", ".join(EGIP_IDS) + " (or 'auto')"


def _not_egip(env_id: str) -> CLIError:
    return CLIError(f"{env_id!r} is not an EGIP environment; {_ids_hint()}")


def _reject_foreign_entry_point(env_id: str) -> None:
    """Refuse, without making it, an id whose entry point is a class other than EGIPEnv.

    Making a foreign environment would pass it clinenv's keyword arguments and could fail
    in arbitrary ways; entry points that are factory functions are checked after
    ``gym.make`` instead (:func:`_make_env`).
    """
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    from clinenv.env import EGIPEnv

    entry_point = gym.spec(env_id).entry_point
    try:
        creator = (load_env_creator(entry_point) if isinstance(entry_point, str)
                   else entry_point)
    except Exception:  # a foreign module that does not import (missing extra...)
        creator = None
    if creator is None or (isinstance(creator, type) and not issubclass(creator, EGIPEnv)):
        raise _not_egip(env_id)


def _make_env(env_id: str, data_dir: Path | None, allow_download: bool) -> Any:
    """``gym.make(env_id)`` with the data options; refuses a non-EGIP environment."""
    import gymnasium as gym

    from clinenv.env import EGIPEnv
    from clinenv.errors import ClinenvError

    kwargs: dict[str, Any] = {}
    if data_dir is not None:
        kwargs["data_dir"] = str(data_dir)
    if allow_download:
        kwargs["allow_download"] = True
    try:
        env = gym.make(env_id, **kwargs)
    except ClinenvError as err:
        raise CLIError(str(err)) from None
    except gym.error.Error as err:
        raise CLIError(f"cannot make {env_id!r}: {err}") from None
    if not isinstance(env.unwrapped, EGIPEnv):
        env.close()
        raise _not_egip(env_id)
    return env


def _fmt_pct(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.2f} %"


def _fmt_num(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.2f}"


def format_summary(summary: dict[str, Any], *, title: str) -> str:
    """Plain-ASCII text of a :func:`clinenv.rollouts.summarize` result."""
    lines = [
        title,
        f"  scheduled   {summary['n_scheduled']}",
        f"  accuracy    {_fmt_pct(summary['accuracy'])}  ({summary['n_correct']} correct, "
        f"{summary['n_wrong']} wrong, {summary['n_unscored']} unscored or missing)",
        f"  coverage    {_fmt_pct(summary['coverage'])}",
        f"  mean turns  {_fmt_num(summary['mean_turns'])}",
        f"  mean exams  {_fmt_num(summary['mean_exams'])}",
    ]
    reps = summary["repetitions"]
    if len(reps) >= 2:
        per = ", ".join(f"{v['accuracy']:.2f}" for v in reps.values())
        lines.append(f"  accuracy over {len(reps)} repetitions: "
                     f"{_fmt_num(summary['accuracy_mean'])} +/- "
                     f"{_fmt_num(summary['accuracy_sd'])} % "
                     f"(mean +/- sample SD; per repetition: {per})")
    return "\n".join(lines)


def cmd_run(args: argparse.Namespace) -> int:
    """``clinenv run``: see the module docstring."""
    from tqdm import tqdm

    from clinenv.rollouts import RunLogError, plan_episodes, run_logged, summarize

    env_id, reason = choose_env(args.env, args.data_dir, args.allow_download)
    out: Path = args.out or Path("runs") / f"{env_id}_{args.doctor}_seed{args.seed}.jsonl"
    if out.is_dir():
        raise CLIError(f"--out {out} is a folder; give a file path")
    if not args.quiet:
        print(f"env: {env_id} ({reason})", flush=True)
    env = _make_env(env_id, args.data_dir, args.allow_download)
    try:
        plan_episodes(len(env.unwrapped.pool.cases), args.episodes, args.repetitions,
                      args.seed)
    except ValueError as err:
        env.close()
        raise CLIError(f"{env_id}: {err}") from None
    doctor = DOCTORS[args.doctor]()
    bar: Any = None

    def start(n_todo: int) -> None:
        nonlocal bar
        bar = tqdm(total=n_todo, desc=env_id, unit="ep", file=sys.stderr,
                   disable=args.quiet or not sys.stderr.isatty())

    # run_logged checks --out (a non-empty file needs --resume) before it writes, and
    # creates the folder of --out only when it starts writing
    try:
        result = run_logged(env, doctor, out=out, seed=args.seed, episodes=args.episodes,
                            repetitions=args.repetitions, resume=args.resume, env_id=env_id,
                            progress=lambda _line: bar.update(1), on_start=start)
    except RunLogError as err:
        raise CLIError(str(err)) from None
    except OSError as err:  # errno None: run_logged's FileExistsError for a non-empty --out
        raise CLIError(str(err) if err.errno is None else f"--out {out}: {err}") from None
    finally:
        if bar is not None:
            bar.close()
        env.close()
    if result.partial_bytes and not args.quiet:
        print(f"note: {out}: cut off a partial last line ({result.partial_bytes} bytes) "
              "left by an interrupted run", file=sys.stderr)
    if result.n_extra and not args.quiet:
        print(f"note: {out} also holds {result.n_extra} episode(s) outside this schedule; "
              "they are not in the summary", file=sys.stderr)
    summary = summarize(result.lines, plan=result.plan)
    n_cases = len({i for i, _, _ in result.plan})
    title = (f"{env_id} | doctor {doctor.name} | seed {args.seed} | {n_cases} cases x "
             f"{args.repetitions} repetition(s) | {result.n_new} run now, "
             f"{result.n_resumed} resumed")
    print(format_summary(summary, title=title))
    print(f"  log         {out}")
    return 0


# ---------------------------------------------------------------------------- data
def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)


def cmd_data_list(args: argparse.Namespace) -> int:
    """``clinenv data list``: name, file, expected records, where found, checksum."""
    from clinenv.datasets import DATASETS, resolve_dataset, sha256_file
    from clinenv.errors import ClinenvError

    rows = [("name", "file", "records", "found", "sha256")]
    for name, spec in DATASETS.items():
        try:
            path = resolve_dataset(name, args.data_dir, verify=False)
        except ClinenvError:
            where, sha = "absent", "-"
        else:
            where = str(path)
            if spec.sha256 is None:
                sha = "not pinned"
            else:
                sha = "ok" if sha256_file(path) == spec.sha256 else "MISMATCH"
        expected = "-" if spec.n_records is None else str(spec.n_records)
        rows.append((name, spec.file_name, expected, where, sha))
    print(_table(rows))
    return 0


def cmd_data_verify(args: argparse.Namespace) -> int:
    """``clinenv data verify``: exit 1 when a present file fails its checks."""
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
    return 1 if failed else 0


def cmd_data_download(args: argparse.Namespace) -> int:
    """``clinenv data download NAME``: fetch a public dataset into the user cache."""
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


# ------------------------------------------------------------------ eval, compare
def _load_runs(logs: Sequence[str], plot: bool) -> list[Any]:
    """Runs of the logs (notes on stderr for partial last lines); checks --plot first."""
    from clinenv.errors import ClinenvError
    from clinenv.evaluation.runs import load_runs

    if plot:
        from clinenv.evaluation.plots import require_matplotlib

        try:
            require_matplotlib()
        except ClinenvError as err:
            raise CLIError(f"--plot: {err}") from None
    try:
        runs = load_runs(logs)
    except ClinenvError as err:
        raise CLIError(str(err)) from None
    for run in runs:
        if run.partial_bytes:
            print(f"note: {', '.join(run.paths)}: skipped a partial last line "
                  f"({run.partial_bytes} bytes) left by an interrupted run", file=sys.stderr)
    return runs


def _check_by(by: str | None) -> None:
    if by is not None and not by.strip():
        raise CLIError("--by needs a case_strata key, e.g. --by question_type")


def _stem(prefix: str, by: str) -> str:
    return prefix + "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in by)


def _written(paths: Sequence[Path]) -> None:
    print("wrote " + ", ".join(str(p) for p in paths))


def _lexical_encoder() -> tuple[Any, str]:
    from clinenv.evaluation.metrics import HashingEncoder

    return HashingEncoder(), "lexical similarity"


#: ``--similarity`` choices: name -> factory of ``(encoder, column name)``.
SIMILARITY_ENCODERS: dict[str, Callable[[], tuple[Any, str]]] = {"lexical": _lexical_encoder}


def _show_and_write(tables: Sequence[tuple[str, Any]], out_dir: Path) -> list[Path]:
    """Print each ``(stem, Table)`` and write its Markdown and CSV; the written paths."""
    written: list[Path] = []
    for stem, table in tables:
        print(table.to_text())
        print()
        written += _write(table, out_dir, stem)
    return written


def cmd_eval(args: argparse.Namespace) -> int:
    """``clinenv eval``: see the module docstring."""
    from clinenv.errors import ClinenvError
    from clinenv.evaluation.reports import accuracy_table

    _check_by(args.by)
    runs = _load_runs(args.logs, args.plot)
    try:
        encoder, sim_name = None, "similarity"
        if args.similarity:
            encoder, sim_name = SIMILARITY_ENCODERS[args.similarity]()
        tables = [("accuracy", accuracy_table(runs, encoder=encoder,
                                              similarity_name=sim_name))]
        if args.by is not None:
            tables.append((_stem("accuracy_by_", args.by), accuracy_table(runs, by=args.by)))
    except (ClinenvError, ValueError) as err:
        raise CLIError(str(err)) from None
    written = _show_and_write(tables, args.out_dir)
    if args.plot:
        from clinenv.evaluation.plots import plot_accuracy

        for stem, table in tables:
            written.append(_plot(plot_accuracy, table, args.out_dir / f"{stem}.png",
                                 n_resamples=args.resamples, seed=args.seed))
    _written(written)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """``clinenv compare``: see the module docstring."""
    from clinenv.errors import ClinenvError
    from clinenv.evaluation.comparison import comparison_table, pair_runs

    _check_by(args.by)
    pair_labels = [_parse_pair(text) for text in args.pair or ()]
    if not args.methods and not pair_labels:
        raise CLIError("compare needs a baseline log and at least one method log")
    runs = _load_runs([args.base, *args.methods], args.plot)
    try:
        if pair_labels:
            pairs = pair_runs(runs, pairs=pair_labels)
        else:
            pairs = pair_runs(runs, base_label=runs[0].label)
        options = dict(n_resamples=args.resamples, seed=args.seed, n_flips=args.flips,
                       intersect=args.intersect)
        tables = [("comparison", comparison_table(pairs, **options))]
        if args.by is not None:
            tables.append((_stem("comparison_by_", args.by),
                           comparison_table(pairs, by=args.by, **options)))
    except (ClinenvError, ValueError) as err:
        raise CLIError(str(err)) from None
    written = _show_and_write(tables, args.out_dir)
    if args.plot:
        from clinenv.evaluation.plots import plot_correction_regression

        written.append(_plot(plot_correction_regression, tables[0][1],
                             args.out_dir / "correction_regression.png"))
    _written(written)
    return 0


def _parse_pair(text: str) -> tuple[str, str]:
    method, sep, base = text.partition("=")
    if not sep or not method.strip() or not base.strip():
        raise CLIError(f"--pair {text!r}: expected METHOD=BASE (two method labels)")
    return method.strip(), base.strip()


def _write(table: Any, out_dir: Path, stem: str) -> list[Path]:
    try:
        return list(table.write(out_dir, stem))
    except OSError as err:
        raise CLIError(f"--out-dir {out_dir}: {err}") from None


def _plot(func: Callable[..., Any], table: Any, path: Path, **kwargs: Any) -> Path:
    try:
        func(table, path, **kwargs)
    except OSError as err:
        raise CLIError(f"--out-dir {path.parent}: {err}") from None
    return path


# ---------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``clinenv`` command line.

    Args:
        argv: arguments without the program name (default: ``sys.argv[1:]``).

    Returns:
        The exit code (see the module docstring). argparse errors exit 2 via
        ``SystemExit``.
    """
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except CLIError as err:
        print(f"clinenv: error: {err}", file=sys.stderr)
        return err.code
    except BrokenPipeError:
        # the reader (e.g. ``head``) closed stdout: stop quietly, and keep Python's exit
        # flush from raising again
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141
    except KeyboardInterrupt:
        print("clinenv: interrupted; finished episodes are in the log, continue with "
              "--resume", file=sys.stderr)
        return 130
