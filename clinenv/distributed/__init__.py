"""One run across many machines on Ray (``clinenv[ray]``, ``ray>=2.60``): runner actors
near node-local LLM servers, one run log on the driver, nothing lost when a node dies.

- :mod:`~clinenv.distributed.driver` — :class:`Ray`, the executor of
  :func:`clinenv.runs.run` on Ray: the schedule, resume and log of a one-machine run
  (:mod:`clinenv.runs.logged`), its episodes on Ray;
- :mod:`~clinenv.distributed.config` — :class:`RayConfig`, Ray's own options (address,
  runners, servers...);
- :mod:`~clinenv.distributed.runner` — :class:`EpisodeRunner`, the runner actor (many
  episodes at once, :func:`clinenv.runs.concurrent.arun_episode`), and
  :class:`RunnerParts`, what it is built from;
- :mod:`~clinenv.distributed.placement` — which server each runner uses
  (:class:`UrlPlan`, :func:`read_base_url_map`) and where runners go;
- :mod:`~clinenv.distributed.serve` — one ``vllm serve`` per GPU node as a subprocess of
  a node actor (:class:`ServeConfig`, :class:`VLLMServer`);
- :mod:`~clinenv.distributed.units` — work units and their grouping by case.

Ray is imported only when a run starts (and by the actors), so this package imports
without it; nothing in the core imports this package. A minimal run (a scripted doctor
needs no server)::

    from clinenv.distributed import Ray, RayConfig
    from clinenv.runs import RunSpec, run

    def make_env():  # module-level: it travels to every node
        return gym.make("EGIP-Demo-v0")

    result = run(make_env, ScriptedDoctor, RunSpec(out="runs/demo.jsonl"),
                 Ray(RayConfig(address="local", runners=2)))

An LLM doctor talks to its node's server: give ``Ray(config, parts=parts)`` a parts
factory ``parts(base_url) -> RunnerParts`` instead (:mod:`~clinenv.distributed.runner`).

Running on a real cluster (``ray up``, KubeRay, one vLLM server per node, where the log
goes, resuming) is described in ``docs/cluster.md``.
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
