"""Ray's own options of a run, in one object: :class:`RayConfig`.

What the run is stays the :class:`~clinenv.runs.spec.RunSpec`; ``clinenv run --ray``
builds a :class:`RayConfig` from its flags.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationInfo, field_validator, model_validator

from clinenv.config_model import ConfigModel
from clinenv.distributed.serve import ServeConfig

__all__ = ["RayConfig"]

#: The lowest value of each integer field.
_LOWEST = {"concurrency": 1, "max_restarts": 0, "runners": 1}


def _integer(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return value


class RayConfig(ConfigModel):
    """Where and how a run goes on Ray; frozen, checked on creation (``config.replace(...)``).

    Attributes:
        address: ``"local"``, ``"auto"``, ``"ray://HOST:PORT"``, ``"HOST:PORT"`` or ``None``.
        runners: runner actors (>= 1); ``None``: one per node with a server.
        concurrency: episodes in flight per runner (>= 1).
        base_url, base_url_map: the server of every node; node (Ray id, IP or hostname) ->
            base URL, or a JSON file of it (docs/cluster.md).
        serve: start ``vllm serve`` on every GPU node (:class:`~clinenv.distributed.serve.
            ServeConfig`); not with ``base_url`` or ``base_url_map``.
        runner_cpus, max_restarts: Ray ``num_cpus`` of each runner and restarts of a
            runner process that dies (both >= 0).
        runner_timeout_s: seconds a runner gets to start or come back (> 0).
        env_vars: the runners' environment variables (e.g. ``CLINENV_DATA_DIR``).
        ray_init: more ``ray.init`` keywords.

    Raises:
        pydantic.ValidationError: a bad value (integers are strict), an unknown field,
            or ``serve`` with a URL or map.
    """

    address: str | None = None
    runners: int | None = None
    concurrency: int = 8
    base_url: str | None = None
    base_url_map: Mapping[str, str] | str | Path | None = None
    serve: ServeConfig | None = None
    runner_cpus: float = 1.0
    max_restarts: int = 3
    runner_timeout_s: float = 180.0
    env_vars: Mapping[str, str] | None = None
    ray_init: Mapping[str, Any] | None = None

    @field_validator("concurrency", "max_restarts", "runners", mode="before")
    @classmethod
    def _integers(cls, value: Any, info: ValidationInfo) -> int | None:
        name = str(info.field_name)
        if value is None and name == "runners":
            return None
        return _integer(name, value, _LOWEST[name])

    @field_validator("runner_cpus", mode="before")
    @classmethod
    def _runner_cpus(cls, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ValueError(f"runner_cpus must be a number >= 0, got {value!r}")
        return value

    @field_validator("runner_timeout_s", mode="before")
    @classmethod
    def _runner_timeout_s(cls, value: Any) -> float:
        if isinstance(value, bool) or not (isinstance(value, int | float) and value > 0):
            raise ValueError(f"runner_timeout_s must be > 0, got {value!r}")
        return value

    @model_validator(mode="after")
    def _serve_alone(self) -> RayConfig:
        if self.serve is not None and (self.base_url or self.base_url_map):
            raise ValueError("serve starts a server on every node and uses it there; give "
                             "neither base_url nor base_url_map with it")
        return self
