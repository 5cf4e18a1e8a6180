"""Where the report commands write, and the one rule for their earlier outputs.

``eval``, ``compare``, ``report`` and ``export`` each replace their own earlier outputs
(:data:`OWNED`) and never a run log (docs/cli.md).
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from clinenv.cli.errors import CLIError

__all__ = ["OWNED", "OutputSweep", "check_not_run_log", "check_out_dir", "check_out_file",
           "owned_files", "replaced_line"]

#: File-name patterns (``fnmatch``) each command owns in its ``--out-dir``.
OWNED: dict[str, tuple[str, ...]] = {
    "eval": tuple(f"{stem}.{ext}" for stem in ("accuracy", "accuracy_by_*")
                  for ext in ("md", "csv", "png"))
    + tuple(f"{stem}.{ext}" for stem in ("components", "components_by_*")
            for ext in ("md", "csv")),
    "compare": tuple(f"{stem}.{ext}"
                     for stem in ("comparison", "comparison_by_*", "sensitivity",
                                  "sensitivity_by_*", "review", "agreement")
                     for ext in ("md", "csv", "png")),
}


def _plural(n: int, word: str = "file") -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def replaced_line(n: int, folder: Path) -> str | None:
    """``replaced N earlier file(s) in FOLDER``, or ``None`` for none."""
    return f"replaced {_plural(n, 'earlier file')} in {folder}" if n else None


def _nearest_existing(path: Path) -> Path:
    for above in (path, *path.parents):
        if above.exists():
            return above
    return Path(".")


def _check_folder_can_hold(folder: Path, option: str, given: Path) -> None:
    """``folder`` is a writable folder, or can be created under one."""
    above = _nearest_existing(folder)
    if not above.is_dir():
        if above == given:
            raise CLIError(f"{option} {given} is a file, not a folder")
        raise CLIError(f"{option} {given}: {above} is a file, not a folder")
    if not os.access(above, os.W_OK | os.X_OK):
        raise CLIError(f"{option} {given}: {above} is not writable")


def check_out_dir(out_dir: Path, names: Iterable[str] = (), *,
                  option: str = "--out-dir") -> None:
    """Refuse an ``--out-dir`` that cannot be written, before any work.

    Args:
        out_dir: the folder (created later when missing).
        names: file names the command will write there; one that is a folder is refused.

    Raises:
        CLIError: ``out_dir`` (or the nearest existing folder above it) is a file or not
            writable, or one of ``names`` is a folder.
    """
    _check_folder_can_hold(out_dir, option, out_dir)
    for name in names:
        if (out_dir / name).is_dir():
            raise CLIError(f"{option} {out_dir}: {out_dir / name} is a folder, where the "
                           f"file {name} goes")


def check_out_file(out: Path, *, option: str = "--out") -> None:
    """Refuse an output file that cannot be written, before any work.

    Raises:
        CLIError: ``out`` is a folder, its folder lies under a file or is not writable,
            or it holds a run log (:func:`check_not_run_log`).
    """
    if out.is_dir():
        raise CLIError(f"{option} {out} is a folder; give a file path")
    _check_folder_can_hold(out.parent, option, out)
    if out.exists() and not os.access(out, os.W_OK):
        raise CLIError(f"{option} {out}: the file is not writable")
    check_not_run_log(out, option=option)


def is_run_log(path: Path) -> bool:
    """``path`` is a file whose first line is a ``clinenv run`` log line."""
    from clinenv.runlog import SCHEMA

    try:
        with path.open("rb") as fh:
            first = fh.readline(1 << 20)
    except OSError:
        return False
    try:
        line = json.loads(first.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError):
        return False
    return isinstance(line, dict) and str(line.get("schema", "")).split("/")[0] == \
        SCHEMA.split("/")[0]


def check_not_run_log(out: Path, *, option: str = "--out") -> None:
    """Raises:
        CLIError: ``out`` holds a ``clinenv run`` log (never overwritten).
    """
    if out.is_file() and is_run_log(out):
        raise CLIError(f"{option} {out} is a clinenv run log; run logs are never "
                       "overwritten: give another file")


def owned_files(folder: Path, command: str) -> set[Path]:
    """The files of ``folder`` (not below it) whose names ``command`` owns."""
    if not folder.is_dir():
        return set()
    patterns = OWNED[command]
    return {path for path in folder.iterdir()
            if path.is_file() and any(fnmatch.fnmatchcase(path.name, p) for p in patterns)}


class OutputSweep:
    """The earlier files of one command in its ``--out-dir``: taken before writing;
    :meth:`finish` removes those this call did not write and returns the lines to print
    (``replaced N earlier files in DIR``; ``removed M earlier files of clinenv CMD in
    DIR that this call did not write: NAMES``)."""

    def __init__(self, folder: Path, command: str) -> None:
        self.folder = folder
        self.command = command
        self.before = owned_files(folder, command)

    def finish(self, written: Sequence[Path]) -> list[str]:
        now = {Path(p).name for p in written}
        replaced = sorted(p for p in self.before if p.name in now)
        stale = sorted(p for p in self.before if p.name not in now)
        removed = []
        for path in stale:
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            except OSError as err:
                raise CLIError(f"--out-dir {self.folder}: cannot remove the earlier "
                               f"{path.name}: {err.strerror or err}") from None
            removed.append(path)
        lines = [line for line in [replaced_line(len(replaced), self.folder)] if line]
        if removed:
            lines.append(f"removed {_plural(len(removed), 'earlier file')} of clinenv "
                         f"{self.command} in {self.folder} that this call did not write: "
                         + ", ".join(p.name for p in removed))
        return lines
