# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The inventory's side of a plan: the lane's hosts, their rank order and their settings.

One job: check what the inventory gives a plan before anything is rendered: host names, node
ranks and fabric addresses, the cluster-wide rank settings (lanekit_rank_*), whether the hosts'
override layers agree where the ranks of one group must, and what each layer set (for people).
Every refusal is one sentence naming the variable, the host or layer, and the fix.
"""
from __future__ import annotations

import ipaddress
import re
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines
from ansible_collections.lanekit.serving.plugins.module_utils._yaml import describe, plain
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._layers import (
    CLI_LAYER,
    GROUP_LAYER,
    HOST_LAYER,
    parse_overrides,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._model import Lane
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _layout as _plan_layout


def order_hosts(hosts: list[dict[str, Any]], head: str | None) -> list[dict[str, Any]]:
    """Rank order: explicit node_rank host vars, else the head first and the group order after."""
    if any(h.get("node_rank") is not None for h in hosts):
        return sorted(hosts, key=lambda h: (h.get("node_rank") is None, h.get("node_rank") or 0))
    if head:
        names = [h["name"] for h in hosts]
        if head not in names:
            raise LanekitError(
                f"lanekit_head_host is {head!r}, which is not in the inventory group lane_nodes "
                f"({', '.join(names)}). Set it to one of those hosts or remove it."
            )
        return [h for h in hosts if h["name"] == head] + [h for h in hosts if h["name"] != head]
    return list(hosts)


_HOST_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]*$")


def check_hosts(hosts: list[dict]) -> None:
    """The inventory's lane_nodes: names without spaces, whole-number node ranks, an IP address per host."""
    for host in hosts:
        name = host["name"]
        if not isinstance(name, str) or not _HOST_NAME_RE.match(name):
            raise LanekitError(
                f"inventory host {name!r} (group lane_nodes) is not a host name: use letters, digits, '.', '-' and '_' "
                f"without spaces."
            )
        rank = plain(host["vars"].get("node_rank"))
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 0):
            raise LanekitError(
                f"host {name}: node_rank is {describe(rank)}; node ranks must be whole numbers (integers, not "
                f"strings) 0..{len(hosts) - 1}, one per host. Fix node_rank in the inventory's host_vars, or remove "
                f"it to use the inventory order."
            )
        ip = plain(host["vars"].get("fabric_ip"))
        if ip is None or ip == "":
            continue  # the plan names the missing fabric_ip with its fix
        try:
            ipaddress.ip_address(str(ip).strip() if isinstance(ip, str) else ip)
        except ValueError:
            raise LanekitError(
                f"host {name}: fabric_ip is {describe(ip)}, which is not an IP address; set it in the inventory's "
                f"host_vars to the address of the host on the fabric (e.g. 10.100.0.11)."
            ) from None
        if not isinstance(ip, str) or ip != ip.strip():
            raise LanekitError(f"host {name}: fabric_ip is {describe(ip)}; write the address as plain text such as "
                               f"'10.100.0.11'.")


_CLUSTER_VARIABLES = {
    "weights_root": "lanekit_weights_root", "rank_gpus": "lanekit_rank_gpus", "rank_devices": "lanekit_rank_devices",
    "rank_cap_add": "lanekit_rank_cap_add", "rank_ulimits": "lanekit_rank_ulimits",
    "rank_group_add": "lanekit_rank_group_add", "rank_security_opt": "lanekit_rank_security_opt",
    "rank_visible_devices": "lanekit_rank_visible_devices", "rank_mounts": "lanekit_rank_mounts",
    "rank_shm_size": "lanekit_rank_shm_size", "head_host": "lanekit_head_host",
}


def check_cluster(cluster: dict) -> None:
    """The inventory's rank settings have the shapes docker takes: text, or lists of text."""
    cluster.setdefault("rank_mounts", [])
    for key in ("rank_devices", "rank_cap_add", "rank_ulimits", "rank_group_add", "rank_security_opt", "rank_mounts"):
        value = cluster[key]
        if value in (None, ""):
            cluster[key] = []
        elif not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise LanekitError(
                f"{_CLUSTER_VARIABLES[key]} is {describe(value)}; expected a list of text entries "
                f"(e.g. [/dev/infiniband]) in the inventory."
            )
        else:
            # Each entry becomes one docker argument: "/dev/a /dev/b" would be one --device naming no device.
            for index, entry in enumerate(value):
                if any(c.isspace() for c in entry):
                    raise LanekitError(
                        f"{_CLUSTER_VARIABLES[key]}[{index}] is {describe(entry)}, which holds a space or a line break; "
                        f"each entry is one docker argument: write one entry per item in the inventory "
                        f"(e.g. [/dev/infiniband/uverbs0, /dev/infiniband/rdma_cm])."
                    )
    cluster["rank_mounts"] = [parse_mount(entry, index) for index, entry in enumerate(cluster["rank_mounts"])]
    for key in ("weights_root", "rank_gpus", "rank_shm_size", "head_host", "rank_visible_devices"):
        value = cluster[key]
        if value is None or (isinstance(value, int) and not isinstance(value, bool) and key == "rank_gpus"):
            continue
        if not isinstance(value, str) or any(c.isspace() for c in value):
            raise LanekitError(
                f"{_CLUSTER_VARIABLES[key]} is {describe(value)}; expected text without spaces in the inventory."
            )
        if key == "rank_gpus" and any(c.isdigit() and c not in "0123456789" for c in value):
            # '8²' passes str.isdigit but is no GPU count docker (or int()) reads.
            raise LanekitError(
                f"{_CLUSTER_VARIABLES[key]} is {describe(value)}; expected all, a GPU count or device ids written "
                f"with the digits 0-9 (e.g. 8 or device=0,1) in the inventory."
            )


def parse_mount(entry: str, index: int) -> dict:
    """One ``lanekit_rank_mounts`` entry, docker's ``-v source:target[:ro|:rw]`` spelling, as a plan mount."""
    parts = entry.split(":")
    read_only = len(parts) == 3 and parts[2] == "ro"
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("ro", "rw")) or \
            not all(p.startswith("/") for p in parts[:2]):
        raise LanekitError(
            f"lanekit_rank_mounts[{index}] is {describe(entry)}; expected an absolute host path and an absolute "
            f"container path, with :ro to mount it read-only (e.g. /usr/local/dcmi:/usr/local/dcmi:ro), in the "
            f"inventory.")
    return {"source": parts[0], "target": parts[1], "read_only": read_only}


def _setting(values: dict, name: str) -> str:
    return describe(values[name]) if values.get(name) is not None else "unset"


def _layer_sets(layer: dict, path: tuple) -> bool:
    node = layer
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def check_rank_agreement(hosts: list[dict[str, Any]], lanes: dict[str, Lane], engine: _engines.Engine) -> None:
    """Refuse a lane whose ranks would run different settings, naming the layer that set the value.

    The group layer must be one value for all hosts: a child group's or a host's own
    ``lane_group_overrides`` replaces the group's (Ansible does not merge variables). A host layer
    may set only ``serve.args``/``serve.env``, and only what the engine record lets one rank of a
    group have on its own (``Engine.may_differ_per_rank``): the ranks of one tensor-, pipeline- or
    data-parallel group that disagree on a scheduling flag run out of step.
    """
    def layer(host: dict[str, Any], source_start: str) -> tuple[str | None, dict[str, Any]]:
        for source, value in host["layers"]:
            if source.startswith(source_start):
                return source, parse_overrides(value, source, source_start.split(" ", 1)[0])
        return None, {}

    head = hosts[0]
    _source, head_group = layer(head, GROUP_LAYER)
    for host in hosts[1:]:
        _source, group = layer(host, GROUP_LAYER)
        if group != head_group:
            raise LanekitError(
                f"{GROUP_LAYER} is not the same for host {host['name']} as for host {head['name']} (a child group's or "
                f"a host's own value replaces the group_vars one, Ansible does not merge them); set {GROUP_LAYER} once "
                f"for all of the lane's hosts (group_vars/all or group_vars/lane_nodes) and put one host's own "
                f"serve.args or serve.env in {HOST_LAYER} in its host_vars.")
    pd = _plan_layout.layout_of(lanes[head["name"]]) == "pd"
    for host in hosts:
        source, own = layer(host, HOST_LAYER)
        if not own:
            continue
        if pd:
            raise LanekitError(
                f"{source} is set, but lane {lanes[head['name']]['lane']} is a prefill/decode lane, whose ranks take "
                f"their settings from pd.prefill and pd.decode; set them there through {GROUP_LAYER} and remove "
                f"{HOST_LAYER} from the host.")
        for key, value in own.items():
            inner = value if key == "serve" and isinstance(value, dict) else {None: None}
            for sub in inner:
                if key != "serve" or sub not in ("args", "env"):
                    dotted = key if sub is None else f"{key}.{sub}"
                    raise LanekitError(
                        f"{source}: key '{dotted}' is set, but it must be the same on every rank of the lane (a host may "
                        f"set only serve.args and serve.env of its own rank); move it to {GROUP_LAYER} in group_vars.")
    lane = lanes[head["name"]]
    group_kind = {"dp": "data-parallel", "pd": "prefill/decode"}.get(
        _plan_layout.layout_of(lane), "pipeline-parallel" if lane["topology"].get("pipeline_parallel", 1) > 1
        else "tensor-parallel")
    for host in hosts[1:]:
        other = lanes[host["name"]]
        for kind in ("args", "env"):
            mine, theirs = lane["serve"][kind], other["serve"][kind]
            for name in list(mine) + [n for n in theirs if n not in mine]:
                if mine.get(name) == theirs.get(name) or engine.may_differ_per_rank(kind, name):
                    continue
                path = ("serve", kind, name)
                source = next((s for h in (host, head) for s, v in [layer(h, HOST_LAYER)] if _layer_sets(v, path)),
                              None) or f"{HOST_LAYER} of host {host['name']}"
                fix = (f"set it for every rank in {GROUP_LAYER} (group_vars) or with -e {CLI_LAYER}, and remove it "
                       f"from {HOST_LAYER}")
                raise LanekitError(
                    f"{source}: key 'serve.{kind}.{name}' is {_setting(theirs, name)} on host {host['name']} but "
                    f"{_setting(mine, name)} on host {head['name']} (rank 0); the ranks of one {group_kind} group "
                    f"must agree on it ({engine.display} lets a rank differ only in its logging and local "
                    f"timeouts); {fix}.")


def _flatten(layer: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """An override layer as {dotted key: value}; mappings under serve.args stay values (a flag's JSON)."""
    out: dict[str, Any] = {}
    for key, value in layer.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and not prefix.startswith("serve.args."):
            if path == "serve.args":
                out.update({f"serve.args.{flag}": v for flag, v in value.items()})
            else:
                out.update(_flatten(value, path + "."))
        else:
            out[path] = value
    return out


def layer_overrides(hosts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """[{layer, hosts, keys}] for every non-empty override layer, in layer order; a layer every host
    shares (the group's, the command line's) is listed once."""
    out: list[dict] = []
    for host in hosts:
        for source, value in host["layers"]:
            layer = parse_overrides(value, source, source.split(" ", 1)[0])
            if not layer:
                continue
            keys = _flatten(layer)
            same = next((o for o in out if o["layer"] == source and o["keys"] == keys), None)
            if same:
                same["hosts"].append(host["name"])
            else:
                out.append({"layer": source, "hosts": [host["name"]], "keys": keys})
    order = (GROUP_LAYER, HOST_LAYER, CLI_LAYER)
    return sorted(out, key=lambda o: order.index(o["layer"].split(" ", 1)[0]) if o["layer"].split(" ", 1)[0] in order
                  else len(order))
