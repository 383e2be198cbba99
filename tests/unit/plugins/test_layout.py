"""Issue 24: the layout of the pure core holds (docs/architecture.md, "Where code lives").

Read from the AST of every file under plugins/ (tests/tools/import_graph.py), the way AnsiballZ
decides what a module's payload carries: it follows every import statement, so a module that
imports one file of controller code ships it, and everything that file imports, to every node.
"""
from __future__ import annotations

import ast
import os
import re

import pytest

from tests.tools import import_graph

GRAPH = import_graph.scan()
MODULES = sorted(name for name in GRAPH if name.startswith("modules."))
SHIPPED = {dep: module for module in MODULES for dep in import_graph.closure(GRAPH, module)}
DOC = os.path.join(import_graph.REPO, "docs", "architecture.md")


@pytest.mark.parametrize("module", MODULES)
def test_no_module_ships_controller_code(module):
    carried = sorted(dep for dep in import_graph.closure(GRAPH, module) if dep.startswith("plugin_utils"))
    assert carried == [], f"{module} imports controller-only code (plugins/plugin_utils): {carried}"


def test_lane_probe_does_not_ship_the_lane_schema_the_hardware_table_or_the_bench_settings():
    # The node-side probe needs the env file's hash (module_utils/_secrets), not what renders the plan.
    controller = {"plugin_utils._lane._schema", "module_utils._lane._hardware", "plugin_utils._bench._settings"}
    assert controller <= set(GRAPH), "a file named here moved: name its new place"
    assert import_graph.closure(GRAPH, "modules.lane_probe") & controller == set()
    assert "module_utils._secrets" in import_graph.closure(GRAPH, "modules.lane_probe")


def test_module_utils_holds_exactly_what_some_module_imports():
    # The rule of the layout: code no module ships lives in plugin_utils, so a node's payload and
    # the sanity import test of module_utils see only node-side code.
    core = sorted(name for name in GRAPH if name.startswith("module_utils."))
    assert [name for name in core if name not in SHIPPED] == []


def test_flat_helpers_import_no_domain():
    # The graph leaves out the arrows into the flat helpers (everything uses _errors and _yaml);
    # that is only honest while the helpers themselves stand below every domain.
    flat = [name for name in GRAPH if name.split(".")[0] in import_graph.CORE and len(name.split(".")) == 2
            and name not in {import_graph.domain(n) for n in GRAPH}]
    assert flat, "no flat helpers found"
    assert {name: sorted(d for d in GRAPH[name] if import_graph.domain(d)) for name in flat} == {n: [] for n in flat}


def test_the_domains_import_each_other_without_a_cycle():
    assert import_graph.cycles(import_graph.domain_edges(GRAPH)) == []


def test_a_cycle_is_found():
    edges = {("plugin_utils._plan", "module_utils._lane"), ("module_utils._lane", "plugin_utils._plan")}
    assert import_graph.cycles(edges) == [["_lane", "_plan", "_lane"]]


def test_the_architecture_page_shows_the_graph_the_code_has():
    with open(DOC, encoding="utf-8") as handle:
        blocks = re.findall(r"^```mermaid\n.*?^```$", handle.read(), re.M | re.S)
    assert blocks == [import_graph.mermaid(GRAPH)], (
        "docs/architecture.md's import graph is stale: paste the output of `python tests/tools/import_graph.py`")


def test_package_markers_hold_only_a_docstring():
    # AnsiballZ ships a package's __init__.py with every module that imports from the package.
    for name in GRAPH:
        path = os.path.join(import_graph.REPO, "plugins", *name.split("."), "__init__.py")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                body = ast.parse(handle.read()).body
            assert len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant), path
