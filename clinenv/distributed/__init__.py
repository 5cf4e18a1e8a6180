"""One run across many machines on Ray (``clinenv[ray]``, ``ray>=2.60``): runner actors
near node-local LLM servers, one run log on the driver, nothing lost when a node dies.

- :mod:`~clinenv.distributed.driver` — :func:`run_ray`: the schedule, resume and log of
  a one-machine run (:mod:`clinenv.runs.logged`), its episodes on Ray;
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

    from clinenv.distributed import RunnerParts, run_ray

    def parts(base_url):  # module-level: it travels to every node
        return RunnerParts(make_env=lambda: gym.make("EGIP-Demo-v0"),
                           make_doctor=ScriptedDoctor)

    result = run_ray(parts, out="runs/demo.jsonl", address="local", runners=2)

Running on a real cluster (``ray up``, KubeRay, one vLLM server per node, where the log
goes, resuming) is described in ``docs/cluster.md``.
"""

from __future__ import annotations

from clinenv.distributed.driver import RayRunError, RayRunResult, run_ray
from clinenv.distributed.placement import (
    BaseUrlMapError,
    NoServerError,
    UrlPlan,
    read_base_url_map,
)
from clinenv.distributed.runner import EpisodeRunner, PartsFactory, RunnerParts
from clinenv.distributed.serve import ServeConfig, ServeError, VLLMServer

__all__ = [
    "BaseUrlMapError", "EpisodeRunner", "NoServerError", "PartsFactory", "RayRunError",
    "RayRunResult", "RunnerParts", "ServeConfig", "ServeError", "UrlPlan", "VLLMServer",
    "read_base_url_map", "run_ray",
]
