"""Wrappers, named by what they wrap (installed as ``clinenv.wrappers``).

- :mod:`clinenv.wrappers.env` — Gymnasium wrappers of an environment: the menu-index
  action (``menu_action``) and the chat-message view (``chat_history``);
- doctor-policy wrappers, which wrap a :class:`~clinenv.agents.base.DoctorPolicy` and
  re-ask it before its final answer: :mod:`clinenv.wrappers.cdeg` (CDEG's policy
  wrapper, graph and construction pipeline), :mod:`clinenv.wrappers.baselines` (the
  CDEG paper's baselines), sharing :mod:`clinenv.wrappers.reask`.
"""
