"""The molecule scenario files: one number each, zero-padded, so that the order testinfra runs them in
(file names, sorted) is the order of their numbers, and every scenario file the docs name exists."""
from __future__ import annotations

import ast
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCENARIOS = os.path.join(REPO, "molecule", "default", "tests")
NAME = re.compile(r"^test_scenario_(\d+)_\w+\.py$")


def _scenario_files() -> list[str]:
    return sorted(f for f in os.listdir(SCENARIOS) if f.startswith("test_scenario_"))


def test_every_scenario_file_has_a_two_digit_number_of_its_own():
    files = _scenario_files()
    assert files, SCENARIOS
    bad = [f for f in files if not (m := NAME.match(f)) or len(m.group(1)) != 2]
    assert not bad, f"name these test_scenario_NN_<what>.py (two digits): {bad}"
    numbers = [int(NAME.match(f).group(1)) for f in files]  # every name matched above
    assert len(set(numbers)) == len(numbers), f"two scenario files share a number: {files}"
    # sorted by name == sorted by number: the 1, 10, 11, 2 trap of unpadded numbers
    assert numbers == sorted(numbers) and numbers == list(range(1, len(numbers) + 1)), files


def _doc_files():
    for top in ("README.md", "docs", "molecule", "tests/molecule-run.sh", "Makefile"):
        path = os.path.join(REPO, top)
        if os.path.isfile(path):
            yield path
            continue
        for root, _dirs, files in os.walk(path):
            for name in files:
                if name.endswith((".md", ".py", ".yml", ".sh")):
                    yield os.path.join(root, name)


def test_every_scenario_file_the_docs_name_exists():
    existing = set(_scenario_files())
    missing = {}
    for path in _doc_files():
        with open(path, encoding="utf-8") as handle:
            for name in re.findall(r"test_scenario_\w+?\.py", handle.read()):
                if name not in existing:
                    missing.setdefault(os.path.relpath(path, REPO), []).append(name)
    assert not missing, f"these files name scenario files that do not exist: {missing}"
    for path in _doc_files():
        with open(path, encoding="utf-8") as handle:
            stale = re.findall(r"test_scenario_\d(?!\d)", handle.read())  # an unpadded number
        assert not stale, f"{os.path.relpath(path, REPO)} names a scenario file by an unpadded number: {stale}"


def _conftest_literal(name: str):
    """A literal assigned at the top of molecule/default/tests/conftest.py (read, not imported)."""
    with open(os.path.join(SCENARIOS, "conftest.py"), encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"conftest.py assigns no {name}")


def _test_exists(root: str, ref: str) -> bool:
    """Whether <path>::<test function> names a test function defined in that file under root."""
    path, _sep, test = ref.partition("::")
    full = os.path.join(root, path)
    if not os.path.isfile(full):
        return False
    if not test:
        return True
    with open(full, encoding="utf-8") as handle:
        return re.search(rf"^def {re.escape(test)}\(", handle.read(), re.MULTILINE) is not None


def test_the_scenario_order_names_only_scenario_files_and_tests_that_exist():
    order = _conftest_literal("SPARK_ORDER")
    stale = [entry for entry in order if not _test_exists(SCENARIOS, entry)]
    assert not stale, f"conftest.SPARK_ORDER names tests that do not exist: {stale}"
    # Every scenario file is placed: in the spark-node order, or in the CPU-node worker's (a file left
    # out would run after all of them, by accident).
    placed = {entry.split("::", 1)[0] for entry in order}
    cpu_nodes = set(_conftest_literal("CPU_NODE_SCENARIOS"))
    assert cpu_nodes <= set(_scenario_files()), cpu_nodes - set(_scenario_files())
    assert set(_scenario_files()) <= placed | cpu_nodes, set(_scenario_files()) - placed - cpu_nodes
    # A CPU-node file in the spark order too only places its tests that use the spark nodes.
    shared = {entry.split("::", 1)[0] for entry in _conftest_literal("SPARK_TESTS_IN_CPU_FILES")}
    assert {entry for entry in order if "::" not in entry} & cpu_nodes <= shared


def test_each_scenario_test_left_to_the_extended_tier_names_a_unit_test_that_exists():
    extended = _conftest_literal("EXTENDED_ONLY")
    assert extended
    for scenario, unit in extended.items():
        assert _test_exists(SCENARIOS, scenario), f"EXTENDED_ONLY names a scenario test that does not exist: {scenario}"
        assert unit.startswith("tests/unit/") and _test_exists(REPO, unit), \
            f"EXTENDED_ONLY says {scenario} is proven by {unit}, which does not exist"
