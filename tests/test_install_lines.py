"""Install lines name what installs: clinenv is not on PyPI, so an extra is installed
from a clone, ``pip install -e '.[EXTRA]'``."""
# issue 30

from __future__ import annotations

import re
from pathlib import Path

from clinenv.errors import install_hint

ROOT = Path(__file__).resolve().parents[1]
#: ``pip install 'clinenv[x]'``, ``pip install clinenv[x]``, across a line break too.
PYPI_LINE = re.compile(r"pip\s+install\s+(?:-\S+\s+)*['\"]?clinenv\[", re.IGNORECASE)
#: Files another change owns, whose lines are fixed there (issue 30's report).
PENDING: set[str] = set()


def _files():
    for folder in ("clinenv", "agents", "wrappers", "examples", "benchmarks", "docs"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in {".py", ".md", ".sh", ".cfg", ".toml", ".yaml", ".txt"}:
                yield path
    yield from (ROOT / "README.md", ROOT / "setup.cfg")


def test_no_install_line_names_clinenv_on_pypi():
    found = [f"{path.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}"
             for path in _files() if path.relative_to(ROOT).as_posix() not in PENDING
             for text in [path.read_text(encoding="utf-8")]
             for m in PYPI_LINE.finditer(text)]
    assert not found, f"install from a clone (pip install -e '.[EXTRA]'): {found}"
    assert PYPI_LINE.search("(``pip install\n'clinenv[plot]'``)")
    assert not PYPI_LINE.search("pip install -e '.[plot]'")


def test_install_hint():
    assert install_hint("plot") == "pip install -e '.[plot]' in a clinenv clone"
    assert install_hint("ray,openai") == "pip install -e '.[ray,openai]' in a clinenv clone"


def test_the_export_extra_requires_datasets_with_json():
    """datasets 4.7.0 added ``datasets.Json`` (huggingface/datasets#8027), the type of
    the export's message columns: the ``export`` and ``trl`` extras require it."""
    import configparser

    import pytest

    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg", encoding="utf-8")
    extras = cfg["options.extras_require"]
    for extra in ("export", "trl"):
        assert "datasets>=4.7" in extras[extra].split("\n"), extra
    datasets = pytest.importorskip("datasets")
    version = tuple(int(p) for p in datasets.__version__.split(".")[:2])
    assert hasattr(datasets, "Json") == (version >= (4, 7))
