"""``clinenv serve``: one EGIP environment served over OpenEnv (``clinenv[openenv]``).

``clinenv serve --env ID [--host 127.0.0.1] [--port 8000] [--max-sessions N]`` runs
uvicorn on :func:`clinenv.integrations.openenv.create_clin_app`. It binds loopback by
default; another host needs ``--allow-remote`` (the server has no authentication).
SIGTERM or Ctrl-C stops it: open sessions are closed, exit 0. Logs (stderr): one line
per session open, close or error (:mod:`clinenv.integrations.openenv`).

Reuses :func:`clinenv.cli.env_choice.choose_env`, ``add_dataset_arguments``,
``add_verify_argument`` and :func:`clinenv.cli.run.reward_spec_option`.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import signal
from typing import Any

from clinenv.cli.argtypes import count, number
from clinenv.cli.env_choice import (
    add_dataset_arguments,
    add_variation_arguments,
    add_verify_argument,
    choose_env,
    env_config,
)
from clinenv.cli.errors import CLIError

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
    add_dataset_arguments(serve)
    add_verify_argument(serve)
    add_variation_arguments(serve)
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
        import uvicorn

        from clinenv.integrations.openenv import create_clin_app
    except ImportError as err:
        from clinenv.errors import install_hint

        raise CLIError(f"clinenv serve needs openenv: {install_hint('openenv')} "
                       f"({err})") from None
    config = env_config(args)  # the data options, --reward-spec
    env_id, _ = choose_env(args.env, config.data_dir, config.allow_download, config.verify)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        app = create_clin_app(env_id, config, max_sessions=args.max_sessions,
                              session_timeout_s=args.session_timeout)
    except Exception as err:  # the environment refused its settings: one line
        raise CLIError(f"cannot serve {env_id!r}: {err}") from None
    logging.getLogger("clinenv.integrations.openenv").info(
        "serving %s on http://%s:%d (max %d sessions)", env_id, args.host, args.port,
        args.max_sessions)
    # uvicorn re-raises the signal that stopped it once it has shut down; these no-op
    # handlers (restored by uvicorn after its run) turn that into a clean exit 0
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning",
                timeout_graceful_shutdown=5)
    logging.getLogger("clinenv.integrations.openenv").info("stopped")
    return 0
