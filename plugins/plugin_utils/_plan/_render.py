# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Planning a lane: lane file + layers + inventory -> lint -> the plan.

One job: the plan's I/O and order of work, for the ``lane_plan`` action. ``plan_lane`` reads the
lane file and the image spec (and its lock), checks the inventory (``_inventory``), runs lint on
every rank's lane, then calls the pure builder (``_build.build_plan``), which makes the whole
plan. No host is contacted.

The plan domain's other files: ``_model`` (the plan's types and ``PLAN_VERSION``), ``_layout``
(which process each rank runs), ``_docker`` (docker argv and docker_container options),
``_paths`` (where specs and reports live), ``_planfile`` (writing plan.json), ``_table`` (the
plan for people). The names below the imports are re-exported for the importers that knew this
file before the split (actions and tests); new code imports from the file that does the job.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, cast

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._image._spec import (
    load_image_spec,
    lock_arch_entry,
    resolve_image,
)
from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import PROFILES, host_env, rank_container
from ansible_collections.lanekit.serving.plugins.module_utils._yaml import load_file, plain
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._layers import HOST_LAYER
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._load import load_lane, read_lane_file
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _kvbudget, _lint
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._build import PlanInputs, build_plan
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._docker import (
    container_options,
    device_requests,
    docker_run_argv,
    module_ulimit,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._inventory import (
    check_cluster,
    check_hosts,
    check_rank_agreement,
    layer_overrides,
    order_hosts,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._model import Plan
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._paths import (
    check_not_shared,
    find_spec_dir,
    pick_spec_dir,
    reports_root,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._planfile import write_plan_file
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._secrets import lane_secrets
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._table import table
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._variables import (
    check_inventory_hardware,
    lane_wide_values,
)

__all__ = [
    "check_cluster", "check_hosts", "check_rank_agreement", "container_options", "device_requests", "docker_run_argv",
    "find_spec_dir", "image_lock", "layer_overrides", "module_ulimit", "order_hosts", "plan_lane", "reports_root",
    "table", "write_plan_file",
]

LOCK_FILE = "image.lock.yml"


def known_lanes(dirs: Sequence[str]) -> list[str]:
    """Every lane name the folders hold, once."""
    return sorted({f[:-4] for d in dirs if os.path.isdir(d) for f in os.listdir(d) if f.endswith(".yml")})


def image_lock(image: dict[str, Any]) -> dict[str, Any] | None:
    """The image lock's entry for the plan's architecture (``images/<name>/image.lock.yml``), None without one.

    The plan publishes it as ``image.pin`` so that no role assembles the pin itself; a lock that
    is not a lock is refused here with the sentence the image role would give.
    """
    path = os.path.join(image["spec_dir"], LOCK_FILE)
    if not os.path.isfile(path):
        return None
    document = load_file(path)
    # A document that is not a mapping is lock_arch_entry's to refuse, with its sentence.
    return lock_arch_entry(cast("dict[str, Any] | None", document), image["name"], image["arch"], path)


def _lint_every_rank(ctx: _lint.LintContext, lanes: dict[str, Any], hosts: list[dict[str, Any]],
                     skip: list[str]) -> dict[str, Any]:
    """Lint findings of the lane, and of every rank whose own lane differs (a host layer can break one rank)."""
    findings = _lint.run(ctx, skip)
    checked = [ctx.lane]
    for host in hosts[1:]:
        other = lanes[host["name"]]
        if any(other == seen for seen in checked):
            continue
        checked.append(other)
        more = _lint.run(_lint.LintContext(lane=other, profile=ctx.profile, image=ctx.image, hosts=ctx.hosts,
                                           node_ranks=ctx.node_ranks, purpose=ctx.purpose,
                                           rank_container=ctx.rank_container, host_env=ctx.host_env), skip)
        for kind in ("errors", "warnings"):
            known = {item["message"] for item in findings[kind]}
            findings[kind] += [dict(item, message=f"on host {host['name']} (its {HOST_LAYER}): {item['message']}")
                               for item in more[kind] if item["message"] not in known]
    return findings


def plan_lane(lanes_dir: str | Sequence[str], images_dir: str | Sequence[str], lane_name: str, hosts: list[dict[str, Any]],
              lint_skip: Sequence[str] | None = None, purpose: str = "plan",
              reports_root: str | None = None) -> tuple[Plan | None, dict[str, Any]]:
    """Lane file + layers + inventory -> (plan or None, lint findings).

    ``hosts``: the lane_nodes hosts in inventory order, each ``{"name", "vars", "layers"}`` where
    ``vars`` are its host variables and ``layers`` its [(source, override mapping)] in order (the
    group layer, its own host layer, the command line: ``_lane.inventory_layers``).
    Lane-wide settings are read through ``_variables``: every host of the lane must agree on each.
    """
    if not hosts:
        raise LanekitError("the inventory group lane_nodes is empty; list the lane's GPU nodes there in rank order.")
    check_hosts(hosts)
    # The user's folder first, then the collection's: a lane or image the user's folder lacks falls back to the
    # collection's copy by name, as recipes do.
    lanes_dirs = [lanes_dir] if isinstance(lanes_dir, str) else list(lanes_dir)
    images_dirs = [images_dir] if isinstance(images_dir, str) else list(images_dir)
    lanes_dir = pick_spec_dir(lanes_dirs, f"{lane_name}.yml")
    if len(lanes_dirs) > 1 and isinstance(lane_name, str) and not os.path.isfile(os.path.join(lanes_dir, f"{lane_name}.yml")):
        raise LanekitError(f"lane {lane_name}: neither {os.path.join(lanes_dirs[0], lane_name + '.yml')} nor the "
                           f"collection's {os.path.join(lanes_dirs[-1], lane_name + '.yml')} exists; known lanes: "
                           f"{', '.join(known_lanes(lanes_dirs)) or 'none'}.")
    lane_file = read_lane_file(lanes_dir, lane_name)
    # What the lane file and its image spec say becomes root's containers on every node: nobody else may change them.
    check_not_shared(lane_file[0], "the lane file")
    lanes = {h["name"]: load_lane(lanes_dir, lane_name, h["layers"], lane_file) for h in hosts}
    lane = lanes[hosts[0]["name"]]
    engine = lane["_engine"]
    check_rank_agreement(hosts, lanes, engine)
    # One value per lane-wide variable, refused when the hosts disagree (a host_vars file of one host).
    lane_wide = lane_wide_values(hosts)
    check_inventory_hardware(lane, PROFILES, lane_wide)
    profile = PROFILES[lane["hardware"]]
    # A profile that fixes the CPU architecture (cpu_x86: amd64) is the default and refuses another.
    arch = str(lane_wide["lanekit_node_arch"] or profile.get("arch") or "arm64")
    if profile.get("arch") and arch != profile["arch"]:
        raise LanekitError(
            f"lanekit_node_arch is {arch!r}, but lane {lane['lane']} runs on hardware {lane['hardware']} "
            f"({profile['display_name']}), whose nodes are {profile['arch']}; set lanekit_node_arch: {profile['arch']} "
            f"in the inventory's group_vars for these nodes.")
    digests = lane_wide["lanekit_image_digests"] or {}
    if not isinstance(digests, dict):
        raise LanekitError(f"lanekit_image_digests is {digests!r}; expected a mapping image name -> arch -> digest.")
    images_dir = pick_spec_dir(images_dirs, os.path.join(lane["image"], "image.yml"))
    spec_dir = os.path.join(images_dir, lane["image"])
    check_not_shared(spec_dir, "the lane's image spec folder")
    check_not_shared(os.path.join(spec_dir, "image.yml"), "the lane's image spec")
    image = resolve_image(load_image_spec(images_dir, lane["image"]), arch, digests)
    node_ranks = {h["name"]: plain(h["vars"]["node_rank"]) for h in hosts if h["vars"].get("node_rank") is not None}
    access = rank_container(profile, lane_wide)
    cluster = plain({
        "weights_root": lane_wide["lanekit_weights_root"],
        # GPU access: the hardware profile's vendor defaults, each overridden by lanekit_rank_<key>.
        "rank_gpus": access["gpus"],
        "rank_devices": access["devices"],
        "rank_group_add": access["group_add"],
        "rank_security_opt": access["security_opt"],
        # Driver files a rank needs from its host (Ascend's driver, Intel's /dev/dri/by-path): lanekit_rank_mounts.
        "rank_mounts": access["mounts"],
        "rank_visible_devices": lane_wide["lanekit_rank_visible_devices"],
        "rank_cap_add": lane_wide["lanekit_rank_cap_add"] or [],
        "rank_ulimits": lane_wide["lanekit_rank_ulimits"] or [],
        "rank_shm_size": lane_wide["lanekit_rank_shm_size"] or "",
        "head_host": lane_wide["lanekit_head_host"],
    })
    check_cluster(cluster)
    # Lint sees the GPU access the ranks get, after the inventory values were checked.
    access = {key: cluster[f"rank_{key}"] for key in access}
    # Rank environment from each host's own variables (the profile declares which, e.g. CPU thread binding).
    envs = {h["name"]: host_env(profile, lane["engine"], h["name"], plain(h["vars"])) for h in hosts}
    # The lint rules read the lane as a mapping.
    data = cast("dict[str, Any]", lane)
    ctx = _lint.LintContext(lane=data, profile=profile, image=image, hosts=[h["name"] for h in hosts],
                            node_ranks=node_ranks, purpose=purpose, rank_container=access, host_env=envs)
    findings = _lint_every_rank(ctx, lanes, hosts, list(lint_skip or []))
    if findings["errors"]:
        return None, findings
    host_specs = [{
        "name": h["name"],
        "fabric_ip": h["vars"].get("fabric_ip"),
        "fabric_ifname": h["vars"].get("fabric_ifname"),
        "ib_hca": h["vars"].get("ib_hca"),
        "ucx_net_devices": h["vars"].get("ucx_net_devices"),
        "node_rank": plain(h["vars"].get("node_rank")),
        "host_env": envs[h["name"]],
    } for h in hosts]
    memory = _lint.kv_assessment(data, profile) or _lint.cpu_kv_assessment(data, profile)
    plan = build_plan(PlanInputs(
        lane=lane, profile=profile, image=image, hosts=host_specs, cluster=cluster, rank_lanes=lanes,
        reports_root=reports_root, secrets=lane_secrets(lane, lane_wide, engine), image_lock=image_lock(image),
        memory=None if memory is None else {k: v for k, v in memory.items() if k not in _kvbudget.ADVICE_KEYS},
        lint=findings, overrides=layer_overrides(hosts)))
    return plan, findings
