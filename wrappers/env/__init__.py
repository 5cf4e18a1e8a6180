"""Gymnasium environment wrappers: they wrap an :class:`~clinenv.env.EGIPEnv`, not a doctor.

- :mod:`clinenv.wrappers.env.menu_action` — a Discrete menu-index doctor action with the
  canonical ``action_mask`` (ids ``EGIP-<Dataset>-Menu-v0``), for classic RL baselines;
- :mod:`clinenv.wrappers.env.chat_history` — the episode as role/content chat messages,
  for chat-template policies.
"""
