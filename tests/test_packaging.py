"""The wheel (``pip install .``) puts agents/ and wrappers/ under clinenv, with demo data,
ships the ``clinenv.cli`` package, and its ``clinenv`` command runs from the wheel alone."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Modules of the command-line package (setup.cfg ``packages`` must list clinenv.cli).
CLI_MODULES = ("__init__", "argtypes", "cdeg", "cdeg_run", "data", "doctors", "env_choice",
               "errors", "evaluate", "llm_setup", "replay", "run", "run_summary")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a copy of the source tree without build outputs: setuptools
    reuses ``build/lib``, so a module left there by an older layout (e.g. a former
    ``clinenv/cli.py``) would otherwise end up in the wheel. Virtual environments in the
    checkout (``.venv*``, gigabytes) are not copied either."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    anywhere = shutil.ignore_patterns("*.egg-info", "__pycache__", ".*_cache")
    top = {".git", "build", "dist", "runs", "reports"}  # run outputs, not clinenv/runs/

    def ignore(folder: str, names: list[str]) -> set[str]:
        skipped = set(anywhere(folder, names))
        if Path(folder) == ROOT:
            skipped |= {n for n in names if n in top or n.startswith(".venv")}
        return skipped

    shutil.copytree(ROOT, src, ignore=ignore)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp), str(src)],
        capture_output=True, text=True, timeout=600,
    )
    if proc.returncode != 0:
        pytest.fail(f"pip wheel failed:\n{proc.stderr[-3000:]}")
    (built,) = tmp.glob("clinenv-*.whl")
    return built


@pytest.fixture(scope="module")
def wheel_names(wheel) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        return set(zf.namelist())


def test_wheel_maps_agents_and_wrappers_into_clinenv(wheel_names):
    assert "clinenv/agents/scripted_doctor.py" in wheel_names
    assert "clinenv/agents/llm_patient.py" in wheel_names
    assert "clinenv/wrappers/__init__.py" in wheel_names
    assert "clinenv/protocol/runtime.py" in wheel_names
    assert "clinenv/evaluation/stats.py" in wheel_names
    assert not any(n.startswith(("agents/", "wrappers/", "tests/")) for n in wheel_names)


def test_wheel_ships_every_package_of_the_source_tree(wheel_names):
    """Every source folder with an ``__init__.py`` (clinenv/, agents/, wrappers/ and their
    subpackages) is in the wheel: a subpackage missing from setup.cfg ``packages`` would
    import in an editable checkout and fail for users of ``pip install .``."""
    roots = {"clinenv": "clinenv", "agents": "clinenv/agents", "wrappers": "clinenv/wrappers"}
    expected = set()
    for folder, installed in roots.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.relative_to(ROOT / folder).as_posix()
            if "__pycache__" not in rel:
                expected.add(f"{installed}/{rel}")
    assert "clinenv/wrappers/cdeg/__init__.py" in expected
    assert sorted(expected - wheel_names) == []


def test_wheel_ships_the_report_assets(wheel_names):
    """The HTML report inlines its stylesheet and script from package data."""
    static = ROOT / "clinenv" / "report" / "static"
    expected = {f"clinenv/report/static/{p.name}" for p in static.iterdir() if p.is_file()}
    assert {"clinenv/report/static/report.css", "clinenv/report/static/report.js"} <= expected
    assert sorted(expected - wheel_names) == []


def test_wheel_ships_the_demo_cases(wheel_names):
    assert "clinenv/datasets/data/demo.jsonl" in wheel_names
    assert not any(n.endswith(("agentclinic_medqa.jsonl", "agentclinic_nejm.jsonl"))
                   for n in wheel_names)


def test_wheel_ships_the_cli_package_and_its_entry_point(wheel, wheel_names):
    assert {f"clinenv/cli/{name}.py" for name in CLI_MODULES} <= wheel_names
    assert "clinenv/cli.py" not in wheel_names
    assert "clinenv/__main__.py" in wheel_names
    (entry_points,) = [n for n in wheel_names if n.endswith(".dist-info/entry_points.txt")]
    with zipfile.ZipFile(wheel) as zf:
        text = zf.read(entry_points).decode("utf-8")
    assert "clinenv = clinenv.cli:main" in text.splitlines()


def test_installed_wheel_runs_the_command(wheel, tmp_path):
    """``python -m clinenv`` from the installed wheel alone (the checkout not on the
    path): the cli package imports and answers ``--help`` and ``data list``."""
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(site), str(wheel)], check=True, capture_output=True, timeout=300)
    env = dict(os.environ, PYTHONPATH=str(site), XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("CLINENV_DATA_DIR", None)

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)

    where = run("-c", "import clinenv.cli, clinenv.cli.run as r; print(r.__file__)")
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()) == site / "clinenv" / "cli" / "run.py"
    usage = run("-m", "clinenv", "--help")
    assert usage.returncode == 0, usage.stderr
    # argparse wraps the line at the terminal width: compared with spaces collapsed
    assert " ".join(usage.stdout.split()).startswith(
        "usage: clinenv [-h] [--version] "
        "{run,replay,data,eval,compare,cdeg,export,report,audit,serve}")
    listing = run("-m", "clinenv", "data", "list")
    assert listing.returncode == 0, listing.stderr
    demo = next(line for line in listing.stdout.splitlines() if line.startswith("demo "))
    assert str(site / "clinenv" / "datasets" / "data" / "demo.jsonl") in demo
