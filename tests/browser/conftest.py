"""A real headless Chromium for the report's browser tests, driven by Selenium.

Debian's ``chromium`` and ``chromium-driver`` (``apt-get install -y chromium
chromium-driver``; ``.ci/run`` installs them) and the ``browser`` extra (``pip install -e
'.[browser]'``: selenium). The driver is started from its own executable through
``Service`` so that selenium-manager never downloads a browser; ``CLINENV_CHROMIUM`` and
``CLINENV_CHROMEDRIVER`` name other executables. Without them the tests skip and say how
to get them.

Screenshots are test artifacts kept under ``reports/browser/`` at the repository root
(ignored by git, beside ``clinenv eval``'s default ``reports/``), or under the folder
named by ``CLINENV_ARTIFACTS``; the test prints the path.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

#: Chromium flags that work in a container without a display, sandbox or network.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,2000")
HOW_TO = ("apt-get install -y chromium chromium-driver (Debian), then "
          "pip install -e '.[test,browser]'; or set CLINENV_CHROMIUM and CLINENV_CHROMEDRIVER")


def _executable(variable: str, *names: str) -> str | None:
    named = os.environ.get(variable, "").strip()
    if named:
        return named if Path(named).is_file() else None
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


def start_chromium():
    """A Selenium Chrome driver on headless Chromium (the caller quits it), or a skip."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip(f"selenium is not installed: {HOW_TO}")
    binary = _executable("CLINENV_CHROMIUM", "chromium", "chromium-browser")
    driver_path = _executable("CLINENV_CHROMEDRIVER", "chromedriver")
    if binary is None or driver_path is None:
        pytest.skip(f"no headless Chromium found (chromium: {binary}, chromedriver: "
                    f"{driver_path}): {HOW_TO}")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tempfile.mkdtemp(prefix='clinenv-chromium-')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=driver_path), options=options)


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium per test module."""
    driver = start_chromium()
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """The folder where screenshots are kept (see the module docstring)."""
    named = os.environ.get("CLINENV_ARTIFACTS", "").strip()
    folder = Path(named) if named else Path(__file__).resolve().parents[2] / "reports" / "browser"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
