"""The seat settings of an audit (``clinenv audit --patient / --examiner``).

``--patient``: ``"retrieval"`` or ``"llm"``; ``--examiner``: ``"default"``,
``"lookup"``, ``"reader"`` or ``"llm"`` (docs/audit.md).
"""

from __future__ import annotations

#: ``patient`` settings of :func:`clinenv.audit.runner.run_audit`.
PATIENT_SEATS = ("retrieval", "llm")
#: ``examiner`` settings of :func:`clinenv.audit.runner.run_audit`.
EXAMINER_SEATS = ("default", "lookup", "reader", "llm")
