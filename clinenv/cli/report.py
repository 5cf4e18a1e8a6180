"""``clinenv report LOGS... [--out report.html]``: one self-contained HTML page of runs.

The page is :mod:`clinenv.report` (docs/report.md); MIMIC-IV episodes need
``--allow-credentialed``, and an existing ``--out`` is replaced (docs/cli.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any

from clinenv.cli.argtypes import count
from clinenv.cli.errors import CLIError
from clinenv.cli.outputs import check_out_file, replaced_line
from clinenv.errors import install_hint

#: Default ``--out``, beside ``clinenv eval``'s tables.
DEFAULT_OUT = Path("reports") / "report.html"


def add_report_parser(sub: Any) -> None:
    """Add the ``report`` sub-command to ``sub`` (the top-level parser's sub-parsers)."""
    rep = sub.add_parser(
        "report", help="one self-contained HTML page: tables, figures and every episode",
        description="An HTML report of run logs: the accuracy table with CIs and coverage, "
                    "the paired comparisons, the reward components with CIs and the "
                    "figures, every episode's transcript, evidence interface, answer, "
                    "verdict and reward components, and the same case under two "
                    "methods side by side. No server or network is needed to view it.")
    rep.add_argument("logs", nargs="+", metavar="RUN.jsonl",
                     help="run log (JSON Lines from clinenv run); LABEL=path names its "
                          "method; the first log's method is the comparisons' baseline")
    rep.add_argument("--out", type=Path, default=DEFAULT_OUT, metavar="FILE",
                     help=f"the HTML file to write (default: {DEFAULT_OUT}); an earlier "
                          "one is replaced")
    rep.add_argument("--pair", action="append", default=None, metavar="METHOD=BASE",
                     help="compare the runs labelled METHOD with those labelled BASE "
                          "(repeatable); default: every log against the first log's label")
    rep.add_argument("--intersect", action="store_true",
                     help="compare the cases both logs of a pair hold instead of refusing "
                          "different case sets")
    rep.add_argument("--resamples", type=count(1), default=10_000, metavar="N",
                     help="case-cluster bootstrap resamples (default: 10000)")
    rep.add_argument("--flips", type=count(1), default=20_000, metavar="N",
                     help="sign-flip randomizations per comparison (default: 20000)")
    rep.add_argument("--seed", type=count(0), default=0, metavar="S",
                     help="seed of the bootstrap and randomization streams (default: 0)")
    rep.add_argument("--mixed-scoring", action="store_true",
                     help="pool or pair logs scored under different scoring versions")
    rep.add_argument("--no-figures", action="store_true",
                     help="leave the figures out (no matplotlib needed)")
    rep.add_argument("--allow-credentialed", action="store_true",
                     help="also write MIMIC-IV episodes (bound by its data-use agreement: "
                          "never publish the report)")
    rep.add_argument("--allow-privileged", action="store_true",
                     help="report logs of a privileged doctor (privileged: true, e.g. "
                          "--doctor teacher, which saw the target; refused by default)")
    rep.set_defaults(func=cmd_report)


def _parse_pair(text: str) -> tuple[str, str]:
    method, sep, base = text.partition("=")
    if not sep or not method.strip() or not base.strip():
        raise CLIError(f"--pair {text!r}: expected METHOD=BASE (two method labels)")
    return method.strip(), base.strip()


def cmd_report(args: argparse.Namespace) -> int:
    """``clinenv report``; prints ``wrote FILE (N episodes, R runs, P compared pairs,
    SIZE MB)`` and returns 0.

    Raises:
        CLIError: a folder as ``--out``, a malformed ``--pair``, a log that cannot be
            evaluated (as ``eval``), credentialed lines without ``--allow-credentialed``,
            a matplotlib that is installed but cannot be imported, or an ``--out`` that
            cannot be written or holds a run log (checked before any work). Without
            matplotlib the page is written without figures, with a warning.
    """
    from clinenv.errors import ClinenvError
    from clinenv.evaluation.plots import PlotDependencyError
    from clinenv.report import build_report, write_report

    out: Path = args.out
    if out.is_dir():
        raise CLIError(f"--out {out} is a folder; give a file path such as {out / 'report.html'}")
    check_out_file(out)
    pairs = [_parse_pair(text) for text in args.pair or ()]
    with_figures = not args.no_figures
    if with_figures and importlib.util.find_spec("matplotlib") is None:
        with_figures = False
        print("clinenv: warning: the report is written without figures: they need "
              f"matplotlib ({install_hint('plot')}); --no-figures silences this",
              file=sys.stderr)
    try:
        report = build_report(args.logs, pairs=pairs or None, intersect=args.intersect,
                              n_resamples=args.resamples, n_flips=args.flips,
                              seed=args.seed, mixed_scoring=args.mixed_scoring,
                              allow_credentialed=args.allow_credentialed,
                              with_figures=with_figures,
                              allow_privileged=args.allow_privileged)
    except PlotDependencyError as err:  # matplotlib found but not importable
        raise CLIError(f"{err}; or pass --no-figures for a report without figures"
                       ) from None
    except (ClinenvError, ValueError) as err:
        raise CLIError(str(err)) from None
    for warning in report.warnings:
        print(f"clinenv: warning: {warning}", file=sys.stderr)
    existed = out.is_file()
    try:
        path = write_report(report, out)
    except OSError as err:
        raise CLIError(f"--out {out}: {err.strerror or err}") from None
    size = path.stat().st_size / 1e6
    print(f"wrote {path} ({report.n_episodes} episodes, {report.n_runs} runs, "
          f"{report.n_pairs} compared pairs, {size:.2f} MB)")
    if existed:
        print(replaced_line(1, path.parent))
    return 0
