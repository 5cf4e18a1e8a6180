"""Credentialed data in a report: MIMIC-IV episodes only with an explicit opt-in.

A report holds case text, so MIMIC-derived lines fall under the data-use agreement; which
lines count is in docs/report.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from clinenv.datasets.registry import DATASETS, normalize_name

__all__ = ["DUA_WARNING", "is_credentialed"]

#: The warning printed (and shown in the page) when a report holds credentialed episodes.
DUA_WARNING = (
    "this report holds MIMIC-IV episodes: they are covered by the PhysioNet credentialed "
    "data-use agreement; share the file only with credentialed users bound by it, never "
    "publish it and never upload it to a third-party service")

_CREDENTIALED = tuple(name for name, spec in DATASETS.items() if spec.access_note)
_CREDENTIALED_FILES = frozenset(DATASETS[name].file_name for name in _CREDENTIALED)


def _names(record: Mapping[str, Any]) -> list[str]:
    names = [record.get("dataset")]
    spec = record.get("env_spec")
    kwargs = spec.get("kwargs") if isinstance(spec, dict) else None
    if isinstance(kwargs, dict):
        names.append(kwargs.get("dataset"))
    return [n for n in names if isinstance(n, str) and n.strip()]


def is_credentialed(record: Mapping[str, Any]) -> bool:
    """Whether a run-log line holds credentialed (MIMIC-derived) data; the rule:
    docs/report.md, "How the page is built", *Credentialed lines*."""
    for name in _names(record):
        if PurePath(name).name in _CREDENTIALED_FILES:
            return True
        key = normalize_name(PurePath(name).stem if name.endswith(".jsonl") else name)
        if key in _CREDENTIALED or key.replace("_", "").startswith("mimic"):
            return True
    return False
