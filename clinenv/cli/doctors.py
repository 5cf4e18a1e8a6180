"""The ``--doctor`` registry of ``clinenv run``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _scripted() -> Any:
    from clinenv.agents.scripted_doctor import ScriptedDoctor

    return ScriptedDoctor()


#: ``--doctor`` choices: name -> factory of a fresh policy (``llm`` is built from the
#: LLM options by :class:`clinenv.cli.llm_setup.LLMSetup`).
DOCTORS: dict[str, Callable[[], Any]] = {"scripted": _scripted}
#: Every ``--doctor`` value.
DOCTOR_CHOICES = ("llm", *DOCTORS)
