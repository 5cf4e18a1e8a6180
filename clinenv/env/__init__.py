"""The environments: the Gymnasium env, its protocol loops, seats, spaces and registration.

- :mod:`~clinenv.env.environment` — :class:`EGIPEnv` (``gym.make("EGIP-MedQA-v0")``);
- :mod:`~clinenv.env.egip_loop`, :mod:`~clinenv.env.native_loop` — the protocol loops;
- :mod:`~clinenv.env.seats`, :mod:`~clinenv.env.simulators` — who answers the doctor;
- :mod:`~clinenv.env.doctor_view` — the doctor's ``exam_mask`` and ``info``;
- :mod:`~clinenv.env.registration`, :mod:`~clinenv.env.vector` — ids and vector envs.

``EGIPEnv`` and the other names below load on first use, so registering the ids at
``import clinenv`` stays cheap.
"""

from clinenv.lazy import lazy_exports

#: Public names -> the module that defines them, imported on first use.
_EXPORTS = {
    "EGIPEnv": "clinenv.env.environment", "DEFAULT_MAX_EXAMS": "clinenv.env.environment",
    "DEFAULT_MAX_TEXT_CHARS": "clinenv.env.environment",
    "JUDGE_TO_VERDICT": "clinenv.env.environment", "PROTOCOLS": "clinenv.env.environment",
    "STRATA_KEYS": "clinenv.env.environment",
    "EnvConfig": "clinenv.env.config",
    "EGIP_IDS": "clinenv.env.registration", "MENU_IDS": "clinenv.env.registration",
    "NATIVE_IDS": "clinenv.env.registration",
    "make_vec": "clinenv.env.vector",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
