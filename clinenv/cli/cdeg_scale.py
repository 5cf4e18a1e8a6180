"""``clinenv cdeg scale``: CDEG's experience-scaling curve (CDEG Figure 3) in one command.

Exit codes: 0 the table was written; 2 bad options, a held-out overlap, or a failed build
or run (named). Its steps, files and ``--run-args`` rules: docs/cdeg.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from clinenv.cli.argtypes import count
from clinenv.cli.errors import CLIError

__all__ = ["add_scale_parser", "cmd_cdeg_scale", "parse_fractions"]

#: Default fractions (CDEG Figure 3).
DEFAULT_FRACTIONS = (0.1, 0.5, 1.0)
_RUN_OWN = ("--cases", "--out", "--cdeg", "--episodes", "--resume")
_BUILD_OWN = ("--out", "--force", "--allow-privileged")


def parse_fractions(text: str) -> tuple[float, ...]:
    """argparse type: comma-separated fractions in (0, 1], ascending once parsed."""
    from clinenv.wrappers.cdeg.scaling import check_fractions

    try:
        return check_fractions(float(x) for x in text.split(",") if x.strip())
    except ValueError as err:
        raise argparse.ArgumentTypeError(
            f"expected fractions in (0, 1] separated by commas, got {text!r} "
            f"({err})") from None


def add_scale_parser(inner: Any, build: argparse.ArgumentParser) -> None:
    """Add ``scale`` to the ``cdeg`` sub-commands ``inner``; ``build`` is the parser of
    ``cdeg build`` (each subset's graph is built with it)."""
    scale = inner.add_parser("scale", help="experience-scaling curve (CDEG Figure 3)",
                             description="Build graphs from nested shares of the "
                                         "construction cases and evaluate each on the "
                                         "same held-out cases.")
    scale.add_argument("logs", nargs="+", type=Path, metavar="RUN.jsonl",
                       help="construction run logs (K repetitions per case)")
    scale.add_argument("--eval-cases", type=Path, required=True, metavar="FILE",
                       help="held-out evaluation case list (e.g. evaluation.txt of "
                            "`clinenv data split`)")
    scale.add_argument("--fractions", type=parse_fractions, default=DEFAULT_FRACTIONS,
                       metavar="F,F,...", help="shares of the construction cases "
                                               "(default: 0.1,0.5,1.0)")
    scale.add_argument("--seed", type=count(0), default=0, metavar="S",
                       help="seed of the subset order (default: 0)")
    scale.add_argument("--out-dir", type=Path, default=Path("runs/scale"), metavar="DIR",
                       help="folder of the logs, graphs and table (default: runs/scale)")
    scale.add_argument("--force", action="store_true",
                       help="overwrite the files of an earlier study in --out-dir")
    scale.add_argument("--run-args", default="", metavar="'ARGS'",
                       help="options of each `clinenv run` (--env, --doctor, --cdeg-*...)")
    scale.add_argument("--build-args", default="", metavar="'ARGS'",
                       help="options of each `clinenv cdeg build`")
    scale.add_argument("--plot", action="store_true", help="also write scaling.png")
    scale.add_argument("--allow-privileged", action="store_true",
                       help="build graphs from logs of a privileged doctor too (the teacher "
                            "saw Y: such a graph is learned from the answer)")
    scale.add_argument("--resamples", type=count(100), default=2000, metavar="N",
                       help="bootstrap resamples of the Δ interval (default: 2000)")
    scale.set_defaults(func=cmd_cdeg_scale, build_parser=build)


def _split(text: str, option: str, own: tuple[str, ...]) -> list[str]:
    try:
        words = shlex.split(text)
    except ValueError as err:
        raise CLIError(f"{option}: {err}") from None
    for word in words:
        name = word.split("=", 1)[0]
        if name in own:
            raise CLIError(f"{option}: {name} is set by `clinenv cdeg scale` itself")
    return words


def _pct(fraction: float) -> str:
    return f"{100 * fraction:g}"


def _check(args: argparse.Namespace) -> tuple[list[str], list[str], Any]:
    from clinenv.case_list import CaseListError, read_case_list

    run_args = _split(args.run_args, "--run-args", _RUN_OWN)
    build_args = _split(args.build_args, "--build-args", _BUILD_OWN)
    for path in args.logs:
        if not path.is_file():
            raise CLIError(f"{path}: no such run log")
    try:
        evaluation = read_case_list(args.eval_cases)
    except (OSError, CaseListError) as err:
        raise CLIError(f"--eval-cases {args.eval_cases}: {err}") from None
    out = args.out_dir
    if out.exists() and not out.is_dir():
        raise CLIError(f"--out-dir {out} is a file")
    if out.is_dir() and any(out.iterdir()) and not args.force:
        raise CLIError(f"--out-dir {out} is not empty; use --force to overwrite the files "
                       "of an earlier study")
    return run_args, build_args, evaluation


def _run_parser() -> argparse.ArgumentParser:
    """A parser of ``clinenv run`` alone (the command's own, :mod:`clinenv.cli.run`)."""
    from clinenv.cli.parser import CLIParser
    from clinenv.cli.run import add_run_parser

    parser = CLIParser(prog="clinenv")  # no abbreviations, as the command's own parser
    add_run_parser(parser.add_subparsers(dest="command"))
    return parser


def _sub(parser: argparse.ArgumentParser, argv: list[str], log: Any, what: str,
         ok: tuple[int, ...] = (0,)) -> int:
    """Run one sub-command with its stdout in ``log``; its exit code.

    Raises:
        CLIError: its options are refused (argparse's message is on stderr), it raises
            a CLIError, or it exits with a code outside ``ok``.
    """
    shown = f"clinenv {shlex.join(argv)}"
    log.write(f"$ {shown}\n")
    log.flush()
    with contextlib.redirect_stdout(log):
        try:
            args = parser.parse_args(argv)
        except SystemExit:
            raise CLIError(f"{what}: options refused: {shown}") from None
        try:
            code = int(args.func(args))
        except CLIError as err:
            raise CLIError(f"{what} failed: {err}") from None
    if code not in ok:
        raise CLIError(f"{what} failed (exit {code}): {shown}")
    return code


def cmd_cdeg_scale(args: argparse.Namespace) -> int:
    """``clinenv cdeg scale`` (docs/cdeg.md)."""
    from clinenv.evaluation.metrics import HashingEncoder
    from clinenv.evaluation.plots import PlotDependencyError
    from clinenv.runlog import RunLogError, check_privileged, read_run_log
    from clinenv.runlog_lock import RunLogLock
    from clinenv.wrappers.cdeg.graph import CDEGraph
    from clinenv.wrappers.cdeg.scaling import (
        log_cases,
        nested_subsets,
        plot_scaling,
        scale_point,
        scaling_table,
        write_subset_log,
    )

    run_args, build_args, evaluation = _check(args)
    if args.allow_privileged:
        build_args = [*build_args, "--allow-privileged"]
    try:
        for path in args.logs:  # before anything is written (cdeg build's own check)
            if Path(path).is_file():
                check_privileged(read_run_log(path), allow=args.allow_privileged,
                                 why="a CDEG graph learned from it is learned from the answer")
        construction = log_cases(args.logs)
        subsets = nested_subsets(construction, args.fractions, args.seed)
    except (RunLogError, ValueError, OSError) as err:
        raise CLIError(str(err)) from None
    held_out = set(evaluation.case_ids)
    both = [c for _, c in construction if c in held_out]
    if both:
        raise CLIError(f"--eval-cases {args.eval_cases}: {len(both)} evaluation case(s) are "
                       f"construction cases of the logs ({', '.join(both[:5])}); evaluate "
                       "on held-out cases (`clinenv data split`)")
    out = args.out_dir
    eval_list = str(args.eval_cases)
    runs = {"vanilla": out / "vanilla.jsonl"}
    runs.update({_pct(f): out / f"cdeg-{_pct(f)}.jsonl" for f in subsets})
    written = [*runs.values(), *(out / f"construct-{_pct(f)}.jsonl" for f in subsets)]
    inputs = {os.path.realpath(p) for p in args.logs}
    clash = [str(p) for p in written if os.path.realpath(p) in inputs]
    if clash:
        raise CLIError(f"--out-dir {out}: {', '.join(clash)} would overwrite an input log; "
                       "give the study another --out-dir")
    out.mkdir(parents=True, exist_ok=True)
    for path in runs.values():  # --force: clinenv run refuses a non-empty --out
        try:
            with RunLogLock(path):  # never a log that a run is writing
                path.unlink(missing_ok=True)
        except RunLogError as err:
            raise CLIError(str(err)) from None
    points = []
    with (out / "scale.log").open("w", encoding="utf-8") as log:
        graphs = {}
        for f, cases in subsets.items():
            sub_log = out / f"construct-{_pct(f)}.jsonl"
            try:
                write_subset_log(args.logs, cases, sub_log)
            except (RunLogError, ValueError) as err:
                raise CLIError(str(err)) from None
            graph = out / f"graph-{_pct(f)}.cdeg.json"
            _sub(args.build_parser, [str(sub_log), "--out", str(graph), "--force",
                                     "--quiet", *build_args],
                 log, f"cdeg build of the {_pct(f)} % subset", ok=(0, 1))
            graphs[f] = graph
        run = _run_parser()
        base = ["run", "--quiet", *run_args, "--cases", eval_list]
        _sub(run, [*base, "--out", str(runs["vanilla"])], log, "the vanilla run")
        for f, graph in graphs.items():
            _sub(run, [*base, "--cdeg", str(graph), "--out", str(runs[_pct(f)])], log,
                 f"the run with the {_pct(f)} % graph")
    encoder = HashingEncoder()
    for f, graph in graphs.items():
        try:
            points.append(scale_point(f, CDEGraph.load(graph), runs["vanilla"],
                                      runs[_pct(f)], encoder=encoder,
                                      n_resamples=args.resamples, seed=args.seed))
        except (RunLogError, ValueError, OSError) as err:  # e.g. runs that do not pair
            raise CLIError(f"the {_pct(f)} % point: {err}") from None
    table = scaling_table(points, similarity_name="lexical hashing encoder")
    print(table.to_text())
    md, csv = table.write(out, "scaling")
    print(f"  table  {md}, {csv}")
    if args.plot:
        try:
            print(f"  figure {plot_scaling(points, out / 'scaling.png')}")
        except PlotDependencyError as err:
            print(f"warning: {err}", file=sys.stderr)
    return 0
