"""The argument parser class of every ``clinenv`` command and sub-command.

:class:`CLIParser` turns option abbreviations off and reports an argument error in two
lines instead of the usage block (docs/cli.md).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, NoReturn

from clinenv.cli.errors import EXIT_USAGE

__all__ = ["CLIParser", "help_hint"]

#: Namespace attribute naming the innermost parser that parsed the arguments.
_LEAF = "_clinenv_leaf_parser"


def help_hint(prog: str) -> str:
    """``Run 'PROG --help' for usage.``"""
    return f"Run '{prog} --help' for usage."


class CLIParser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` without abbreviations whose errors are one
    line plus a pointer to ``--help`` (docs/cli.md)."""

    def __init__(self, *args: Any, allow_abbrev: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, allow_abbrev=allow_abbrev, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n{help_hint(self.prog)}\n")

    def parse_known_args(self, args: Sequence[str] | None = None,
                         namespace: argparse.Namespace | None = None
                         ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if not hasattr(parsed, _LEAF):  # the innermost sub-parser returns first
            setattr(parsed, _LEAF, self)
        return parsed, extras

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        leaf = vars(parsed).pop(_LEAF, self)
        if extras:
            leaf.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed
