# Copyright: lanekit developers
# Apache-2.0
"""The filter node_ranks: this node's ranks from the lane's plan (plugin_utils/_plan/_node_ranks.py
is the one definition)."""
from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._node_ranks import node_ranks as _node_ranks


def node_ranks(plan: Any, host: str) -> list[dict[str, Any]]:
    try:
        return _node_ranks(plan, str(host))
    except LanekitError as err:
        raise AnsibleFilterError(str(err)) from None


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"node_ranks": node_ranks}
