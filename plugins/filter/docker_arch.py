# Copyright: lanekit developers
# Apache-2.0
"""The filter docker_arch: a machine architecture in the container-platform spelling (the one table
is module_utils/_image/_docker_cli.normalize_arch), for comparing Ansible's facts with a lane."""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import normalize_arch


def docker_arch(value: str | None) -> str:
    return normalize_arch(value)


class FilterModule:
    def filters(self) -> dict:
        return {"docker_arch": docker_arch}
