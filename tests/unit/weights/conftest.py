"""Fixtures for the weights/page-cache unit tests.

Makes ``ansible_collections.lanekit.serving`` importable from the checkout (through the
``.collections`` link the Makefile creates, or a temporary one), and provides ``fake_hub``: a
local HTTP server on 127.0.0.1 that serves a small repository the way the Hugging Face Hub does,
so the real huggingface_hub client can be exercised without the network.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _ensure_collection_importable():
    link = ROOT / ".collections"
    if (link / "ansible_collections" / "lanekit" / "serving" / "plugins").is_dir():
        base = link
    else:
        base = Path(tempfile.mkdtemp(prefix="lanekit-coll-"))
        (base / "ansible_collections" / "lanekit").mkdir(parents=True)
        os.symlink(ROOT, base / "ansible_collections" / "lanekit" / "serving")
    if str(base) not in sys.path:
        sys.path.insert(0, str(base))


_ensure_collection_importable()
sys.path.insert(0, str(Path(__file__).resolve().parent))

from hubserver import FakeHub  # noqa: E402


@pytest.fixture
def fake_hub():
    hub = FakeHub()
    hub.start()
    try:
        yield hub
    finally:
        hub.stop()
