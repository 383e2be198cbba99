"""The import graph of plugins/module_utils and plugins/plugin_utils, by domain, read from the AST.

One job: say which collection file imports which, so that tests can hold the layout
(docs/architecture.md) and the document can show it without going stale:

- a domain is a folder (``_lane/``, ``_plan/`` ...) of module_utils or plugin_utils; the flat
  files beside the folders (``_errors``, ``_yaml`` ...) are helpers anyone may import;
- ``closure(graph, "modules.lane_probe")`` is every collection file a module's AnsiballZ
  payload carries (AnsiballZ follows every import statement, also the ones inside ``try``);
- ``mermaid(graph)`` is the domain graph as the Mermaid block docs/architecture.md shows.

Standard library only (no pydeps). Run from the checkout to print the block:
``python tests/tools/import_graph.py``.
"""
from __future__ import annotations

import ast
import os
import sys

PREFIX = "ansible_collections.lanekit.serving.plugins."
KINDS = ("module_utils", "plugin_utils", "modules", "action", "filter", "lookup", "doc_fragments")
CORE = ("module_utils", "plugin_utils")
TITLES = {"module_utils": "plugins/module_utils: imported by modules, shipped to the nodes",
          "plugin_utils": "plugins/plugin_utils: controller only"}
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _files(root: str) -> dict[str, str]:
    """Dotted name under plugins (``module_utils._lane._engines``) -> path, packages included."""
    out = {}
    for kind in KINDS:
        base = os.path.join(root, "plugins", kind)
        for folder, dirs, names in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in names:
                if not name.endswith(".py"):
                    continue
                rel = os.path.relpath(os.path.join(folder, name), os.path.join(root, "plugins"))[:-3]
                dotted = rel.replace(os.sep, ".")
                out[dotted[: -len(".__init__")] if dotted.endswith(".__init__") else dotted] = os.path.join(folder, name)
    return out


def scan(root: str = REPO) -> dict[str, set[str]]:
    """Every collection Python file under plugins/ -> the collection files it imports."""
    files = _files(root)
    graph = {}
    for name, path in files.items():
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), path)
        package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: resolve against this file's package
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join([*parts, node.module] if node.module else parts)
                else:
                    module = node.module[len(PREFIX):] if (node.module or "").startswith(PREFIX) else None
                if module is None:
                    continue
                # `from pkg import _mod` imports the file pkg/_mod.py; `from mod import name` imports mod.
                targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in files else module
                           for alias in node.names]
            else:
                continue
            for target in targets:
                target = target[len(PREFIX):] if target.startswith(PREFIX) else target
                if target in files and target != name:
                    deps.add(target)
                    # importing a.b.c runs a/__init__.py and a/b/__init__.py first
                    parts = target.split(".")
                    deps.update(p for p in (".".join(parts[:i]) for i in range(2, len(parts))) if p in files)
        graph[name] = deps
    return graph


def closure(graph: dict[str, set[str]], name: str) -> set[str]:
    """Every file ``name`` imports, directly or through another file."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        for dep in graph.get(todo.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def domain(name: str) -> str | None:
    """``module_utils._lane._engines`` -> ``module_utils._lane``; a flat helper or a plugin -> None."""
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] in CORE and len(parts) >= 3 else None


def domain_edges(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """(domain, domain it imports) for every import between two domain folders."""
    edges = set()
    for name, deps in graph.items():
        for dep in deps:
            a, b = domain(name), domain(dep)
            if a and b and a != b:
                edges.add((a, b))
    return edges


def cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """Each cycle between domains once (a domain's two halves, module_utils and plugin_utils, are one)."""
    merged: dict[str, set[str]] = {}
    for a, b in edges:
        a, b = a.split(".")[1], b.split(".")[1]
        if a != b:
            merged.setdefault(a, set()).add(b)
    found, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(merged.get(node, ())):
            if state.get(nxt) == "open":
                found.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = "done"

    for start in sorted(merged):
        if start not in state:
            visit(start, [start])
    return found


def mermaid(graph: dict[str, set[str]]) -> str:
    """The domain graph as a fenced Mermaid block: each folder a box in its half, an arrow per import."""
    domains = sorted({d for d in map(domain, graph) if d})
    ident = {d: d.replace("module_utils.", "mu").replace("plugin_utils.", "pu") for d in domains}
    lines = ["```mermaid", "flowchart LR"]
    for kind in CORE:
        lines.append(f'  subgraph {kind} ["{TITLES[kind]}"]')
        lines += [f'    {ident[d]}["{d.split(".")[1]}/"]' for d in domains if d.startswith(kind + ".")]
        lines.append("  end")
    lines += [f"  {ident[a]} --> {ident[b]}" for a, b in sorted(domain_edges(graph))]
    lines.append("```")
    return "\n".join(lines)


if __name__ == "__main__":
    print(mermaid(scan(sys.argv[1] if len(sys.argv) > 1 else REPO)))
