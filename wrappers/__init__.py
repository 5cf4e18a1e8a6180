"""Policy and environment wrappers (CDEG and its baselines; Gymnasium wrappers).

Installed as ``clinenv.wrappers``.
"""
