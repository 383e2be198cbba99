"""Issue 25: the pair search names the slow link, and the slow node when the evidence points at one."""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.plugin_utils._fabric import _pairs, _probe

MB = 10**6


def transfers(speeds):
    """{(src, dst): GB/s} -> the probe's transfers of 100 MB each."""
    return [{"src": s, "dst": d, "size": 100 * MB, "seconds": [0.1 / gbps]} for (s, d), gbps in speeds.items()]


def ring(n, fast=10.0, **slow):
    speeds = {link: fast for link in _pairs.neighbour_pairs(n)}
    for name, gbps in slow.items():
        s, d = name[1:].split("_")
        speeds[(int(s), int(d))] = gbps
    return transfers(speeds)


HOSTS = {i: f"node-{i}" for i in range(8)}


def test_neighbour_pairs_and_the_probe_agree():
    assert _pairs.neighbour_pairs(1) == []
    assert _pairs.neighbour_pairs(2) == [(0, 1), (1, 0)]
    assert _pairs.neighbour_pairs(3) == [(0, 1), (1, 0), (1, 2), (2, 1), (2, 0), (0, 2)]
    for n in range(1, 9):
        assert _probe.neighbour_pairs(n) == _pairs.neighbour_pairs(n)


def test_a_node_with_a_slow_uplink_is_named_on_its_send_side():
    found = _pairs.search(ring(8, l3_4=0.5, l3_2=0.6), 5.0, HOSTS)
    assert (found["node"], found["side"]) == (3, "send")
    assert (found["slowest"]["src_host"], found["slowest"]["dst_host"]) == ("node-3", "node-4")
    assert found["slowest"]["gbps"] == 0.5


def test_a_node_slow_both_ways_and_on_receive():
    both = _pairs.search(ring(4, l2_3=1, l3_2=1, l2_1=1, l1_2=1), 5.0, HOSTS)
    assert (both["node"], both["side"]) == (2, "both")
    receive = _pairs.search(ring(4, l1_2=1, l3_2=1), 5.0, HOSTS)
    assert (receive["node"], receive["side"]) == (2, "receive")


def test_two_nodes_name_the_sender_of_the_slow_direction():
    found = _pairs.search(transfers({(0, 1): 1.2, (1, 0): 0.012}), 0.05, {0: "cpu-01", 1: "cpu-02"})
    assert (found["node"], found["side"]) == (1, "send")
    found = _pairs.search(transfers({(0, 1): 0.012, (1, 0): 1.2}), 0.05, {0: "cpu-01", 1: "cpu-02"})
    assert (found["node"], found["side"]) == (0, "send")


def test_no_single_node_when_every_link_or_one_link_is_slow():
    everything = _pairs.search(ring(4, fast=1.0), 5.0, HOSTS)
    assert everything["node"] is None and len(everything["slow"]) == 8
    one_link = _pairs.search(ring(4, l0_1=1), 5.0, HOSTS)
    # One direction of one cable: both ends have other, fast links, so the link is named, not a node.
    assert one_link["node"] is None and [(x["src"], x["dst"]) for x in one_link["slow"]] == [(0, 1)]
    two_links = _pairs.search(ring(5, l0_1=1, l2_3=1), 5.0, HOSTS)
    assert two_links["node"] is None and {(x["src"], x["dst"]) for x in two_links["slow"]} == {(0, 1), (2, 3)}


def test_without_a_floor_an_outlier_is_slow():
    found = _pairs.search(ring(4, l1_2=0.1, l1_0=0.1), None, HOSTS)
    assert found["threshold_gbps"] == 5.0 and (found["node"], found["side"]) == (1, "send")
    assert _pairs.search([], 1.0, HOSTS)["slowest"] is None
