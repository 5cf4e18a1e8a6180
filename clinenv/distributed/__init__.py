"""One run across many machines on Ray (``clinenv[ray]``, ``ray>=2.60``): runner actors
near node-local LLM servers, one run log on the driver, nothing lost when a node dies.

:class:`Ray` (:mod:`~clinenv.distributed.driver`) is the executor of
:func:`clinenv.runs.run` on Ray, with :class:`RayConfig` its options; Ray is imported only
when a run starts. A minimal run (a scripted doctor needs no server)::

    result = run(make_env, ScriptedDoctor, RunSpec(out="runs/demo.jsonl"),
                 Ray(RayConfig(address="local", runners=2)))

``make_env`` must be module-level (it travels to every node); an LLM doctor needs a
parts factory ``Ray(config, parts=parts)`` (:mod:`~clinenv.distributed.runner`). Real
clusters: docs/cluster.md.
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
