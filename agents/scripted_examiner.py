"""A scripted policy for the examiner seat of the PettingZoo game (``examiner_0``).

It reports the ``# Stored record`` of its observation verbatim, as record lookup O does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clinenv.protocol.seat_views import RECORD_HEADER

#: Reply when the observation holds no stored record (nothing was requested).
NO_RECORD = "No examination was requested."


class ScriptedExaminer:
    """Copies the stored record of the pending request; ``act(observation, info) -> str``."""

    name = "scripted-examiner"

    def reset(self, *, seed: int | None = None) -> None:
        """Nothing to reset (deterministic and stateless)."""

    def act(self, observation: Mapping[str, Any], info: Mapping[str, Any]) -> str:
        """The stored record text of the request in ``observation["text"]``."""
        text = observation["text"]
        start = text.find(RECORD_HEADER)
        if start < 0:
            return NO_RECORD
        return text[start + len(RECORD_HEADER):].strip("\n")
