"""Gymnasium environment wrappers: they wrap an :class:`~clinenv.env.EGIPEnv`, not a doctor.

The menu-index action (``EGIP-<Dataset>-Menu-v0``) and the chat-message view.
"""
