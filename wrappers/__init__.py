"""Wrappers, named by what they wrap (installed as ``clinenv.wrappers``).

Environment wrappers (:mod:`clinenv.wrappers.env`) and doctor-policy wrappers that re-ask
before the final answer (:mod:`clinenv.wrappers.cdeg`, :mod:`clinenv.wrappers.baselines`).
"""

from clinenv.lazy import lazy_exports

#: Public names -> the module that defines them, imported on first use.
_EXPORTS = {
    "MenuActionEnv": "clinenv.wrappers.env.menu_action",
    "ChatHistory": "clinenv.wrappers.env.chat_history",
    "BeforeAnswerWrapper": "clinenv.wrappers.reask",
    "ReaskWrapper": "clinenv.wrappers.reask",
    "CDEGConfig": "clinenv.wrappers.cdeg.policy",
    "CDEGDoctor": "clinenv.wrappers.cdeg.policy",
    "SelfReflectionDoctor": "clinenv.wrappers.baselines.self_reflection",
    "TrajectoryRAGDoctor": "clinenv.wrappers.baselines.trajectory_rag",
    "FlatExperienceDoctor": "clinenv.wrappers.baselines.flat_experience",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
