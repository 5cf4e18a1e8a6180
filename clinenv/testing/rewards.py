"""The reference number of the adapters' reward tests: a plain Gym env stepped with
action texts, scored by its reward spec (:mod:`clinenv.reward_components`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import gymnasium as gym


def gym_reward(env_id: str, case_id: str, seed: int, replies: Iterable[str],
               spec: Any) -> tuple[float, dict[str, Any]]:
    """``(spec reward, components dict)`` of ``replies`` played on ``env_id`` with the
    tool view's settings (delta observations, ``premature_diagnosis="decide"``), the
    episode finished or cut off after the last reply."""
    with gym.make(env_id, observation_format="delta", premature_diagnosis="decide",
                  reward_spec=spec) as env:
        env.reset(seed=seed, options={"case_id": case_id})
        for reply in replies:
            env.step(reply)
        u = env.unwrapped
        components = u.reward_components()
        return u.reward_spec.reward(components), components.to_dict()
