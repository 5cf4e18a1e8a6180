"""The doctor-policy interface every doctor agent implements.

A policy maps observation and info to one text action; ``reset`` takes a per-episode seed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class DoctorPolicy(Protocol):
    """Anything with ``reset`` and ``act`` can be the doctor.

    ``act`` receives the observation dict (``text``, ``exam_mask``) and the info dict
    (``phase``, ``menu``, ``candidates``...) of :class:`clinenv.env.EGIPEnv` and returns
    the doctor's utterance: a question, ``REQUEST TEST: <id or name>``, or in the
    decision phase ``DIAGNOSIS READY: <diagnosis>``.
    """

    name: str

    def reset(self, *, seed: int | None = None) -> None:
        """Start a new episode; ``seed`` pins any sampling the policy does."""

    def act(self, observation: Mapping[str, Any], info: Mapping[str, Any]) -> str:
        """The next utterance."""
