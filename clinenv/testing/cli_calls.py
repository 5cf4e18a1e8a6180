"""The ``clinenv`` command line called from tests: as a real subprocess
(:func:`run_cli`, ``python -m clinenv``) or in this process (:func:`main_cli`), and
readers of what it prints and writes.

Both run in a given folder with ``folder/cache`` as the user cache and an absent
``folder/no-data`` as ``CLINENV_DATA_DIR`` (only the bundled demo set is found), and
check the exit code. In-process calls go through the console-script entry point
(:func:`clinenv_main`); pytest is imported only by :func:`main_cli`.
"""

from __future__ import annotations

import contextlib
import csv
import gc
import io
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path


def clinenv_main() -> Callable[[list[str] | None], int]:
    """The ``clinenv`` command's entry point (``main(argv) -> exit code``), loaded from the
    installed distribution's ``console_scripts``, as the command itself loads it."""
    (entry,) = entry_points(group="console_scripts", name="clinenv")
    return entry.load()


def run_cli(cwd: Path, *args: str, code: int = 0, env_extra: dict | None = None
            ) -> subprocess.CompletedProcess:
    """``python -m clinenv ARGS`` in ``cwd``; checks the exit code and that no traceback
    is printed."""
    env = dict(os.environ, PYTHONIOENCODING="utf-8", XDG_CACHE_HOME=str(cwd / "cache"),
               CLINENV_DATA_DIR=str(cwd / "no-data"))
    env.update(env_extra or {})
    proc = subprocess.run([sys.executable, "-m", "clinenv", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, encoding="utf-8", timeout=300)
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def main_cli(cwd: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess:
    """The ``clinenv`` command's ``main`` (:func:`clinenv_main`) with ARGS in this process,
    set up like :func:`run_cli` (``cwd`` the current folder, ``cwd/cache`` the user cache,
    ``CLINENV_DATA_DIR`` an absent folder); checks the exit code (an argparse error's
    ``SystemExit`` gives its code). stdout and stderr are captured, and every warning raised
    meanwhile is appended to stderr as Python prints one, so a check on stderr sees it as
    in a subprocess."""
    import pytest

    main = clinenv_main()
    out, err = io.StringIO(), io.StringIO()
    # Earlier tests' cyclic garbage (e.g. a client socket) is collected here, not by a
    # collection inside the recording below, where its ResourceWarning would read as this
    # command's; with the collector paused, what warns is what the command drops itself.
    gc.collect()
    gc.disable()
    with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        patch.chdir(cwd)
        patch.setenv("XDG_CACHE_HOME", str(cwd / "cache"))
        patch.setenv("CLINENV_DATA_DIR", str(cwd / "no-data"))
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                returncode = main(list(args))
            except SystemExit as exit_:
                returncode = exit_.code
            finally:
                gc.enable()
    stderr = err.getvalue() + "".join(
        warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in seen)
    proc = subprocess.CompletedProcess(["clinenv", *args], returncode, out.getvalue(), stderr)
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    return proc


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The one line of ``proc``'s stderr, checked to be ``clinenv: error: ...``."""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("clinenv: error: "), proc.stderr
    return lines[0]


def read_csv(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV table ``clinenv`` wrote."""
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))
