"""The environments: the Gymnasium env, its protocol loops, seats, spaces and registration.

- :mod:`~clinenv.env.environment` — :class:`EGIPEnv` (``gym.make("EGIP-MedQA-v0")``);
- :mod:`~clinenv.env.egip_loop`, :mod:`~clinenv.env.native_loop` — the protocol loops;
- :mod:`~clinenv.env.seats`, :mod:`~clinenv.env.simulators` — who answers the doctor;
- :mod:`~clinenv.env.doctor_view` — the doctor's ``exam_mask`` and ``info``;
- :mod:`~clinenv.env.registration`, :mod:`~clinenv.env.vector` — ids and vector envs.

``EGIPEnv`` and the constants below load on first use, so registering the ids at
``import clinenv`` stays cheap.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_MAX_EXAMS", "DEFAULT_MAX_TEXT_CHARS", "EGIPEnv", "EnvSettings",
           "JUDGE_TO_VERDICT", "PROTOCOLS", "STRATA_KEYS"]


def __getattr__(name: str) -> Any:
    if name == "EnvSettings":
        from clinenv.env.settings import EnvSettings

        return EnvSettings
    if name in __all__:
        from clinenv.env import environment

        return getattr(environment, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
