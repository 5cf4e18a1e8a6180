"""Environment ids, registered with Gymnasium when :mod:`clinenv` is imported.

``EGIP-<Dataset>-v0``, ``EGIP-<Dataset>-Menu-v0``, ``AgentClinic-<Dataset>-v0`` and
``MedAgentSim-<Dataset>-v0``; no ``TimeLimit`` (episodes end by themselves).
"""

from __future__ import annotations

import gymnasium as gym

ENTRY_POINT = "clinenv.env:EGIPEnv"
MENU_ENTRY_POINT = "clinenv.wrappers.env.menu_action:MenuActionEnv"

#: Environment id -> dataset registry name (text actions).
EGIP_IDS: dict[str, str] = {
    "EGIP-Demo-v0": "demo",
    "EGIP-MedQA-v0": "medqa",
    "EGIP-MedQA_Ext-v0": "medqa_ext",
    "EGIP-NEJM-v0": "nejm",
    "EGIP-NEJM_Ext-v0": "nejm_ext",
    "EGIP-MIMIC-IV-v0": "mimiciv",
}

#: Native-protocol id -> (dataset registry name, preset); one line per variant.
NATIVE_IDS: dict[str, tuple[str, str]] = {
    "AgentClinic-Demo-v0": ("demo", "agentclinic"),
    "AgentClinic-MedQA-v0": ("medqa", "agentclinic"),
    "AgentClinic-MedQA_Ext-v0": ("medqa_ext", "agentclinic"),
    "AgentClinic-NEJM-v0": ("nejm", "agentclinic"),
    "AgentClinic-NEJM_Ext-v0": ("nejm_ext", "agentclinic"),
    "AgentClinic-MIMIC-IV-v0": ("mimiciv", "agentclinic"),
    "MedAgentSim-Demo-v0": ("demo", "medagentsim"),
    "MedAgentSim-MedQA-v0": ("medqa", "medagentsim"),
    "MedAgentSim-MedQA_Ext-v0": ("medqa_ext", "medagentsim"),
    "MedAgentSim-NEJM-v0": ("nejm", "medagentsim"),
    "MedAgentSim-NEJM_Ext-v0": ("nejm_ext", "medagentsim"),
    "MedAgentSim-MIMIC-IV-v0": ("mimiciv", "medagentsim"),
}

#: Environment id -> dataset registry name (Discrete menu-index actions).
MENU_IDS: dict[str, str] = {
    env_id.removesuffix("-v0") + "-Menu-v0": dataset for env_id, dataset in EGIP_IDS.items()
}


def register_all() -> None:
    """Register every id in :data:`EGIP_IDS`, :data:`MENU_IDS` and :data:`NATIVE_IDS`
    (idempotent)."""
    import clinenv.env.vector  # noqa: F401  (installs the shared-memory guard)

    for ids, entry_point in ((EGIP_IDS, ENTRY_POINT), (MENU_IDS, MENU_ENTRY_POINT)):
        for env_id, dataset in ids.items():
            if env_id not in gym.registry:
                gym.register(id=env_id, entry_point=entry_point, kwargs={"dataset": dataset})
    for env_id, (dataset, preset) in NATIVE_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=ENTRY_POINT,
                         kwargs={"dataset": dataset, "preset": preset})
