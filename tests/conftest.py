"""Test setup shared by tests/unit and tests/integration: the checkout as ansible_collections.lanekit.serving.

tests/ is a package, so pytest (rootdir import mode ``prepend``) puts the checkout on sys.path and the
test modules import their helpers as ``tests.unit.helpers.<name>``; test files in different folders
may then share a name (plugins/modules/test_lane_plan.py beside plugins/action/test_lane_plan.py), as
the mirror of plugins/ needs.

The collection is imported by its Ansible name through a link ansible_collections/lanekit/serving ->
the checkout. The link is made in a temporary directory, not in the checkout: a test run leaves the
working tree as it found it (``git status`` clean), and a checkout without ``make venv`` needs none.
ANSIBLE_COLLECTIONS_PATH points the ansible-playbook runs of tests/integration at the same link
(ansible.cfg's ./.collections is only there after ``make venv``).
"""
from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _collections_root() -> str:
    root = tempfile.mkdtemp(prefix="lanekit-collections-")
    # rmtree removes the link itself and never follows it into the checkout.
    atexit.register(shutil.rmtree, root, True)
    link = os.path.join(root, "ansible_collections", "lanekit", "serving")
    os.makedirs(os.path.dirname(link))
    os.symlink(REPO, link)
    return root


COLLECTIONS = _collections_root()
sys.path.insert(0, COLLECTIONS)
os.environ["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join(
    p for p in (COLLECTIONS, os.environ.get("ANSIBLE_COLLECTIONS_PATH")) if p)
