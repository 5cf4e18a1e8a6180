"""Environment ids, registered with Gymnasium when :mod:`clinenv` is imported.

One line per variant. ``EGIP-<Dataset>-v0`` builds :class:`clinenv.env.EGIPEnv` (text
actions); ``EGIP-<Dataset>-Menu-v0`` builds
:class:`clinenv.wrappers.env.menu_action.MenuActionEnv` (a Discrete menu-index action with
``action_mask``, for classic RL baselines) over the same dataset. On cases without
candidate labels (MedQA, MIMIC-IV) its answer action can only submit a diagnosis named
in the acquired evidence (``info["answer_source"] == "evidence"``), which is copied
from a record on cases flagged ``target_in_records``: report those cases separately or
exclude them when comparing Menu-id agents. ``AgentClinic-<Dataset>-v0`` and
``MedAgentSim-<Dataset>-v0`` build the same :class:`clinenv.env.EGIPEnv` with the native
presets ``"agentclinic"`` / ``"medagentsim"`` (:mod:`clinenv.protocol.presets`; the
published loops, offline with the deterministic record reader as measurement agent;
pass ``examiner="llm", examiner_model=...`` and ``patient="llm"``, ``judge="llm"`` for
the model-backed seats). The dataset is
resolved at ``gym.make`` time, so an id whose data is missing fails at once with the
how-to-get-it error (:class:`clinenv.errors.DatasetNotFoundError`).

Episodes end by themselves after T acquisition rounds and one decision step, so no
``TimeLimit`` is added (``max_episode_steps`` is ``None``). Registering also imports
:mod:`clinenv.env.vector`, which makes async vector envs refuse shared memory for text;
use :func:`clinenv.env.vector.make_vec`.

The PettingZoo game is not registered (PettingZoo has no registry): use
:mod:`clinenv.multiagent.egip_v0`.
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
