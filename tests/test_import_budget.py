"""What the command line and the run path import, in a fresh interpreter each time.

``import clinenv.cli`` (every ``clinenv`` command starts with it) loads no HTTP client, no
plotting, no Hugging Face ``datasets`` and no torch; a ``clinenv run`` with an LLM doctor
loads only the client of the calls it makes: aiohttp with ``--concurrency`` > 1 (the
openai package, about a second to import, stays out), the openai client without. The
checks read ``sys.modules``, not the clock, so a loaded machine cannot make them flaky.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from clinenv.testing.fake_server import FakeChatServer

#: Top-level packages no command may import before it needs them.
HEAVY = ("openai", "httpx", "httpx2", "aiohttp", "matplotlib", "datasets", "torch",
         "transformers", "vllm")


def top_level_after(code: str) -> set[str]:
    """The top-level package names in ``sys.modules`` after running ``code`` in a fresh
    interpreter (``code`` must not print)."""
    script = f"import sys\n{code}\nimport json\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return {name.split(".")[0] for name in json.loads(done.stdout.splitlines()[-1])}


def test_import_clinenv_cli_imports_no_heavy_package():
    assert not top_level_after("import clinenv.cli") & set(HEAVY)


def test_import_clinenv_registers_the_ids_and_defers_the_case_model():
    loaded = top_level_after("import clinenv, gymnasium\n"
                             "assert 'EGIP-MedQA-v0' in gymnasium.registry\n"
                             "assert 'pydantic' not in sys.modules")
    assert "gymnasium" in loaded and not loaded & set(HEAVY)
    # the lazily imported names still resolve, and to the defining modules' objects
    import clinenv
    from clinenv.cases import Case
    from clinenv.datasets import load_cases

    assert clinenv.Case is Case and clinenv.load_cases is load_cases
    assert {"Case", "load_cases"} <= set(dir(clinenv))
    with pytest.raises(AttributeError, match="no_such_name"):
        clinenv.no_such_name  # noqa: B018


needs_client = pytest.mark.skipif(
    importlib.util.find_spec("openai") is None or importlib.util.find_spec("aiohttp") is None,
    reason="the openai extra (openai[aiohttp]) is not installed")


@needs_client
@pytest.mark.parametrize(("concurrency", "loads", "leaves"), [
    (2, "aiohttp", "openai"), (1, "openai", None)])
def test_a_cli_run_imports_only_the_client_it_uses(tmp_path, concurrency, loads, leaves):
    with FakeChatServer("clinician") as server:
        code = (f"from clinenv.cli import main\n"
                f"assert main(['run', '--env', 'EGIP-Demo-v0', '--doctor', 'llm', "
                f"'--model', 'fake', '--base-url', {server.base_url!r}, '--episodes', '2', "
                f"'--concurrency', '{concurrency}', '--quiet', "
                f"'--out', {str(tmp_path / 'run.jsonl')!r}]) == 0")
        loaded = top_level_after(code)
        assert server.stats()["n_requests"] > 0
    assert loads in loaded and leaves not in loaded  # (openai itself imports aiohttp)
    lines = (tmp_path / "run.jsonl").read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(line)["llm"]["calls"] for line in lines)
