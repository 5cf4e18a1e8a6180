"""The information-boundary audit (``clinenv audit``): does Y or an unrequested record
reach the doctor?

EGIP's first claim (section 3.2) is that the doctor's input never holds the reference
target Y or a measurement it did not request. The audit drives every case of an
environment with adversarial doctor turns (:mod:`clinenv.audit.turns`) through the seats
it uses, an LLM patient or measurement agent included (offline, an over-sharing fake
model: :mod:`clinenv.audit.responder`), and reports each place where the detector
(:mod:`clinenv.audit.detector`) finds the target, one of its distinctive words, or a
specific unrequested result in the doctor's input (:mod:`clinenv.audit.report`).
``docs/audit.md`` says what a pass can and cannot prove.

It sits beside the core (it imports :mod:`clinenv.testing` and, through the
environment, :mod:`clinenv.agents`); the core never imports it.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> defining module (imported on first use, so that ``clinenv --help``
#: does not load the detector).
_EXPORTS = {
    "AuditReport": "clinenv.audit.report", "Finding": "clinenv.audit.report",
    "Hit": "clinenv.audit.detector", "LeakDetector": "clinenv.audit.detector",
    "distinctive_words": "clinenv.audit.detector", "is_specific": "clinenv.audit.detector",
    "audit_case": "clinenv.audit.runner", "audit_env": "clinenv.audit.runner",
    "run_audit": "clinenv.audit.runner",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'clinenv.audit' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
