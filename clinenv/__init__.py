"""clinenv: clinical diagnosis cases as Gymnasium and PettingZoo environments.

Importing it registers the environment ids (``EGIP-MedQA-v0``...) with Gymnasium; the
other exports (:func:`load_cases`, the case model, case lists, errors) load on first use.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

from clinenv.env.registration import EGIP_IDS, register_all

register_all()

#: Lazily imported names -> the module that defines them.
_LAZY = {
    "Case": "clinenv.cases", "CaseFlags": "clinenv.cases", "Records": "clinenv.cases",
    "Target": "clinenv.cases", "read_cases": "clinenv.cases", "write_cases": "clinenv.cases",
    "load_cases": "clinenv.datasets",
    "ClinenvError": "clinenv.errors", "DatasetNotFoundError": "clinenv.errors",
    "read_case_list": "clinenv.case_list", "write_case_list": "clinenv.case_list",
}

__all__ = [
    "Case",
    "CaseFlags",
    "ClinenvError",
    "DatasetNotFoundError",
    "EGIP_IDS",
    "Records",
    "Target",
    "__version__",
    "load_cases",
    "read_case_list",
    "read_cases",
    "write_case_list",
    "write_cases",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
