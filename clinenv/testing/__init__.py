"""Test doubles shipped with the package: a local OpenAI-compatible server
(:mod:`~clinenv.testing.fake_server`) and its scripted responders
(:mod:`~clinenv.testing.fake_responders`, :mod:`~clinenv.testing.fake_native`).

For tests, benchmarks and offline demos; never imported by the environment.
"""
