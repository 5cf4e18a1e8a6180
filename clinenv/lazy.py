"""Lazy package exports: a package's public names, each imported from its module on
first use, so that importing the package stays cheap.

``__getattr__, __dir__, __all__ = lazy_exports(__name__, {"run": "clinenv.runs.execute"})``
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, names: Mapping[str, str]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """The ``__getattr__``, ``__dir__`` and ``__all__`` of ``package`` exporting ``names``
    (name -> the module that defines it); a name resolved once is cached on the package."""
    table = dict(names)

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    return __getattr__, __dir__, sorted(table)
