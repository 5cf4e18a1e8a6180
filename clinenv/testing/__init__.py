"""Test doubles shipped with the package: a local OpenAI-compatible server
(:mod:`~clinenv.testing.fake_server`) and its scripted responders
(:mod:`~clinenv.testing.fake_responders`, :mod:`~clinenv.testing.fake_native`).

For tests, benchmarks and offline demos; never imported by the environment.

The helpers clinenv's own tests import are here too, one module per purpose: where the
AgentClinic files are (:mod:`~clinenv.testing.data`), a deterministic clinic behind the
fake server (:mod:`~clinenv.testing.clinic`), hand-made run logs
(:mod:`~clinenv.testing.eval_logs`, :mod:`~clinenv.testing.cdeg_logs`), CDEG policy stubs
(:mod:`~clinenv.testing.cdeg_policy`), patient facts
(:mod:`~clinenv.testing.patient_facts`), the command line called from a test
(:mod:`~clinenv.testing.cli_calls`), report pages read back
(:mod:`~clinenv.testing.report_pages`) and tiny local models
(:mod:`~clinenv.testing.tiny_chat`, :mod:`~clinenv.testing.tiny_models`).
"""
