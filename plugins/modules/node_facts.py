#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
"""Read what the preflight compares with a lane's hardware on one node (GPU, CPU architecture, docker version), and
say whether the node matches (the comparison is _hardware.node_mismatch)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_facts
short_description: Read a GPU node's GPU, CPU architecture and docker version in one call
version_added: 0.1.0
description:
  - Reads the GPU the preflight compares with the lane's hardware profile before anything boots, the way
    an operator would, with C(nvidia-smi --query-gpu=name,compute_cap,memory.total).
  - On a node without C(nvidia-smi) that has ROCm's C(rocminfo) (AMD Instinct), the GPU agents of C(rocminfo)
    are read instead; their C(Marketing Name) is the name and their gfx target (for example C(gfx950)) is
    reported as the compute capability, which the preflight compares with the profile's C(gfx_arch).
  - Also reports the CPU architecture (as C(uname -m) says it) and the docker daemon's version
    (C(docker version), the server part), so that the preflight reads a node in one round trip instead of three
    (M(ansible.builtin.setup), M(community.docker.docker_host_info) and this module); a re-run of a lane pays
    each round trip on every node.
  - Read-only; never reports a change. A node without C(nvidia-smi), or whose driver does not answer,
    reports no GPU and says why in the C(error) key of RV(gpu) rather than failing, so the preflight can name the node.
  - With O(hardware) and O(arch), also compares the node with the lane (RV(mismatch)); a hardware profile without a
    GPU (CPU nodes) requires none, only the architecture and a docker daemon.
  - For the profiles that are recognised by more than nvidia-smi (Google TPU, Intel XPU, Huawei Ascend, Intel Xeon
    generations, by the profile's C(recognition)), also reads the first processor of C(/proc/cpuinfo), the display and
    processing-accelerator PCI functions under C(/sys/bus/pci/devices) and the accelerator device nodes under
    C(/dev) (RV(node)), and a node of another kind is refused naming the profile.
options:
  hardware:
    description:
      - The lane's hardware profile as the plan publishes it (C(lanekit_plan.hardware_profile)).
      - Its C(gpu_name) and C(compute_capability) (or C(gfx_arch)) are what the node's GPU must report; a profile
        whose C(gpu_name) is empty requires no GPU.
    type: dict
  arch:
    description:
      - The architecture the lane's image is built for (C(lanekit_plan.image.arch), docker's spelling such as V(amd64)).
    type: str
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
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
seealso:
  - module: lanekit.serving.lane_probe
"""

EXAMPLES = r"""
---
- name: Read the node's GPU
  lanekit.serving.node_facts:
  register: node
"""

RETURN = r"""
gpu:
  description:
    - The first GPU, from C(nvidia-smi --query-gpu=name,compute_cap,memory.total), with the number of GPUs.
    - C(error) says why nothing was read (no C(nvidia-smi), or its message when it failed).
    - On AMD, from C(rocminfo); C(compute_capability) is the gfx target and C(memory_total_mib) is not read.
  returned: always
  type: dict
  sample: {"name": "NVIDIA GB10", "compute_capability": "12.1", "memory_total_mib": 122572, "count": 1}
architecture:
  description: The CPU architecture as C(uname -m) reports it (V(aarch64), V(x86_64)).
  returned: always
  type: str
mismatch:
  description:
    - Why the node cannot run the lane, as one sentence (what it reports, what the lane needs and the fix); empty when
      it matches. Only with O(hardware) and O(arch).
  returned: when O(hardware) and O(arch) are given
  type: str
node:
  description:
    - What recognises the kinds nvidia-smi does not see (C(_recognise.node_summary)), C(cpu) (vendor, family, model,
      model name of the first processor), C(pci) (the display and processing-accelerator PCI functions with vendor,
      device, class, driver) and C(dev) (the accelerator device nodes under C(/dev), such as vfio, accel*, davinci*).
  returned: always
  type: dict
  sample: {"cpu": {"vendor": "GenuineIntel", "family": 6, "model": 173, "model_name": "Intel(R) Xeon(R) 6980P"},
           "pci": [], "dev": []}
docker:
  description:
    - The docker daemon's version (C(server_version)), empty when the CLI is missing or the daemon does not
      answer; C(error) then says why.
  returned: always
  type: dict
  sample: {"server_version": "28.2.2"}
"""

import os
import platform

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import normalize_arch
from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import node_mismatch
from ansible_collections.lanekit.serving.plugins.module_utils._lane._recognise import node_summary

GPU_QUERY = ["--query-gpu=name,compute_cap,memory.total", "--format=csv,noheader,nounits"]


def no_gpu(error: str | None = None) -> dict:
    gpu: dict = {"name": "", "compute_capability": "", "memory_total_mib": None, "count": 0}
    if error is not None:
        gpu["error"] = error
    return gpu


def parse_gpu_csv(text: str) -> dict:
    """The first GPU of ``nvidia-smi --query-gpu=name,compute_cap,memory.total`` CSV, with the count."""
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
        return no_gpu()
    return dict(gpus[0], count=len(gpus))


def parse_rocminfo(text: str) -> dict:
    """The first GPU agent of ``rocminfo``: its marketing name and gfx target, with the GPU count."""
    gpus = []
    for block in text.split("*******"):
        fields: dict = {}
        for line in block.splitlines():
            # Agent fields sit at two spaces; deeper lines (pools, ISAs) repeat keys such as Name.
            if line.startswith("  ") and not line.startswith("   ") and ":" in line:
                key, _sep, value = line.strip().partition(":")
                fields.setdefault(key.strip(), value.strip())
        if fields.get("Device Type") == "GPU":
            gpus.append({"name": fields.get("Marketing Name", ""), "compute_capability": fields.get("Name", ""),
                         "memory_total_mib": None})
    if not gpus:
        return no_gpu()
    return dict(gpus[0], count=len(gpus))


def read_gpu(module: AnsibleModule) -> dict:
    smi = module.get_bin_path("nvidia-smi")
    rocminfo = None if smi else module.get_bin_path("rocminfo")
    if rocminfo:
        rc, out, err = module.run_command([rocminfo])
        return parse_rocminfo(out) if rc == 0 else no_gpu((err or out).strip())
    if not smi:
        return no_gpu("nvidia-smi not found")
    rc, out, err = module.run_command([smi] + GPU_QUERY)
    if rc != 0:
        return no_gpu((err or out).strip())
    return parse_gpu_csv(out)


def read_docker(module: AnsibleModule) -> dict:
    """The daemon's version as the CLI reports it; an unanswered daemon is a value, not a failure."""
    docker = module.get_bin_path("docker")
    if not docker:
        return {"server_version": "", "error": "the docker CLI is not on PATH"}
    rc, out, err = module.run_command([docker, "version", "--format", "{{.Server.Version}}"])
    version = out.strip() if rc == 0 else ""
    return {"server_version": version} if version else {"server_version": "", "error": (err or out).strip()}


PCI_ROOT = "/sys/bus/pci/devices"


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(1 << 20)
    except OSError:
        return ""


def read_pci(root: str = PCI_ROOT) -> list:
    """Every PCI function's vendor, device, class and bound driver, as sysfs writes them (unreadable: empty)."""
    try:
        addresses = sorted(os.listdir(root))
    except OSError:
        return []
    out = []
    for address in addresses:
        base = os.path.join(root, address)
        driver = os.path.realpath(os.path.join(base, "driver")) if os.path.exists(os.path.join(base, "driver")) else ""
        out.append({"vendor": _read(os.path.join(base, "vendor")).strip(), "device": _read(os.path.join(base, "device")).strip(),
                    "class": _read(os.path.join(base, "class")).strip(), "driver": os.path.basename(driver)})
    return out


def read_node(cpuinfo: str = "/proc/cpuinfo", pci_root: str = PCI_ROOT, dev: str = "/dev") -> dict:
    """The node's CPU, accelerator PCI functions and accelerator device nodes (``_recognise.node_summary``)."""
    try:
        names = os.listdir(dev)
    except OSError:
        names = []
    return node_summary(_read(cpuinfo), read_pci(pci_root), names)


def facts(module: AnsibleModule) -> dict:
    """The node's facts and, when the lane's hardware and arch are given, whether the node matches them."""
    gpu, architecture, docker, node = read_gpu(module), platform.machine(), read_docker(module), read_node()
    out = {"changed": False, "gpu": gpu, "architecture": architecture, "docker": docker, "node": node}
    hardware, arch = module.params.get("hardware"), module.params.get("arch")
    if hardware is not None and arch:
        out["mismatch"] = node_mismatch(hardware, gpu, normalize_arch(architecture), docker, arch, node)
    return out


def main() -> None:
    module = AnsibleModule(argument_spec={"hardware": {"type": "dict"}, "arch": {"type": "str"}},
                           supports_check_mode=True)
    module.exit_json(**facts(module))


if __name__ == "__main__":
    main()
