"""The molecule scenario files: one number each, zero-padded, so that the order testinfra runs them in
(file names, sorted) is the order of their numbers, and every scenario file the docs name exists."""
from __future__ import annotations

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
