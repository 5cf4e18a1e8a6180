"""Named environment presets: EGIP, its acquisition ablations, and the native protocols.

A preset is a dict of :class:`clinenv.env.EGIPEnv` kwargs (:data:`PRESETS`); explicit
kwargs win. The presets and what they set: docs/protocols.md.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from clinenv.protocol.config import ProtocolConfig
from clinenv.protocol.native_config import NativeConfig

#: The CDEG paper's interaction budget in turns ("Implementation Details").
CDEG_TURNS = 30
#: ``protocol=`` values: EGIP (default) and the native loops (:mod:`clinenv.protocol.native`).
PROTOCOLS = ("egip", "agentclinic", "medagentsim")
#: Preset name -> environment kwargs (read-only).
PRESETS: MappingProxyType[str, MappingProxyType[str, Any]] = MappingProxyType({
    "egip": MappingProxyType({}),
    "egip-no-menu": MappingProxyType({"show_menu": False}),
    "egip-native-measurement": MappingProxyType({"examiner": "reader"}),
    "agentclinic": MappingProxyType({"protocol": "agentclinic", "examiner": "reader"}),
    "medagentsim": MappingProxyType({"protocol": "medagentsim", "examiner": "reader"}),
    "cdeg-30": MappingProxyType({"acquisition_rounds": CDEG_TURNS - 1,
                                 "premature_diagnosis": "decide", "history_review": True}),
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


def protocol_settings(preset: str | None, settings: dict[str, Any], *,
                      protocol: str | None = None, examiner: Any = None,
                      ) -> tuple[str, ProtocolConfig | NativeConfig, Any]:
    """``(protocol, config, examiner)`` of an environment's keyword arguments.

    ``preset`` fills what the explicit ``settings``, ``protocol`` and ``examiner`` leave
    unset (:func:`resolve_preset`); the config is a
    :class:`~clinenv.protocol.config.ProtocolConfig` under ``"egip"``, else a
    :class:`~clinenv.protocol.native_config.NativeConfig` whose ``final_turn`` defaults
    to ``"discussion"`` (MedAgentSim) or ``"notice"`` (AgentClinic).

    Raises:
        ValueError: an unknown preset or protocol, or ``acquisition_rounds`` under a
            native protocol (it counts doctor turns: ``max_turns``).
        pydantic.ValidationError: an invalid setting.
    """
    explicit = {k: v for k, v in (("protocol", protocol), ("examiner", examiner))
                if v is not None}
    settings = resolve_preset(preset, {**settings, **explicit})
    protocol = settings.pop("protocol", "egip")
    examiner = settings.pop("examiner", None)
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    if protocol == "egip":
        return protocol, ProtocolConfig(**settings), examiner
    if "acquisition_rounds" in settings:
        raise ValueError(f"protocol {protocol!r} counts doctor turns: use "
                         "max_turns= (default 20) instead of acquisition_rounds=")
    settings.setdefault("final_turn", "discussion" if protocol == "medagentsim" else "notice")
    return protocol, NativeConfig(**settings), examiner
