"""Terminal strategies by name: Direct, Vote, Full (EGIP appendix A.2) and MedAgentSim's
final-turn discussion (published, or this project's variant), all deciding on the same
evidence interface e_T."""

from __future__ import annotations

from typing import Any

from clinenv.agents.terminal_base import TerminalStrategy
from clinenv.agents.terminal_direct import Direct
from clinenv.agents.terminal_discussion import Discussion
from clinenv.agents.terminal_full import Full
from clinenv.agents.terminal_medagentsim import MedAgentSimDiscussion
from clinenv.agents.terminal_vote import Vote

__all__ = ["STRATEGY_NAMES", "make_strategy"]

#: Names :func:`make_strategy` accepts.
STRATEGY_NAMES = ("direct", "vote", "full", "discussion", "medagentsim")


def make_strategy(name: str, **kwargs: Any) -> TerminalStrategy:
    """A terminal strategy by name: ``"direct"``, ``"vote"``, ``"full"`` (EGIP appendix
    A.2), ``"medagentsim"`` (MedAgentSim's final turn as published, answer options
    included, :mod:`clinenv.agents.terminal_medagentsim`) or ``"discussion"`` (this
    project's variant without the option step, :mod:`clinenv.agents.terminal_discussion`).

    Args:
        name: the strategy name (case-insensitive).
        **kwargs: the strategy's parameters (e.g. ``make_strategy("vote", n_samples=5)``).

    Raises:
        ValueError: an unknown name.
        TypeError: a parameter the strategy does not take.
    """
    strategies: dict[str, type[TerminalStrategy]] = {"direct": Direct, "vote": Vote,
                                                     "full": Full, "discussion": Discussion,
                                                     "medagentsim": MedAgentSimDiscussion}
    key = name.strip().lower() if isinstance(name, str) else name
    if key not in strategies:
        raise ValueError(f"strategy must be one of {sorted(strategies)}, got {name!r}")
    return strategies[key](**kwargs)
