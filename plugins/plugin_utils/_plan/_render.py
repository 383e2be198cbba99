# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The per-rank plan: one container spec per rank, rendered from a validated lane.

Pure: the controller renders the plan from the lane, the hardware profile, the resolved image
and the inventory's host variables, without contacting any host. Every rank gets a distinct
argv (its node rank); replaying one rank's command on every node hangs the rendezvous.
"""
from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import posixpath
import re

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._files import check_output_path, write_output
from ansible_collections.lanekit.serving.plugins.module_utils._image._spec import load_image_spec, resolve_image
from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines
from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import PROFILES, host_env, rank_container
from ansible_collections.lanekit.serving.plugins.module_utils._secrets import Secrets
from ansible_collections.lanekit.serving.plugins.module_utils._weights._stage_revisions import revision_path
from ansible_collections.lanekit.serving.plugins.module_utils._yaml import ascii_digits, describe, plain
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._schema import (
    CLI_LAYER,
    GROUP_LAYER,
    HOST_LAYER,
    effective_env,
    load_lane,
    parse_overrides,
    read_lane_file,
    timeout_value,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._values import plan_owned_flag
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _kvbudget, _lint
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _layout as _plan_layout
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _secrets as _plan_secrets
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._secrets import (
    lane_secrets,
    plan_secrets,
    secret_spec,
)

CONTAINER_PREFIX = "lanekit-"
LABEL = "io.lanekit"


def check_plan_owned(lane: dict) -> None:
    """Refuse a lane that sets a flag the plan renders itself (the engine record lists them)."""
    engine = _engines.get(lane["engine"])
    for flag, value in lane["serve"]["args"].items():
        owned = plan_owned_flag(engine, flag)
        if owned and value not in (None, False):
            raise LanekitError(
                f"{lane['_source']}: key 'serve.args.{flag}' is set, but the plan renders {owned} from "
                f"{engine.plan_owned[owned]}; remove it from serve.args (or set it to null in an override layer)."
            )


def order_hosts(hosts: list[dict], head: str | None) -> list[dict]:
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


def _str_env(env: dict) -> dict:
    out = {}
    for key, value in env.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "1" if value else "0"
        out[key] = str(value)
    return out


def _fabric_env(engine: _engines.Engine, host: dict) -> dict:
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


def docker_run_argv(spec: dict) -> list[str]:
    """The exact ``docker run`` a person could paste to start this rank by hand."""
    argv = ["docker", "run", "-d", "--name", spec["container_name"], "--restart", "no",
            "--network", spec["network_mode"], "--ipc", spec["ipc_mode"]]
    if spec["gpus"]:
        argv += ["--gpus", spec["gpus"]]
    for device in spec["devices"]:
        argv += ["--device", device]
    for group in spec.get("group_add") or []:
        argv += ["--group-add", str(group)]
    for option in spec.get("security_opt") or []:
        argv += ["--security-opt", str(option)]
    for cap in spec["cap_add"]:
        argv += ["--cap-add", cap]
    for ulimit in spec["ulimits"]:
        argv += ["--ulimit", ulimit]
    if spec["shm_size"]:
        argv += ["--shm-size", spec["shm_size"]]
    if spec.get("secret_env_file"):
        argv += ["--env-file", spec["secret_env_file"]]
    for mount in spec["mounts"]:
        argv += ["-v", f"{mount['source']}:{mount['target']}" + (":ro" if mount["read_only"] else "")]
    for key in sorted(spec["env"]):
        argv += ["-e", f"{key}={spec['env'][key]}"]
    for key in sorted(spec["labels"]):
        argv += ["--label", f"{key}={spec['labels'][key]}"]
    argv += list(spec["extra_docker_args"])
    argv += ["--entrypoint", spec["entrypoint"][0], spec["image"]]
    return argv + list(spec["entrypoint"][1:]) + list(spec["command"])


def device_requests(gpus) -> list[dict]:
    """docker's --gpus value (all, a count, or device ids) as docker_container device_requests."""
    value = str(gpus or "").strip()
    if value.startswith("device="):
        value = value[len("device="):]
    if not value:
        return []
    request: dict = {"driver": "nvidia", "capabilities": [["gpu"]]}
    if value == "all":
        request["count"] = -1
    elif ascii_digits(value):
        request["count"] = int(value)
    else:
        request["device_ids"] = value.split(",")
    return [request]


def module_ulimit(ulimit: str) -> str:
    """docker's ``--ulimit name=soft[:hard]`` in docker_container's ``name:soft[:hard]`` form."""
    name, sep, limits = str(ulimit).partition("=")
    return f"{name}:{limits}" if sep and name.replace("_", "").isalpha() else str(ulimit)


def container_options(spec: dict) -> dict:
    """The rank as community.docker.docker_container options (role-level settings are the role's)."""
    options = {
        "name": spec["container_name"],
        "image": spec["image"],
        "entrypoint": list(spec["entrypoint"]),
        "command": list(spec["command"]),
        "env": dict(spec["env"]),
        "labels": dict(spec["labels"]),
        "mounts": [{"type": "bind", "source": m["source"], "target": m["target"], "read_only": m["read_only"]}
                   for m in spec["mounts"]],
        "network_mode": spec["network_mode"],
        "ipc_mode": spec["ipc_mode"],
        "devices": list(spec["devices"]),
        "ulimits": [module_ulimit(u) for u in spec["ulimits"]],
        "capabilities": list(spec["cap_add"]),
    }
    if spec["shm_size"]:
        options["shm_size"] = spec["shm_size"]
    # AMD ranks join the video group (ROCm's device permissions); set only when used, so NVIDIA plans are unchanged.
    if spec.get("group_add"):
        options["groups"] = [str(g) for g in spec["group_add"]]
    if spec.get("security_opt"):
        options["security_opts"] = [str(o) for o in spec["security_opt"]]
    if spec.get("secret_env_file"):
        # The secrets' values reach docker from this root-only file on the node, never from the plan.
        options["env_file"] = spec["secret_env_file"]
    requests = device_requests(spec["gpus"])
    if requests:
        options["device_requests"] = requests
    return options


def batches(engine: _engines.Engine, ranks: list[dict], first: tuple[str, ...]) -> list[list[int]]:
    """The node_ranks in start (or stop) batches: ranks whose role is in ``first``, then the others."""
    return engine.batches([r["role"] for r in ranks], first)


def _hash(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def render(lane: dict, profile: dict, image: dict, hosts: list[dict], cluster: dict, rank_lanes: dict | None = None,
           reports_root: str | None = None, secrets: Secrets | None = None) -> dict:
    """Render the plan.

    ``hosts``: [{name, fabric_ip, fabric_ifname?, ib_hca?, ucx_net_devices?, node_rank?}] from lane_nodes.
    ``cluster``: {weights_root, rank_gpus, rank_devices, rank_cap_add, rank_ulimits, rank_shm_size, head_host}.
    ``rank_lanes``: per-host lanes when host_vars carry their own lane_host_overrides (serve.args/env only).
    ``reports_root``: the controller's reports root (the action resolves it); the plan's
    ``reports_dir`` is ``<reports_root>/<lane>``.
    """
    check_plan_owned(lane)
    engine = _engines.get(lane["engine"])
    weights_root = cluster.get("weights_root")
    if not weights_root or not str(weights_root).startswith("/"):
        raise LanekitError(
            f"lanekit_weights_root is {weights_root!r}; set it in the inventory to the absolute path where the NFS "
            f"export of the weights is mounted on every node (e.g. /mnt/nfs/models)."
        )
    ordered = order_hosts(hosts, cluster.get("head_host"))
    nnodes = len(ordered)
    layout = _plan_layout.layout_of(lane)
    model_dir = posixpath.join(weights_root, lane["model"]["dir"])
    # The engines read the lane's own revision directory (_stage_revisions): staging another
    # revision of the model never replaces a file under a running lane.
    model_path = revision_path(model_dir, lane["model"].get("revision"))
    entry = list(lane["serve"].get("entrypoint") or image.get("entrypoint") or [])
    secret_record = plan_secrets(lane, secrets or Secrets())
    records = _plan_layout.processes(lane, ordered, model_path, rank_lanes)
    ranks = []
    for rank, record in enumerate(records):
        host, rlane = record["host"], record["lane"]
        env = {}
        if record["gpu"]:
            env.update(profile.get("env", {}))
            env.update(profile.get("engine_env", {}).get(lane["engine"], {}))
            env.update(effective_env(rlane))
            # What the host's own inventory variables set for its rank (the profile declares which): over the lane's.
            env.update(host.get("host_env") or {})
        env.update(_fabric_env(engine, host))
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
        env = _str_env(env)
        own_entry = record.get("entrypoint") or entry
        command = own_entry[1:] + record["argv"]
        spec = {
            "host": host["name"],
            "node_rank": rank,
            "role": record["role"],
            "container_name": f"{CONTAINER_PREFIX}{lane['lane']}-r{rank}",
            "image": image["ref"],
            "entrypoint": own_entry[:1],
            "command": command,
            "env": env,
            "mounts": [{"source": weights_root, "target": weights_root, "read_only": True}] if record["gpu"] else [],
            "network_mode": "host",
            "ipc_mode": "host",
            "gpus": (cluster.get("rank_gpus") or "") if record["gpu"] else "",
            "devices": list(cluster.get("rank_devices") or []) if record["gpu"] else [],
            "group_add": list(cluster.get("rank_group_add") or []) if record["gpu"] else [],
            "security_opt": list(cluster.get("rank_security_opt") or []) if record["gpu"] else [],
            "cap_add": list(cluster.get("rank_cap_add") or []),
            "ulimits": list(cluster.get("rank_ulimits") or []),
            "shm_size": cluster.get("rank_shm_size") or "",
            "extra_docker_args": list(rlane["serve"].get("docker_args") or []),
            "fabric_ip": host.get("fabric_ip"),
            "api_port": lane["serve"]["port"],
            # Which ranks answer HTTP: the head; workers where the engine runs a health server on them
            # (SGLang; not vLLM's headless ranks); every data-parallel engine that is not headless.
            "health_port": record["health_port"],
        }
        if layout != "tp":
            # Published for the new layouts only, so the plans of tensor-parallel lanes do not move.
            spec["pool"] = record.get("pool") or "lane"
            spec["pool_rank"] = record["pool_rank"]
            spec["api_port"] = record["health_port"] if record.get("pool") in _plan_layout.POOLS else lane["serve"]["port"]
            spec["serves_api"] = record["role"] in _engines.API_ROLES
        hashed = {k: spec[k] for k in (
            "image", "entrypoint", "command", "env", "mounts", "network_mode", "ipc_mode", "gpus", "devices",
            "cap_add", "ulimits", "shm_size", "extra_docker_args", "container_name")}
        # Hashed only when set, so the hashes of plans without them do not move.
        hashed.update({k: spec[k] for k in ("group_add", "security_opt") if spec[k]})
        if secret_record:
            secret_spec(spec, hashed, engine, secret_record)
        spec_hash = _hash(hashed)
        spec["spec_hash"] = spec_hash
        spec["labels"] = {
            f"{LABEL}.lane": lane["lane"],
            f"{LABEL}.rank": str(rank),
            f"{LABEL}.role": spec["role"],
            f"{LABEL}.spec-hash": spec_hash,
            f"{LABEL}.image": image["ref"],
            f"{LABEL}.content-hash": image["content_hash"],
            # which revision directory this rank reads: staging removes none that a rank reads
            f"{LABEL}.weights": model_path,
        }
        if secret_record:
            # Names only: rank_status and teardown archives redact these variables' values by this label.
            spec["labels"][f"{LABEL}.secret-env"] = ",".join(spec["secret_env_names"])
        ranks.append(spec)
    plan_hash = _hash([r["spec_hash"] for r in ranks])
    for spec in ranks:
        spec["labels"][f"{LABEL}.plan-hash"] = plan_hash
        spec["docker_argv"] = docker_run_argv(spec)
        spec["container"] = container_options(spec)
    hosts_index: dict[str, list[int]] = {}
    for spec in ranks:
        hosts_index.setdefault(spec["host"], []).append(spec["node_rank"])
    api_rank = next(r for r in ranks if r["role"] in _engines.API_ROLES)
    start_order, stop_order = _plan_layout.orders(layout, [r["role"] for r in ranks], engine)
    out = {
        "lane": lane["lane"],
        "engine": lane["engine"],
        "plan_hash": plan_hash,
        "hardware": lane["hardware"],
        "topology": lane["topology"],
        "image": {k: image[k] for k in ("name", "ref", "content_hash", "base_ref", "base_digest", "arch",
                                        "platform", "pinned", "pin_problem", "spec_dir", "entrypoint", "patches",
                                        "labels", "repository", "tag")},
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
        "api": {
            "host": api_rank["host"],
            "address": _api_address(lane, api_rank["fabric_ip"] or ""),
            "port": lane["serve"]["port"],
            "served_model_name": lane["model"]["served_name"],
        },
        "boot": lane["boot"],
        "cache": lane.get("cache", {}),
        # The lane's bench settings (roles/bench merges them over its defaults); only when it has
        # some, so plans of lanes without a bench: section do not change.
        **({"bench": dict(lane["bench"])} if lane.get("bench") else {}),
        # Published so that no later phase derives them again (docs/contracts.md).
        # A P/D lane's pools each meet at their own port (pd.<pool>.rendezvous_port).
        "rendezvous_port": lane["serve"]["rendezvous_port"] if nnodes > 1 and layout != "pd" else None,
        "barrier_timeout_s": timeout_value(lane, "barrier"),
        "reports_dir": posixpath.join(reports_root, lane["lane"]) if reports_root else None,
        "hosts": hosts_index,
        "start_order": start_order,
        "stop_order": stop_order,
        "ranks": ranks,
    }
    if layout == "pd":
        out["pools"] = {role: {"ranks": [r["node_rank"] for r in ranks if r.get("pool") == role],
                               "port": lane["pd"][role]["port"], "parallelism": lane["pd"][role]["parallelism"]}
                        for role in _plan_layout.POOLS}
        out["pools"]["router"] = {"ranks": [r["node_rank"] for r in ranks if r["role"] == "router"],
                                  "port": lane["serve"]["port"]}
    return out


def _api_address(lane: dict, head_ip: str) -> str:
    """Where clients and probes reach the API: the head's fabric address, or api.bind when it names one."""
    bind = (lane.get("api") or {}).get("bind")
    return head_ip if bind in (None, "0.0.0.0", "::") else bind


def reports_root(configured: str | None, playbook_dir: str | None, cwd: str) -> str:
    """The controller's reports root: ``lanekit_reports_dir``, else ``reports/`` beside a checkout's playbooks.

    A playbook run from an installed collection (under an ``ansible_collections/`` tree) must not
    write into the installed collection, so its reports go to ``reports/`` in the working directory.
    """
    if configured:
        return os.path.abspath(os.path.join(cwd, str(configured)))
    if playbook_dir and "ansible_collections" not in os.path.normpath(playbook_dir).split(os.sep):
        base = os.path.dirname(playbook_dir) if os.path.basename(playbook_dir) == "playbooks" else playbook_dir
        return os.path.join(os.path.abspath(base), "reports")
    return os.path.join(os.path.abspath(cwd), "reports")


def find_spec_dir(name: str, explicit: str | None, configured: str | None, cwd: str, collection_root: str) -> str:
    """Where ``lanes/`` (or ``images/``) is read from: the task's argument, the inventory's variable,
    a ``<name>/`` directory in the working directory (a team's own repository), else the collection's own."""
    for candidate in (explicit, configured):
        if candidate:
            return os.path.abspath(os.path.join(cwd, str(candidate)))
    local = os.path.join(os.path.abspath(cwd), name)
    if os.path.isdir(local):
        return local
    return os.path.join(collection_root, name)


def table(plan: dict) -> str:
    """A readable per-rank table for people (the JSON is for machines)."""
    rows = [("rank", "host", "role", "fabric ip", "container", "health")]
    for r in plan["ranks"]:
        rows.append((str(r["node_rank"]), r["host"], r["role"], r["fabric_ip"] or "-", r["container_name"],
                     str(r["health_port"] or "-")))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    head = plan["ranks"][0]
    lines.append("")
    # The tag is shown beside the digest because only the digest is pulled: a tag edited in image.yml without its
    # digest changes nothing in the image, and the table makes that visible (docs/images.md).
    tag = plan["image"].get("tag")
    lines.append(f"image   {plan['image']['ref']}  (base {plan['image']['base_ref']}"
                 + (f", tag {tag})" if tag else ")"))
    lines.append(f"weights {plan['weights']['path']}  (read-only, revision {plan['weights']['revision'] or 'unpinned'})")
    lines.append(f"api     http://{plan['api']['address']}:{plan['api']['port']}/v1  model {plan['api']['served_model_name']}")
    lines.append("rank 0  " + " ".join(_quote(a) for a in head["entrypoint"] + head["command"]))
    for override in plan.get("overrides") or []:
        every = len(override["hosts"]) == len({r["host"] for r in plan["ranks"]})
        own = override["layer"].startswith(HOST_LAYER)  # the source names its host
        where = "" if every or own else f" (ranks on {', '.join(override['hosts'])})"
        keys = ", ".join(f"{k}={json.dumps(v) if isinstance(v, (dict, list)) else v}" for k, v in override["keys"].items())
        lines.append(f"layer   {override['layer']}{where}: {keys}")
    for note in plan.get("notes") or []:
        lines.append(f"note    {note}")
    return "\n".join(lines)


def _quote(arg: str) -> str:
    if arg in (_plan_secrets.KEY_ARGV_PROGRAM, _plan_secrets.key_guard_program()):
        # lanekit's fixed launcher programs (the key's handoff, the key guard): named, not printed.
        return "<lanekit's key launcher, docs/security.md>"
    safe = all(c.isalnum() or c in "-_./:=,@+" for c in arg)
    return arg if safe and arg else "'" + arg.replace("'", "'\"'\"'") + "'"


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
    "rank_visible_devices": "lanekit_rank_visible_devices",
    "rank_shm_size": "lanekit_rank_shm_size", "head_host": "lanekit_head_host",
}


def check_cluster(cluster: dict) -> None:
    """The inventory's rank settings have the shapes docker takes: text, or lists of text."""
    for key in ("rank_devices", "rank_cap_add", "rank_ulimits", "rank_group_add", "rank_security_opt"):
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


def write_plan_file(path: str, plan: dict) -> bool:
    """Write the plan JSON atomically; return True only when the content changed. Path problems are sentences."""
    content = json.dumps(plan, indent=2, sort_keys=True) + "\n"
    where = f"plan_file {path}"
    check_output_path(path, where, "plan.json")
    if os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as handle:
                if handle.read() == content:
                    os.chmod(path, 0o600)  # a plan written by an older lanekit was world-readable
                    return False
        except (OSError, UnicodeDecodeError):
            pass  # rewritten below, or the write says why not
    # Reports are the operator's: the plan names hosts, paths and the secrets' names.
    return write_output(path, content, where, mode=0o600, dir_mode=0o700, example="plan.json")


def _setting(values: dict, name: str) -> str:
    return describe(values[name]) if values.get(name) is not None else "unset"


def _layer_sets(layer: dict, path: tuple) -> bool:
    node = layer
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def check_rank_agreement(hosts: list[dict], lanes: dict, engine: _engines.Engine) -> None:
    """Refuse a lane whose ranks would run different settings, naming the layer that set the value.

    The group layer must be one value for all hosts: a child group's or a host's own
    ``lane_group_overrides`` replaces the group's (Ansible does not merge variables). A host layer
    may set only ``serve.args``/``serve.env``, and only what the engine record lets one rank of a
    group have on its own (``Engine.may_differ_per_rank``): the ranks of one tensor-, pipeline- or
    data-parallel group that disagree on a scheduling flag run out of step.
    """
    def layer(host, source_start):
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
                    path = key if sub is None else f"{key}.{sub}"
                    raise LanekitError(
                        f"{source}: key '{path}' is set, but it must be the same on every rank of the lane (a host may "
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


def plan_lane(lanes_dir: str, images_dir: str, lane_name: str, hosts: list[dict], lint_skip=None,
              purpose: str = "plan", reports_root: str | None = None) -> tuple[dict | None, dict]:
    """Lane file + layers + inventory -> (plan or None, lint findings).

    ``hosts``: the lane_nodes hosts in inventory order, each ``{"name", "vars", "layers"}`` where
    ``vars`` are its host variables and ``layers`` its [(source, override mapping)] in order (the
    group layer, its own host layer, the command line: ``_lane.inventory_layers``).
    Cluster-wide settings are read from the first host's variables.
    """
    if not hosts:
        raise LanekitError("the inventory group lane_nodes is empty; list the lane's GPU nodes there in rank order.")
    check_hosts(hosts)
    lane_file = read_lane_file(lanes_dir, lane_name)
    lanes = {h["name"]: load_lane(lanes_dir, lane_name, h["layers"], lane_file) for h in hosts}
    lane = lanes[hosts[0]["name"]]
    engine = _engines.get(lane["engine"])
    check_rank_agreement(hosts, lanes, engine)
    head_vars = hosts[0]["vars"]
    profile = PROFILES[lane["hardware"]]
    # A profile that fixes the CPU architecture (cpu_x86: amd64) is the default and refuses another.
    arch = str(head_vars.get("lanekit_node_arch") or profile.get("arch") or "arm64")
    if profile.get("arch") and arch != profile["arch"]:
        raise LanekitError(
            f"lanekit_node_arch is {arch!r}, but lane {lane['lane']} runs on hardware {lane['hardware']} "
            f"({profile['display_name']}), whose nodes are {profile['arch']}; set lanekit_node_arch: {profile['arch']} "
            f"in the inventory's group_vars for these nodes.")
    digests = plain(head_vars.get("lanekit_image_digests")) or {}
    if not isinstance(digests, dict):
        raise LanekitError(f"lanekit_image_digests is {digests!r}; expected a mapping image name -> arch -> digest.")
    image = resolve_image(load_image_spec(images_dir, lane["image"]), arch, digests)
    node_ranks = {h["name"]: plain(h["vars"]["node_rank"]) for h in hosts if h["vars"].get("node_rank") is not None}
    access = rank_container(profile, plain(head_vars))
    cluster = plain({
        "weights_root": head_vars.get("lanekit_weights_root"),
        # GPU access: the hardware profile's vendor defaults, each overridden by lanekit_rank_<key>.
        "rank_gpus": access["gpus"],
        "rank_devices": access["devices"],
        "rank_group_add": access["group_add"],
        "rank_security_opt": access["security_opt"],
        "rank_visible_devices": head_vars.get("lanekit_rank_visible_devices"),
        "rank_cap_add": head_vars.get("lanekit_rank_cap_add", []),
        "rank_ulimits": head_vars.get("lanekit_rank_ulimits", []),
        "rank_shm_size": head_vars.get("lanekit_rank_shm_size", ""),
        "head_host": head_vars.get("lanekit_head_host"),
    })
    check_cluster(cluster)
    # Lint sees the GPU access the ranks get, after the inventory values were checked.
    access = {key: cluster[f"rank_{key}"] for key in access}
    # Rank environment from each host's own variables (the profile declares which, e.g. CPU thread binding).
    envs = {h["name"]: host_env(profile, lane["engine"], h["name"], plain(h["vars"])) for h in hosts}
    ctx = _lint.LintContext(lane=lane, profile=profile, image=image, hosts=[h["name"] for h in hosts],
                            node_ranks=node_ranks, purpose=purpose, rank_container=access, host_env=envs)
    findings = _lint.run(ctx, lint_skip or [])
    # Every rank's effective lane goes through the same rules: a host-level override can break one rank only.
    checked = [lane]
    for host in hosts[1:]:
        other = lanes[host["name"]]
        if any(other == seen for seen in checked):
            continue
        checked.append(other)
        more = _lint.run(_lint.LintContext(lane=other, profile=profile, image=image, hosts=ctx.hosts,
                                           node_ranks=node_ranks, purpose=purpose, rank_container=access,
                                           host_env=envs),
                         lint_skip or [])
        for kind in ("errors", "warnings"):
            known = {item["message"] for item in findings[kind]}
            findings[kind] += [dict(item, message=f"on host {host['name']} (its {HOST_LAYER}): {item['message']}")
                               for item in more[kind] if item["message"] not in known]
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
    secrets = lane_secrets(lane, head_vars, engine)
    plan = render(lane, profile, image, host_specs, cluster, lanes, reports_root, secrets)
    if secrets:
        # Names, the env file and a hash only; probes and bench send lanekit_api_key when key_required.
        plan["secrets"] = plan_secrets(lane, secrets)
        plan["api"]["key_required"] = plan["secrets"]["api_key"]
    memory = _lint.kv_assessment(lane, profile) or _lint.cpu_kv_assessment(lane, profile)
    plan["memory"] = None if memory is None else {k: v for k, v in memory.items() if k not in _kvbudget.ADVICE_KEYS}
    plan["hardware_profile"] = {k: profile[k] for k in ("display_name", "gpu_name", "compute_capability",
                                                        "device_memory_gib", "admission_free_gib", "unified_memory")}
    plan["hardware_profile"].update({k: profile.get(k) for k in ("vendor", "gfx_arch", "gpus_per_node")})
    # Published only when the profile states it, so the plans of the GPU profiles do not change.
    plan["hardware_profile"].update({k: profile[k] for k in ("memory_model", "arch") if profile.get(k)})
    # Operator notes (a recipe lane's notes); "Troubleshooting: " notes are lint warnings instead.
    plan["notes"] = [n for n in lane.get("notes") or [] if not n.startswith(_lint.TROUBLESHOOTING_PREFIX)]
    plan["lint"] = {"warnings": findings["warnings"], "skipped": findings["skipped"]}
    plan["layers"] = lane["_layers"]
    overrides = layer_overrides(hosts)
    if overrides:
        # What each override layer set and for which hosts, for the person reading the plan.
        plan["overrides"] = overrides
    return plan, findings


def _flatten(layer, prefix: str = "") -> dict:
    """An override layer as {dotted key: value}; mappings under serve.args stay values (a flag's JSON)."""
    out = {}
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


def layer_overrides(hosts: list[dict]) -> list[dict]:
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
