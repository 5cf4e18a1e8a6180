"""The terminal reward: the reward spec over the components of the episode's record.

Both loops call :func:`terminal_reward`, from the same fields the episode record holds,
so a run-log line gives the same components again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clinenv.protocol.history import event_to_dict
from clinenv.reward_spec import RewardSpec

__all__ = ["runtime_record", "terminal_reward"]


def runtime_record(rt: Any, *, protocol: str, outcome: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of the episode record that the components read, from a runtime
    (:class:`~clinenv.protocol.runtime.EGIPRuntime` or
    :class:`~clinenv.protocol.native.NativeRuntime`) and the outcome keys (``{}``
    before the end)."""
    record: dict[str, Any] = {
        "case_id": rt.case.case_id, "phase": rt.phase, "turns": rt.turn,
        "invalid_actions": rt.invalid_actions,
        "events": [event_to_dict(e) for e in rt.history], **outcome}
    if protocol != "egip":
        record["protocol"] = protocol
    return record


def terminal_reward(rt: Any, spec: RewardSpec, *, protocol: str,
                    outcome: Mapping[str, Any]) -> tuple[float, dict[str, Any]]:
    """``(spec reward, components dict)`` of the episode that just ended (or was cut
    off: then ``outcome`` is ``{}`` or holds the cut's keys)."""
    components = spec.components(runtime_record(rt, protocol=protocol, outcome=outcome),
                                 rt.case)
    return spec.reward(components), components.to_dict()
