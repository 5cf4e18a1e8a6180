"""Turn-based AEC -> Parallel conversion for games whose next speaker is chosen at run time.

:class:`TurnBasedParallelEnv` replaces PettingZoo's ``turn_based_aec_to_parallel``, whose
``reset`` infos lack ``active_agent`` and whose ``step`` returns a 4-tuple once done.
"""

from __future__ import annotations

import copy
from typing import Any

from pettingzoo import AECEnv, ParallelEnv


class TurnBasedParallelEnv(ParallelEnv):
    """A Parallel view of a turn-based AEC env.

    Every live agent submits an action each step; only the active agent's is applied.
    ``infos[agent]["active_agent"]`` names the agent the next step applies, from
    ``reset`` on (``None`` once over). Rewards, terminations and truncations are the AEC
    step's; after the end ``step`` returns five empty dicts. Returned dicts are fresh.

    Args:
        aec_env: the AEC environment (e.g. :class:`clinenv.multiagent.aec.EGIPAECEnv`);
            this wrapper owns it from now on.
    """

    def __init__(self, aec_env: AECEnv) -> None:
        self.aec_env = aec_env
        self.possible_agents = list(aec_env.possible_agents)
        self.metadata = dict(getattr(aec_env, "metadata", {}))
        self.render_mode = getattr(aec_env, "render_mode", None)
        self.agents: list[str] = []
        self._started = False

    def observation_space(self, agent: str):
        """The AEC env's (cached) observation space of ``agent``."""
        return self.aec_env.observation_space(agent)

    def action_space(self, agent: str):
        """The AEC env's (cached) action space of ``agent``."""
        return self.aec_env.action_space(agent)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset the AEC env.

        Returns:
            ``(observations, infos)`` for every agent; each info holds ``active_agent``.
        """
        self.aec_env.reset(seed=seed, options=options)
        self._started = True
        self.agents = list(self.aec_env.agents)
        observations = {a: self.aec_env.observe(a) for a in self.agents}
        return observations, self._infos(self.agents)

    def step(self, actions: dict[str, Any]):
        """Apply ``actions[active_agent]``; the other agents' actions are ignored.

        Returns:
            ``(observations, rewards, terminations, truncations, infos)``, each keyed by
            the agents alive before this step; five empty dicts after the end.

        Raises:
            RuntimeError: before the first ``reset``.
            KeyError: ``actions`` has no entry for the active agent (the message names it).
        """
        if not self._started:
            raise RuntimeError("call reset() before step()")
        if not self.agents:
            return {}, {}, {}, {}, {}
        aec = self.aec_env
        active = aec.agent_selection
        if active not in actions:
            raise KeyError(f"actions has no entry for the active agent {active!r} "
                           f"(infos[agent]['active_agent'] names it)")
        alive = list(self.agents)
        aec.step(actions[active])
        observations = {a: aec.observe(a) for a in alive}
        rewards = {a: float(aec.rewards.get(a, 0.0)) for a in alive}
        terminations = {a: bool(aec.terminations.get(a, False)) for a in alive}
        truncations = {a: bool(aec.truncations.get(a, False)) for a in alive}
        infos = self._infos(alive)
        while aec.agents and (aec.terminations[aec.agent_selection]
                              or aec.truncations[aec.agent_selection]):
            aec.step(None)  # remove done agents; nothing else changes
        self.agents = list(aec.agents)
        active_next = aec.agent_selection if self.agents else None
        for info in infos.values():
            info["active_agent"] = active_next
        return observations, rewards, terminations, truncations, infos

    def _infos(self, agents: list[str]) -> dict[str, dict[str, Any]]:
        active = self.aec_env.agent_selection if self.aec_env.agents else None
        return {a: {**copy.deepcopy(self.aec_env.infos[a]), "active_agent": active}
                for a in agents}

    def render(self):
        """The AEC env's render."""
        return self.aec_env.render()

    def close(self) -> None:
        """Close the AEC env."""
        self.aec_env.close()

    def state(self):
        """The AEC env's global state, where it defines one."""
        return self.aec_env.state()
