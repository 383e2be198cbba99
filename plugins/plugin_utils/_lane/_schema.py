# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The lane domain's front door: the names other domains import, from the file that does each job.

One job: keep one import path for the lane's users while the work lives in one file per job:

- ``_table``: the schema as data (docs/lane-schema.md is generated from it);
- ``_layers``: the override layers and which layer set each key;
- ``_validate``: a merged lane checked against the table, one sentence per problem;
- ``_load``: reading ``lanes/<lane>.yml`` and validating it with its layers;
- ``_flags``: ``serve.args``/``serve.env`` as ranks get them, the boot budget's timeouts;
- ``_values``: the checks that need the engine record;
- ``_model``: the validated lane's type (``Lane``), which carries its engine record.

Layers, in order (later wins per key; mappings deep-merge, lists are replaced): the lane file,
``lane_group_overrides`` (group_vars), ``lane_host_overrides`` (one host's host_vars: ``serve.args``
/ ``serve.env`` of its rank), ``lane_cli_overrides`` (``-e``).
"""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._flags import (
    budget_args,
    budget_env,
    effective_args,
    effective_env,
    render_args,
    render_flag_value,
    timeout_value,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._layers import (
    CLI_LAYER,
    CLI_SOURCE,
    GROUP_LAYER,
    GROUP_SOURCE,
    HOST_LAYER,
    OLD_LAYER,
    Layers,
    deep_merge,
    host_source,
    inventory_layers,
    old_layer_refusal,
    parse_overrides,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._load import lane_path, load_lane, read_lane_file
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._model import Lane
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._table import (
    ENGINES,
    FLAG_RE,
    LANE_NAME_RE,
    SCHEMA,
    SERVED_NAME_RE,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._validate import validate

__all__ = [
    "CLI_LAYER", "CLI_SOURCE", "ENGINES", "FLAG_RE", "GROUP_LAYER", "GROUP_SOURCE", "HOST_LAYER", "LANE_NAME_RE",
    "OLD_LAYER", "SCHEMA", "SERVED_NAME_RE", "Lane", "Layers", "budget_args", "budget_env", "deep_merge",
    "effective_args", "effective_env", "host_source", "inventory_layers", "lane_path", "load_lane",
    "old_layer_refusal", "parse_overrides", "read_lane_file", "render_args", "render_flag_value", "timeout_value",
    "validate",
]
