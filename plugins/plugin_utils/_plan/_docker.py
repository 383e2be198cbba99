# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""One rank's spec in docker's two spellings: the ``docker run`` line and docker_container options.

One job: docker argv. A rank's spec (``_model.RankSpec``) becomes the exact ``docker run`` a
person could paste, and the ``community.docker.docker_container`` options the ranks role passes
on; nothing here decides what a rank runs.
"""
from __future__ import annotations

from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._yaml import ascii_digits


def docker_run_argv(spec: dict[str, Any]) -> list[str]:
    """The exact ``docker run`` a person could paste to start this rank by hand."""
    argv = ["docker", "run", "-d", "--name", spec["container_name"], "--restart", "no"]
    # The container's own settings first (restart, log rotation), then what it reaches on the host.
    if spec.get("log_driver"):
        argv += ["--log-driver", spec["log_driver"]]
    for key in sorted(spec.get("log_opts") or {}):
        argv += ["--log-opt", f"{key}={spec['log_opts'][key]}"]
    argv += ["--network", spec["network_mode"], "--ipc", spec["ipc_mode"]]
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


def device_requests(gpus: Any) -> list[dict[str, Any]]:
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


def container_options(spec: dict[str, Any]) -> dict[str, Any]:
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
    if spec.get("log_driver"):
        # docker_container applies log_options only together with log_driver.
        options["log_driver"] = spec["log_driver"]
        options["log_options"] = {str(k): str(v) for k, v in (spec.get("log_opts") or {}).items()}
    # AMD ranks join the video group (ROCm's device permissions). Options a rank does not use are left out,
    # so docker_container keeps docker's defaults for them.
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
