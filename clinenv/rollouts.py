"""Deprecated alias of :mod:`clinenv.runs.logged` (moved in 0.2; this path goes in 0.3)."""

from clinenv._moved import alias

alias(__name__)
