"""Each package exports its public names from its ``__init__``, loaded on first use, so
README and the examples import from a handful of module paths."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Packages whose ``__init__`` exports names of their modules.
PACKAGES = ("clinenv", "clinenv.runs", "clinenv.agents", "clinenv.wrappers",
            "clinenv.wrappers.cdeg", "clinenv.protocol", "clinenv.env", "clinenv.llm",
            "clinenv.datasets", "clinenv.evaluation", "clinenv.embeddings")
#: The module paths README and the examples import from (an adapter of an optional
#: extra, ``clinenv.integrations.<framework>``, is imported from its module).
IMPORT_PATHS = {"clinenv", "clinenv.runs", "clinenv.agents", "clinenv.wrappers",
                "clinenv.wrappers.cdeg", "clinenv.protocol", "clinenv.env", "clinenv.llm",
                "clinenv.datasets", "clinenv.evaluation", "clinenv.embeddings",
                "clinenv.multiagent"}


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_is_its_module_object(package):
    module = importlib.import_module(package)
    table = getattr(module, "_EXPORTS", None) or getattr(module, "_LAZY", None) or {}
    for name in module.__all__:
        value = getattr(module, name)
        if name in table:
            assert value is getattr(importlib.import_module(table[name]), name), name
    assert set(module.__all__) <= set(dir(module))
    with pytest.raises(AttributeError, match="no_such_name"):
        module.no_such_name  # noqa: B018


def test_importing_the_packages_loads_none_of_the_exported_modules():
    code = ("import sys, json\n"
            "import clinenv.runs, clinenv.agents, clinenv.wrappers, clinenv.wrappers.cdeg, "
            "clinenv.protocol, clinenv.env, clinenv.llm\n"
            "print(json.dumps(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout))
    assert not loaded & {"clinenv.runs.logged", "clinenv.runs.replaying",
                         "clinenv.agents.llm_doctor", "clinenv.wrappers.cdeg.build",
                         "clinenv.wrappers.env.menu_action", "clinenv.protocol.catalog",
                         "clinenv.env.environment", "clinenv.llm.openai_backend"}


def test_readme_and_the_examples_import_from_the_packages():
    files = [ROOT / "README.md", *sorted((ROOT / "examples").rglob("*.py"))]
    paths = {m.group(2) for f in files for m in re.finditer(
        r"^\s*(from|import) (clinenv[\w.]*)", f.read_text(encoding="utf-8"), re.M)}
    odd = sorted(p for p in paths - IMPORT_PATHS
                 if not p.startswith("clinenv.integrations."))
    assert not odd, f"import these from their package instead: {odd}"
