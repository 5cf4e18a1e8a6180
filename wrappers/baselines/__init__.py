"""The CDEG paper's baselines as doctor-policy wrappers (CDEG paper, "Baselines").

Self-Reflection, Trajectory RAG and Flat Experience, re-asking the doctor before its
final answer through :class:`~clinenv.wrappers.reask.ReaskWrapper`, as CDEG does.
"""
