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
from clinenv.cli.llm_setup import LLMSetup
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


def ray_options(args: argparse.Namespace) -> Any:
    """Check the ``--ray`` options before anything is built; ``None`` without ``--ray``,
    else their :class:`clinenv.distributed.RayConfig` (``--concurrency`` per runner).

    With ``--ray-serve MODEL``, ``--model`` defaults to MODEL and the driver's copy of the
    models names the served URL; with ``--base-url-map`` and no ``--base-url``, it names
    the map's first URL (runners use their own node's).

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
        return None
    if importlib.util.find_spec("ray") is None:
        raise CLIError("--ray needs Ray: " + install_hint("ray"))
    if args.base_url_map is not None and args.ray_serve:
        raise CLIError("--base-url-map and --ray-serve both choose each node's server; give one")
    seats = args.doctor == "llm" or "llm" in (args.patient, args.judge,
                                              getattr(args, "examiner", None))
    if (args.base_url_map is not None or args.ray_serve) and not seats:
        raise CLIError(f"{given[-1]} is used only with an LLM agent (--doctor llm, "
                       "--patient llm, --judge llm or --examiner llm)")
    if seats and args.backend != "openai":
        raise CLIError(f"--ray runs the LLM agents against OpenAI-compatible servers; use "
                       f"--backend openai, not {args.backend}")
    options: dict[str, Any] = {"address": args.ray, "runners": args.ray_runners,
                               "base_url": args.base_url}
    if args.ray_serve:
        from clinenv.distributed import ServeConfig

        if args.base_url:
            raise CLIError("--base-url is not used with --ray-serve: each runner talks to "
                           "the server started on its own node")
        if args.model and args.model != args.ray_serve:
            raise CLIError(f"--model {args.model} differs from --ray-serve {args.ray_serve}, "
                           "the name vllm serve gives the model; leave --model out")
        args.model = args.model or args.ray_serve
        options["serve"] = ServeConfig(args.ray_serve)
        args.base_url = options["serve"].url(options["serve"].port)
    if args.base_url_map is not None:
        from clinenv.distributed import BaseUrlMapError, read_base_url_map

        try:
            options["base_url_map"] = read_base_url_map(args.base_url_map)
        except BaseUrlMapError as err:
            raise CLIError(f"--base-url-map: {err}") from None
        args.base_url = args.base_url or next(iter(options["base_url_map"].values()))
    if os.environ.get("CLINENV_DATA_DIR"):
        options["env_vars"] = {"CLINENV_DATA_DIR": os.environ["CLINENV_DATA_DIR"]}
    from clinenv.distributed import RayConfig

    return RayConfig(concurrency=args.concurrency, **options)


class RayParts:
    """The parts factory of ``clinenv run --ray`` (:data:`clinenv.distributed.runner.
    PartsFactory`): picklable, it carries the parsed options to each runner's node and
    builds the models there against that node's server (``base_url``), then
    environments and doctors as ``clinenv run`` does on one machine.

    Args:
        args: the checked options; env_id, verify: the chosen environment and
            ``--no-verify``; wrap: the doctor wrapper (:func:`doctor_wrapper`) or
            ``None``; env_options: further environment kwargs (``preset``,
            ``premature_diagnosis``).
    """

    def __init__(self, args: argparse.Namespace, env_id: str, verify: bool,
                 wrap: Any, env_options: dict[str, Any]) -> None:
        self.args = argparse.Namespace(**{k: v for k, v in vars(args).items() if k != "func"})
        self.env_id, self.verify, self.wrap = env_id, verify, wrap
        self.env_options = dict(env_options)

    def __call__(self, base_url: str | None) -> Any:
        from clinenv.distributed import RunnerParts

        args = argparse.Namespace(**vars(self.args))
        args.base_url = base_url or args.base_url
        setup = LLMSetup(args)
        setup.build()
        setup.env_kwargs.update(self.env_options)

        def new_env() -> Any:
            return make_env(self.env_id, args.data_dir, args.allow_download, self.verify,
                            **setup.env_kwargs)

        spare = [new_env()]
        setup.match_env(spare[0].unwrapped)

        def make_doctor() -> Any:
            doctor = setup.make_doctor()
            return doctor if self.wrap is None else self.wrap(doctor)

        return RunnerParts(make_env=lambda: spare.pop() if spare else new_env(),
                           make_doctor=make_doctor, close=setup.close)
