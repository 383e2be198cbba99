# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""What every kind of accelerator node needs, shared by the hardware profiles (``_hardware``, ``_hardware_taxonomy``).

One job: the per-kind building blocks of a profile: how a rank container reaches the accelerators
(``rank_container``: docker's device request, device nodes, groups, driver mounts), which rank
settings the ``rank-gpu-access`` lint requires (``rank_access``), the vLLM CPU backend's facts, and
the builders of a discrete-accelerator profile and of a CPU profile. Every value here cites where it
comes from; what was not measured on hardware is marked ESTIMATE.

A rank container dict has one key per ``lanekit_rank_<key>`` inventory variable that overrides it:
``gpus`` (docker's ``--gpus``), ``devices`` (``--device``), ``group_add``, ``security_opt`` and
``mounts`` (``-v source:target[:ro]``, mounted into GPU ranks beside the weights).
"""
from __future__ import annotations

GIB_PER_GB = 1e9 / 2**30

# How a rank container reaches the GPUs, per vendor (inventory lanekit_rank_* variables win).
NVIDIA_RANK_CONTAINER = {"gpus": "all", "devices": [], "group_add": [], "security_opt": [], "mounts": []}
# ROCm: docs "Running ROCm Docker containers" and vLLM's ROCm quick start use
# --device=/dev/kfd --device=/dev/dri --group-add video (plus SYS_PTRACE/seccomp for debugging,
# which lanekit leaves to the inventory).
AMD_RANK_CONTAINER = {"gpus": "", "devices": ["/dev/kfd", "/dev/dri"], "group_add": ["video"], "security_opt": [],
                      "mounts": []}
# CPU nodes: no GPU request, no device; the engine computes on the host's cores.
CPU_RANK_CONTAINER = {"gpus": "", "devices": [], "group_add": [], "security_opt": [], "mounts": []}
# Google Cloud TPU (vLLM TPU, docs.vllm.ai/projects/tpu and vLLM's TPU installation page: `docker run --privileged
# --net host --shm-size=16G`; the recipes' Trillium command adds `-v /dev/shm:/dev/shm`). lanekit grants no
# --privileged: a v5e/v6e/v7 TPU VM exposes its chips as VFIO groups under /dev/vfio, which is what the TPU
# runtime opens, so the directory is passed as a device (docker adds every node in it). Host network and IPC are
# every rank's already. ESTIMATE: not verified on a TPU VM; older generations (v4, v5p) expose /dev/accel*
# instead: set lanekit_rank_devices for them.
TPU_RANK_CONTAINER = {"gpus": "", "devices": ["/dev/vfio"], "group_add": [], "security_opt": [], "mounts": []}
# Intel GPUs (vLLM's XPU installation page: `docker run --device /dev/dri -v /dev/dri/by-path:/dev/dri/by-path`;
# the recipes' Arc Pro B60/B70 command is the same plus --ipc=host). by-path holds only the links Level Zero
# reads to order the cards, so it is mounted read-only. No --group-add render: vLLM's images run as root, and a
# group name the image lacks would stop docker ("Unable to find group render").
XPU_RANK_CONTAINER = {"gpus": "", "devices": ["/dev/dri"], "group_add": [], "security_opt": [],
                      "mounts": ["/dev/dri/by-path:/dev/dri/by-path:ro"]}
# Huawei Ascend (vLLM Ascend quick start, "Setup environment using container": --device /dev/davinci<N> for each
# NPU, plus /dev/davinci_manager, /dev/devmm_svm and /dev/hisi_hdc, and the host's driver mounted in: dcmi,
# npu-smi, driver/lib64, driver/version.info, /etc/ascend_install.info). Read-only here: a rank reads the driver,
# never writes it. One NPU (davinci0) per the taxonomy's ascend_950pr; a node of more lists them all in
# lanekit_rank_devices.
ASCEND_DEVICES = ["/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]
ASCEND_RANK_CONTAINER = {
    "gpus": "", "devices": ["/dev/davinci0"] + ASCEND_DEVICES, "group_add": [], "security_opt": [],
    "mounts": ["/usr/local/dcmi:/usr/local/dcmi:ro", "/usr/local/bin/npu-smi:/usr/local/bin/npu-smi:ro",
               "/usr/local/Ascend/driver/lib64:/usr/local/Ascend/driver/lib64:ro",
               "/usr/local/Ascend/driver/version.info:/usr/local/Ascend/driver/version.info:ro",
               "/etc/ascend_install.info:/etc/ascend_install.info:ro"]}

# What the rank-gpu-access lint requires of the rank settings, per kind: device nodes that must be passed
# (``devices``), one of a numbered family (``numbered``: /dev/davinci<N>), groups (``groups``) and whether an
# NVIDIA device request (--gpus) can be granted (``nvidia``). ``what`` names the kind in the lint's sentences.
NVIDIA_ACCESS: dict = {"what": "NVIDIA", "devices": [], "numbered": "", "groups": [], "nvidia": True}
AMD_ACCESS: dict = {"what": "AMD", "devices": ["/dev/kfd", "/dev/dri"], "numbered": "", "groups": ["video"],
                    "nvidia": False}
CPU_ACCESS: dict = {"what": "CPU", "devices": [], "numbered": "", "groups": [], "nvidia": False}
TPU_ACCESS: dict = {"what": "TPU", "devices": [], "numbered": "", "groups": [], "nvidia": False,
                    # either spelling of the chips: VFIO groups (v5e and later) or /dev/accel<N> (v4, v5p)
                    "any_of": ["/dev/vfio", "/dev/accel"]}
XPU_ACCESS: dict = {"what": "Intel XPU", "devices": ["/dev/dri"], "numbered": "", "groups": [], "nvidia": False}
ASCEND_ACCESS: dict = {"what": "Ascend", "devices": ASCEND_DEVICES, "numbered": "/dev/davinci", "groups": [],
                       "nvidia": False}

# vLLM's CPU backend, as vllm-cpu 0.32.0 behaves (shared/reference/real-engine.md; vLLM's envs.py for the
# variables). SGLang has no entry: its CPU backend is a source build for AMX Xeons, not a PyPI install.
VLLM_CPU_BACKEND = {
    # The KV cache is this many GiB of host RAM per rank (an integer); --gpu-memory-utilization plays no part.
    # Unset, vLLM sizes it itself (4 GiB in the releases that document a default; newer releases treat the
    # variable as a legacy form of --kv-cache-memory-bytes), so the lint cannot check an unset value.
    "kv_space_env": "VLLM_CPU_KVCACHE_SPACE",
    # OpenMP thread binding: CPU ids per local worker, separated by '|'; unset means auto, one NUMA node per
    # local worker ("Not enough allowed NUMA nodes to bind threads of 2 local CPUWorkers" on a one-node box).
    "threads_bind_env": "VLLM_CPU_OMP_THREADS_BIND",
    "threads_bind_auto": "auto",
    # Variables a rank takes from its host's inventory variable when that is set (else the lane's serve.env):
    # which cores a rank's threads use is a fact of the host, e.g. two nodes sharing one machine.
    "host_env": {"VLLM_CPU_OMP_THREADS_BIND": "lanekit_cpu_threads_bind"},
    # Head sizes the CPU attention kernels support; another boots, then dies on the first request
    # ("Unsupported CPU attention configuration: head_dim=16").
    "head_sizes": (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512),
}

_NVIDIA_ENGINE_ENV: dict = {"sglang": {}, "vllm": {}}
_AMD_ENGINE_ENV: dict = {"sglang": {}, "vllm": {}}
# vendor -> (rank container, visible-devices variable, image family, rank access)
KINDS = {
    "nvidia": (NVIDIA_RANK_CONTAINER, "CUDA_VISIBLE_DEVICES", "cuda", NVIDIA_ACCESS),
    # ROCm: the recipe's own example (`docker run -e ROCR_VISIBLE_DEVICES=4,5,6,7` for a second TP4 replica).
    "amd": (AMD_RANK_CONTAINER, "ROCR_VISIBLE_DEVICES", "rocm", AMD_ACCESS),
    # libtpu's chip selection (with TPU_CHIPS_PER_PROCESS_BOUNDS / TPU_PROCESS_BOUNDS in serve.env for a sub-slice).
    "google": (TPU_RANK_CONTAINER, "TPU_VISIBLE_CHIPS", "tpu", TPU_ACCESS),
    # Level Zero's device selection (oneAPI's ZE_AFFINITY_MASK), which vLLM's XPU platform honours.
    "intel": (XPU_RANK_CONTAINER, "ZE_AFFINITY_MASK", "xpu", XPU_ACCESS),
    # CANN's runtime selection (vLLM Ascend's docs use ASCEND_RT_VISIBLE_DEVICES).
    "huawei": (ASCEND_RANK_CONTAINER, "ASCEND_RT_VISIBLE_DEVICES", "ascend", ASCEND_ACCESS),
}


def gib(gb: float) -> float:
    """A vendor's GB (10^9 bytes) in GiB, as the engines count memory."""
    return round(gb * GIB_PER_GB, 2)


def discrete(display: str, gpu_name: str, vendor: str, gpus: int, memory_gb: float, *, cc: str | None = None,
             gfx: str | None = None, source: str, recognition: dict | None = None, graphs: str = "cuda") -> dict:
    """A profile of a discrete accelerator with its own memory (GPU, TPU chip, NPU).

    ``admission_free_gib`` is an ESTIMATE: device memory less ~1 GiB of driver and context reservation.
    ``recognition`` says how node_facts tells the node apart when nvidia-smi/rocminfo do not (``_recognise``);
    ``graphs`` is the kind of captured graphs whose memory the cuda-graph-sizes lint counts (``xla`` on TPU:
    no CUDA graphs, so the rule does not apply).
    """
    container, visible, family, access = KINDS[vendor]
    device = gib(memory_gb)
    profile = {
        "display_name": display,
        "gpu_name": gpu_name,
        "vendor": vendor,
        "compute_capability": cc,
        "gfx_arch": gfx,
        "gpus_per_node": gpus,
        "device_memory_gib": device,
        "admission_free_gib": round(device - 1.0, 2),  # ESTIMATE, see the docstring
        "admission_estimated": True,
        "unified_memory": False,
        "env": {},
        "engine_env": _AMD_ENGINE_ENV if vendor == "amd" else _NVIDIA_ENGINE_ENV,
        "rank_container": container,
        # lanekit_rank_visible_devices goes to this variable.
        "visible_devices_env": visible,
        "image_family": family,
        "rank_access": access,
        "graphs": graphs,
        "source": source,
    }
    if recognition:
        profile["recognition"] = recognition
    return profile


def cpu_profile(display: str, *, workers: int, source: str, recognition: dict | None = None,
                numa_nodes: int | None = None) -> dict:
    """A profile of x86-64 CPU nodes running vLLM's CPU backend: no GPU facts, the KV cache in host RAM.

    ``workers``: CPU workers (engine processes) per node, which ``gpus_per_node`` counts on CPU nodes.
    ``numa_nodes``: NUMA nodes a node of this kind has at least, when known: vLLM's automatic thread binding
    puts each local worker on a NUMA node of its own, so up to that many workers need no explicit binding
    (the cpu-threads-bind lint). Unknown (None): more than one worker per node must be bound explicitly.
    """
    profile: dict = {
        "display_name": display,
        "gpu_name": None,  # no GPU: the preflight requires none (requires_gpu)
        "vendor": "cpu",
        # The CPU architecture the nodes (and so the image) must have; lanekit_node_arch defaults to it.
        "arch": "amd64",
        "compute_capability": None,
        "gfx_arch": None,
        "gpus_per_node": workers,
        # No device memory: KV cache and weights live in host RAM (cpu_backend's kv_space_env).
        "device_memory_gib": None,
        "admission_free_gib": None,
        "admission_estimated": False,
        "unified_memory": False,
        # The engine's memory is ordinary host memory, for which the kernel reclaims page cache: the cache
        # role keeps MemAvailable above its headroom, as with a discrete GPU (published in the plan).
        "memory_model": "discrete",
        "env": {},
        "engine_env": {"sglang": {}, "vllm": {}},
        "rank_container": CPU_RANK_CONTAINER,
        "visible_devices_env": None,
        "cpu_backend": {"vllm": VLLM_CPU_BACKEND},
        "image_family": "cpu",
        "rank_access": CPU_ACCESS,
        "graphs": None,
        "source": source,
    }
    if recognition:
        profile["recognition"] = recognition
    if numa_nodes:
        profile["numa_nodes"] = numa_nodes
    return profile
