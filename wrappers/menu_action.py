"""Deprecated alias of :mod:`clinenv.wrappers.env.menu_action` (moved in 0.2; goes in 0.3)."""

from clinenv._moved import alias

alias(__name__)
