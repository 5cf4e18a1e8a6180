"""One run across many machines on Ray (``clinenv[ray]``, ``ray>=2.60``): runner actors
near node-local LLM servers, one run log on the driver, nothing lost when a node dies.

:class:`Ray` is the executor of :func:`clinenv.runs.run` and :class:`RayConfig` its
options; Ray is imported only when a run starts (docs/cluster.md).
"""

from __future__ import annotations

from clinenv.distributed.config import RayConfig
from clinenv.distributed.driver import FactoryParts, Ray, RayRunError, RayRunResult
from clinenv.distributed.placement import (
    BaseUrlMapError,
    NoServerError,
    UrlPlan,
    read_base_url_map,
)
from clinenv.distributed.runner import EpisodeRunner, PartsFactory, RunnerParts
from clinenv.distributed.serve import ServeConfig, ServeError, VLLMServer

__all__ = [
    "BaseUrlMapError", "EpisodeRunner", "FactoryParts", "NoServerError", "PartsFactory",
    "Ray", "RayConfig", "RayRunError", "RayRunResult", "RunnerParts", "ServeConfig",
    "ServeError", "UrlPlan", "VLLMServer", "read_base_url_map",
]
