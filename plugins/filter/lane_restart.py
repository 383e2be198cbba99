# Copyright: lanekit developers
# Apache-2.0
"""The filter lane_restart: the whole-lane restart decision of the ranks role from every node's
report (plugin_utils/_boot/_restart.py is the one definition)."""
from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._restart import lane_restart as _lane_restart


def lane_restart(reports: Any, restart_lane_on_change: Any = True, archive_on_change: Any = True) -> dict[str, Any]:
    if not isinstance(reports, (list, tuple)):
        raise AnsibleFilterError(f"lane_restart needs a list of the nodes' reports, got {type(reports).__name__}.")
    try:
        return _lane_restart(reports, _bool(restart_lane_on_change, "restart_lane_on_change"),
                             _bool(archive_on_change, "archive_on_change"))
    except LanekitError as err:
        raise AnsibleFilterError(str(err)) from None


def _bool(value: Any, name: str) -> bool:
    # Role variables arrive as booleans or, templated, as their text.
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0", ""):
        return False
    raise AnsibleFilterError(f"lane_restart: {name} must be true or false, got {value!r}.")


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"lane_restart": lane_restart}
