#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
"""Report what runs on one node: every container's docker inspect object and the GPU's processes."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_workloads
short_description: Report the containers and GPU processes of one node
version_added: 0.2.0
description:
  - Runs on a node. Returns the C(docker inspect) object (a subset) of every container, running
    or not, and, where C(nvidia-smi) exists, the processes the GPU query lists, each with the
    container it runs in when its cgroup names one.
  - Used by the cluster status playbook to tell which lanes run where (by the containers'
    C(io.lanekit.*) labels) and what else holds the GPUs. Only the docker CLI (through the
    collection's shared wrapper), C(nvidia-smi) and the Python standard library are used.
options:
  lane:
    description:
      - The lane about to run here. RV(other_lanes) then names every other lane whose rank runs on
        this node (one lane per GPU; the deploy's preflight refuses the node while one does).
    type: str
  command_timeout:
    description: Seconds after which one docker command is abandoned.
    type: int
    default: 30
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  idempotent:
    support: full
    details: It only reads.
"""

EXAMPLES = r"""
---
- name: What runs on each node
  lanekit.serving.node_workloads:
  register: workloads
"""

RETURN = r"""
containers:
  description:
    - "Subset of C(docker inspect) of every container: Id, Name, State, Config (Image, Labels, and
      Env reduced to C(NVIDIA_VISIBLE_DEVICES)), HostConfig (Runtime, DeviceRequests)."
  returned: always
  type: list
  elements: dict
gpu_processes:
  description: "Processes the GPU query lists: pid, name, used_memory_mib, container (its name, when in one)."
  returned: always
  type: list
  elements: dict
other_lanes:
  description: "With O(lane): each other lane with a running rank here, as C(lane NAME (r3 running))."
  returned: always
  type: list
  elements: str
other_lane_names:
  description: With O(lane), the names of the lanes in RV(other_lanes) (what C(lanekit_replace) tears down).
  returned: always
  type: list
  elements: str
gpu_query_error:
  description: Why the GPU's processes could not be listed (no C(nvidia-smi), or it failed); empty when they were.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.lanekit.serving.plugins.module_utils._boot._workloads import (
    classify,
    other_lane_names,
    other_lanes,
)
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import DockerCLI

GPU_QUERY = ["--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader,nounits"]


def subset(obj: dict) -> dict:
    config = obj.get("Config") or {}
    host = obj.get("HostConfig") or {}
    return {
        "Id": obj.get("Id"), "Name": obj.get("Name"), "State": obj.get("State") or {},
        "Config": {"Image": config.get("Image"), "Labels": config.get("Labels") or {},
                   # Only the variable that hands GPUs to a container: the rest may hold secrets.
                   "Env": [e for e in config.get("Env") or [] if str(e).startswith("NVIDIA_VISIBLE_DEVICES=")]},
        "HostConfig": {"Runtime": host.get("Runtime"), "DeviceRequests": host.get("DeviceRequests") or []},
    }


def parse_gpu_apps(text: str) -> list[dict]:
    """nvidia-smi's CSV (pid, process name, used memory MiB) as records; malformed lines skipped."""
    apps = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 3 or not fields[0].isdigit():
            continue
        memory = int(fields[2]) if fields[2].isdigit() else None
        apps.append({"pid": int(fields[0]), "name": fields[1], "used_memory_mib": memory})
    return apps


def container_of(pid: int, ids: dict[str, str]) -> str:
    """The name of the container whose id the process's cgroup path names, or ''."""
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8") as handle:
            text = handle.read()
    except OSError:
        return ""
    return next((name for cid, name in ids.items() if cid and cid in text), "")


def gpu_processes(module: AnsibleModule, ids: dict[str, str]) -> tuple[list[dict], str]:
    smi = module.get_bin_path("nvidia-smi")
    if not smi:
        return [], "nvidia-smi not found: GPU processes outside containers cannot be listed on this node"
    rc, out, err = module.run_command([smi, *GPU_QUERY], check_rc=False)
    if rc != 0:
        return [], f"nvidia-smi exited with {rc}: {(err or out).strip()[:200]}"
    apps = parse_gpu_apps(out)
    for app in apps:
        app["container"] = container_of(app["pid"], ids)
    return apps, ""


def main() -> None:
    module = AnsibleModule(argument_spec=dict(lane=dict(type="str"), command_timeout=dict(type="int", default=30)),
                           supports_check_mode=True)
    try:
        docker = DockerCLI(module, timeout=module.params["command_timeout"])
        _rc, out, _err = docker.run(["ps", "-a", "--format", "{{.Names}}"], record=False, what="docker ps")
        found = docker.inspect_containers([n for n in out.split() if n])
    except LanekitError as err:
        module.fail_json(msg=str(err))
    containers = [subset(obj) for _name, obj in sorted(found.items())]
    ids = {str(c.get("Id") or ""): str(c.get("Name") or "").lstrip("/") for c in containers}
    apps, error = gpu_processes(module, ids)
    lane = module.params["lane"]
    workloads = classify("", {"containers": containers})
    busy = other_lanes(workloads, lane) if lane else []
    names = other_lane_names(workloads, lane) if lane else []
    module.exit_json(changed=False, containers=containers, gpu_processes=apps, gpu_query_error=error, other_lanes=busy,
                     other_lane_names=names)


if __name__ == "__main__":
    main()
