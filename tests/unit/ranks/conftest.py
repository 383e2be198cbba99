# Copyright: lanekit developers
# Apache-2.0
"""Make ``ansible_collections.lanekit.serving`` importable for the ranks/readiness unit tests.

`make venv` links the checkout at .collections/ansible_collections/lanekit/serving; without it
(a bare pytest run) a temporary link is made. ``ansible_collections`` is a namespace package, so
adding a path is enough.
"""
from __future__ import annotations

import importlib
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _ensure_collection_path() -> None:
    try:
        importlib.import_module("ansible_collections.lanekit.serving.plugins")
        return
    except ImportError:
        pass
    linked = os.path.join(ROOT, ".collections")
    if os.path.isdir(os.path.join(linked, "ansible_collections", "lanekit", "serving", "plugins")):
        sys.path.append(linked)
    else:
        base = tempfile.mkdtemp(prefix="lanekit-unit-")
        os.makedirs(os.path.join(base, "ansible_collections", "lanekit"))
        os.symlink(ROOT, os.path.join(base, "ansible_collections", "lanekit", "serving"))
        sys.path.append(base)
    importlib.invalidate_caches()


_ensure_collection_path()
