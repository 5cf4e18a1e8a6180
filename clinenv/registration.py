"""Environment ids, registered with Gymnasium when :mod:`clinenv` is imported.

One line per variant. Every id builds :class:`clinenv.env.EGIPEnv`; the dataset is
resolved at ``gym.make`` time, so an id whose data is missing fails at once with the
how-to-get-it error (:class:`clinenv.errors.DatasetNotFoundError`).

Episodes end by themselves after T acquisition rounds and one decision step, so no
``TimeLimit`` is added (``max_episode_steps`` is ``None``).
"""

from __future__ import annotations

import gymnasium as gym

ENTRY_POINT = "clinenv.env:EGIPEnv"

#: Environment id -> dataset registry name.
EGIP_IDS: dict[str, str] = {
    "EGIP-Demo-v0": "demo",
    "EGIP-MedQA-v0": "medqa",
    "EGIP-MedQA_Ext-v0": "medqa_ext",
    "EGIP-NEJM-v0": "nejm",
    "EGIP-NEJM_Ext-v0": "nejm_ext",
    "EGIP-MIMIC-IV-v0": "mimiciv",
}


def register_all() -> None:
    """Register every id in :data:`EGIP_IDS` (idempotent)."""
    for env_id, dataset in EGIP_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=ENTRY_POINT, kwargs={"dataset": dataset})
