"""One ``vllm serve`` per node, as a subprocess of a node actor that holds the node's GPUs.

vLLM's own Ray executor loses the GPUs inside a Ray actor (ray #51242, vllm #14610);
the child process dies with its actor (docs/cluster.md).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import field_validator

from clinenv.config_model import ConfigModel
from clinenv.errors import ClinenvError

__all__ = ["ServeConfig", "ServeError", "VLLMServer", "serve_command", "server_nodes"]

#: Lines of the server's log quoted by a startup error.
LOG_TAIL_LINES = 20
#: Seconds between two health checks while a server starts.
HEALTH_POLL_S = 0.5
#: ``ServeConfig()`` without a model given by position.
_UNSET: Any = object()


class ServeError(ClinenvError, RuntimeError):
    """A node's ``vllm serve`` did not come up: it exited, or its health check did not
    answer in time; the message names the node, the command and the log's last lines."""


class ServeConfig(ConfigModel):
    """How to serve a model on every node (``--ray-serve MODEL``); frozen, checked on
    creation; the model may be given by position: ``ServeConfig("Qwen/Qwen3-8B")``.

    Attributes:
        model: a Hugging Face id or a path on the nodes; the name vLLM serves it under.
        port: the port on each node's loopback (1..65535, default 8000; 0: a free one).
        args: extra ``vllm serve`` arguments, kept as a tuple of strings.
        executable: the ``vllm`` program (on each node's ``PATH``).
        startup_timeout_s: seconds to wait for the health check (> 0).
        gpus_per_node: GPUs per server (>= 1); ``None``: all of the node's.

    Raises:
        pydantic.ValidationError: an empty model, a bad port, a non-positive timeout or
            GPU count, an ``args`` entry that is not a string, or an unknown field.
        TypeError: ``model`` given both by position and by name.
    """

    model: str
    port: int = 8000
    args: tuple[str, ...] = ()
    executable: str = "vllm"
    startup_timeout_s: float = 1800.0
    gpus_per_node: int | None = None

    def __init__(self, model: Any = _UNSET, /, **data: Any) -> None:
        if model is not _UNSET:
            if "model" in data:
                raise TypeError("ServeConfig() got multiple values for argument 'model'")
            data["model"] = model
        super().__init__(**data)

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"model must be a non-empty string, got {value!r}")
        return value

    @field_validator("port", mode="before")
    @classmethod
    def _port(cls, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
            raise ValueError(f"port must be an integer in 0..65535, got {value!r}")
        return value

    @field_validator("startup_timeout_s", mode="before")
    @classmethod
    def _startup_timeout_s(cls, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise ValueError(f"startup_timeout_s must be > 0, got {value!r}")
        return value

    @field_validator("gpus_per_node", mode="before")
    @classmethod
    def _gpus_per_node(cls, value: Any) -> int | None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            raise ValueError(f"gpus_per_node must be None or an integer >= 1, got "
                             f"{value!r}")
        return value

    @field_validator("args", mode="before")
    @classmethod
    def _args(cls, value: Any) -> tuple[str, ...]:
        args = tuple(value)
        if not all(isinstance(a, str) for a in args):
            raise ValueError(f"args must be strings, got {list(args)!r}")
        return args

    def url(self, port: int) -> str:
        """The base URL of a server on ``port`` of the node's loopback."""
        return f"http://127.0.0.1:{port}/v1"


def serve_command(config: ServeConfig, port: int, gpus: int) -> list[str]:
    """The command line of one node's server (docs/cluster.md)."""
    command = [config.executable, "serve", config.model, "--host", "127.0.0.1",
               "--port", str(port)]
    if gpus > 1:
        command += ["--tensor-parallel-size", str(gpus)]
    return command + list(config.args)


def server_nodes(nodes: Sequence[Any], config: ServeConfig) -> list[tuple[Any, int]]:
    """``[(node, gpus), ...]``: the nodes that get a server and the GPUs each holds —
    every node with a GPU, or every node when none has one (0 GPUs)."""
    with_gpus = [node for node in nodes if node.gpus > 0]
    if not with_gpus:
        return [(node, 0) for node in nodes]
    return [(node, min(node.gpus, config.gpus_per_node or node.gpus)) for node in with_gpus]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Ask Linux to send SIGTERM to this child when its parent dies."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except OSError:
            pass


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:  # noqa: S310 - loopback only
            return reply.status == 200
    except (urllib.error.URLError, OSError):
        return False


class VLLMServer:
    """The node actor of one node's ``vllm serve`` (docs/cluster.md); wrapped with
    ``ray.remote`` by :mod:`clinenv.distributed.driver`, or used directly.

    Args:
        config: what to serve.
        gpus: the GPUs this actor holds (0 on a CPU node).
    """

    def __init__(self, config: ServeConfig, gpus: int = 0) -> None:
        self.config = config
        self.gpus = int(gpus)
        self.process: subprocess.Popen | None = None
        self.port = 0
        self.log_path: Path | None = None

    def start(self) -> dict[str, Any]:
        """Start the server and wait for its health check.

        Returns:
            ``{"url", "port", "pid", "log", "command", "cuda_visible_devices"}``.

        Raises:
            ServeError: the program is missing, exited before it was healthy, or was not
                healthy within ``startup_timeout_s`` (then it is stopped).
        """
        if self.process is not None:
            return self.info()
        config = self.config
        self.port = config.port or _free_port()
        command = serve_command(config, self.port, self.gpus)
        fd, name = tempfile.mkstemp(prefix="clinenv-vllm-", suffix=".log")
        self.log_path = Path(name)
        try:
            self.process = subprocess.Popen(  # noqa: S603 - our own command line
                command, stdin=subprocess.DEVNULL, stdout=fd, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent)  # noqa: PLW1509 - only a prctl call
        except FileNotFoundError:
            raise ServeError(f"{self._where()}: {config.executable!r} is not on PATH; "
                             "install vLLM on every GPU node") from None
        finally:
            os.close(fd)
        health = f"http://127.0.0.1:{self.port}/health"
        deadline = time.monotonic() + config.startup_timeout_s
        while not _healthy(health):
            code = self.process.poll()
            if code is not None:
                raise ServeError(f"{self._where()}: `{' '.join(command)}` exited with code "
                                 f"{code} before its health check answered{self._tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise ServeError(f"{self._where()}: `{' '.join(command)}` did not answer "
                                 f"{health} within {config.startup_timeout_s:g} s"
                                 f"{self._tail()}")
            time.sleep(HEALTH_POLL_S)
        return self.info()

    def info(self) -> dict[str, Any]:
        """The running server: ``{"url", "port", "pid", "log", "command",
        "cuda_visible_devices"}``."""
        return {"url": self.config.url(self.port), "port": self.port,
                "pid": None if self.process is None else self.process.pid,
                "log": str(self.log_path), "command": serve_command(self.config, self.port,
                                                                    self.gpus),
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}

    def stop(self, grace_s: float = 30.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``grace_s``). Idempotent."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _where(self) -> str:
        node = "local"
        try:
            import ray

            if ray.is_initialized():
                node = ray.get_runtime_context().get_node_id()
        except ImportError:  # used without Ray
            pass
        return f"node {node} ({socket.gethostname()})"

    def _tail(self) -> str:
        if self.log_path is None:
            return ""
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        tail = "\n".join(lines[-LOG_TAIL_LINES:])
        return f"; log {self.log_path}:\n{tail}" if tail else f"; log {self.log_path} is empty"
