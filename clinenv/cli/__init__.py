"""The ``clinenv`` command line.

This module holds the top-level parser and :func:`main`; each command lives in its own
module of this package. Outputs, method labels and exit codes: docs/cli.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from clinenv.cli.audit import add_audit_parser
from clinenv.cli.cdeg import add_cdeg_parser
from clinenv.cli.data import add_data_parser, cmd_data_download, cmd_data_list, cmd_data_verify
from clinenv.cli.doctors import DOCTOR_CHOICES, DOCTORS
from clinenv.cli.env_choice import AUTO_FALLBACK, AUTO_PREFERRED, choose_env
from clinenv.cli.errors import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_RUN_ERRORS,
    EXIT_USAGE,
    EXIT_VERIFY_FAILED,
    CLIError,
)
from clinenv.cli.evaluate import SIMILARITY_ENCODERS, add_eval_parsers, cmd_compare, cmd_eval
from clinenv.cli.export import add_export_parser
from clinenv.cli.llm_setup import BACKENDS, LLMConfig, LLMSeats, check_llm_config, llm_config
from clinenv.cli.parser import CLIParser
from clinenv.cli.replay import add_replay_parser
from clinenv.cli.report import add_report_parser
from clinenv.cli.run import MESSAGE_CHARS, aborted_message, add_run_parser, cmd_run
from clinenv.cli.run_summary import format_llm_totals, format_summary
from clinenv.cli.serve import add_serve_parser

__all__ = [
    "AUTO_FALLBACK", "AUTO_PREFERRED", "BACKENDS", "DOCTORS", "DOCTOR_CHOICES",
    "EXIT_BROKEN_PIPE", "EXIT_INTERRUPTED", "EXIT_RUN_ERRORS", "EXIT_USAGE",
    "EXIT_VERIFY_FAILED", "MESSAGE_CHARS", "SIMILARITY_ENCODERS", "CLIError", "LLMConfig",
    "LLMSeats", "aborted_message", "build_parser", "check_llm_config", "choose_env", "cmd_compare",
    "cmd_data_download", "cmd_data_list", "cmd_data_verify", "cmd_eval", "cmd_run",
    "format_llm_totals", "format_summary", "llm_config", "main",
]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``clinenv`` (sub-commands ``run``, ``replay``, ``data``,
    ``eval``, ``compare``, ``cdeg``, ``export``, ``report``, ``audit``); each parsed
    namespace carries the command's handler as ``func``. It and every sub-parser are
    :class:`~clinenv.cli.parser.CLIParser`: no option abbreviations, and an argument
    error is one line plus where help is (exit 2)."""
    parser = CLIParser(
        prog="clinenv",
        description="Clinical diagnosis cases as EGIP environments: run doctor policies, "
                    "manage datasets and report on run logs.")
    from clinenv import __version__

    parser.add_argument("--version", action="version", version=f"clinenv {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=CLIParser,
                                metavar="{run,replay,data,eval,compare,cdeg,export,report,audit,serve}")
    sub.required = True
    add_run_parser(sub)
    add_replay_parser(sub)
    add_data_parser(sub)
    add_eval_parsers(sub)
    add_cdeg_parser(sub)
    add_export_parser(sub)
    add_report_parser(sub)
    add_audit_parser(sub)
    add_serve_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``clinenv`` command line.

    Args:
        argv: arguments without the program name (default: ``sys.argv[1:]``).

    Returns:
        The exit code (:mod:`clinenv.cli.errors`). argparse errors exit 2 via
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
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        print("clinenv: interrupted; finished episodes are in the log, continue with "
              "--resume", file=sys.stderr)
        return EXIT_INTERRUPTED
