"""The runner actor: many episodes at once on one node, against that node's LLM server.

It is built on its node from a parts factory ``parts(base_url) -> RunnerParts`` and
returns each episode's record; the driver writes the line (docs/cluster.md).
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clinenv.distributed.placement import UrlPlan
from clinenv.runlog import doctor_config
from clinenv.runs.concurrent import arun_episode

__all__ = ["EpisodeRunner", "PartsFactory", "RunnerParts", "identity"]


@dataclass
class RunnerParts:
    """What a parts factory returns on a node.

    Attributes:
        make_env: factory of a fresh environment (a Gymnasium environment over
            :class:`clinenv.env.EGIPEnv`).
        make_doctor: factory of a fresh doctor; every doctor has the same config.
        close: called once when the runner stops (e.g. closes the model clients), or
            ``None``.
    """

    make_env: Callable[[], Any]
    make_doctor: Callable[[], Any]
    close: Callable[[], None] | None = None


#: ``parts(base_url) -> RunnerParts``: picklable (module-level functions, classes, or
#: ``functools.partial`` of them), called on each runner's node with its server's URL.
PartsFactory = Callable[[str | None], RunnerParts]


def identity(env: Any, doctor: Any) -> dict[str, Any]:
    """What must agree between the driver and every runner: ``{"dataset",
    "dataset_sha256", "case_ids_sha256", "doctor", "clinenv_version"}`` (sha256 of the
    case ids in dataset order, newline-joined; the doctor as :func:`doctor_config`)."""
    from clinenv import __version__

    pool = env.unwrapped.pool
    ids = "\n".join(case.case_id for case in pool.cases).encode("utf-8")
    return {"dataset": pool.name, "dataset_sha256": pool.sha256,
            "case_ids_sha256": hashlib.sha256(ids).hexdigest(),
            "doctor": doctor_config(doctor), "clinenv_version": __version__}


class EpisodeRunner:
    """One runner (docs/cluster.md); an asynchronous Ray actor once wrapped with
    ``ray.remote`` (:mod:`clinenv.distributed.driver` does so).

    Args:
        parts: the parts factory.
        urls: the servers of every node; the runner looks up its own node's.
        index: the runner's number in the run (for messages).
    """

    def __init__(self, parts: PartsFactory, urls: UrlPlan, index: int) -> None:
        import ray

        self.index = index
        context = ray.get_runtime_context()
        self.node = {"node_id": context.get_node_id(), "ip": ray.util.get_node_ip_address(),
                     "hostname": socket.gethostname()}
        self.base_url: str | None = None
        self.url_source = "none"
        self.error: str | None = None
        self._parts: RunnerParts | None = None
        self._idle: list[tuple[Any, Any]] = []
        self._envs: list[Any] = []
        self._identity: dict[str, Any] | None = None
        self.n_episodes = 0
        try:
            self.base_url, self.url_source = urls.resolve(**self.node)
            self._parts = parts(self.base_url)
            env, doctor = self._new_pair()
            self._identity = identity(env, doctor)
            self._idle.append((env, doctor))
        except Exception as err:  # noqa: BLE001 - reported by info(), named by the driver
            self.error = f"{type(err).__name__}: {err}"

    def _new_pair(self) -> tuple[Any, Any]:
        assert self._parts is not None
        env = self._parts.make_env()
        self._envs.append(env)
        doctor = self._parts.make_doctor()
        if self._identity is not None and doctor_config(doctor) != self._identity["doctor"]:
            raise ValueError("make_doctor() must build identically configured doctors (got "
                             f"{doctor_config(doctor)} after {self._identity['doctor']})")
        return env, doctor

    async def info(self) -> dict[str, Any]:
        """``{"index", "node_id", "ip", "hostname", "pid", "base_url", "url_source",
        "identity", "error", "n_episodes"}`` (``n_episodes``: played since this process
        started); ``error`` is ``None`` unless the runner could not start (then
        ``identity`` is ``None``)."""
        return {"index": self.index, **self.node, "pid": os.getpid(),
                "base_url": self.base_url, "url_source": self.url_source,
                "identity": self._identity, "error": self.error,
                "n_episodes": self.n_episodes}

    async def run(self, item: tuple[int, int, int]) -> dict[str, Any]:
        """Play one work unit ``(case_index, repetition, seed)``; returns the episode
        record of :func:`clinenv.runs.concurrent.arun_episode`.

        Raises:
            RuntimeError: the runner could not start (:meth:`info` says why).
        """
        if self.error is not None:
            raise RuntimeError(f"runner {self.index} could not start: {self.error}")
        pair = self._idle.pop() if self._idle else self._new_pair()
        try:
            record = await arun_episode(pair[0], pair[1], case_id=item[0], seed=item[2])
        finally:
            self._idle.append(pair)
        self.n_episodes += 1
        return record

    async def close(self) -> None:
        """Close every environment made here, then the parts (idempotent)."""
        envs, self._envs, self._idle = self._envs, [], []
        for env in envs:
            env.close()
        parts, self._parts = self._parts, None
        if parts is not None and parts.close is not None:
            parts.close()
