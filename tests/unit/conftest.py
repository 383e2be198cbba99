"""Fixtures shared by the unit tests (the collection's import path is set up by tests/conftest.py)."""
from __future__ import annotations

import pytest

from tests.unit.helpers.hubserver import FakeHub
from tests.unit.helpers.modules import stage_local_model


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
