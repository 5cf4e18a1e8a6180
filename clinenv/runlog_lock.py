"""One writer per run log: an exclusive advisory lock held for a run's whole lifetime.

``flock(2)`` on a sidecar ``<log>.lock`` naming its holder; every writer takes it, readers
do not (docs/evaluation.md).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from clinenv.runlog import RunLogError

#: Suffix of the sidecar lock file (``runs/a.jsonl`` -> ``runs/a.jsonl.lock``).
LOCK_SUFFIX = ".lock"


class RunLogLocked(RunLogError):
    """Another process (or another run in this process) holds the log's lock.

    Attributes:
        holder: what the holder wrote into the sidecar (``pid``, ``host``, ``started``,
            ``argv``); empty when it had not written it yet.
    """

    def __init__(self, path: str | Path, holder: dict[str, Any]) -> None:
        self.holder = holder
        pid = holder.get("pid")
        host = holder.get("host")
        here = host in (None, socket.gethostname())
        if pid is None:
            who = "another run"
        elif pid == os.getpid() and here:
            who = f"another run in this process (pid {pid}"
        else:
            who = f"another run (pid {pid}" + ("" if here else f" on {host}")
        if pid is not None:
            if holder.get("started"):
                who += f", since {holder['started']}"
            who += ")"
        super().__init__(f"in use by {who}; two runs must not write one log: wait for it "
                         "to end, or write to another file", path=path)


def lock_path(log: str | Path) -> Path:
    """The sidecar lock file of ``log``: beside the file the path resolves to (symlinks
    followed, absolute), so every spelling of one log names one lock."""
    log = Path(os.path.realpath(log))
    return log.with_name(log.name + LOCK_SUFFIX)


class RunLogLock:
    """Exclusive, non-blocking lock on a run log (context manager; not re-entrant).

    Acquiring creates the log's folder when missing (and removes it again on release if
    it is still empty). A second acquisition of the same log, from any process or from
    another :class:`RunLogLock` in this one, raises :class:`RunLogLocked` at once.

    Args:
        log: the run-log path (the log itself need not exist).
    """

    def __init__(self, log: str | Path) -> None:
        self.log = Path(log)
        self.path = lock_path(self.log)  # absolute: a later chdir changes nothing
        self._fd: int | None = None
        self._made_dir: Path | None = None

    @property
    def held(self) -> bool:
        """The lock is held by this object."""
        return self._fd is not None

    def acquire(self) -> RunLogLock:
        """Take the lock.

        Raises:
            RunLogLocked: another holder has it (the message names the log and its pid).
            RunLogError: the file system cannot lock files (some network mounts).
            RuntimeError: this object holds it already.
            OSError: the folder or sidecar cannot be created.
        """
        if self._fd is not None:
            raise RuntimeError(f"{self.log}: lock already held by this object")
        parent = self.path.parent
        if not parent.exists():
            top = parent
            while not top.parent.exists():
                top = top.parent
            parent.mkdir(parents=True, exist_ok=True)
            self._made_dir = top
        try:
            self._fd = self._take()
        except BaseException:
            self._remove_made_dir()
            raise
        holder = {"pid": os.getpid(), "host": socket.gethostname(),
                  "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                  "argv": [os.path.basename(sys.argv[0]), *sys.argv[1:]] if sys.argv else []}
        data = json.dumps(holder).encode("utf-8") + b"\n"
        try:  # written before the old content is cut: a reader never sees it empty
            os.pwrite(self._fd, data, 0)
            os.ftruncate(self._fd, len(data))
        except BaseException:
            self.release()
            raise
        return self

    def _take(self) -> int:
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except PermissionError as err:
                raise RunLogError(f"cannot open its lock file {self.path} ({err.strerror}); "
                                  "a run of another user holds or left it", path=self.log
                                  ) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                raise RunLogLocked(self.log, holder) from None
            except OSError as err:
                os.close(fd)
                if err.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                    raise
                raise RunLogError(f"the file system of {self.path.parent} cannot lock files "
                                  f"({err.strerror}); write the log to a local folder",
                                  path=self.log) from None
            except BaseException:
                os.close(fd)
                raise
            # the previous holder may have unlinked the sidecar between our open and our
            # flock: then we hold a lock on a file nobody else will see; take it anew
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                return fd
            os.close(fd)

    def release(self) -> None:
        """Drop the lock and remove the sidecar (nothing when not held)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:  # unlinked while still locked, so a waiter re-checks the inode; only ours
            if os.stat(self.path).st_ino == os.fstat(fd).st_ino:
                os.unlink(self.path)
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)
        self._remove_made_dir()

    def _remove_made_dir(self) -> None:
        made, self._made_dir = self._made_dir, None
        if made is None:
            return
        parent = self.path.parent
        while True:  # rmdir only empty folders, from the deepest up to the one we made
            try:
                parent.rmdir()
            except OSError:
                return
            if parent == made:
                return
            parent = parent.parent

    def __enter__(self) -> RunLogLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:  # a lock dropped without release(): still let go of it
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None


def _read_holder(fd: int) -> dict[str, Any]:
    try:
        data = os.pread(fd, 4096, 0)
        holder = json.loads(data.decode("utf-8"))
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}
