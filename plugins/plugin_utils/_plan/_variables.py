# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The inventory variables the planner reads, each with its scope, and the one reader of them.

One job: say, for every inventory variable the plan depends on, whether it is **lane-wide** (every rank
of the lane gets one value, so every host of the lane must say the same: set in host_vars for some
hosts only, it would otherwise apply to all of them from the head, or to none from another host) or
**per host** (read from each host for that host's ranks), and read them that way. A lane-wide
variable whose hosts disagree is refused naming two hosts and their values; the planner reads no
inventory variable but through this table (tests/unit/plugins/plugin_utils/_plan/test__variables.py
fails on a ``lanekit_*`` name the planning code reads that the table does not declare).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._yaml import plain

LANE = "lane-wide"
HOST = "per host"


@dataclass(frozen=True)
class Variable:
    name: str
    scope: str
    meaning: str
    doc: str


# The rank container's GPU access keys a hardware profile may set (module_utils/_lane/_hardware.rank_container
# reads lanekit_rank_<key> for each of them).
RANK_ACCESS_KEYS = ("gpus", "devices", "group_add", "security_opt", "mounts")

VARIABLES: tuple[Variable, ...] = (
    Variable("lanekit_hardware", LANE, "the nodes' hardware profile (compared with the lane's hardware)",
             "docs/hardware.md"),
    Variable("lanekit_gpus_per_node", LANE, "GPUs per node (compared with the lane's topology.gpus_per_node)",
             "docs/hardware.md"),
    Variable("lanekit_node_arch", LANE, "the nodes' CPU architecture: the image's platform", "docs/hardware.md"),
    Variable("lanekit_image_digests", LANE, "pinned upstream digests per image and architecture", "docs/install.md"),
    Variable("lanekit_weights_root", LANE, "where the export holding the weights is mounted on every node",
             "docs/real-nodes.md"),
    Variable("lanekit_rank_visible_devices", LANE, "the devices every rank sees", "docs/hardware.md"),
    Variable("lanekit_rank_cap_add", LANE, "capabilities added to every rank container", "docs/hardware.md"),
    Variable("lanekit_rank_ulimits", LANE, "ulimits of every rank container", "docs/hardware.md"),
    Variable("lanekit_rank_shm_size", LANE, "/dev/shm size of every rank container", "docs/hardware.md"),
    Variable("lanekit_head_host", LANE, "the host of rank 0 when it is not the first of lane_nodes",
             "docs/architecture.md"),
    Variable("lanekit_api_key", LANE, "the API key every rank serves with (a secret)", "docs/security.md"),
    Variable("lanekit_secret_env", LANE, "secret environment every rank gets (a secret)", "docs/security.md"),
    *(Variable(f"lanekit_rank_{key}", LANE, f"rank container GPU access: {key.replace('_', ' ')}",
               "docs/hardware.md") for key in RANK_ACCESS_KEYS),
    Variable("node_rank", HOST, "the host's place in the lane's rank order", "docs/architecture.md"),
    Variable("fabric_ip", HOST, "the host's address on the lane's fabric", "docs/real-nodes.md"),
    Variable("fabric_ifname", HOST, "the host's fabric interface", "docs/real-nodes.md"),
    Variable("ib_hca", HOST, "the host's InfiniBand adapters", "docs/real-nodes.md"),
    Variable("ucx_net_devices", HOST, "the host's UCX devices", "docs/real-nodes.md"),
    Variable("lanekit_cpu_threads_bind", HOST, "CPU cores the host's rank binds its threads to (CPU lanes)",
             "docs/hardware.md"),
)
BY_NAME = {v.name: v for v in VARIABLES}
SECRET = frozenset({"lanekit_api_key", "lanekit_secret_env"})


def _shown(name: str, value: Any) -> str:
    if value is None:
        return "nothing (unset)"
    if name in SECRET:
        return "a value (hidden)"
    return repr(value)


def lane_wide_values(hosts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """{name: value} of every lane-wide variable, the one value all of ``hosts`` agree on (None: unset on all).

    ``hosts``: the planner's ``{"name", "vars"}`` in rank order. Hosts that disagree (one sets a value in
    its host_vars, another sets another or none) are refused naming two of them: every rank gets one
    value, and reading it from one host would silently apply that host's to all or ignore another's.
    """
    out: dict[str, Any] = {}
    for variable in VARIABLES:
        if variable.scope != LANE:
            continue
        first_host, first = None, None
        for index, host in enumerate(hosts):
            # "" is a value of its own (lanekit_rank_gpus: "" asks for no GPU request), unlike unset
            value = plain((host.get("vars") or {}).get(variable.name))
            if index == 0:
                first_host, first = host["name"], value
            elif value != first:
                raise LanekitError(
                    f"{variable.name} is lane-wide ({variable.meaning}: one value for every rank of the lane), but "
                    f"the lane's hosts disagree: {first_host} has {_shown(variable.name, first)} and {host['name']} "
                    f"has {_shown(variable.name, value)}. Set it once for all of the lane's hosts (group_vars, not "
                    f"one host's host_vars), or give each host the same value ({variable.doc}).")
        out[variable.name] = first
    return out


def per_host(host: Mapping[str, Any], name: str) -> Any:
    """A per-host variable of one host (the table must declare it per host)."""
    if BY_NAME[name].scope != HOST:
        raise KeyError(f"{name} is not a per-host variable")  # pragma: no cover - a programming error
    return plain((host.get("vars") or {}).get(name))


def _whole(name: str, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise LanekitError(f"{name} is {value!r}; expected a whole number (the GPUs each node of the lane has).")


def check_inventory_hardware(lane: Mapping[str, Any], profiles: Mapping[str, Any], values: Mapping[str, Any]) -> None:
    """The lane's hardware and topology against what the inventory says its nodes are, on every path a lane
    comes by (lane file, recipe, override layers): a lane for other hardware differs in GPUs per node,
    memory and flags, and would fail on the nodes after its image and weights were staged."""
    source = lane.get("_source") or f"lane {lane.get('lane')}"
    kind = values.get("lanekit_hardware")
    if kind is not None:
        if not isinstance(kind, str):
            raise LanekitError(f"lanekit_hardware is {kind!r}; expected one hardware profile id (docs/hardware.md).")
        if kind != lane["hardware"]:
            theirs = profiles.get(kind, {}).get("display_name", kind)
            ours = profiles.get(lane["hardware"], {}).get("display_name", lane["hardware"])
            raise LanekitError(
                f"{source}: lane {lane['lane']} is for hardware {lane['hardware']} ({ours}), but the inventory's nodes "
                f"are {kind} ({theirs}, lanekit_hardware). Plan it with an inventory of {lane['hardware']} nodes, or "
                f"use a lane for these nodes (compile one with -e recipe=... for {kind}, or set the lane's hardware "
                f"and check its topology and memory settings for them).")
    per_node = values.get("lanekit_gpus_per_node")
    if per_node is not None:
        have = _whole("lanekit_gpus_per_node", per_node)
        need = lane["topology"]["gpus_per_node"]
        if need > have:
            raise LanekitError(
                f"{source}: key 'topology.gpus_per_node' is {need}, but the inventory's nodes have {have} GPU"
                f"{'s' if have != 1 else ''} each (lanekit_gpus_per_node); set topology.gpus_per_node (and the "
                f"parallel sizes) for these nodes, or plan the lane on nodes with {need} GPUs.")
