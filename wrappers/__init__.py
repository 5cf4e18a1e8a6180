"""Wrappers, named by what they wrap (installed as ``clinenv.wrappers``).

- :mod:`clinenv.wrappers.env` — Gymnasium wrappers of an environment: the menu-index
  action (``menu_action``) and the chat-message view (``chat_history``);
- doctor-policy wrappers, which wrap a :class:`~clinenv.agents.base.DoctorPolicy` and
  re-ask it before its final answer: :mod:`clinenv.wrappers.cdeg` (CDEG's policy
  wrapper, graph and construction pipeline), :mod:`clinenv.wrappers.baselines` (the
  CDEG paper's baselines), sharing :mod:`clinenv.wrappers.reask`.

The public names below import from this package, each loaded on first use.
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
