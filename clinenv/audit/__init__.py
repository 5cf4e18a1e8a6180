"""The information-boundary audit (``clinenv audit``): does Y or an unrequested record
reach the doctor?

EGIP section 3.2: :func:`run_audit`, :func:`audit_env`; what a pass proves is in docs/audit.md.
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
