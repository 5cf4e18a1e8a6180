"""Docstring measures of a Python source tree (issue 36); stdlib ``ast`` only.

Definitions, applied alike to clinenv and to the anchors (Gymnasium, PettingZoo):

- source lines: the non-blank physical lines of every ``*.py`` file under the roots;
- a docstring: the first statement of a module, class or function body when it is a
  string literal; its length is its physical lines, ``end_lineno - lineno + 1``;
- docstring share: the non-blank lines inside docstrings / source lines;
- median module docstring: over modules that have one (``--all-modules`` counts a
  missing module docstring as 0 lines).

Usage: ``python benchmarks/docstring_stats.py [ROOT ...] [--top N] [--all-modules]``;
the roots default to ``clinenv agents wrappers``.
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
from pathlib import Path

DEFAULT_ROOTS = ("clinenv", "agents", "wrappers")
LONG = 20


def _docstrings(tree: ast.Module):
    """Yield ``(qualname, node, docstring_expr)`` for the module and each def/class."""

    def first_str(body):
        if body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return body[0]
        return None

    node = first_str(tree.body)
    if node is not None:
        yield "<module>", tree, node

    def walk(parent, prefix):
        for child in ast.iter_child_nodes(parent):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                doc = first_str(child.body)
                if doc is not None:
                    yield name, child, doc
                yield from walk(child, name + ".")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


def measure(roots):
    """Return a dict of the measures over every ``*.py`` file under ``roots``."""
    source = doc_nonblank = 0
    module_lengths, module_missing, entries = [], 0, []
    for root in roots:
        root = Path(root)
        files = [root] if root.is_file() else sorted(root.rglob("*.py"))
        for path in files:
            text = path.read_text(encoding="utf-8", errors="replace")
            lines = text.splitlines()
            source += sum(1 for line in lines if line.strip())
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue
            has_module_doc = False
            for name, _node, expr in _docstrings(tree):
                span = lines[expr.lineno - 1 : expr.end_lineno]
                doc_nonblank += sum(1 for line in span if line.strip())
                length = expr.end_lineno - expr.lineno + 1
                if name == "<module>":
                    has_module_doc = True
                    module_lengths.append(length)
                entries.append((length, f"{path}:{expr.lineno}", name))
            if not has_module_doc:
                module_missing += 1
    entries.sort(key=lambda e: (-e[0], e[1]))
    return {
        "source_lines": source,
        "docstring_lines": doc_nonblank,
        "share": doc_nonblank / source if source else 0.0,
        "module_lengths": module_lengths,
        "module_missing": module_missing,
        "entries": entries,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="*", default=list(DEFAULT_ROOTS))
    parser.add_argument("--top", type=int, default=15, help="longest docstrings to list")
    parser.add_argument(
        "--all-modules", action="store_true", help="count a missing module docstring as 0"
    )
    args = parser.parse_args(argv)
    m = measure(args.roots)
    lengths = m["module_lengths"] + ([0] * m["module_missing"] if args.all_modules else [])
    median = statistics.median(lengths) if lengths else 0
    n_long = sum(1 for e in m["entries"] if e[0] >= LONG)
    print(f"roots: {' '.join(args.roots)}")
    print(
        f"docstring share: {m['share']:.1%} "
        f"({m['docstring_lines']} of {m['source_lines']} non-blank lines)"
    )
    print(
        f"median module docstring: {median} lines "
        f"({len(m['module_lengths'])} with one, {m['module_missing']} without)"
    )
    print(f"docstrings of >= {LONG} lines: {n_long} of {len(m['entries'])}")
    print(f"longest {args.top}:")
    for length, where, name in m["entries"][: args.top]:
        print(f"  {length:4d}  {where}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
