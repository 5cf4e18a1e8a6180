"""The seat settings of an audit (``clinenv audit --patient / --examiner``).

``--patient``: ``"retrieval"`` (the default simulator) or ``"llm"`` (the LLM patient over
the over-sharing fake model, :mod:`clinenv.audit.responder`). ``--examiner``:
``"default"`` (the id's own: record lookup O under EGIP, the record reader under a native
protocol), ``"lookup"``, ``"reader"`` or ``"llm"`` (the LLM measurement agent over the
over-sharing fake model).
"""

from __future__ import annotations

#: ``patient`` settings of :func:`clinenv.audit.runner.run_audit`.
PATIENT_SEATS = ("retrieval", "llm")
#: ``examiner`` settings of :func:`clinenv.audit.runner.run_audit`.
EXAMINER_SEATS = ("default", "lookup", "reader", "llm")
