# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Whether a deploy restarts the whole lane, decided once for all of its nodes.

One job: from what each node found (roles/ranks: which of its ranks the container module would
change, whose image is not on the node yet, which run, which exist), say which ranks change,
which running ranks restart with them and whether the teardown role runs first (archive, stop).
A multi-node lane cannot take back one restarted rank: the others lost their peer, so when any
rank changes the running ones restart with it, stopped and started in the engine's order.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError

# What each node reports (all lists of node ranks; a missing key is an empty list).
REPORT_KEYS = ("changed", "missing_image", "running", "existing")


def _ranks(report: Mapping[str, Any], key: str) -> list[int]:
    value = report.get(key) or []
    if not isinstance(value, (list, tuple)) or not all(isinstance(r, int) and not isinstance(r, bool) for r in value):
        raise LanekitError(f"lane_restart: a node's {key} must be a list of rank numbers, got {value!r}; "
                           "the ranks role builds these reports (roles/ranks/tasks/main.yml).")
    return list(value)


def lane_restart(reports: Iterable[Any], restart_lane_on_change: bool = True,
                 archive_on_change: bool = True) -> dict[str, Any]:
    """The lane's decision from every node's report.

    Returns ``changed`` (ranks that are created or recreated: the container module would change
    them, or their image has yet to arrive), ``restart`` (running ranks that did not change and
    restart with them; none unless ``restart_lane_on_change``), ``teardown`` (whether the teardown
    role runs before the ranks start: something changes, some container of the lane exists, and it
    is asked to stop or archive), ``stop`` and ``archive`` (what that teardown does) and
    ``message``, the one line the role prints.
    """
    changed: set[int] = set()
    running: set[int] = set()
    existing: set[int] = set()
    for report in reports:
        if report is None:  # a host that ran none of the role's tasks (another lane's node)
            continue
        if not isinstance(report, Mapping):
            raise LanekitError(f"lane_restart: each node's report must be a mapping of {', '.join(REPORT_KEYS)}, "
                               f"got {type(report).__name__}.")
        changed.update(_ranks(report, "changed"), _ranks(report, "missing_image"))
        running.update(_ranks(report, "running"))
        existing.update(_ranks(report, "existing"))
    restart = sorted(running - changed) if changed and restart_lane_on_change else []
    teardown = bool(changed) and bool(existing) and (restart_lane_on_change or archive_on_change)
    return {
        "changed": sorted(changed),
        "restart": restart,
        "teardown": teardown,
        "stop": teardown and restart_lane_on_change,
        "archive": teardown and archive_on_change,
        "message": _message(sorted(changed), restart),
    }


def _message(changed: list[int], restart: list[int]) -> str:
    if not changed:
        return "no rank changes."
    text = "ranks " + ", ".join(str(r) for r in changed) + " change"
    if restart:
        text += "; running ranks " + ", ".join(str(r) for r in restart) + " restart with them"
    return text + "."
