"""PettingZoo environments: the EGIP episode with doctor, patient and examiner seats.

:mod:`~clinenv.multiagent.egip_v0` (``env``, ``parallel_env``, ``raw_env``) over the AEC
game :mod:`~clinenv.multiagent.aec`; docs/environments.md describes the game.
"""
