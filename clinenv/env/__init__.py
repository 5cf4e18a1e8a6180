"""The environments: the Gymnasium env, its protocol loops, seats, spaces and registration.

Main exports: :class:`EGIPEnv`, :class:`EnvConfig`, :func:`make_vec`; they load on first
use, so ``import clinenv`` stays cheap.
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
