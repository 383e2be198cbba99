# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Where the plan reads its specs from and writes its reports to, on the controller.

One job: the controller's paths: ``lanes/`` and ``images/`` (the task's argument, the inventory's
variable, the working directory, else the collection's own) and the reports root.
"""
from __future__ import annotations

import os


def reports_root(configured: str | None, playbook_dir: str | None, cwd: str) -> str:
    """The controller's reports root: ``lanekit_reports_dir``, else ``reports/`` beside a checkout's playbooks.

    A playbook run from an installed collection (under an ``ansible_collections/`` tree) must not
    write into the installed collection, so its reports go to ``reports/`` in the working directory.
    """
    if configured:
        return os.path.abspath(os.path.join(cwd, str(configured)))
    if playbook_dir and "ansible_collections" not in os.path.normpath(playbook_dir).split(os.sep):
        base = os.path.dirname(playbook_dir) if os.path.basename(playbook_dir) == "playbooks" else playbook_dir
        return os.path.join(os.path.abspath(base), "reports")
    return os.path.join(os.path.abspath(cwd), "reports")


def find_spec_dir(name: str, explicit: str | None, configured: str | None, cwd: str, collection_root: str) -> str:
    """Where ``lanes/`` (or ``images/``) is read from: the task's argument, the inventory's variable,
    a ``<name>/`` directory in the working directory (a team's own repository), else the collection's own."""
    for candidate in (explicit, configured):
        if candidate:
            return os.path.abspath(os.path.join(cwd, str(candidate)))
    local = os.path.join(os.path.abspath(cwd), name)
    if os.path.isdir(local):
        return local
    return os.path.join(collection_root, name)
