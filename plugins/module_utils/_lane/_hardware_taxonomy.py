# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The recipe taxonomy's hardware beyond the data-centre GPUs: NVIDIA workstations, Google TPU, Intel XPU and
Xeon CPU nodes, Huawei Ascend. ``_hardware.PROFILES`` merges them in.

One job: these profiles' facts. Ids, accelerators per node and the memory the recipe site sizes with are the
vLLM recipe taxonomy's (``taxonomy.yaml`` of vllm-project/recipes: ``gpu_count``, ``vram_gb``); the memory per
device is the vendor's per-device figure converted to GiB; ``admission_free_gib`` is an ESTIMATE (device memory
less ~1 GiB) until ``mem_get_info`` (or the vendor's equivalent) is read on such a node. What a rank container
needs on each kind is in ``_hardware_kinds`` with its sources; ``recognition`` is how node_facts tells the
node's kind apart (``_recognise``).
"""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware_kinds import cpu_profile, discrete

# nvidia-smi's names of the RTX PRO 6000 Blackwell editions (server, workstation, Max-Q); all are sm_120, 96 GB.
RTX_PRO_6000_NAMES = ["NVIDIA RTX PRO 6000 Blackwell Server Edition", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
                      "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"]
RTX_PRO_5000_NAMES = ["NVIDIA RTX PRO 5000 Blackwell", "NVIDIA RTX PRO 5000 72GB Blackwell"]


def _nvidia(profile_id: str, names: list[str]) -> dict:
    return {"profile": profile_id, "kind": "nvidia", "gpu_names": names}


def _rtx_pro_6000(profile_id: str, gpus: int) -> dict:
    return discrete(f"NVIDIA RTX PRO 6000 Blackwell ({gpus}x)", RTX_PRO_6000_NAMES[0], "nvidia", gpus, 96, cc="12.0",
                    recognition=_nvidia(profile_id, RTX_PRO_6000_NAMES),
                    source="NVIDIA RTX PRO 6000 Blackwell datasheet: 96 GB GDDR7 per GPU; sm_120 (CUDA 12.8 and later)")


def _rtx_pro_5000(profile_id: str, gpus: int) -> dict:
    return discrete(f"NVIDIA RTX PRO 5000 Blackwell ({gpus}x)", RTX_PRO_5000_NAMES[0], "nvidia", gpus, 72, cc="12.0",
                    recognition=_nvidia(profile_id, RTX_PRO_5000_NAMES),
                    source="NVIDIA RTX PRO 5000 Blackwell datasheet (72 GB model, the taxonomy's); sm_120")


def _rtx_5090(profile_id: str, gpus: int) -> dict:
    return discrete(f"NVIDIA GeForce RTX 5090 ({gpus}x)", "NVIDIA GeForce RTX 5090", "nvidia", gpus, 32, cc="12.0",
                    recognition=_nvidia(profile_id, ["NVIDIA GeForce RTX 5090"]),
                    source="NVIDIA GeForce RTX 5090 specifications: 32 GB GDDR7; sm_120")


def _tpu(profile_id: str, generation: str) -> dict:
    # A TPU chip is a PCI function of Google's vendor id (0x1ae0) in the processing-accelerator class (0x12);
    # Compute Engine's gVNIC shares the vendor id but is a network function (class 0x02), so the class matters.
    # ESTIMATE: the ids are from the PCI id registry, not read on a TPU VM; the generation is not told apart.
    return {"profile": profile_id, "kind": "tpu", "pci_vendor": "0x1ae0", "pci_class": "0x12",
            "what": f"Google TPU {generation} chips (PCI vendor 0x1ae0, processing accelerator)"}


def _xeon(profile_id: str, generation: str, models: list[int]) -> dict:
    # /proc/cpuinfo's "cpu family" 6 and "model": Intel's model numbers of the generation's server parts.
    return {"profile": profile_id, "kind": "cpu", "cpu_vendor": "GenuineIntel", "cpu_family": 6, "cpu_models": models,
            "what": f"Intel Xeon {generation} CPUs (family 6, model {' or '.join(str(m) for m in models)})"}


TAXONOMY_PROFILES = {
    # NVIDIA workstations. The DGX Station's GB300 is one Blackwell Ultra GPU behind a Grace CPU (arm64); its
    # HBM3e is its own (not GB10-style unified memory); 252 GB is the taxonomy's figure (NVIDIA quotes up to 288 GB).
    "dgx_station_gb300": discrete(
        "NVIDIA DGX Station (GB300)", "NVIDIA GB300", "nvidia", 1, 252, cc="10.3",
        recognition=_nvidia("dgx_station_gb300", ["NVIDIA GB300"]),
        source="NVIDIA DGX Station datasheet: 1x GB300 Grace Blackwell Ultra; 252 GB per the recipe taxonomy "
               "(ESTIMATE: NVIDIA quotes up to 288 GB HBM3e); sm_103"),
    "rtx_pro_6000": _rtx_pro_6000("rtx_pro_6000", 1),
    "rtx_pro_6000_2x": _rtx_pro_6000("rtx_pro_6000_2x", 2),
    "rtx_pro_6000_8x": _rtx_pro_6000("rtx_pro_6000_8x", 8),
    "rtx_pro_5000": _rtx_pro_5000("rtx_pro_5000", 1),
    "rtx_pro_5000_4x": _rtx_pro_5000("rtx_pro_5000_4x", 4),
    "rtx_5090": _rtx_5090("rtx_5090", 1),
    "rtx_5090_2x": _rtx_5090("rtx_5090_2x", 2),
    "rtx_4090_2x": discrete(
        "NVIDIA GeForce RTX 4090 (2x)", "NVIDIA GeForce RTX 4090", "nvidia", 2, 24, cc="8.9",
        recognition=_nvidia("rtx_4090_2x", ["NVIDIA GeForce RTX 4090"]),
        source="NVIDIA GeForce RTX 4090 specifications: 24 GB GDDR6X; sm_89"),
    # Google Cloud TPU, served by vLLM TPU (tpu-inference, the vllm/vllm-tpu image). vLLM TPU sizes its KV cache
    # as --gpu-memory-utilization x HBM per chip less the weights, as on a GPU, without CUDA graphs (XLA programs).
    # Chips per node: the taxonomy's (a v6e-8 host; one Ironwood chip; ESTIMATE: a tpu7x host has 4).
    "trillium": discrete(
        "Google Cloud TPU v6e (Trillium)", "TPU v6e", "google", 8, 32, recognition=_tpu("trillium", "v6e"),
        graphs="xla", source="Google Cloud TPU v6e documentation: 32 GB HBM per chip, 8 chips per v6e-8 host"),
    "ironwood": discrete(
        "Google Cloud TPU v7 (Ironwood)", "TPU v7", "google", 1, 192, recognition=_tpu("ironwood", "v7"),
        graphs="xla", source="Google Cloud TPU7x (Ironwood) documentation: 192 GB HBM per chip"),
    # Intel Arc Pro (Battlemage) on the xe kernel driver, served by vLLM's XPU backend (vllm/vllm-openai-xpu).
    # XPU memory is device memory as on a GPU (--gpu-memory-utilization of it), so the GPU KV rules apply.
    "arc_pro_b60": discrete(
        "Intel Arc Pro B60 (4x)", "Intel Arc Pro B60", "intel", 4, 24,
        recognition={"profile": "arc_pro_b60", "kind": "xpu", "pci_vendor": "0x8086", "pci_class": "0x03",
                     "driver": "xe", "what": "Intel discrete GPUs on the xe driver (PCI vendor 0x8086, display class)"},
        source="Intel Arc Pro B60 product brief: 24 GB GDDR6 (Xe2, BMG-G21)"),
    "arc_pro_b70": discrete(
        "Intel Arc Pro B70 (4x)", "Intel Arc Pro B70", "intel", 4, 32,
        recognition={"profile": "arc_pro_b70", "kind": "xpu", "pci_vendor": "0x8086", "pci_class": "0x03",
                     "driver": "xe", "what": "Intel discrete GPUs on the xe driver (PCI vendor 0x8086, display class)"},
        source="Intel Arc Pro B70 product brief: 32 GB GDDR6 (Xe2); per the recipe taxonomy, 4 cards per node"),
    # Huawei Ascend, served by vLLM Ascend (quay.io/ascend/vllm-ascend). NPU memory is device memory claimed as a
    # fraction (--gpu-memory-utilization), and ACL graphs capture decode as CUDA graphs do, so the GPU KV rules apply.
    "ascend_950pr": discrete(
        "Huawei Ascend 950PR (1x NPU)", "Ascend 950PR", "huawei", 1, 128,
        recognition={"profile": "ascend_950pr", "kind": "npu", "devices": ["/dev/davinci_manager"],
                     "numbered": "/dev/davinci", "what": "Ascend NPUs (/dev/davinci_manager and /dev/davinci<N>)"},
        graphs="acl", source="Huawei Ascend 950PR (recipe taxonomy): 128 GB HiBL 1.0 HBM, one NPU per node"),
    # Intel Xeon CPU nodes: vLLM's CPU backend, the facts cpu_x86 has (one definition: _hardware_kinds.cpu_profile).
    # The taxonomy counts 4 engine processes per node (the recipes' TP layouts: Llama-3.1-8B runs TP2 on one);
    # NUMA nodes: ESTIMATE of 4 (two sockets, SNC2 or more) so vLLM's automatic binding gives each worker its own.
    "xeon6": cpu_profile("Intel Xeon 6 CPU node (vLLM CPU backend)", workers=4, numa_nodes=4,
                         recognition=_xeon("xeon6", "6", [173, 175]),
                         source="vLLM CPU backend (docs: installation/cpu, x86); Intel Xeon 6 (Granite Rapids model "
                                "173, Sierra Forest model 175)"),
    "xeon5": cpu_profile("Intel Xeon 5 CPU node (vLLM CPU backend)", workers=4, numa_nodes=4,
                         recognition=_xeon("xeon5", "5", [207]),
                         source="vLLM CPU backend (docs: installation/cpu, x86); 5th Gen Intel Xeon (Emerald Rapids, "
                                "model 207)"),
}

# vLLM's TPU and XPU images are built for x86-64 only (vllm/vllm-tpu, vllm/vllm-openai-xpu), so their nodes are amd64
# whatever the inventory says (lanekit_node_arch defaults to it and another is refused, as on CPU nodes).
for _key in ("trillium", "ironwood", "arc_pro_b60", "arc_pro_b70"):
    TAXONOMY_PROFILES[_key]["arch"] = "amd64"
