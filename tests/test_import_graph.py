"""The package's import graph: no cycles between packages, and the layers hold.

The graph is read from the source with :mod:`ast`, so imports inside functions count as
much as module-level ones, and so do the modules a string names (an entry point
``"module:attr"`` or a lazy table's ``"module"``, imported when used). A node is a
package of ``clinenv`` (``clinenv.env``, ``clinenv.agents``...) or a top-level module
(``clinenv.scoring``); the root ``clinenv/__init__.py`` is the node ``clinenv``.

The core's layers (docs/layout.md) run one way: cases -> protocol -> environment -> runs
-> evaluation (:data:`LAYERS`); agents, wrappers, integrations, the CLI and the test
doubles sit beside (:data:`BESIDE`) and the core names them only through the entry
points of :data:`PLUGINS`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Package name -> source folder (setup.cfg's package_dir).
SOURCES = {"clinenv": ROOT / "clinenv", "clinenv.agents": ROOT / "agents",
           "clinenv.wrappers": ROOT / "wrappers"}
#: Beside the core: they may import the core, never the reverse.
BESIDE = {"clinenv.agents", "clinenv.wrappers", "clinenv.integrations", "clinenv.cli",
          "clinenv.testing", "clinenv.export", "clinenv.export_tokens", "clinenv.distributed",
          "clinenv.__main__",
          "clinenv.audit", "clinenv.template_check"}
#: The core's layers, lowest first: a module imports its own layer or lower ones only.
#: Every core node is in one (a new package must be placed).
LAYERS = (
    # foundations: errors, seeds, lazy exports, the settings base, the case model and its
    # sources, the LLM layer (chat models, encoders), none of which knows an environment
    {"clinenv.errors", "clinenv.seeding", "clinenv.lazy", "clinenv.config_model",
     "clinenv.case_list", "clinenv.cases", "clinenv.datasets", "clinenv.llm", "clinenv.embeddings"},
    # the protocol: EGIP's letters, scoring and the reward components over them
    {"clinenv.protocol", "clinenv.scoring", "clinenv.icd_map", "clinenv.reward_components",
     "clinenv.reward_spec"},
    # the environments (the root package registers their ids)
    {"clinenv", "clinenv.env", "clinenv.multiagent"},
    # runs and their log format
    {"clinenv.runs", "clinenv.runlog", "clinenv.runlog_lock", "clinenv.runlog_dedupe"},
    # evaluation of run logs, and the report over it
    {"clinenv.evaluation", "clinenv.report"},
)
#: The core's only names for modules beside it, ``"source -> target"``, each an entry
#: point imported when chosen.
PLUGINS = {
    # Gymnasium's registration idiom: the Menu ids' environment class is a wrapper
    "clinenv.env.registration -> clinenv.wrappers.env.menu_action",
    # the opt-in model-backed seats (patient="llm", judge="llm", examiner="llm") live
    # with the agents (docs/layout.md), named as Gymnasium's registry names a class
    "clinenv.env.simulators -> clinenv.agents.llm_patient",
    "clinenv.env.simulators -> clinenv.agents.judge",
    "clinenv.env.simulators -> clinenv.agents.measurement_agent",
}
#: A string that names a module: ``"clinenv.x.y"`` or an entry point ``"clinenv.x:attr"``
#: (not a bare ``"clinenv"``, which is also the cache folder's name).
NAMED = re.compile(r"clinenv((\.\w+)+(:[A-Za-z_]\w*(\.\w+)*)?|:[A-Za-z_]\w*)")
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


def named_strings(path: Path) -> set[str]:
    """The strings of ``path``'s source that name a module (:data:`NAMED`): ``X`` for
    ``"X"``, ``X.attr`` for an entry point ``"X:attr"``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return {node.value.replace(":", ".") for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and NAMED.fullmatch(node.value)}


def module_graph(*, plugins: bool = False) -> dict[str, set[str]]:
    """Module -> the package modules it imports or names in a string, each name resolved
    to its longest module prefix (``from X import a``: the module ``X.a``, else ``X``).
    The entry points of :data:`PLUGINS` are left out unless ``plugins``."""
    known = modules()

    def resolve(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    def targets(name: str, path: Path) -> set[str]:
        # a string naming the module's own package (``files("clinenv.report")``) adds
        # nothing: importing a module imports its packages first
        named = {t for d in named_strings(path)
                 if (t := resolve(d)) is not None and not name.startswith(f"{t}.")}
        imported = {t for d in imported_names(name, path)
                    if d.startswith("clinenv") and (t := resolve(d)) is not None}
        return {t for t in imported | named if t != name
                and (plugins or f"{name} -> {t}" not in PLUGINS)}

    return {name: targets(name, path) for name, path in known.items()}


def upward_edges(graph: Mapping[str, Iterable[str]],
                 layers: Iterable[set[str]] = LAYERS) -> list[str]:
    """``"a -> b"`` for every edge from a core node's layer to a higher layer."""
    rank = {node: i for i, nodes in enumerate(layers) for node in nodes}
    return sorted(f"{s} -> {t}" for s, ts in graph.items() for t in ts
                  if node_of(s) in rank and node_of(t) in rank
                  and rank[node_of(t)] > rank[node_of(s)])


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


def test_the_graph_reads_strings_that_name_a_module(tmp_path):
    source = tmp_path / "mod.py"
    source.write_text('SEATS = {"p": "clinenv.agents.llm_patient:LLMPatient"}\n'
                      '_LAZY = {"run_logged": "clinenv.runs.logged"}\n'
                      'HELP = "see clinenv.runs for more"\n')
    assert named_strings(source) == {"clinenv.agents.llm_patient.LLMPatient",
                                     "clinenv.runs.logged"}


def test_the_layer_check_finds_an_upward_import():
    graph = {"clinenv.runs.summary": {"clinenv.evaluation.metrics", "clinenv.runlog"},
             "clinenv.evaluation.metrics": {"clinenv.runs.logged", "clinenv.cases"}}
    assert upward_edges(graph) == ["clinenv.runs.summary -> clinenv.evaluation.metrics"]


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


def test_every_core_node_has_a_layer(graph):
    placed = set().union(*LAYERS)
    core = {node_of(m) for m in graph} - BESIDE
    assert core <= placed, f"place these in LAYERS: {sorted(core - placed)}"
    assert not placed & BESIDE


def test_the_layers_run_one_way(graph):
    """cases -> protocol -> environment -> runs -> evaluation (docs/layout.md)."""
    bad = upward_edges(graph)
    assert not bad, "a layer imports a higher one:\n" + "\n".join(bad)


def test_the_core_names_what_sits_beside_it_only_by_its_plugins():
    """Strings count: the LLM layer's scripted backend names no test double, and the
    environment names the agents' model-backed seats only through :data:`PLUGINS`."""
    every = module_graph(plugins=True)
    named = sorted(f"{s} -> {t}" for s, ts in every.items() if node_of(s) not in BESIDE
                   for t in ts if node_of(t) in BESIDE)
    assert named == sorted(PLUGINS)


def test_every_named_module_exists():
    """A string naming a package module (an entry point, a lazy table) names a real one,
    and an entry point's attribute is defined or imported there."""
    known = modules()
    bad = []
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and NAMED.fullmatch(node.value)):
                continue
            module, _, attr = node.value.partition(":")
            if module.startswith("clinenv.") and module.split(".")[1] == "__main__":
                continue
            if module not in known:
                bad.append(f"{name}: {node.value!r} names no module")
            elif attr and attr.split(".")[0] not in top_level_names(known[module]):
                bad.append(f"{name}: {node.value!r}: {module} has no {attr}")
    assert not bad, "\n".join(bad)


def top_level_names(path: Path) -> set[str]:
    """Names a module defines, assigns or imports at its top level."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                names.update(ast.literal_eval(node.value))  # lazy: a module __getattr__
            if isinstance(node.value, ast.Dict) and node.value.values and all(
                    isinstance(v, ast.Constant) and NAMED.fullmatch(str(v.value))
                    for v in node.value.values):  # a lazy table (clinenv.lazy)
                names.update(k.value for k in node.value.keys if isinstance(k, ast.Constant))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


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
