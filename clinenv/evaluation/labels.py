"""The method label of a run: the doctor's name, plus the environment variant when the
run did not play plain EGIP.

Runs of the same doctor under different protocols are different methods (EGIP Table 3A
compares EGIP against its ablations and against the native AgentClinic / MedAgentSim
loops), so their labels must differ by themselves: :func:`method_label` gives
``doctor.name`` for plain EGIP (``"scripted"``, as in every log written before) and
``doctor.name@variant`` otherwise (``"scripted@agentclinic"``,
``"scripted@egip-no-menu"``, ``"llm-direct@medagentsim"``). The variant is read from
the line's ``env_spec`` keyword arguments: an explicit non-EGIP ``protocol`` first, then
the ``preset`` (given with ``--preset``, or the one a native id registers,
:data:`clinenv.registration.NATIVE_IDS`). A user's ``LABEL=path`` still wins
(:mod:`clinenv.evaluation.runs`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["PLAIN_VARIANTS", "environment_variant", "method_label"]

#: Protocol and preset names that mean plain EGIP (no suffix on the label).
PLAIN_VARIANTS = frozenset({"egip"})


def environment_variant(line: Mapping[str, Any]) -> str | None:
    """The protocol or preset a run-log line was played under, or ``None`` for plain EGIP.

    Args:
        line: a run-log line (its ``env_spec.kwargs`` and ``env_id`` are read; a line
            without them is plain EGIP unless its id is a native one).

    Returns:
        ``kwargs["protocol"]`` when it is given and not ``"egip"``; else the preset
        (``kwargs["preset"]``, or the registered preset of a native ``env_id``) when it is
        not ``"egip"``; else ``None``.
    """
    from clinenv.registration import NATIVE_IDS

    spec = line.get("env_spec")
    kwargs = spec.get("kwargs") if isinstance(spec, Mapping) else None
    kwargs = kwargs if isinstance(kwargs, Mapping) else {}
    protocol = kwargs.get("protocol")
    if isinstance(protocol, str) and protocol not in PLAIN_VARIANTS:
        return protocol
    preset = kwargs.get("preset")
    if not isinstance(preset, str):
        native = NATIVE_IDS.get(str(line.get("env_id")))
        preset = native[1] if native else None
    return preset if preset is not None and preset not in PLAIN_VARIANTS else None


def method_label(line: Mapping[str, Any]) -> str:
    """``doctor.name`` of a run-log line, with ``@<variant>`` when
    :func:`environment_variant` names one (module docstring).

    Raises:
        KeyError: the line has no ``doctor.name`` (callers check it first).
    """
    name = str(line["doctor"]["name"])
    variant = environment_variant(line)
    return name if variant is None else f"{name}@{variant}"
