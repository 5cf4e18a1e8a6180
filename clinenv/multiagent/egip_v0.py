"""``egip_v0``: the EGIP doctor-patient-examiner game, the PettingZoo way.

``env(...)`` (AEC), ``parallel_env(...)`` (turn-based) and ``raw_env(...)`` take the
keywords of :class:`clinenv.multiagent.aec.EGIPAECEnv`; the version changes whenever
observations, rewards or turn order change.
"""

from __future__ import annotations

from typing import Any

from pettingzoo.utils.wrappers import OrderEnforcingWrapper

from clinenv.multiagent.aec import AGENTS, EGIPAECEnv
from clinenv.multiagent.parallel import TurnBasedParallelEnv

#: The bare AEC environment class (PettingZoo's ``raw_env`` convention).
raw_env = EGIPAECEnv

__all__ = ["AGENTS", "env", "parallel_env", "raw_env"]


def env(**kwargs: Any) -> OrderEnforcingWrapper:
    """The AEC environment wrapped in PettingZoo's ``OrderEnforcingWrapper``.

    Raises:
        ValueError: an invalid argument (see :class:`EGIPAECEnv`).
    """
    return OrderEnforcingWrapper(EGIPAECEnv(**kwargs))


def parallel_env(**kwargs: Any) -> TurnBasedParallelEnv:
    """The Parallel environment: every live agent submits, the active one's action counts.

    ``infos[agent]["active_agent"]`` names the active agent from ``reset`` on (see
    :mod:`clinenv.multiagent.parallel`).

    Raises:
        ValueError: an invalid argument (see :class:`EGIPAECEnv`).
    """
    return TurnBasedParallelEnv(EGIPAECEnv(**kwargs))
