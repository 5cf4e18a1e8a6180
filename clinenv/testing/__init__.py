"""Test doubles shipped with the package: a local OpenAI-compatible server
(:mod:`~clinenv.testing.fake_server`) and its scripted responders
(:mod:`~clinenv.testing.fake_responders`, :mod:`~clinenv.testing.fake_native`).

For tests, benchmarks and offline demos; never imported by the environment. The other
modules are the helpers clinenv's own tests import, one per purpose (the data folder,
a fake clinic, run logs, CDEG stubs, CLI calls, report pages, tiny models); how to use
the doubles: docs/testing.md, "Test doubles".
"""
