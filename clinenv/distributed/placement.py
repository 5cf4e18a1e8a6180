"""Where runners go and which LLM server each one uses: node-local servers, by node.

A node's server is the one started there, else its entry of the base-URL map (by Ray
id, IP address, then hostname), else ``--base-url`` (docs/cluster.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from clinenv.errors import ClinenvError

__all__ = [
    "BaseUrlMapError", "Node", "NoServerError", "UrlPlan", "alive_nodes", "check_url",
    "read_base_url_map", "runner_nodes",
]


class BaseUrlMapError(ClinenvError, ValueError):
    """A base-URL map file cannot be used; the message names the file and the key or
    the line."""


class NoServerError(ClinenvError, LookupError):
    """A runner's node has no LLM server in the :class:`UrlPlan`; the message names the
    node's id, IP and hostname."""


def check_url(url: Any, what: str) -> str:
    """``url`` if it is an ``http://`` or ``https://`` URL with a host.

    Raises:
        ValueError: anything else (the message starts with ``what``).
    """
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{what} must be an http:// or https:// URL with a host, got "
                         f"{url!r}")
    return url


def read_base_url_map(path: str | Path) -> dict[str, str]:
    """Read a base-URL map: a JSON object from node (Ray node id, IP address or
    hostname) to the OpenAI-compatible base URL of the server on that node, e.g.
    ``{"10.0.0.11": "http://127.0.0.1:8000/v1", "gpu-node-2": "http://127.0.0.1:8000/v1"}``
    (UTF-8; a BOM is tolerated).

    Returns:
        ``{key: url}`` in file order.

    Raises:
        BaseUrlMapError: the file is missing or unreadable, not JSON (line and column
            named), not an object, empty, holds a key twice, an empty key, or a value
            that is not an http(s) URL (key named).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise BaseUrlMapError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise BaseUrlMapError(f"{path}: cannot be read ({err})") from None

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, value in items:
            if key in seen:
                raise BaseUrlMapError(f"{path}: key {key!r} appears twice")
            seen[key] = value
        return seen

    try:
        data = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as err:
        raise BaseUrlMapError(f"{path}, line {err.lineno} column {err.colno}: not JSON "
                              f"({err.msg})") from None
    if not isinstance(data, dict):
        raise BaseUrlMapError(f"{path}: expected a JSON object from node (id, IP or "
                              f"hostname) to base URL, got a {type(data).__name__}")
    if not data:
        raise BaseUrlMapError(f"{path}: the map is empty; give one entry per node")
    result: dict[str, str] = {}
    for key, url in data.items():
        if not key.strip():
            raise BaseUrlMapError(f"{path}: an empty key; keys are node ids, IPs or "
                                  "hostnames")
        try:
            result[key] = check_url(url, f"{path}: key {key!r}: the value")
        except ValueError as err:
            raise BaseUrlMapError(str(err)) from None
    return result


@dataclass(frozen=True)
class Node:
    """One alive Ray node.

    Attributes:
        node_id: Ray's node id (hex).
        ip: the node's IP address (Ray's ``NodeManagerAddress``).
        hostname: the node's hostname.
        cpus, gpus: the node's ``CPU`` and ``GPU`` resources (whole units).
    """

    node_id: str
    ip: str
    hostname: str
    cpus: int = 0
    gpus: int = 0


@dataclass(frozen=True)
class UrlPlan:
    """The LLM server of every node (module docstring's order); picklable.

    Attributes:
        served: node id -> URL of the server started there (``--ray-serve``).
        by_node: base-URL map, key (node id, IP or hostname) -> URL.
        base_url: the fallback URL for any node, or ``None``.
        source: where ``by_node`` came from (a file name), for messages.
    """

    served: Mapping[str, str] = field(default_factory=dict)
    by_node: Mapping[str, str] = field(default_factory=dict)
    base_url: str | None = None
    source: str = "the base-URL map"

    @property
    def any_server(self) -> bool:
        """Some server is configured (else the doctor needs none: no LLM seat)."""
        return bool(self.served or self.by_node or self.base_url)

    def lookup(self, node_id: str, ip: str, hostname: str) -> tuple[str | None, str]:
        """The URL of a node and how it was found: ``(url, "served" | "map:node-id" |
        "map:ip" | "map:hostname" | "base-url")``, or ``(None, "none")``."""
        if node_id in self.served:
            return self.served[node_id], "served"
        for how, key in (("map:node-id", node_id), ("map:ip", ip),
                         ("map:hostname", hostname)):
            if key in self.by_node:
                return self.by_node[key], how
        if self.base_url:
            return self.base_url, "base-url"
        return None, "none"

    def resolve(self, node_id: str, ip: str, hostname: str) -> tuple[str | None, str]:
        """:meth:`lookup`, refusing a node without a server when servers are configured.

        Returns:
            ``(url, how)``; ``(None, "none")`` when no server is configured at all.

        Raises:
            NoServerError: servers are configured but none for this node.
        """
        url, how = self.lookup(node_id, ip, hostname)
        if url is None and self.any_server:
            where = ("no server was started there" if self.served else
                     f"{self.source} has no entry for it")
            raise NoServerError(
                f"node {node_id} (IP {ip}, hostname {hostname}) has no LLM server: {where} "
                "(add the node's id, IP or hostname to the map, or give --base-url to "
                "send its requests to one shared server)")
        return url, how

    def serves(self, node: Node) -> bool:
        """A runner on ``node`` has a server (or needs none)."""
        return not self.any_server or self.lookup(node.node_id, node.ip,
                                                  node.hostname)[0] is not None


def alive_nodes() -> list[Node]:
    """The alive nodes of the connected Ray cluster, in Ray's order (needs Ray)."""
    import ray

    nodes = []
    for info in ray.nodes():
        if not info.get("Alive"):
            continue
        resources = info.get("Resources") or {}
        nodes.append(Node(node_id=info["NodeID"], ip=info.get("NodeManagerAddress", ""),
                          hostname=info.get("NodeManagerHostname", ""),
                          cpus=int(resources.get("CPU", 0)),
                          gpus=int(resources.get("GPU", 0))))
    return nodes


def runner_nodes(nodes: Sequence[Node], plan: UrlPlan, runners: int | None) -> list[Node]:
    """The node of each runner: one per node that has a server (all nodes when no
    server is configured), or ``runners`` of them spread round-robin over those nodes.

    Raises:
        NoServerError: no node has a server (each node's id, IP and hostname named).
        ValueError: ``runners`` is not ``None`` or an integer >= 1.
    """
    if runners is not None and (isinstance(runners, bool) or not isinstance(runners, int)
                                or runners < 1):
        raise ValueError(f"runners must be None (one per node) or an integer >= 1, got "
                         f"{runners!r}")
    usable = [node for node in nodes if plan.serves(node)]
    if not usable:
        listed = "; ".join(f"{n.node_id} (IP {n.ip}, hostname {n.hostname})" for n in nodes)
        raise NoServerError(f"no node of the cluster has an LLM server in {plan.source}: "
                            f"{listed or 'no alive node'}")
    count = len(usable) if runners is None else runners
    return [usable[i % len(usable)] for i in range(count)]
