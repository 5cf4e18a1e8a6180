"""``clinenv run --ray``: its options, checked before anything is built, and the picklable
parts factory that builds each runner's models, environments and doctors on its node
(:mod:`clinenv.distributed`, docs/cluster.md)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from clinenv.cli.argtypes import count
from clinenv.cli.env_choice import make_env
from clinenv.cli.errors import CLIError
from clinenv.cli.llm_setup import LLMConfig, LLMSeats
from clinenv.errors import install_hint


def add_ray_arguments(run: argparse.ArgumentParser) -> None:
    """The ``--ray`` options of ``clinenv run`` (:mod:`clinenv.distributed`)."""
    ray = run.add_argument_group("Ray: one run across many machines (clinenv[ray]; "
                                 "docs/cluster.md)")
    ray.add_argument("--ray", default=None, metavar="ADDRESS",
                     help="run the episodes on Ray runner actors: 'local' starts a Ray on "
                          "this machine, 'auto' or ray://HOST:PORT joins a cluster; the log, "
                          "summary and --resume are those of a one-machine run, and "
                          "--concurrency counts episodes at once per runner")
    ray.add_argument("--ray-runners", type=count(1), default=None, metavar="N",
                     help="runner actors, spread over the nodes (default: one per node "
                          "with an LLM server)")
    ray.add_argument("--base-url-map", type=Path, default=None, metavar="FILE",
                     help="JSON object: node IP, hostname or Ray node id -> base URL of "
                          "that node's server; each runner uses its own node's (with "
                          "--base-url too: the fallback of nodes not listed)")
    ray.add_argument("--ray-serve", default=None, metavar="MODEL",
                     help="start `vllm serve MODEL` on 127.0.0.1:8000 of every GPU node and "
                          "use it there (--model defaults to MODEL)")


def ray_config(args: argparse.Namespace, llm: LLMConfig) -> tuple[Any, LLMConfig]:
    """Check the ``--ray`` options before anything is built: ``(None, llm)`` without
    ``--ray``, else their :class:`clinenv.distributed.RayConfig` (``--concurrency`` per
    runner) and the LLM seats as the options fill them (``args`` is left as it is).

    With ``--ray-serve MODEL``, the seats' ``model`` defaults to MODEL and their
    ``base_url`` (the driver's copy of the models) is the served URL; with
    ``--base-url-map`` and no ``--base-url``, it is the map's first URL (runners use
    their own node's).

    Args:
        args: the parsed ``clinenv run`` options.
        llm: the LLM seats of the flags (:func:`clinenv.cli.llm_setup.llm_config`).

    Raises:
        CLIError: a Ray option without ``--ray``, ``--base-url-map`` with ``--ray-serve``,
            ``--ray-serve`` with ``--base-url`` or another ``--model``, an LLM seat on a
            backend other than openai, a map file that cannot be used, or no Ray installed.
    """
    import importlib.util

    given = [flag for flag, value in (("--ray-runners", args.ray_runners),
                                      ("--base-url-map", args.base_url_map),
                                      ("--ray-serve", args.ray_serve)) if value is not None]
    if args.ray is None:
        if given:
            raise CLIError(f"{given[0]} is used only with --ray ADDRESS")
        return None, llm
    if importlib.util.find_spec("ray") is None:
        raise CLIError("--ray needs Ray: " + install_hint("ray"))
    if args.base_url_map is not None and args.ray_serve:
        raise CLIError("--base-url-map and --ray-serve both choose each node's server; give one")
    seats = bool(llm.seat_models())
    if (args.base_url_map is not None or args.ray_serve) and not seats:
        raise CLIError(f"{given[-1]} is used only with an LLM agent (--doctor llm, "
                       "--patient llm, --judge llm or --examiner llm)")
    if seats and llm.backend != "openai":
        raise CLIError(f"--ray runs the LLM agents against OpenAI-compatible servers; use "
                       f"--backend openai, not {llm.backend}")
    options: dict[str, Any] = {"address": args.ray, "runners": args.ray_runners,
                               "base_url": llm.base_url}
    if args.ray_serve:
        from clinenv.distributed import ServeConfig

        if llm.base_url:
            raise CLIError("--base-url is not used with --ray-serve: each runner talks to "
                           "the server started on its own node")
        if llm.model and llm.model != args.ray_serve:
            raise CLIError(f"--model {llm.model} differs from --ray-serve {args.ray_serve}, "
                           "the name vllm serve gives the model; leave --model out")
        options["serve"] = ServeConfig(args.ray_serve)
        llm = llm.replace(model=llm.model or args.ray_serve,
                          base_url=options["serve"].url(options["serve"].port))
    if args.base_url_map is not None:
        from clinenv.distributed import BaseUrlMapError, read_base_url_map

        try:
            options["base_url_map"] = read_base_url_map(args.base_url_map)
        except BaseUrlMapError as err:
            raise CLIError(f"--base-url-map: {err}") from None
        llm = llm.replace(base_url=llm.base_url or next(iter(
            options["base_url_map"].values())))
    if os.environ.get("CLINENV_DATA_DIR"):
        options["env_vars"] = {"CLINENV_DATA_DIR": os.environ["CLINENV_DATA_DIR"]}
    from clinenv.distributed import RayConfig

    return RayConfig(concurrency=args.concurrency, **options), llm


class RayParts:
    """The parts factory of ``clinenv run --ray`` (:data:`clinenv.distributed.runner.
    PartsFactory`): picklable (settings objects and the loaded doctor wrapper), it
    carries the run's settings to each runner's node and builds the models there
    against that node's server (``base_url``), then environments and doctors as
    ``clinenv run`` does on one machine.

    Args:
        llm: the checked LLM seats (:class:`~clinenv.cli.llm_setup.LLMConfig`).
        env_id: the chosen environment.
        env_config: its settings from the flags
            (:func:`~clinenv.cli.env_choice.env_config`).
        wrap: the doctor wrapper (:func:`~clinenv.cli.doctors.doctor_wrapper`) or
            ``None``.
    """

    def __init__(self, llm: LLMConfig, env_id: str, env_config: Any, wrap: Any) -> None:
        self.llm, self.env_id, self.env_config, self.wrap = llm, env_id, env_config, wrap

    def __call__(self, base_url: str | None) -> Any:
        from clinenv.distributed import RunnerParts

        seats = LLMSeats(self.llm.replace(base_url=base_url or self.llm.base_url))
        seats.build()
        kwargs = seats.env_kwargs()

        def new_env() -> Any:
            return make_env(self.env_id, self.env_config, **kwargs)

        spare = [new_env()]
        seats.match_env(spare[0].unwrapped)

        def make_doctor() -> Any:
            doctor = seats.make_doctor()
            return doctor if self.wrap is None else self.wrap(doctor)

        return RunnerParts(make_env=lambda: spare.pop() if spare else new_env(),
                           make_doctor=make_doctor, close=seats.close)
