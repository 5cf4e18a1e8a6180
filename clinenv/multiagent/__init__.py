"""PettingZoo environments: the EGIP episode with doctor, patient and examiner seats.

- :mod:`clinenv.multiagent.egip_v0` — the versioned module (``env``, ``parallel_env``,
  ``raw_env``);
- :mod:`clinenv.multiagent.aec` — the AEC game (turn order, role views, rewards);
- :mod:`clinenv.multiagent.parallel` — the turn-based Parallel conversion;
- :mod:`clinenv.protocol.seat_views` — the patient's and examiner's observation text;
- :mod:`clinenv.multiagent.fidelity` — the optional fidelity rewards of the seats.
"""
