"""Policy and environment wrappers (CDEG and its baselines; Gymnasium wrappers).

Installed as ``clinenv.wrappers``. Gymnasium wrappers:

- :mod:`clinenv.wrappers.menu_action` — a Discrete menu-index doctor action with the
  canonical ``action_mask`` (ids ``EGIP-<Dataset>-Menu-v0``), for classic RL baselines;
- :mod:`clinenv.wrappers.chat_history` — the episode as role/content chat messages, for
  chat-template policies.
"""
