"""Self-Reflection baseline (CDEG paper, "Baselines").

Re-asks the inner doctor once, before its final answer, with :data:`REFLECTION_PROMPT`;
no memory is used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clinenv.wrappers.reask import BeforeAnswerWrapper, next_step

#: The reflection prompt; ``{next}`` is the action expected afterwards.
REFLECTION_PROMPT = (
    "Before you finalize, reconsider your diagnostic reasoning from the interaction "
    "history above: check whether every finding fits your diagnosis, whether any finding "
    "points to another diagnosis, and whether something important is still unknown. "
    "Then {next}.")


class SelfReflectionDoctor(BeforeAnswerWrapper):
    """Self-Reflection around any doctor policy (docs/api/wrappers.md).

    Takes ``doctor`` and ``max_reasks`` (reflections per episode, default 1) as
    :class:`~clinenv.wrappers.reask.BeforeAnswerWrapper` does.
    """

    suffix = "+self-reflection"
    kind = "self-reflection"

    def before_answer(self, observation: Mapping[str, Any], info: Mapping[str, Any],
                      proposed: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """The reflection prompt (always)."""
        phase = str(info.get("phase", "acquire"))
        return REFLECTION_PROMPT.format(next=next_step(phase)), {}, {}

    def wrapper_config(self) -> dict[str, Any]:
        """``{"max_reasks"}``."""
        return {"max_reasks": self.max_reasks}
