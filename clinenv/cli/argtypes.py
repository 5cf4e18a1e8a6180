"""argparse ``type=`` converters for the numeric options of ``clinenv``.

Each returns a callable that parses one argument string or raises
``argparse.ArgumentTypeError`` (argparse prints it with the option name and exits 2).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def number(minimum: float, *, above: bool = False) -> Callable[[str], float]:
    """argparse type: a float >= ``minimum`` (> with ``above``); NaN is refused."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if value != value or (value <= minimum if above else value < minimum):
            raise argparse.ArgumentTypeError(
                f"must be {'>' if above else '>='} {minimum:g}, got {text}")
        return value

    return parse


def count(minimum: int) -> Callable[[str], int]:
    """argparse type: an integer >= ``minimum``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse
