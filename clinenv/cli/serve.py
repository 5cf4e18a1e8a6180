"""``clinenv serve``: one EGIP environment served over OpenEnv (``clinenv[openenv]``).

uvicorn on :func:`clinenv.integrations.openenv.create_clin_app`, on loopback unless
``--allow-remote`` (there is no authentication); SIGTERM or Ctrl-C closes it, exit 0.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import signal
from pathlib import Path
from typing import Any

from clinenv.cli.argtypes import count, number
from clinenv.cli.env_choice import (
    add_dataset_arguments,
    add_variation_arguments,
    add_verify_argument,
    choose_env,
    env_config,
    make_env,
)
from clinenv.cli.errors import CLIError
from clinenv.cli.llm_setup import (
    LLMSeats,
    add_connection_arguments,
    add_examiner_arguments,
    add_seat_arguments,
    add_server_arguments,
    check_llm_config,
    env_protocol,
    llm_config,
)
from clinenv.protocol.presets import PRESETS

LOOPBACK_NAMES = ("localhost",)


def add_serve_parser(sub: Any) -> None:
    """Add the ``serve`` sub-command to ``sub``."""
    serve = sub.add_parser("serve", help="serve an environment over OpenEnv (WebSocket, "
                                         "HTTP, MCP tools)",
                           description="Serve an EGIP text environment over OpenEnv: one "
                                       "episode per WebSocket session (/ws), the doctor's "
                                       "four tools over MCP. Needs clinenv[openenv].")
    serve.add_argument("--env", default="auto", metavar="ID|auto",
                       help="EGIP text environment id (EGIP-<Dataset>-v0), or 'auto' as "
                            "for `clinenv run`")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to bind (default: 127.0.0.1); a non-loopback "
                            "address needs --allow-remote")
    serve.add_argument("--port", type=count(0), default=8000, help="port (default: 8000)")
    serve.add_argument("--max-sessions", type=count(1), default=64, metavar="N",
                       help="concurrent WebSocket sessions (default: 64)")
    serve.add_argument("--session-timeout", type=number(0, above=True), default=None,
                       metavar="S", help="close a session idle this many seconds "
                                         "(default: never)")
    serve.add_argument("--allow-remote", action="store_true",
                       help="allow a non-loopback --host: the server has no "
                            "authentication, and LLM seats hold API keys server-side")
    serve.add_argument("--reward-spec", default=None, metavar="PRESET|FILE",
                       help="terminal reward: a preset (accuracy, the default; diagagent; "
                            "cost-aware) or a JSON spec file (docs/rewards.md)")
    serve.add_argument("--preset", default=None, choices=sorted(PRESETS), metavar="NAME",
                       help="environment preset of the EGIP ids (e.g. egip-no-menu)")
    serve.add_argument("--dataset", type=Path, default=None, metavar="FILE",
                       help="serve the cases of this file instead of the id's dataset")
    serve.add_argument("--cases", type=Path, default=None, metavar="FILE",
                       help="serve only the cases listed in FILE (one case id per line): "
                            "an unseeded reset draws among them, another case id is "
                            "refused")
    add_dataset_arguments(serve)
    add_verify_argument(serve)
    add_variation_arguments(serve)
    seats = serve.add_argument_group("LLM seats (--patient llm, --judge llm, --examiner "
                                     "llm), run on the server")
    add_server_arguments(seats)
    add_connection_arguments(seats)
    add_seat_arguments(seats)
    add_examiner_arguments(seats)
    serve.set_defaults(func=cmd_serve)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is loopback only."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the server until SIGTERM / SIGINT; returns 0.

    Raises:
        CLIError: openenv not installed, a non-loopback host without --allow-remote, an
            unknown id or a bad environment setting.
    """
    if not is_loopback(args.host) and not args.allow_remote:
        raise CLIError(f"--host {args.host} is not loopback: the server has no "
                       "authentication; pass --allow-remote to serve it anyway")
    try:
        import uvicorn  # noqa: F401  (checked here: serve_until_stopped runs it)

        from clinenv.integrations.openenv import create_clin_app
    except ImportError as err:
        from clinenv.errors import install_hint

        raise CLIError(f"clinenv serve needs openenv: {install_hint('openenv')} "
                       f"({err})") from None
    config = env_config(args)  # data options, --preset, --reward-spec, --dataset
    llm = llm_config(args)
    check_llm_config(llm, env_protocol(args.env, args.preset))
    env_id, _ = choose_env(args.env, config.data_dir, config.allow_download, config.verify)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    seats = LLMSeats(llm)
    try:
        seats.build()
        kwargs = seats.env_kwargs()
        if args.cases is not None:
            kwargs["cases"] = listed_cases(args.cases, env_id, config)
        try:
            app = create_clin_app(env_id, config, max_sessions=args.max_sessions,
                                  session_timeout_s=args.session_timeout, **kwargs)
        except Exception as err:  # the environment refused its settings: one line
            raise CLIError(f"cannot serve {env_id!r}: {err}") from None
        serve_until_stopped(app, args.host, args.port, env_id, args.max_sessions)
    finally:
        seats.close()
    return 0


def listed_cases(path: Path, env_id: str, config: Any) -> list[Any]:
    """The cases of ``env_id``'s dataset that the case list ``path`` names, in dataset
    order.

    Raises:
        CLIError: a list that cannot be read, or that names a case the dataset lacks.
    """
    from clinenv.case_list import CaseListError, read_case_list

    try:
        listed = read_case_list(path)
    except (OSError, CaseListError) as err:
        raise CLIError(f"--cases {path}: {err}") from None
    env = make_env(env_id, config)
    try:
        pool = env.unwrapped.pool
        ids = [case.case_id for case in pool.cases]
        try:
            return [pool.cases[i] for i in listed.indices(ids, dataset=f"dataset {pool.name}")]
        except ValueError as err:
            raise CLIError(f"--cases {path}: {err}") from None
    finally:
        env.close()


def serve_until_stopped(app: Any, host: str, port: int, env_id: str,
                        max_sessions: int) -> None:
    """Serve ``app`` with uvicorn until SIGTERM or SIGINT (then a clean return)."""
    import uvicorn

    logging.getLogger("clinenv.integrations.openenv").info(
        "serving %s on http://%s:%d (max %d sessions)", env_id, host, port, max_sessions)
    # uvicorn re-raises the signal that stopped it once it has shut down; these no-op
    # handlers (restored by uvicorn after its run) turn that into a clean exit 0
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=5)
    logging.getLogger("clinenv.integrations.openenv").info("stopped")
