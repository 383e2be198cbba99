# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Reading ``lanes/<lane>.yml`` and turning it, with its layers, into a validated lane.

One job: the lane's file I/O. The lane file is read once per plan; every host's layers are
merged over the same data (``_layers``) and validated (``_validate``).
"""
from __future__ import annotations

import os

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._yaml import describe, load_file
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._layers import (
    Layers,
    layer_variable,
    parse_overrides,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._model import Lane
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._table import LANE_NAME_RE
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._validate import validate

_describe = describe


def lane_path(lanes_dir: str, lane_name: str) -> str:
    return os.path.join(lanes_dir, f"{lane_name}.yml")


def read_lane_file(lanes_dir: str, lane_name: object) -> tuple[str, dict]:
    if not isinstance(lane_name, str) or not LANE_NAME_RE.match(lane_name or ""):
        raise LanekitError(
            f"lane {lane_name!r} is not a lane name: pass -e lane=<name> with a file lanes/<name>.yml "
            f"(lower-case letters, digits, '-' and '.')."
        )
    path = lane_path(lanes_dir, lane_name)
    if not os.path.isfile(path):
        known = sorted(f[:-4] for f in os.listdir(lanes_dir) if f.endswith(".yml")) if os.path.isdir(lanes_dir) else []
        raise LanekitError(f"{path} does not exist; known lanes: {', '.join(known) or 'none'}.")
    data = load_file(path)
    if data is None:
        raise LanekitError(f"{path} is empty; a lane file is a mapping of lane settings (lane, engine, image, ...).")
    if not isinstance(data, dict):
        raise LanekitError(f"{path} must be a mapping of lane settings, found {_describe(data)}.")
    return path, data


def load_lane(lanes_dir: str, lane_name: str, overrides: list[tuple[str, object]] | None = None,
              lane_file: tuple[str, dict] | None = None) -> Lane:
    """Load, layer and validate one lane. ``overrides`` is [(source name, mapping or string)];
    ``lane_file`` is read_lane_file's (path, data) when the caller already read it (one read per plan)."""
    path, data = lane_file or read_lane_file(lanes_dir, lane_name)
    parsed = [(name, parse_overrides(value, name, layer_variable(name))) for name, value in (overrides or [])]
    layers = Layers(path, data, parsed)
    lane = validate(layers, lane_name)
    lane["_source"] = path
    lane["_layers"] = [name for name, _layer in layers.layers]
    return lane
