# Copyright: lanekit developers
# Apache-2.0
"""The filter phases_settled: the deploy phases the re-run probes found nothing to do for on any node
(plugin_utils/_boot/_phases.py is the one definition)."""
from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._phases import settled_phases


def phases_settled(results: Any) -> list[str]:
    if not isinstance(results, (list, tuple)):
        raise AnsibleFilterError(f"phases_settled needs a list of the nodes' lane_probe results, got {type(results).__name__}.")
    return settled_phases([r if isinstance(r, dict) else None for r in results])


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"phases_settled": phases_settled}
