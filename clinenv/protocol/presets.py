"""Named environment presets: EGIP, its acquisition ablations, and the native protocols.

A preset is a dict of :class:`clinenv.env.EGIPEnv` kwargs; ``EGIPEnv(preset=name)`` (or
``gym.make(id, preset=name)``) starts from it, and every kwarg given explicitly wins::

    gym.make("EGIP-MedQA-v0", preset="egip-native-measurement",
             examiner="llm", examiner_model=model)

==============================  ==========================================================
preset                          what it sets
==============================  ==========================================================
``egip``                        nothing: the EGIP defaults (EGIP sections 3.2-3.3)
``egip-no-menu``                ``show_menu=False``: the "w/o menu" ablation (EGIP
                                Table 3A): B removed, validation against A unchanged
``egip-native-measurement``     ``examiner="reader"``: the "native measurement access"
                                ablation (EGIP Table 3A, appendix C): validated requests
                                go to a measurement agent that holds the whole record and
                                may answer normal readings. The offline default is the
                                deterministic record reader; pass ``examiner="llm",
                                examiner_model=...`` for the LLM measurement agent
``agentclinic``                 ``protocol="agentclinic"``, ``examiner="reader"``: the
                                native AgentClinic loop (:mod:`clinenv.protocol.native`)
``medagentsim``                 ``protocol="medagentsim"``, ``examiner="reader"``: the
                                same, with the final turn replaced by a discussion
==============================  ==========================================================

The ids ``AgentClinic-<Dataset>-v0`` and ``MedAgentSim-<Dataset>-v0`` register the last
two (:mod:`clinenv.registration`).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

#: Preset name -> environment kwargs (read-only).
PRESETS: MappingProxyType[str, MappingProxyType[str, Any]] = MappingProxyType({
    "egip": MappingProxyType({}),
    "egip-no-menu": MappingProxyType({"show_menu": False}),
    "egip-native-measurement": MappingProxyType({"examiner": "reader"}),
    "agentclinic": MappingProxyType({"protocol": "agentclinic", "examiner": "reader"}),
    "medagentsim": MappingProxyType({"protocol": "medagentsim", "examiner": "reader"}),
})


def resolve_preset(name: str | None, given: dict[str, Any]) -> dict[str, Any]:
    """The kwargs of preset ``name`` overridden by the explicitly ``given`` ones.

    Args:
        name: a preset name, or ``None`` (``given`` unchanged).
        given: kwargs the caller passed (they win over the preset's).

    Returns:
        A new dict.

    Raises:
        ValueError: an unknown preset; the message lists the known ones.
    """
    if name is None:
        return dict(given)
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}")
    return {**PRESETS[name], **given}
