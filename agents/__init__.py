"""Agents that fill the seats of an episode: doctors, patient simulators, examiners.

Installed as ``clinenv.agents``.
"""
