"""Issue 25: the fabric probe for real: two ranks as two local processes, gloo over 127.0.0.1, started with
the argv the role gives the containers (python3 -c <source> <JSON>).

Needs a Python with torch (CPU build is enough): LANEKIT_FABRIC_VENV names its virtualenv (default
/tmp/fabric-venv, made with `python3 -m venv /tmp/fabric-venv && /tmp/fabric-venv/bin/pip install
/opt/wheels/torch-2.13.0+cpu-*.whl`); the tests that need torch are skipped without it. Sizes are
small: the build machines have two shared cores.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from ansible_collections.lanekit.serving.plugins.plugin_utils._fabric import _launch, _verdict
from tests.unit.plugins.plugin_utils._fabric.helpers_plan import plan, rank

VENV = os.environ.get("LANEKIT_FABRIC_VENV", "/tmp/fabric-venv")
TORCH_PYTHON = os.path.join(VENV, "bin", "python")


def has_torch(python: str) -> bool:
    if not os.path.exists(python):
        return False
    return subprocess.run([python, "-c", "import torch.distributed"], capture_output=True, check=False).returncode == 0


needs_torch = pytest.mark.skipif(not has_torch(TORCH_PYTHON), reason=f"no torch in {VENV} (LANEKIT_FABRIC_VENV)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def local_plan():
    return plan(ranks=[rank(0, "cpu-01", "127.0.0.1", env={"GLOO_SOCKET_IFNAME": "lo"}),
                       rank(1, "cpu-02", "127.0.0.1", role="worker", env={"GLOO_SOCKET_IFNAME": "lo"})])


def run_ranks(python: str, spec: dict, hosts: list[str], timeout: float = 120) -> list[dict]:
    """Start each host's probe as the container would (its env, its argv), wait, parse like the role."""
    procs = []
    for host in hosts:
        container = spec["nodes"][host]["container"]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **container["env"], "OMP_NUM_THREADS": "1"}
        procs.append((host, subprocess.Popen([python, *container["command"]], env=env, stdout=subprocess.PIPE,
                                             stderr=subprocess.STDOUT, text=True)))
    out = []
    for host, proc in procs:
        text = proc.communicate(timeout=timeout)[0]
        assert proc.returncode == 0, text[-2000:]
        out.append(_launch.parse_output(host, spec["nodes"][host]["probe_rank"], {"container": {"Output": text}}))
    return out


@needs_torch
def test_two_ranks_measure_gloo_over_loopback_and_the_gate_judges_them():
    spec = _launch.specs(local_plan(), sizes=[2**16, 2**20], iters=2, timeout_s=60, port=free_port(),
                         floor={"op": "all_gather", "gbps": 1000.0}, pairs="auto")
    results = run_ranks(TORCH_PYTHON, spec, ["cpu-01", "cpu-02"])
    assert [r["status"] for r in results] == ["ok", "ok"], results
    assert results[0]["env"]["GLOO_SOCKET_IFNAME"] == "lo" and results[0]["torch"].startswith("2.")
    assert {(t["op"], t["size"]) for t in results[0]["timings"]} == {
        ("all_reduce", 2**16), ("all_reduce", 2**20), ("all_gather", 2**16), ("all_gather", 2**20)}
    # 1000 GB/s is out of reach on loopback: both ranks decided alike to search the pairs
    links = sorted((t["src"], t["dst"]) for r in results for t in r["transfers"])
    assert links == [(0, 1), (1, 0)]
    below = _verdict.judge("L", "strict", results, {"op": "all_gather", "gbps": 1000.0}, wants_rdma=False, env={})
    assert below["status"] == "below_floor" and below["blocking"] and "Slowest pair: cpu-0" in below["message"]
    passing = _verdict.judge("L", "strict", results, {"op": "all_gather", "gbps": 1e-6}, wants_rdma=False, env={})
    assert passing["status"] == "pass", passing["message"]
    assert passing["transport_used"] == "gloo/tcp"


@needs_torch
def test_a_rank_whose_peer_never_comes_fails_with_the_reason():
    spec = _launch.specs(local_plan(), sizes=[2**12], iters=1, timeout_s=10, port=free_port(),
                         floor={"op": "all_gather", "gbps": 1.0})
    (result,) = run_ranks(TORCH_PYTHON, spec, ["cpu-01"], timeout=90)
    assert result["status"] == "failed", result
    assert result["stage"] == "rendezvous" or "no result after" in result["reason"]


def test_an_image_without_torch_says_it_cannot_run():
    python = sys.executable
    if has_torch(python):
        pytest.skip("this Python has torch")
    spec = _launch.specs(local_plan(), sizes=None, iters=1, timeout_s=30, port=free_port(),
                         floor={"op": "all_gather", "gbps": 1.0})
    results = run_ranks(python, spec, ["cpu-01", "cpu-02"])
    assert [r["status"] for r in results] == ["cannot_run", "cannot_run"]
    assert "no usable torch (ModuleNotFoundError: No module named 'torch')" in results[0]["reason"]
    verdict = _verdict.judge("L", "strict", results, {"op": "all_gather", "gbps": 1.0}, wants_rdma=False, env={})
    assert verdict["status"] == "cannot_run" and verdict["blocking"]


def test_bad_arguments_are_a_result_not_a_traceback():
    proc = subprocess.run([sys.executable, "-c", _launch.probe_source(), "{not json"], capture_output=True, text=True,
                          check=False, timeout=60)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    result = json.loads(proc.stdout.split(_launch.MARK, 1)[1])
    assert result["status"] == "failed" and result["reason"].startswith("bad probe arguments")


def test_the_report_shows_the_lanes_env_not_the_probes_own_nccl_debug(tmp_path):
    args = {"rank": 0, "world": 2, "master_addr": "127.0.0.1", "master_port": free_port(), "backend": "nccl",
            "sizes": [4096], "iters": 1, "timeout_s": 30}
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_HCA": "mlx5_0",
           "PYTHONPATH": str(tmp_path)}
    (tmp_path / "torch.py").write_text("raise ImportError('no torch in this image')\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", _launch.probe_source(), json.dumps(args)], env=env, capture_output=True,
                          text=True, check=False, timeout=60)
    result = json.loads(proc.stdout.split(_launch.MARK, 1)[1])
    assert result["status"] == "cannot_run" and "no torch in this image" in result["reason"]
    assert result["env"] == {"NCCL_IB_HCA": "mlx5_0", "NCCL_SOCKET_IFNAME": "eth0"}
    assert result["nccl_lines"] == []
