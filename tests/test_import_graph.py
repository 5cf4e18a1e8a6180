"""The package's import graph: no cycles between packages, and the layers hold.

The graph is read from the source with :mod:`ast`, so imports inside functions count as
much as module-level ones. A node is a package of ``clinenv`` (``clinenv.env``,
``clinenv.agents``...) or a top-level module (``clinenv.scoring``); the root
``clinenv/__init__.py`` is the node ``clinenv``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Package name -> source folder (setup.cfg's package_dir).
SOURCES = {"clinenv": ROOT / "clinenv", "clinenv.agents": ROOT / "agents",
           "clinenv.wrappers": ROOT / "wrappers"}
#: Beside the core: they may import the core, never the reverse.
BESIDE = {"clinenv.agents", "clinenv.wrappers", "clinenv.integrations", "clinenv.cli",
          "clinenv.testing", "clinenv.export", "clinenv.distributed", "clinenv.__main__",
          "clinenv.audit"}
#: What the protocol package (EGIP's letters) may never import.
PROTOCOL_FORBIDDEN = ("gymnasium", "pettingzoo", "clinenv.env", "clinenv.runs",
                      "clinenv.agents", "clinenv.wrappers", "clinenv.cli",
                      "clinenv.integrations", "clinenv.testing", "clinenv.multiagent")


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (``__init__`` as its package)."""
    found: dict[str, Path] = {}
    for package, folder in SOURCES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if package == "clinenv" and parts[0] in ("agents", "wrappers"):
                continue
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def imported_names(name: str, path: Path) -> set[str]:
    """Dotted names ``name`` imports anywhere in its source (functions included): ``X``
    for ``import X``, ``X.a`` for ``from X import a`` (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def module_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports, each name resolved to its longest
    module prefix (``from X import a``: the module ``X.a``, else ``X``)."""
    known = modules()

    def resolve(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    return {name: {target for dotted in imported_names(name, path)
                   if dotted.startswith("clinenv")
                   and (target := resolve(dotted)) not in (None, name)}
            for name, path in known.items()}


def node_of(module: str) -> str:
    """The graph node of ``module``: its package under ``clinenv`` or its top module."""
    parts = module.split(".")
    return ".".join(parts[:2])


def package_graph(graph: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    packages: dict[str, set[str]] = {}
    for source, targets in graph.items():
        node = node_of(source)
        packages.setdefault(node, set()).update(
            node_of(t) for t in targets if node_of(t) != node)
    return packages


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    nodes = set(graph) | {t for ts in graph.values() for t in ts}
    for node in sorted(nodes):
        if node not in index:
            visit(node)
    return sorted(found)


def edges_within(graph: Mapping[str, Iterable[str]], component: list[str]) -> list[str]:
    """``"a -> b"`` for every module edge between the nodes of ``component``."""
    inside = set(component)
    return sorted(f"{s} -> {t}" for s, ts in graph.items() for t in ts
                  if node_of(s) in inside and node_of(t) in inside
                  and node_of(s) != node_of(t))


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return module_graph()


def test_the_cycle_finder_finds_cycles_and_only_cycles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "d": {"a", "c"}}) == []
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}) == [["a", "b"], ["c", "d"]]


def test_the_graph_sees_imports_inside_functions(tmp_path):
    source = tmp_path / "mod.py"
    source.write_text("def f():\n    from clinenv.agents.judge import LLMJudge\n"
                      "    import clinenv.scoring\n")
    names = imported_names("clinenv.x", source)
    assert {"clinenv.agents.judge.LLMJudge", "clinenv.scoring"} <= names


def test_the_graph_covers_every_package(graph):
    nodes = set(package_graph(graph))
    assert {"clinenv.env", "clinenv.runs", "clinenv.protocol", "clinenv.agents",
            "clinenv.wrappers", "clinenv.llm", "clinenv.testing"} <= nodes
    # the environment's step imports its loops (a module edge the graph must see)
    assert "clinenv.env.egip_loop" in graph["clinenv.env.environment"]


def test_no_import_cycle_between_packages(graph):
    packages = package_graph(graph)
    found = cycles(packages)
    assert not found, "import cycles between packages:\n" + "\n".join(
        f"{c}:\n  " + "\n  ".join(edges_within(graph, c)) for c in found)


def test_no_import_cycle_between_modules(graph):
    """Within a package too (a package ``__init__`` that re-exports counts)."""
    assert not cycles(graph)


def test_the_core_never_imports_what_sits_beside_it(graph):
    bad = sorted(f"{s} -> {t}" for s, ts in graph.items() if node_of(s) not in BESIDE
                 for t in ts if node_of(t) in BESIDE)
    assert not bad, "the core imports agents/wrappers/integrations/cli/testing:\n" + \
        "\n".join(bad)


def test_the_protocol_imports_no_environment_agent_or_cli():
    bad = []
    for name, path in modules().items():
        if name.startswith("clinenv.protocol"):
            bad += [f"{name} -> {t}" for t in sorted(imported_names(name, path))
                    if t.startswith(PROTOCOL_FORBIDDEN)]
    assert not bad, "\n".join(bad)
