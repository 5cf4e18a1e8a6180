"""``clinenv serve`` in a subprocess on 127.0.0.1 (a free port), for tests: started,
waited for (``GET /health``), its stderr log read, stopped. Needs ``clinenv[openenv]``
(``httpx`` comes with it).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (free when asked; another process may take it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServeProcess:
    """``python -m clinenv serve --port PORT *args`` with its stderr in
    ``folder/serve.log``; returns once ``/health`` answers 200.

    Attributes: ``port``, ``url`` (``http://127.0.0.1:PORT``), ``proc`` (the Popen).

    Raises:
        AssertionError: the process exits, or ``/health`` does not answer within
            ``start_timeout_s`` (the log's text in the message).
    """

    def __init__(self, folder: Path, *args: str, cwd: Path | None = None,
                 start_timeout_s: float = 180.0) -> None:
        import httpx

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(folder) / "serve.log"
        self._log_file = self.log_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "clinenv", "serve", "--port", str(self.port), *args],
            cwd=cwd, stdout=subprocess.DEVNULL, stderr=self._log_file,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + start_timeout_s  # importing openenv imports gradio
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.stop()
                raise AssertionError("server exited:\n" + self.log())
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.3)
        self.stop()
        raise AssertionError("server did not start:\n" + self.log())

    def log(self) -> str:
        """The server's stderr so far."""
        return self.log_path.read_text()

    def stop(self) -> None:
        """Kill the process (if running) and close the log file."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._log_file.close()
