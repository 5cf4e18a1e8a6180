"""Deprecated module paths of the 0.2 layout (CHANGELOG 0.2: ``env/``, ``runs/``,
``testing/``): each old module is an alias of its new one until 0.3."""

from __future__ import annotations

import importlib
import sys
import warnings

#: Old module path -> new module path.
ALIASES = {
    "clinenv.rollouts": "clinenv.runs.logged",
    "clinenv.concurrent": "clinenv.runs.concurrent",
    "clinenv.episode": "clinenv.runs.episode",
    "clinenv.fail_fast": "clinenv.runs.fail_fast",
    "clinenv.replay": "clinenv.runs.replay",
    "clinenv.vector": "clinenv.env.vector",
    "clinenv.terminal_outcome": "clinenv.env.terminal_outcome",
    "clinenv.registration": "clinenv.env.registration",
    "clinenv.llm.fake_server": "clinenv.testing.fake_server",
    "clinenv.wrappers.menu_action": "clinenv.wrappers.env.menu_action",
    "clinenv.wrappers.chat_history": "clinenv.wrappers.env.chat_history",
}


def alias(old: str) -> None:
    """Make module ``old`` (a key of :data:`ALIASES`) the very module it moved to, in
    ``sys.modules``, with a :class:`DeprecationWarning` naming both paths."""
    new = ALIASES[old]
    warnings.warn(f"{old} moved to {new}; import it from there (the old path goes in 0.3)",
                  DeprecationWarning, stacklevel=3)
    sys.modules[old] = importlib.import_module(new)
