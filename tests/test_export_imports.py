"""What importing :mod:`clinenv.export` loads, in a fresh interpreter each time.

The agents' prompts and the Direct decision's e_T reader are module-level imports; the
tool view (``clinenv.integrations``, never imported by the core) and ``datasets`` (the
optional ``export`` extra) load only when an export needs them; ``import clinenv`` does
not import the export module.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def loaded_after(statement: str) -> set[str]:
    code = f"import sys\n{statement}\nimport json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_import_clinenv_does_not_import_the_export_module():
    loaded = loaded_after("import clinenv")
    assert "clinenv.export" not in loaded and "clinenv.cli.export" not in loaded


def test_the_export_module_imports_the_agents_at_module_level():
    loaded = loaded_after("import clinenv.export")
    assert {"clinenv.agents.prompts", "clinenv.agents.llm_doctor",
            "clinenv.datasets.registry"} <= loaded
    assert not {m for m in loaded if m.startswith("clinenv.integrations")}
    assert "datasets" not in loaded


def test_the_export_module_binds_what_it_uses_at_module_level():
    import clinenv.agents.llm_doctor as llm_doctor
    import clinenv.agents.prompts as prompts
    import clinenv.export as export

    assert export.evidence_part is llm_doctor.evidence_part
    for name in ("DIRECT_SYSTEM", "EGIP_DOCTOR_SYSTEM", "AGENTCLINIC_DOCTOR_SYSTEM"):
        assert getattr(export, name) is getattr(prompts, name)


@pytest.mark.parametrize("fmt", ["messages", "tools"])
def test_an_export_loads_the_tool_view_only_when_run(fmt, tmp_path):
    """An export (the ``tool_calls`` column, the tools format) loads the tool view."""
    log = tmp_path / "run.jsonl"
    code = (f"from clinenv.cli import main\n"
            f"assert main(['run', '--env', 'EGIP-Demo-v0', '--doctor', 'scripted', "
            f"'--episodes', '1', '--quiet', '--out', {str(log)!r}]) == 0\n"
            f"from clinenv.export import episode_rows\n"
            f"(row,) = list(episode_rows([{str(log)!r}], fmt={fmt!r}))\n"
            f"assert row['tool_calls']")
    loaded = loaded_after(code)
    assert "clinenv.integrations.tools" in loaded and "datasets" not in loaded
