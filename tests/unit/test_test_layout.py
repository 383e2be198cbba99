"""Where tests live and what a test run may touch (issue 24 part 5).

Tests that run ansible-playbook belong in tests/integration (`make integration`), so `make unit`
stays the quick pure-Python run; and the collection link the tests import through lives outside
the checkout, so a test run leaves the working tree as it found it."""
from __future__ import annotations

import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# An ansible-playbook (or ansible) program named as a command: a string ending in the program's name.
RUNS_ANSIBLE = re.compile(r"""["'](?:[^"'\s]*/)?ansible(?:-playbook)?["']""")


def test_no_unit_test_runs_ansible_playbook():
    found = []
    for root, _dirs, files in os.walk(os.path.join(REPO, "tests", "unit")):
        for name in files:
            path = os.path.join(root, name)
            if name.endswith(".py") and path != os.path.abspath(__file__):  # this file names it on purpose
                with open(path, encoding="utf-8") as handle:
                    if RUNS_ANSIBLE.search(handle.read()):
                        found.append(os.path.relpath(path, REPO))
    assert not found, f"these run ansible-playbook: move them to tests/integration/ ({found})"


def test_the_pattern_finds_a_program_and_not_a_sentence():
    assert RUNS_ANSIBLE.search('os.path.join(bin_dir, "ansible-playbook")')
    assert RUNS_ANSIBLE.search("['/venv/bin/ansible-playbook', 'site.yml']")
    assert not RUNS_ANSIBLE.search('"run ansible-playbook lanekit.serving.deploy_lane -i inv"')


def test_the_collection_link_is_outside_the_checkout():
    collections = sys.modules["tests.conftest"].COLLECTIONS
    assert not os.path.realpath(collections).startswith(os.path.realpath(REPO) + os.sep), collections
    link = os.path.join(collections, "ansible_collections", "lanekit", "serving")
    assert os.path.realpath(link) == os.path.realpath(REPO)
    assert os.environ["ANSIBLE_COLLECTIONS_PATH"].split(os.pathsep)[0] == collections
