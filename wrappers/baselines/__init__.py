"""The CDEG paper's baselines as doctor-policy wrappers (CDEG paper, "Baselines").

- :class:`~clinenv.wrappers.baselines.self_reflection.SelfReflectionDoctor` — re-asks the
  doctor to reconsider its reasoning from the interaction history before its final answer;
- :class:`~clinenv.wrappers.baselines.trajectory_rag.TrajectoryRAGDoctor` — gives the k
  most similar successful trajectories of earlier run logs as in-context examples;
- :class:`~clinenv.wrappers.baselines.flat_experience.FlatExperienceDoctor` — gives the
  k most similar experience snippets (distilled from run logs or a CDEG graph) as
  unstructured text.

They share :class:`~clinenv.wrappers.reask.ReaskWrapper` with the CDEG wrapper
(:class:`clinenv.wrappers.cdeg.policy.CDEGDoctor`).
"""
