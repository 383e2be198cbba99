#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_facts
short_description: Read a GPU node's GPU, CPU architecture, memory and docker daemon
version_added: 0.1.0
description:
  - Reads what the preflight compares with the lane before anything boots, the way an operator would,
    C(nvidia-smi) for the GPU, the machine architecture, C(/proc/meminfo) and C(docker version).
  - Read-only; never reports a change.
options: {}
attributes:
  check_mode:
    support: full
    details: Read-only, runs the same in check mode.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: Never changes the host.
author:
  - lanekit developers
"""

EXAMPLES = r"""
---
- name: Read the node
  lanekit.serving.node_facts:
  register: node
"""

RETURN = r"""
gpu:
  description: The first GPU, from C(nvidia-smi --query-gpu=name,compute_cap,memory.total).
  returned: always
  type: dict
  sample: {"name": "NVIDIA GB10", "compute_capability": "12.1", "memory_total_mib": 122572, "count": 1}
arch:
  description: CPU architecture in container-platform spelling (C(arm64), C(amd64)).
  returned: always
  type: str
meminfo_gib:
  description: MemTotal, MemFree, MemAvailable and Cached from C(/proc/meminfo), in GiB.
  returned: always
  type: dict
docker:
  description: The docker server version, empty when the daemon does not answer.
  returned: always
  type: dict
"""

import os
import platform

from ansible.module_utils.basic import AnsibleModule

ARCH_NAMES = {"aarch64": "arm64", "arm64": "arm64", "x86_64": "amd64", "amd64": "amd64"}


def read_meminfo(path="/proc/meminfo"):
    values = {}
    with open(path, encoding="ascii") as handle:
        for line in handle:
            key, _sep, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                values[key] = int(parts[0]) * 1024
    gib = 1 << 30
    return {k: round(values.get(k, 0) / gib, 2) for k in ("MemTotal", "MemFree", "MemAvailable", "Cached")}


def parse_gpu_csv(text):
    gpus = []
    for line in text.strip().splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 2:
            continue
        total = fields[2] if len(fields) > 2 else ""
        gpus.append({
            "name": fields[0],
            "compute_capability": fields[1],
            "memory_total_mib": int(total) if total.isdigit() else None,
        })
    if not gpus:
        return {"name": "", "compute_capability": "", "memory_total_mib": None, "count": 0}
    first = dict(gpus[0])
    first["count"] = len(gpus)
    return first


class NodeReader:
    def __init__(self, module):
        self.module = module

    def gpu(self):
        smi = self.module.get_bin_path("nvidia-smi")
        if not smi:
            return {"name": "", "compute_capability": "", "memory_total_mib": None, "count": 0,
                    "error": "nvidia-smi not found"}
        rc, out, err = self.module.run_command(
            [smi, "--query-gpu=name,compute_cap,memory.total", "--format=csv,noheader,nounits"])
        if rc != 0:
            return {"name": "", "compute_capability": "", "memory_total_mib": None, "count": 0,
                    "error": (err or out).strip()}
        return parse_gpu_csv(out)

    def docker(self):
        docker = self.module.get_bin_path("docker")
        if not docker:
            return {"server_version": "", "error": "docker not found"}
        rc, out, err = self.module.run_command([docker, "version", "--format", "{{.Server.Version}}"])
        return {"server_version": out.strip() if rc == 0 else "", "error": "" if rc == 0 else err.strip()}

    def run(self):
        machine = platform.machine()
        return {
            "changed": False,
            "gpu": self.gpu(),
            "arch": ARCH_NAMES.get(machine, machine),
            "meminfo_gib": read_meminfo() if os.path.exists("/proc/meminfo") else {},
            "docker": self.docker(),
        }


def main():
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    module.exit_json(**NodeReader(module).run())


if __name__ == "__main__":
    main()
