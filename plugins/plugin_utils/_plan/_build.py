# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The whole plan, built in one place from checked inputs: one container spec per rank, then the lane's keys.

One job: build the plan. Pure: ``_render.plan_lane`` reads the files, checks the inventory and
runs lint, then hands everything here as one ``PlanInputs``; ``build_plan`` returns the
complete ``Plan`` (``_model``), with no key added afterwards. Every rank gets a distinct argv
(its node rank); replaying one rank's command on every node hangs the rendezvous.
"""
from __future__ import annotations

import hashlib
import json
import posixpath
from dataclasses import dataclass, field
from typing import Any, cast

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines
from ansible_collections.lanekit.serving.plugins.module_utils._secrets import Secrets
from ansible_collections.lanekit.serving.plugins.module_utils._weights._stage_revisions import revision_path
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._flags import effective_env, timeout_value
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._model import Lane
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._table import LOG_MAX_FILES, LOG_MAX_SIZE
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._values import plan_owned_flag
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _layout as _plan_layout
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._docker import container_options, docker_run_argv
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._inventory import order_hosts
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._lint import TROUBLESHOOTING_PREFIX
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._model import (
    PLAN_VERSION,
    ApiSpec,
    HardwareSummary,
    ImagePin,
    ImageSpec,
    Plan,
    PoolSpec,
    RankSpec,
    SecretsRecord,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._secrets import plan_secrets, secret_spec

CONTAINER_PREFIX = "lanekit-"
LABEL = "io.lanekit"
# The rank spec keys that make its spec_hash (with plan_version and the secrets' hash).
HASHED_KEYS = ("image", "entrypoint", "command", "env", "mounts", "network_mode", "ipc_mode", "gpus", "devices",
               "group_add", "security_opt", "cap_add", "ulimits", "shm_size", "log_driver", "log_opts",
               "extra_docker_args", "container_name")
# Pinned rather than the daemon's default: max-size and max-file are options of json-file (and local), a
# daemon defaulting to journald or syslog would refuse them, and the status probes read the log through
# docker logs, which json-file always serves.
LOG_DRIVER = "json-file"
_IMAGE_KEYS = ("name", "ref", "content_hash", "base_ref", "base_digest", "arch", "platform", "pinned", "pin_problem",
               "spec_dir", "entrypoint", "patches", "labels", "repository", "tag")
_PROFILE_KEYS = ("display_name", "gpu_name", "compute_capability", "device_memory_gib", "admission_free_gib",
                 "unified_memory", "vendor", "gfx_arch", "gpus_per_node", "memory_model", "arch")
# Published only by the profiles that have them (the node check's recognition: _hardware_taxonomy).
_OPTIONAL_PROFILE_KEYS = ("recognition",)


@dataclass
class PlanInputs:
    """Everything a plan is built from, already read and checked (``_render.plan_lane``).

    ``hosts``: [{name, fabric_ip, fabric_ifname?, ib_hca?, ucx_net_devices?, node_rank?, host_env}] from lane_nodes.
    ``cluster``: {weights_root, rank_gpus, rank_devices, rank_group_add, rank_security_opt, rank_mounts,
    rank_visible_devices, rank_cap_add, rank_ulimits, rank_shm_size, head_host}, checked by ``_inventory.check_cluster``.
    ``rank_lanes``: per-host lanes when host_vars carry their own lane_host_overrides (serve.args/env only).
    ``image_lock``: the image lock's entry for this architecture (``images/<name>/image.lock.yml``), if any.
    ``memory``: the KV-cache assessment (``_lint.kv_assessment``), ``lint``: the findings that did not refuse.
    """

    lane: Lane
    profile: dict[str, Any]
    image: dict[str, Any]
    hosts: list[dict[str, Any]]
    cluster: dict[str, Any]
    rank_lanes: dict[str, Lane] | None = None
    reports_root: str | None = None
    secrets: Secrets = field(default_factory=Secrets)
    image_lock: dict[str, Any] | None = None
    memory: dict[str, Any] | None = None
    lint: dict[str, Any] = field(default_factory=lambda: {"warnings": [], "skipped": []})
    overrides: list[dict[str, Any]] = field(default_factory=list)

    @property
    def engine(self) -> _engines.Engine:
        """The lane's engine record (carried on the lane since validation)."""
        return self.lane["_engine"]


def check_plan_owned(lane: Lane) -> None:
    """Refuse a lane that sets a flag the plan renders itself (the engine record lists them)."""
    engine = lane["_engine"]
    for flag, value in lane["serve"]["args"].items():
        owned = plan_owned_flag(engine, flag)
        if owned and value not in (None, False):
            raise LanekitError(
                f"{lane['_source']}: key 'serve.args.{flag}' is set, but the plan renders {owned} from "
                f"{engine.plan_owned[owned]}; remove it from serve.args (or set it to null in an override layer)."
            )


def _str_env(env: dict[str, Any]) -> dict[str, str]:
    out = {}
    for key, value in env.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "1" if value else "0"
        out[key] = str(value)
    return out


def _fabric_env(engine: _engines.Engine, host: dict[str, Any]) -> dict[str, str]:
    env = {}
    ip = host.get("fabric_ip")
    if not ip:
        carriers = " / ".join(e.host_ip_env for e in _engines.ENGINES.values())
        raise LanekitError(
            f"host {host['name']} has no fabric_ip: every rank advertises its fabric address to its peers "
            f"({carriers}). Set fabric_ip in the inventory's host_vars for {host['name']}."
        )
    env[engine.host_ip_env] = ip
    if host.get("fabric_ifname"):
        env["NCCL_SOCKET_IFNAME"] = host["fabric_ifname"]
        env["GLOO_SOCKET_IFNAME"] = host["fabric_ifname"]
    if host.get("ib_hca"):
        env["NCCL_IB_HCA"] = host["ib_hca"]
    if host.get("ucx_net_devices"):
        env["UCX_NET_DEVICES"] = host["ucx_net_devices"]
    return env


def _hash(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _rank_env(inputs: PlanInputs, record: dict[str, Any]) -> dict[str, str]:
    lane, profile, cluster, host = inputs.lane, inputs.profile, inputs.cluster, record["host"]
    env: dict[str, Any] = {}
    if record["gpu"]:
        env.update(profile.get("env", {}))
        env.update(profile.get("engine_env", {}).get(lane["engine"], {}))
        env.update(effective_env(record["lane"]))
        # What the host's own inventory variables set for its rank (the profile declares which): over the lane's.
        env.update(host.get("host_env") or {})
    env.update(_fabric_env(inputs.engine, host))
    if record["gpu"] and cluster.get("rank_visible_devices") not in (None, ""):
        # A rank that owns some of the node's GPUs (e.g. a second TP4 replica on GPUs 4-7).
        variable = profile.get("visible_devices_env", "CUDA_VISIBLE_DEVICES")
        if variable is None:
            raise LanekitError(
                f"lanekit_rank_visible_devices is {cluster['rank_visible_devices']!r}, but lane {lane['lane']} runs "
                f"on {profile.get('display_name')} nodes, which have no GPUs to choose; remove it from the inventory "
                f"(name the CPU cores of a host's rank with lanekit_cpu_threads_bind instead).")
        env[variable] = str(cluster["rank_visible_devices"])
    if record.get("pool") in _plan_layout.POOLS:
        # NIXL's side channel listens on the rank's own fabric address (the site's $<ROLE>_NODE_k).
        env["VLLM_NIXL_SIDE_CHANNEL_HOST"] = host.get("fabric_ip") or ""
    # Ranks read the staged weights only; a rank reaching for the Hub mid-boot is a bug.
    env["HF_HUB_OFFLINE"] = "1"
    return _str_env(env)


def log_opts(lane: Lane) -> dict[str, str]:
    """docker's --log-opt entries for every rank of ``lane``: serve.logs, else the schema's defaults."""
    logs = lane["serve"].get("logs") or {}
    return {"max-size": str(logs.get("max_size") or LOG_MAX_SIZE),
            "max-file": str(logs.get("max_files") or LOG_MAX_FILES)}


def _rank_spec(inputs: PlanInputs, rank: int, record: dict[str, Any], model_path: str,
               secret_record: SecretsRecord | None) -> RankSpec:
    """One rank's container spec, its spec_hash and its labels (the plan hash label comes after)."""
    lane, cluster, image, host = inputs.lane, inputs.cluster, inputs.image, record["host"]
    weights_root = cluster["weights_root"]
    gpu = record["gpu"]
    own_entry = record.get("entrypoint") or list(lane["serve"].get("entrypoint") or image.get("entrypoint") or [])
    spec: dict[str, Any] = {
        "host": host["name"],
        "node_rank": rank,
        "role": record["role"],
        "pool": record.get("pool") or "lane",
        "pool_rank": record["pool_rank"],
        "serves_api": record["role"] in _engines.API_ROLES,
        "container_name": f"{CONTAINER_PREFIX}{lane['lane']}-r{rank}",
        "image": image["ref"],
        "entrypoint": own_entry[:1],
        "command": own_entry[1:] + record["argv"],
        "env": _rank_env(inputs, record),
        # The weights, then what the profile's kind needs from the host (Ascend's driver files...).
        "mounts": ([{"source": weights_root, "target": weights_root, "read_only": True}]
                   + [dict(m) for m in cluster.get("rank_mounts") or []]) if gpu else [],
        "network_mode": "host",
        "ipc_mode": "host",
        "gpus": (cluster.get("rank_gpus") or "") if gpu else "",
        "devices": list(cluster.get("rank_devices") or []) if gpu else [],
        "group_add": list(cluster.get("rank_group_add") or []) if gpu else [],
        "security_opt": list(cluster.get("rank_security_opt") or []) if gpu else [],
        "cap_add": list(cluster.get("rank_cap_add") or []),
        "ulimits": list(cluster.get("rank_ulimits") or []),
        "shm_size": cluster.get("rank_shm_size") or "",
        # Rotated on every rank: an engine's log cannot fill the node's disk, and what lanekit copies
        # of it (status tails, teardown archives, failure bundles) is bounded by size x files.
        "log_driver": LOG_DRIVER,
        "log_opts": log_opts(lane),
        "extra_docker_args": list(record["lane"]["serve"].get("docker_args") or []),
        "fabric_ip": host.get("fabric_ip"),
        # A P/D pool's ranks belong to their pool's API; every other rank to the lane's.
        "api_port": record["health_port"] if record.get("pool") in _plan_layout.POOLS else lane["serve"]["port"],
        # Which ranks answer HTTP: the head; workers where the engine runs a health server on them
        # (SGLang; not vLLM's headless ranks); every data-parallel engine that is not headless.
        "health_port": record["health_port"],
    }
    hashed = {key: spec[key] for key in HASHED_KEYS}
    hashed["plan_version"] = PLAN_VERSION
    if secret_record:
        secret_spec(spec, hashed, inputs.engine, cast("dict[str, Any]", secret_record))
    spec["spec_hash"] = _hash(hashed)
    spec["labels"] = {
        f"{LABEL}.lane": lane["lane"],
        f"{LABEL}.rank": str(rank),
        f"{LABEL}.role": spec["role"],
        f"{LABEL}.spec-hash": spec["spec_hash"],
        f"{LABEL}.image": image["ref"],
        f"{LABEL}.content-hash": image["content_hash"],
        # which revision directory this rank reads: staging removes none that a rank reads
        f"{LABEL}.weights": model_path,
    }
    if secret_record:
        # Names only: rank_status and teardown archives redact these variables' values by this label.
        spec["labels"][f"{LABEL}.secret-env"] = ",".join(spec["secret_env_names"])
    return cast(RankSpec, spec)


def api_url(address: str, port: int) -> str:
    """``http://address:port``; an IPv6 address goes in brackets (RFC 3986)."""
    return f"http://[{address}]:{port}" if ":" in address else f"http://{address}:{port}"


def _api_address(lane: Lane, head_ip: str) -> str:
    """Where clients and probes reach the API: the head's fabric address, or api.bind when it names one."""
    bind = (lane.get("api") or {}).get("bind")
    return head_ip if bind in (None, "0.0.0.0", "::") else str(bind)


def image_section(image: dict[str, Any], locked: dict[str, Any] | None) -> ImageSpec:
    """The plan's image section from a resolved image spec and its lock entry (None before the first build)."""
    out = {key: image[key] for key in _IMAGE_KEYS}
    pin: ImagePin = {"ref": image["ref"], "content_hash": image["content_hash"],
                     "rootfs": str((locked or {}).get("rootfs") or ""), "config": str((locked or {}).get("config") or "")}
    out["pin"] = pin
    return cast(ImageSpec, out)


def _hardware(profile: dict[str, Any]) -> HardwareSummary:
    summary = {key: profile.get(key) for key in _PROFILE_KEYS}
    summary.update({key: profile[key] for key in _OPTIONAL_PROFILE_KEYS if profile.get(key)})
    return cast(HardwareSummary, summary)


def _pools(lane: Lane, ranks: list[RankSpec]) -> dict[str, PoolSpec]:
    pd = lane.get("pd") or {}
    pools: dict[str, PoolSpec] = {
        role: {"ranks": [r["node_rank"] for r in ranks if r["pool"] == role],
               "port": pd[role]["port"], "parallelism": pd[role]["parallelism"]}
        for role in _plan_layout.POOLS}
    pools["router"] = {"ranks": [r["node_rank"] for r in ranks if r["role"] == "router"], "port": lane["serve"]["port"]}
    return pools


def build_plan(inputs: PlanInputs) -> Plan:
    """The complete plan of ``inputs`` (see ``_model.Plan`` for every key)."""
    lane, engine = inputs.lane, inputs.engine
    check_plan_owned(lane)
    weights_root = inputs.cluster.get("weights_root")
    if not weights_root or not str(weights_root).startswith("/"):
        raise LanekitError(
            f"lanekit_weights_root is {weights_root!r}; set it in the inventory to the absolute path where the NFS "
            f"export of the weights is mounted on every node (e.g. /mnt/nfs/models)."
        )
    ordered = order_hosts(inputs.hosts, inputs.cluster.get("head_host"))
    layout = _plan_layout.layout_of(lane)
    model_dir = posixpath.join(weights_root, lane["model"]["dir"])
    # The engines read the lane's own revision directory (_stage_revisions): staging another
    # revision of the model never replaces a file under a running lane.
    model_path = revision_path(model_dir, lane["model"].get("revision"))
    secret_record = cast("SecretsRecord | None", plan_secrets(lane, inputs.secrets))
    records = _plan_layout.processes(lane, ordered, model_path, inputs.rank_lanes)
    ranks = [_rank_spec(inputs, rank, record, model_path, secret_record) for rank, record in enumerate(records)]
    plan_hash = _hash([r["spec_hash"] for r in ranks])
    for spec in ranks:
        spec["labels"][f"{LABEL}.plan-hash"] = plan_hash
        spec["docker_argv"] = docker_run_argv(cast("dict[str, Any]", spec))
        spec["container"] = container_options(cast("dict[str, Any]", spec))
    hosts_index: dict[str, list[int]] = {}
    for spec in ranks:
        hosts_index.setdefault(spec["host"], []).append(spec["node_rank"])
    api_rank = next(r for r in ranks if r["serves_api"])
    address = _api_address(lane, api_rank["fabric_ip"] or "")
    start_order, stop_order = _plan_layout.orders(layout, [r["role"] for r in ranks], engine)
    api: ApiSpec = {
        "host": api_rank["host"],
        "address": address,
        "port": lane["serve"]["port"],
        "url": api_url(address, lane["serve"]["port"]),
        "served_model_name": lane["model"]["served_name"],
        "key_required": bool(secret_record and secret_record["api_key"]),
    }
    plan: Plan = {
        "plan_version": PLAN_VERSION,
        "lane": lane["lane"],
        "engine": lane["engine"],
        "plan_hash": plan_hash,
        "hardware": lane["hardware"],
        "hardware_profile": _hardware(inputs.profile),
        "topology": dict(lane["topology"]),
        "image": image_section(inputs.image, inputs.image_lock),
        "weights": {
            "root": weights_root,
            "path": model_path,
            "dir": model_dir,
            "model_id": lane["model"]["id"],
            "revision": lane["model"].get("revision"),
            "layout": lane["model"].get("layout"),
            "source": lane["model"].get("source"),
            "size_gib": lane["model"].get("size_gib"),
        },
        "api": api,
        "boot": dict(lane["boot"]),
        "cache": dict(lane.get("cache") or {}),
        "bench": dict(lane.get("bench") or {}),
        # A P/D lane's pools each meet at their own port (pd.<pool>.rendezvous_port).
        "rendezvous_port": lane["serve"]["rendezvous_port"] if len(ordered) > 1 and layout != "pd" else None,
        "barrier_timeout_s": timeout_value(lane, "barrier"),
        "reports_dir": posixpath.join(inputs.reports_root, lane["lane"]) if inputs.reports_root else None,
        "hosts": hosts_index,
        "start_order": start_order,
        "stop_order": stop_order,
        "ranks": ranks,
        "memory": inputs.memory,
        # Operator notes (a recipe lane's notes); "Troubleshooting: " notes are lint warnings instead.
        "notes": [n for n in lane.get("notes") or [] if not n.startswith(TROUBLESHOOTING_PREFIX)],
        "lint": {"warnings": inputs.lint.get("warnings", []), "skipped": inputs.lint.get("skipped", [])},
        "layers": list(lane["_layers"]),
    }
    if layout == "pd":
        plan["pools"] = _pools(lane, ranks)
    if secret_record:
        # Names, the env file and a hash only; probes and bench send lanekit_api_key when key_required.
        plan["secrets"] = secret_record
    if inputs.overrides:
        # What each override layer set and for which hosts, for the person reading the plan.
        plan["overrides"] = cast("list[Any]", inputs.overrides)
    return plan
