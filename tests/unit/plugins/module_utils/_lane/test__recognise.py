"""Node recognition (module_utils/_lane/_recognise.py, _hardware.node_mismatch): a TPU, an Intel GPU, an Ascend NPU or
a Xeon generation is told apart from what node_facts reads, and a lane on the wrong kind of node is refused naming
its hardware profile (issue 27)."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import PROFILES, node_mismatch
from ansible_collections.lanekit.serving.plugins.module_utils._lane._recognise import (
    found,
    node_summary,
    parse_cpuinfo,
    recognition_mismatch,
)

GRANITE_RAPIDS = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 173
model name\t: Intel(R) Xeon(R) 6980P
flags\t\t: fpu amx_tile

processor\t: 1
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 173
"""
EPYC = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: AMD EPYC 9575F 64-Core\n"
TPU_PCI = [{"vendor": "0x1ae0", "device": "0x006f", "class": "0x120000", "driver": "vfio-pci"}] * 8
GVNIC = [{"vendor": "0x1ae0", "device": "0x0042", "class": "0x020000", "driver": "gve"}]
B60_PCI = [{"vendor": "0x8086", "device": "0xe211", "class": "0x030000", "driver": "xe"}] * 4
NVIDIA_PCI = [{"vendor": "0x10de", "device": "0x2bb1", "class": "0x030200", "driver": "nvidia"}]
ASCEND_DEV = ["davinci0", "davinci_manager", "devmm_svm", "hisi_hdc", "null", "tty"]
DOCKER = {"server_version": "28.2.2"}
NO_GPU = {"name": "", "compute_capability": "", "memory_total_mib": None, "count": 0, "error": "nvidia-smi not found"}


def published(hardware):
    """The profile as the plan publishes it (hardware_profile, recognition included when the profile has one)."""
    profile = PROFILES[hardware]
    keys = ("display_name", "gpu_name", "compute_capability", "gfx_arch", "vendor", "recognition")
    return {k: profile.get(k) for k in keys if k in profile}


def test_the_first_processor_of_cpuinfo_is_read():
    assert parse_cpuinfo(GRANITE_RAPIDS) == {"vendor": "GenuineIntel", "family": 6, "model": 173,
                                             "model_name": "Intel(R) Xeon(R) 6980P"}
    assert parse_cpuinfo("") == {"vendor": "", "family": None, "model": None, "model_name": ""}


def test_the_summary_keeps_accelerator_pci_functions_and_device_nodes_only():
    pci = TPU_PCI[:1] + GVNIC + [{"vendor": "0x8086", "device": "0x1234", "class": "0x060400", "driver": "pcieport"}]
    summary = node_summary(EPYC, pci, ["vfio", "null", "accel0", "sda", "davinci_manager"])
    assert summary["pci"] == TPU_PCI[:1] and summary["dev"] == ["accel0", "davinci_manager", "vfio"]


@pytest.mark.parametrize("hardware, node, count", [
    ("trillium", node_summary(EPYC, TPU_PCI + GVNIC, ["vfio"]), 8),
    ("trillium", node_summary(EPYC, GVNIC + NVIDIA_PCI, []), 0),  # a GCE VM's gVNIC is Google's, not a TPU
    ("arc_pro_b60", node_summary(GRANITE_RAPIDS, B60_PCI, []), 4),
    ("arc_pro_b60", node_summary(GRANITE_RAPIDS, [dict(B60_PCI[0], driver="i915")], []), 0),
    ("ascend_950pr", node_summary("", [], ASCEND_DEV), 1),
    ("ascend_950pr", node_summary("", [], ["davinci0"]), 0),  # no manager device: the driver is not there
    ("xeon6", node_summary(GRANITE_RAPIDS, [], []), 1),
    ("xeon5", node_summary(GRANITE_RAPIDS, [], []), 0),
    ("xeon6", node_summary(EPYC, [], []), 0),
])
def test_each_kind_is_recognised_from_what_the_node_shows(hardware, node, count):
    assert found(PROFILES[hardware]["recognition"], node) == count


def test_a_tpu_lane_on_a_gpu_node_is_refused_naming_the_profile():
    node = node_summary(EPYC, NVIDIA_PCI, [])
    gpu = {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "count": 8}
    text = node_mismatch(published("trillium"), gpu, "amd64", DOCKER, "amd64", node)
    assert text.startswith("it reports accelerator-class PCI functions 0x10de:0x2bb1 class 0x030200 (nvidia), not "
                           "Google TPU v6e chips")
    assert "the lane's hardware profile trillium (Google Cloud TPU v6e (Trillium)) needs Google TPU v6e chips" in text
    assert text.endswith("Fix the node, or the inventory's lanekit_hardware and the lane's hardware.") and "\n" not in text
    assert node_mismatch(published("trillium"), NO_GPU, "amd64", DOCKER, "amd64",
                         node_summary(EPYC, TPU_PCI, ["vfio"])) == ""


def test_a_xeon6_lane_on_an_epyc_node_is_refused_and_cpu_x86_takes_any_x86_node():
    node = node_summary(EPYC, [], [])
    text = node_mismatch(published("xeon6"), NO_GPU, "amd64", DOCKER, "amd64", node)
    assert "it reports CPU 'AMD EPYC 9575F 64-Core' (AuthenticAMD family 26, model 2), not Intel Xeon 6 CPUs" in text
    assert "hardware profile xeon6 (Intel Xeon 6 CPU node (vLLM CPU backend))" in text
    assert node_mismatch(published("xeon6"), NO_GPU, "amd64", DOCKER, "amd64", node_summary(GRANITE_RAPIDS, [], [])) == ""
    # The real-engine lane's profile recognises no generation: the sim's CPU nodes are whatever x86 machine runs it.
    assert node_mismatch(published("cpu_x86"), NO_GPU, "amd64", DOCKER, "amd64", node) == ""


def test_an_ascend_lane_needs_the_npu_devices_and_the_architecture():
    assert node_mismatch(published("ascend_950pr"), NO_GPU, "arm64", DOCKER, "arm64", node_summary("", [], ASCEND_DEV)) == ""
    text = node_mismatch(published("ascend_950pr"), NO_GPU, "amd64", DOCKER, "arm64", node_summary("", [], ASCEND_DEV))
    assert text.startswith("it reports architecture amd64") and "ascend_950pr" in text
    text = node_mismatch(published("ascend_950pr"), NO_GPU, "arm64", DOCKER, "arm64", node_summary("", [], []))
    assert text.startswith("it reports device nodes none of /dev/davinci*, not Ascend NPUs")


def test_a_node_facts_without_the_node_summary_cannot_recognise_the_kind():
    assert "cannot be recognised as Intel discrete GPUs" in recognition_mismatch(PROFILES["arc_pro_b60"]["recognition"], None)


def test_every_edition_of_a_card_is_accepted_and_another_card_is_refused_naming_the_profile():
    for name in ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"):
        gpu = {"name": name, "compute_capability": "12.0", "count": 8}
        assert node_mismatch(published("rtx_pro_6000_8x"), gpu, "amd64", DOCKER, "amd64") == ""
    gpu = {"name": "NVIDIA GeForce RTX 5090", "compute_capability": "12.0", "count": 1}
    text = node_mismatch(published("rtx_pro_6000_8x"), gpu, "amd64", DOCKER, "amd64")
    assert "(12.0) (hardware profile rtx_pro_6000_8x)" in text and "NVIDIA RTX PRO 6000 Blackwell Server Edition or" in text
