"""Issue 25: the transport NCCL really used, read from real NCCL_DEBUG=INFO lines (tests/fixtures/nccl)."""
from __future__ import annotations

import os

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._fabric import _transport

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "nccl")


def lines(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        text = handle.read().splitlines()
    assert text[0].startswith("# source: https://github.com/"), f"{name} must name its public source"
    return text[1:]


@pytest.mark.parametrize("name, used, via", [
    ("ib_gdrdma_ibext.log", "rdma", ["NET/IBext_v8/7/GDRDMA"]),
    ("ib_with_p2p.log", "rdma", ["NET/IB/3", "P2P/direct pointer/read"]),
    ("ib_gdrdma_old_format.log", "rdma", ["NET/IB/1/GDRDMA", "P2P/IPC/read"]),
    ("socket_channels.log", "socket", ["NET/Socket/3", "P2P/IPC/read"]),
    ("socket_no_ib.log", "socket", []),
])
def test_the_transport_between_nodes_is_read_from_real_lines(name, used, via):
    summary = _transport.parse(lines(name))
    assert _transport.used(summary) == used
    assert summary["via"] == via


def test_version_network_and_devices():
    summary = _transport.parse(lines("socket_no_ib.log"))
    assert summary["nccl_version"] == "2.21.5+cuda12.4"
    assert summary["network"] == "Socket" and summary["ib_missing"] is True
    assert summary["socket_devices"] == ["lo:127.0.0.1<0>"]
    offered = _transport.parse(lines("ib_using_devices.log"))
    assert offered["ib_devices"] == ["mlx5_0:1/IB", "mlx5_1:1/IB"]
    assert offered["socket_devices"] == ["enp41s0f1:<0>", "virbr0:<0>"]
    spark = _transport.parse(lines("spark_roce_plugin.log"))
    assert spark["ib_devices"] == ["rocep1s0f1", "roceP2p1s0f1"]
    counted = _transport.parse(lines("ib_with_p2p.log"))["channels"]
    assert counted == {"p2p": 2, "rdma": 3}


def test_gloo_or_silent_nccl_says_nothing():
    assert _transport.used(_transport.parse([])) == ""


def test_what_the_lane_means():
    spark_env = {"NCCL_IB_DISABLE": "0", "NCCL_SOCKET_IFNAME": "enP7s7"}
    assert _transport.expects_rdma(spark_env, []) is True
    assert _transport.expects_rdma({"NCCL_IB_HCA": "mlx5_0"}, []) is True
    assert _transport.expects_rdma({}, ["/dev/infiniband"]) is True
    assert _transport.expects_rdma({}, ["/dev/infiniband/uverbs0:/dev/infiniband/uverbs0"]) is True
    assert _transport.expects_rdma({"NCCL_IB_HCA": "mlx5_0", "NCCL_IB_DISABLE": "1"}, []) is False
    assert _transport.expects_rdma({"NCCL_NET": "Socket"}, ["/dev/infiniband"]) is False
    assert _transport.expects_rdma({"GLOO_SOCKET_IFNAME": "eth0"}, []) is False
    assert _transport.expects_rdma({}, [], "rdma") is True
    assert _transport.expects_rdma({"NCCL_IB_HCA": "x"}, [], "socket") is False
    with pytest.raises(LanekitError, match="lanekit_fabric_transport is 'ib'"):
        _transport.expects_rdma({}, [], "ib")


def test_a_lane_that_meant_rdma_but_got_sockets_is_refused():
    env = {"NCCL_IB_HCA": "rocep1s0f0,roceP2p1s0f0"}
    sockets = _transport.parse(lines("socket_no_ib.log"))
    sentence = _transport.problem(sockets, True, env)
    assert "over TCP sockets" in sentence and "NCCL_IB_HCA=rocep1s0f0,roceP2p1s0f0" in sentence
    assert "No device found" in sentence
    assert _transport.problem(sockets, False, env) == ""
    assert _transport.problem(_transport.parse(lines("ib_with_p2p.log")), True, env) == ""
