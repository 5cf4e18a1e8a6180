"""Repair of a run log that holds an episode twice (``clinenv data dedupe LOG``).

:func:`dedupe_run_log` keeps each episode's standing line and moves later duplicates to
``<log>.dropped``, rewriting the log atomically under its lock (docs/evaluation.md).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from clinenv.runlog import KEY, EpisodeLines, episode_key, read_run_log
from clinenv.runlog_lock import RunLogLock

#: Suffix of the file that receives the dropped lines.
DROPPED_SUFFIX = ".dropped"
#: Fields that differ between two runs of one episode even with identical replies.
VOLATILE_FIELDS = ("timing", "llm")


@dataclass(frozen=True)
class DroppedLine:
    """One line moved out of the log.

    Attributes:
        line: its 1-based line number in the original log.
        key: its episode ``(case_id, repetition)``.
        kept_line: the line number of the line kept for that episode.
        same: it equals the kept line apart from :data:`VOLATILE_FIELDS`.
    """

    line: int
    key: KEY
    kept_line: int
    same: bool


@dataclass
class DedupeResult:
    """What :func:`dedupe_run_log` found and did.

    Attributes:
        path: the log.
        n_lines: complete lines read.
        dropped: the lines dropped, in file order.
        dropped_path: where they were appended (``None`` when nothing was dropped or on
            a dry run).
        written: the log was rewritten (false on a dry run or with nothing to drop).
    """

    path: Path
    n_lines: int
    dropped: list[DroppedLine] = field(default_factory=list)
    dropped_path: Path | None = None
    written: bool = False

    @property
    def n_kept(self) -> int:
        """Lines left in the log."""
        return self.n_lines - len(self.dropped)

    @property
    def n_differing(self) -> int:
        """Dropped lines whose content (beyond timing and llm) differs from the kept."""
        return sum(not d.same for d in self.dropped)


def dropped_path(log: str | Path) -> Path:
    """The file receiving ``log``'s dropped lines (``<log>.dropped``)."""
    log = Path(log)
    return log.with_name(log.name + DROPPED_SUFFIX)


def dedupe_run_log(path: str | Path, *, dry_run: bool = False) -> DedupeResult:
    """Drop every line of an episode that already has a standing line.

    The standing line is the first line of an episode, or the first after its error
    lines (:class:`clinenv.runlog.EpisodeLines`); every later line of a standing episode
    is appended, byte for byte, to ``<log>.dropped`` and the log is rewritten atomically
    under its lock (docs/evaluation.md, "The run-log line", *One writer per log*).

    Args:
        path: the run log.
        dry_run: only report what would be dropped; write nothing.

    Returns:
        A :class:`DedupeResult`.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        RunLogLocked: a run is writing the log.
        RunLogError: a complete line is not a run-log line (nothing is changed).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such run log")
    real = Path(os.path.realpath(path))  # a symlink's target is rewritten, not the link
    with RunLogLock(real):
        data = path.read_bytes()
        log = read_run_log(path)
        chunks = data.split(b"\n")
        index = EpisodeLines()
        result = DedupeResult(path, len(log.lines))
        drop: set[int] = set()
        for line, number in zip(log.lines, log.line_numbers, strict=True):
            earlier = index.add(line, number)
            if earlier is not None:
                kept = index.lines[episode_key(line)]
                same = _strip(line) == _strip(kept)
                result.dropped.append(DroppedLine(number, episode_key(line), earlier, same))
                drop.add(number)
        if dry_run or not drop:
            return result
        complete = set(log.line_numbers)
        kept_bytes = b"".join(chunks[n - 1] + b"\n" for n in range(1, len(chunks))
                              if n in complete and n not in drop)
        tail = chunks[-1] if log.partial_bytes else b""
        if not log.partial_bytes and log.line_numbers and log.line_numbers[-1] == len(chunks):
            # a complete last line without a final newline: it is kept with one
            kept_bytes += b"" if len(chunks) in drop else chunks[-1] + b"\n"
        target = dropped_path(real)
        mode = real.stat().st_mode & 0o7777
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode)  # the log's mode
        with os.fdopen(fd, "ab") as fh:  # first: a crash before the rewrite loses nothing
            fh.write(b"".join(chunks[n - 1] + b"\n" for n in sorted(drop)))
            fh.flush()
            os.fsync(fh.fileno())
        _replace(real, kept_bytes + tail)
        result.dropped_path, result.written = target, True
        return result


def _strip(line: dict) -> dict:
    return {k: v for k, v in line.items() if k not in VOLATILE_FIELDS}


def _replace(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


__all__ = ["DROPPED_SUFFIX", "DedupeResult", "DroppedLine", "dedupe_run_log", "dropped_path"]
