# Copyright: lanekit developers
# Apache-2.0
"""The filter image_method: which method distributes the image this run, from every node's
image_info report and the image's layer sizes (plugin_utils/_image/_method.py is the one definition)."""
from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._image._method import choice_dict, choose_method


def image_method(reports: Any, sizes: Any, forks: Any, requested: Any = "auto") -> dict[str, Any]:
    if not isinstance(reports, dict):
        raise AnsibleFilterError(f"image_method needs a mapping of node name to its image_info report, "
                                 f"got {type(reports).__name__}.")
    try:
        sizes = [int(size) for size in (sizes or [])]
        forks = int(forks)
    except (TypeError, ValueError):
        raise AnsibleFilterError(f"image_method needs the layer sizes as whole numbers and forks as a number, "
                                 f"got {sizes!r} and {forks!r}.") from None
    try:
        return choice_dict(choose_method(reports, sizes, forks, str(requested)))
    except LanekitError as err:
        raise AnsibleFilterError(str(err)) from None


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"image_method": image_method}
