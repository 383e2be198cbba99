# Copyright: lanekit developers
# Apache-2.0
"""The filter phase_skip: whether a deploy phase is skipped on the re-run probe's proof, and why
(plugin_utils/_boot/_phases.py is the one definition)."""
from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._phases import phase_skip as _phase_skip


def phase_skip(phase: Any, settled: Any = None, plan: Any = None, settings: Any = None) -> dict[str, Any]:
    if settled is not None and not isinstance(settled, (list, tuple)):
        raise AnsibleFilterError(f"phase_skip needs the list lanekit_phases_settled, got {type(settled).__name__}.")
    return _phase_skip(str(phase), list(settled or []), plan if isinstance(plan, dict) else {},
                       settings if isinstance(settings, dict) else {})


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"phase_skip": phase_skip}
