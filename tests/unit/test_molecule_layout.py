"""The molecule scenarios (molecule/<scenario>/, settings shared in .config/molecule/config.yml): each
stands alone with the nodes it names, every one of its tests has a time budget and a place in its
order, its files are numbered once across all scenarios (zero-padded, so that a file listing is in
their order), and every scenario and scenario file the docs name exists."""
from __future__ import annotations

import ast
import os
import re

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MOLECULE = os.path.join(REPO, "molecule")
SHARED = os.path.join(MOLECULE, "shared", "tests")
NAME = re.compile(r"^test_scenario_(\d+)_\w+\.py$")


def _scenarios() -> list[str]:
    return sorted(name for name in os.listdir(MOLECULE) if os.path.isfile(os.path.join(MOLECULE, name, "molecule.yml")))


def _tests_dir(scenario: str) -> str:
    return os.path.join(MOLECULE, scenario, "tests")


def _test_files(scenario: str) -> list[str]:
    return sorted(f for f in os.listdir(_tests_dir(scenario)) if f.startswith("test_") and f.endswith(".py"))


def _scenario_files() -> dict[str, str]:
    """{test_scenario_NN_<what>.py: its scenario} over every scenario."""
    return {f: s for s in _scenarios() for f in _test_files(s) if f.startswith("test_scenario_")}


def _yaml(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def test_the_scenarios_are_the_four_the_makefile_and_readme_name():
    assert _scenarios() == ["real-vllm", "recipes", "seed-lanes", "ssh-faults"]
    with open(os.path.join(REPO, "Makefile"), encoding="utf-8") as handle:
        listed = re.search(r"^SCENARIOS := (.*)$", handle.read(), re.MULTILINE)
    assert listed and sorted(listed.group(1).split()) == _scenarios()
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    for scenario in _scenarios():
        assert f"make scenario S={scenario}" in readme, f"README does not say how to run {scenario}"
    assert "After every change, run `make check`" in readme


def test_each_scenario_names_the_nodes_it_brings_up_and_its_own_tests():
    for scenario in _scenarios():
        config = _yaml(os.path.join(MOLECULE, scenario, "molecule.yml"))
        sets = config["provisioner"]["env"]["LANEKIT_SIM_NODE_SETS"].split(",")
        assert sets and set(sets) <= {"spark", "cpu"}, (scenario, sets)
        # The inventory its playbooks run on is that of its nodes.
        links = config["provisioner"].get("inventory", {}).get("links", {"hosts": "../../inventories/sim/hosts.yml"})
        assert links["hosts"] == ("../../inventories/sim/hosts.yml" if sets == ["spark"] else
                                  "../../inventories/sim-cpu/hosts.yml"), scenario
        # Its one platform is a host of that inventory: testinfra's tests reach every host molecule lists.
        inventory = _yaml(os.path.normpath(os.path.join(MOLECULE, scenario, links["hosts"])))
        hosts = {h for group in inventory["all"]["children"].values() for h in (group.get("hosts") or {})}
        assert [p["name"] for p in config["platforms"]] and {p["name"] for p in config["platforms"]} <= hosts, scenario
        assert _test_files(scenario), f"{scenario} has no tests"
        assert "create" in config["scenario"]["test_sequence"] and config["scenario"]["test_sequence"][-1] == "destroy"


def test_every_scenario_test_has_a_time_budget():
    base = _yaml(os.path.join(REPO, ".config", "molecule", "config.yml"))
    assert int(base["verifier"]["options"]["timeout"]) > 0
    with open(os.path.join(REPO, "requirements.txt"), encoding="utf-8") as handle:
        assert re.search(r"^pytest-timeout==", handle.read(), re.MULTILINE)
    for scenario in _scenarios():
        # No scenario turns the budget off.
        config = _yaml(os.path.join(MOLECULE, scenario, "molecule.yml"))
        assert "timeout" not in (config.get("verifier") or {}).get("options", {}), scenario
        for name in _test_files(scenario):
            with open(os.path.join(_tests_dir(scenario), name), encoding="utf-8") as handle:
                assert not re.search(r"mark\.timeout\((0|None)\)", handle.read()), f"{scenario}/{name} has no budget"


def test_every_scenario_file_has_a_two_digit_number_of_its_own():
    files = sorted(_scenario_files())
    assert files
    bad = [f for f in files if not (m := NAME.match(f)) or len(m.group(1)) != 2]
    assert not bad, f"name these test_scenario_NN_<what>.py (two digits): {bad}"
    numbers = [int(NAME.match(f).group(1)) for f in files]  # every name matched above
    assert len(set(numbers)) == len(numbers), f"two scenario files share a number: {files}"
    # sorted by name == sorted by number: the 1, 10, 11, 2 trap of unpadded numbers
    assert numbers == sorted(numbers) and numbers == list(range(1, len(numbers) + 1)), files


def _doc_files():
    for top in ("README.md", "docs", "molecule", "tests/molecule-run.sh", "tests/test-all.sh", "Makefile"):
        path = os.path.join(REPO, top)
        if os.path.isfile(path):
            yield path
            continue
        for root, _dirs, files in os.walk(path):
            for name in files:
                if name.endswith((".md", ".py", ".yml", ".sh")):
                    yield os.path.join(root, name)


def test_every_scenario_file_and_scenario_the_docs_name_exists():
    existing = set(_scenario_files())
    missing = {}
    for path in _doc_files():
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        for name in re.findall(r"test_scenario_\w+?\.py", text):
            if name not in existing:
                missing.setdefault(os.path.relpath(path, REPO), []).append(name)
        for scenario in re.findall(r"molecule/([a-z0-9-]+)/", text):
            if scenario != "shared" and scenario not in _scenarios():
                missing.setdefault(os.path.relpath(path, REPO), []).append(f"molecule/{scenario}/")
        stale = re.findall(r"test_scenario_\d(?!\d)", text)  # an unpadded number
        assert not stale, f"{os.path.relpath(path, REPO)} names a scenario file by an unpadded number: {stale}"
    assert not missing, f"these files name scenario files or scenarios that do not exist: {missing}"


def _literal(path: str, name: str):
    """A literal assigned at the top of a Python file (read, not imported)."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{os.path.relpath(path, REPO)} assigns no {name}")


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


def test_each_scenarios_order_places_every_file_and_names_only_tests_that_exist():
    for scenario in _scenarios():
        order = _literal(os.path.join(_tests_dir(scenario), "conftest.py"), "ORDER")
        stale = [entry for entry in order if not _test_exists(_tests_dir(scenario), entry)]
        assert not stale, f"{scenario}'s conftest.ORDER names tests that do not exist there: {stale}"
        # A file left out would run after all of them, by accident.
        placed = {entry.split("::", 1)[0] for entry in order}
        assert set(_test_files(scenario)) <= placed, (scenario, set(_test_files(scenario)) - placed)


def test_each_scenario_test_left_to_the_extended_tier_names_a_unit_test_that_exists():
    extended = _literal(os.path.join(SHARED, "lanefixtures.py"), "EXTENDED_ONLY")
    assert extended
    files = _scenario_files()
    for scenario_test, unit in extended.items():
        path = scenario_test.split("::", 1)[0]
        assert path in files and _test_exists(_tests_dir(files[path]), scenario_test), \
            f"EXTENDED_ONLY names a scenario test that does not exist: {scenario_test}"
        assert unit.startswith("tests/unit/") and _test_exists(REPO, unit), \
            f"EXTENDED_ONLY says {scenario_test} is proven by {unit}, which does not exist"
