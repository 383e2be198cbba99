"""Unit-test setup: the checkout as ansible_collections.lanekit.serving, and the shared fixtures.

tests/ and tests/unit/ are packages, so pytest (rootdir import mode ``prepend``) puts the checkout
on sys.path and the test modules import their helpers as ``tests.unit.helpers.<name>``; test
files in different folders may then share a name (plugins/modules/test_lane_plan.py beside
plugins/action/test_lane_plan.py), as the mirror of plugins/ needs.
"""
from __future__ import annotations

import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(REPO, ".collections")
LINK = os.path.join(COLLECTIONS, "ansible_collections", "lanekit", "serving")

if not os.path.exists(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink("../../..", LINK)
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)

from tests.unit.helpers.hubserver import FakeHub  # noqa: E402  (needs the path above)
from tests.unit.helpers.modules import stage_local_model  # noqa: E402


@pytest.fixture
def fake_hub():
    """A local Hugging Face Hub look-alike on 127.0.0.1 (helpers/hubserver.py), stopped at teardown.

    The tests that use it drive the real huggingface_hub client, so they are skipped without it.
    """
    pytest.importorskip("huggingface_hub")
    hub = FakeHub()
    hub.start()
    try:
        yield hub
    finally:
        hub.stop()


@pytest.fixture
def staged(tmp_path):
    """A small two-shard model staged from tmp_path/src into tmp_path/nfs/model by weights_stage."""
    return stage_local_model(tmp_path)
