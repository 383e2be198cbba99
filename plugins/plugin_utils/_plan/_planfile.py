# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Writing ``reports/<lane>/plan.json``.

One job: the plan file: atomic, 0600 (the plan names hosts, paths and the secrets' names),
left alone when its content did not change, and read back for the next run's --diff.
"""
from __future__ import annotations

import json
import os

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._files import check_output_path, write_output
from ansible_collections.lanekit.serving.plugins.module_utils._yaml import load_json_text, read_limited
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._model import Plan


def write_plan_file(path: str, plan: Plan) -> bool:
    """Write the plan JSON atomically; return True only when the content changed. Path problems are sentences."""
    content = json.dumps(plan, indent=2, sort_keys=True) + "\n"
    where = f"plan_file {path}"
    check_output_path(path, where, "plan.json")
    if os.path.isfile(path) and not os.path.islink(path):  # a link is replaced by the write below, never chmod-ed
        try:
            with open(path, encoding="utf-8") as handle:
                if handle.read() == content:
                    os.chmod(path, 0o600)  # a plan written by an older lanekit was world-readable
                    return False
        except (OSError, UnicodeDecodeError):
            pass  # rewritten below, or the write says why not
    # Reports are the operator's: the plan names hosts, paths and the secrets' names.
    return write_output(path, content, where, mode=0o600, dir_mode=0o700, example="plan.json")


def read_previous_plan(path: str) -> dict | None:
    """The plan last written at ``path`` (for ``--diff``), None when there is none or it cannot be read as a plan."""
    if not os.path.isfile(path):
        return None
    try:
        data = load_json_text(read_limited(path), path)
    except LanekitError:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("ranks"), list) else None
