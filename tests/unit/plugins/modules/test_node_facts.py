"""node_facts: the GPU as nvidia-smi reports it, and the docker version in the same call."""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.modules import node_facts


class SmiModule:
    """Just enough of AnsibleModule: an nvidia-smi that is missing or answers (rc, out, err)."""

    def __init__(self, smi=None, answer=(0, "", "")):
        self.smi = smi
        self.answer = answer
        self.calls = []

    def get_bin_path(self, name, required=False):
        return self.smi if name == "nvidia-smi" else None

    def run_command(self, argv, **kwargs):
        self.calls.append(argv)
        return self.answer


def test_the_first_gpu_is_reported_with_the_count():
    text = "NVIDIA GB10, 12.1, 122570\nNVIDIA GB10, 12.1, 122570\n"
    assert node_facts.parse_gpu_csv(text) == {"name": "NVIDIA GB10", "compute_capability": "12.1",
                                              "memory_total_mib": 122570, "count": 2}


def test_a_memory_figure_nvidia_smi_cannot_give_is_left_empty():
    assert node_facts.parse_gpu_csv("NVIDIA GB10, 12.1, [N/A]\n")["memory_total_mib"] is None


def test_a_node_without_nvidia_smi_reports_no_gpu_and_why():
    gpu = node_facts.read_gpu(SmiModule())
    assert gpu["count"] == 0 and gpu["name"] == "" and gpu["error"] == "nvidia-smi not found"


def test_a_driver_that_does_not_answer_is_reported_in_its_own_words():
    module = SmiModule("/usr/bin/nvidia-smi", (9, "", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"))
    gpu = node_facts.read_gpu(module)
    assert gpu["count"] == 0 and gpu["error"].startswith("NVIDIA-SMI has failed")
    assert module.calls == [["/usr/bin/nvidia-smi", "--query-gpu=name,compute_cap,memory.total", "--format=csv,noheader,nounits"]]


def test_a_query_that_lists_nothing_reports_no_gpu_without_an_error():
    assert node_facts.read_gpu(SmiModule("/usr/bin/nvidia-smi", (0, "\n", ""))) == node_facts.no_gpu()


def test_the_node_check_compares_ansibles_architecture_in_docker_spelling():
    from ansible_collections.lanekit.serving.plugins.filter.docker_arch import FilterModule
    docker_arch = FilterModule().filters()["docker_arch"]
    assert [docker_arch(a) for a in ("x86_64", "aarch64", "arm64", "ppc64le")] == ["amd64", "arm64", "arm64", "ppc64le"]


ROCMINFO = """*******
Agent 1
*******
  Name:                    AMD EPYC 9575F 64-Core Processor
  Marketing Name:          AMD EPYC 9575F 64-Core Processor
  Device Type:             CPU
*******
Agent 9
*******
  Name:                    gfx950
  Uuid:                    GPU-5c3e1a2b3c4d5e6f
  Marketing Name:          AMD Instinct MI355X
  Vendor Name:             AMD
  Device Type:             GPU
  Pool Info:
    Pool 1
      Segment:                 GLOBAL; FLAGS: COARSE GRAINED
  ISA Info:
    ISA 1
      Name:                    amdgcn-amd-amdhsa--gfx950:sramecc+:xnack-
*******
Agent 10
*******
  Name:                    gfx950
  Marketing Name:          AMD Instinct MI355X
  Device Type:             GPU
"""


class RocmModule(SmiModule):
    """A node without nvidia-smi that has ROCm's rocminfo."""

    def get_bin_path(self, name, required=False):
        return "/opt/rocm/bin/rocminfo" if name == "rocminfo" else None


def test_an_amd_node_reports_its_gpu_and_gfx_target_from_rocminfo():
    module = RocmModule(answer=(0, ROCMINFO, ""))
    assert node_facts.read_gpu(module) == {"name": "AMD Instinct MI355X", "compute_capability": "gfx950",
                                           "memory_total_mib": None, "count": 2}
    assert module.calls == [["/opt/rocm/bin/rocminfo"]]


def test_rocminfo_that_fails_is_reported_in_its_own_words():
    gpu = node_facts.read_gpu(RocmModule(answer=(1, "", "hsa api call failure at: rocminfo.cc:1306\n")))
    assert gpu["count"] == 0 and gpu["error"].startswith("hsa api call failure")


class DockerVersionModule(SmiModule):
    """A node whose docker CLI answers `docker version --format {{.Server.Version}}` with (rc, out, err)."""

    def __init__(self, docker=None, answer=(0, "", "")):
        super().__init__(None, answer)
        self.docker = docker

    def get_bin_path(self, name, required=False):
        return self.docker if name == "docker" else None


def test_the_docker_version_is_read_in_the_same_call():
    module = DockerVersionModule("/usr/bin/docker", (0, "28.2.2\n", ""))
    assert node_facts.read_docker(module) == {"server_version": "28.2.2"}
    assert module.calls == [["/usr/bin/docker", "version", "--format", "{{.Server.Version}}"]]


def test_a_daemon_that_does_not_answer_is_an_empty_version_and_its_words():
    module = DockerVersionModule("/usr/bin/docker", (1, "", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock.\n"))
    assert node_facts.read_docker(module) == {
        "server_version": "", "error": "Cannot connect to the Docker daemon at unix:///var/run/docker.sock."}
    assert node_facts.read_docker(DockerVersionModule())["error"] == "the docker CLI is not on PATH"


class NodeModule(SmiModule):
    """A node without a GPU (no nvidia-smi, no rocminfo) whose docker answers, given the lane's hardware."""

    def __init__(self, params):
        super().__init__()
        self.params = params

    def get_bin_path(self, name, required=False):
        return "/usr/bin/docker" if name == "docker" else None

    def run_command(self, argv, **kwargs):
        self.calls.append(argv)
        return (0, "28.2.2\n", "")


def test_the_node_is_compared_with_the_lanes_hardware_when_given(monkeypatch):
    from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import PROFILES
    monkeypatch.setattr(node_facts.platform, "machine", lambda: "x86_64")
    cpu = {k: PROFILES["cpu_x86"].get(k) for k in ("display_name", "gpu_name", "compute_capability", "gfx_arch")}
    result = node_facts.facts(NodeModule({"hardware": cpu, "arch": "amd64"}))
    assert result["mismatch"] == "" and result["gpu"]["count"] == 0 and result["architecture"] == "x86_64"
    gb10 = {k: PROFILES["dgx_spark_gb10"].get(k) for k in ("display_name", "gpu_name", "compute_capability", "gfx_arch")}
    result = node_facts.facts(NodeModule({"hardware": gb10, "arch": "amd64"}))
    assert result["mismatch"].startswith("it reports GPU '' (compute capability ), architecture amd64")
    assert "mismatch" not in node_facts.facts(NodeModule({"hardware": None, "arch": None}))


def test_the_node_summary_reads_cpuinfo_the_pci_functions_and_dev(tmp_path):
    # A TPU VM as sysfs shows it: a chip bound to vfio-pci, gVNIC beside it (left out: a network function).
    (tmp_path / "cpuinfo").write_text("vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n\n")
    for address, vendor, klass, driver in (("0000:00:04.0", "0x1ae0", "0x120000", "vfio-pci"),
                                           ("0000:00:05.0", "0x1ae0", "0x020000", "gve")):
        function = tmp_path / "pci" / address
        function.mkdir(parents=True)
        (function / "vendor").write_text(vendor + "\n")
        (function / "device").write_text("0x006f\n")
        (function / "class").write_text(klass + "\n")
        (tmp_path / "drivers" / driver).mkdir(parents=True)
        (function / "driver").symlink_to(tmp_path / "drivers" / driver)
    (tmp_path / "dev" / "vfio").mkdir(parents=True)
    (tmp_path / "dev" / "null").write_text("")
    node = node_facts.read_node(str(tmp_path / "cpuinfo"), str(tmp_path / "pci"), str(tmp_path / "dev"))
    assert node == {"cpu": {"vendor": "AuthenticAMD", "family": 25, "model": 17, "model_name": ""},
                    "pci": [{"vendor": "0x1ae0", "device": "0x006f", "class": "0x120000", "driver": "vfio-pci"}],
                    "dev": ["vfio"]}
    assert node_facts.read_node(str(tmp_path / "none"), str(tmp_path / "none"), str(tmp_path / "none")) == {
        "cpu": {"vendor": "", "family": None, "model": None, "model_name": ""}, "pci": [], "dev": []}


def test_a_tpu_lane_on_a_node_without_a_tpu_is_refused_by_the_module(monkeypatch):
    from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import PROFILES
    monkeypatch.setattr(node_facts.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(node_facts, "read_node", lambda: {"cpu": {}, "pci": [], "dev": []})
    trillium = {k: PROFILES["trillium"].get(k) for k in ("display_name", "gpu_name", "compute_capability", "gfx_arch",
                                                         "recognition")}
    result = node_facts.facts(NodeModule({"hardware": trillium, "arch": "amd64"}))
    assert result["mismatch"].startswith("it reports accelerator-class PCI functions none, not Google TPU v6e chips")
    assert "hardware profile trillium" in result["mismatch"] and result["node"] == {"cpu": {}, "pci": [], "dev": []}
