"""Issue 25: the verdict: figures, the slowest pair and the fix; never a silent pass."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._fabric import _verdict

MiB = 2**20
FLOOR = {"op": "all_gather", "gbps": 0.05, "estimated": False, "source": "inventory"}


def ok(rank, host, gather_s, transfers=(), **extra):
    return {"rank": rank, "host": host, "world": 2, "status": "ok", "backend": "gloo", "torch": "2.13.0+cpu",
            "timings": [{"op": "all_reduce", "size": 8 * MiB, "seconds": [gather_s * 2]},
                        {"op": "all_gather", "size": 8 * MiB, "seconds": [gather_s]}],
            "transfers": list(transfers), **extra}


def judge(results, gate="strict", floor=None, rdma=False, env=None):
    return _verdict.judge("tiny", gate, results, floor or FLOOR, wants_rdma=rdma, env=env or {})


def test_a_fast_fabric_passes_with_its_figures():
    verdict = judge([ok(0, "cpu-01", 0.01), ok(1, "cpu-02", 0.01)])
    assert verdict["status"] == "pass" and verdict["blocking"] is False
    assert verdict["message"].startswith("The fabric of lane tiny (2 nodes) passes: all_reduce busbw 0.419 GB/s at 8 MiB; "
                                         "all_gather busbw 0.419 GB/s")
    assert "'" not in verdict["message"]  # Ansible's YAML output would double it
    assert "floor 0.05 GB/s" in verdict["message"] and "transport gloo/tcp" in verdict["message"]


def test_a_capped_node_is_named_with_the_fix():
    slow_back = [{"src": 1, "dst": 0, "size": 8 * MiB, "seconds": [0.7]}]
    fast_there = [{"src": 0, "dst": 1, "size": 8 * MiB, "seconds": [0.01]}]
    verdict = judge([ok(0, "cpu-01", 0.7, slow_back), ok(1, "cpu-02", 0.7, fast_there)])
    assert verdict["status"] == "below_floor" and verdict["blocking"] is True
    message = verdict["message"]
    assert "is below its floor: all_reduce busbw" in message and "floor 0.05 GB/s" in message
    assert "Slowest pair: cpu-02 -> cpu-01 at 0.012 GB/s (back: 0.839 GB/s). cpu-02 is slow on its send side." in message
    assert verdict["fix"].startswith("check the NIC, cable and switch port of cpu-02")
    assert "'" not in message + verdict["fix"]
    assert "-e fabric_gate=warn" in verdict["fix"]
    # warn reports the same and goes on
    warned = judge([ok(0, "cpu-01", 0.7, slow_back), ok(1, "cpu-02", 0.7, fast_there)], gate="warn")
    assert warned["status"] == "below_floor" and warned["blocking"] is False
    assert "fabric_gate=warn: the deploy goes on." in _verdict.lines(warned)


def test_an_image_without_torch_cannot_run_and_never_passes():
    reason = "the image has no usable torch (ModuleNotFoundError: No module named 'torch')"
    results = [{"rank": 0, "host": "spark-01", "status": "cannot_run", "reason": reason},
               {"rank": 1, "host": "spark-02", "status": "cannot_run", "reason": reason}]
    verdict = judge(results)
    assert verdict["status"] == "cannot_run" and verdict["blocking"] is True
    assert verdict["message"].startswith("The fabric gate cannot run on lane tiny (2 nodes): spark-01: the image "
                                         "has no usable torch")
    assert "-e fabric_gate=off" in verdict["fix"]
    assert judge(results, gate="warn")["blocking"] is False


def test_a_rank_that_failed_or_did_not_report_is_named():
    verdict = judge([ok(0, "cpu-01", 0.01), {"rank": 1, "host": "cpu-02", "status": "failed",
                                             "reason": "rendezvous at tcp://10.0.0.1:29502 failed: timeout"}])
    assert verdict["status"] == "failed" and "cpu-02: rendezvous at tcp://10.0.0.1:29502 failed" in verdict["message"]
    assert "NCCL_SOCKET_IFNAME" in verdict["fix"] and "the fabric address of cpu-01" in verdict["fix"]


def test_sockets_on_a_lane_that_means_rdma_are_refused():
    lines = ["NCCL version 2.21.5+cuda12.4", "x NCCL INFO NET/IB : No device found.",
             "x NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0"]
    results = [dict(ok(0, "spark-01", 0.01), backend="nccl", nccl_lines=lines, nccl_version="2.21.5"),
               dict(ok(1, "spark-02", 0.01), backend="nccl")]
    verdict = judge(results, rdma=True, env={"NCCL_IB_HCA": "rocep1s0f0"})
    assert verdict["status"] == "wrong_transport" and verdict["blocking"] is True
    assert "over TCP sockets (NET/Socket/0) although the lane means RDMA (NCCL_IB_HCA=rocep1s0f0)" in verdict["message"]
    assert verdict["nccl_version"] == "2.21.5"
    assert judge(results, rdma=False)["status"] == "pass"


def test_no_floor_reports_without_refusing():
    verdict = judge([ok(0, "a", 10.0), ok(1, "b", 10.0)], floor={"op": "all_gather", "gbps": None})
    assert verdict["status"] == "pass" and "no floor for this hardware" in verdict["message"]


def test_the_gate_setting_is_checked():
    with pytest.raises(LanekitError, match="fabric_gate is 'loose'"):
        judge([], gate="loose")
