# Copyright: lanekit developers
# Apache-2.0
"""Make ``ansible_collections.lanekit.serving`` importable for the ranks/readiness unit tests.

`make venv` links the checkout at .collections/ansible_collections/lanekit/serving; without it
(a bare pytest run) a temporary link is made.
"""
from __future__ import annotations

import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))



def _ensure_collection_path() -> None:
    try:
        import ansible_collections.lanekit.serving.plugins  # noqa: F401
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
    import ansible_collections  # noqa: F401
    for name in [m for m in sys.modules if m == "ansible_collections" or m.startswith("ansible_collections.")]:
        # A namespace package computed before the path change would hide the collection.
        if name == "ansible_collections":
            mod = sys.modules[name]
            path = getattr(mod, "__path__", None)
            if path is not None and hasattr(path, "_recalculate"):
                path._recalculate()


_ensure_collection_path()
