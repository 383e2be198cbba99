# Copyright: lanekit developers
# Apache-2.0
"""Issue 38, item 2: whose is the port the key would go to (module_utils/_boot/_portowner.py), read from a fake
/proc: the listening socket's inode, the process holding it, and whether that process is the rank container's."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._boot import _portowner as owner
from tests.unit.helpers.procfs import CONTAINER_ID, ENGINE_CGROUP, FakeProc

URL = "http://10.0.0.1:8000"


@pytest.fixture
def proc(tmp_path):
    fake = FakeProc(tmp_path / "proc")
    fake.process(1, ppid=0, comm="systemd")
    fake.process(40, ppid=1, comm="containerd-shim")
    return fake


def rank(inspect):
    return owner.RankContainer.of("lk-r0", inspect)


def test_the_engine_of_the_rank_container_may_have_the_key(proc):
    inspect = proc.rank_container(inode=9001)
    proc.listen(8000, 9001, "0.0.0.0")
    proc.listen(8000, 9002, "10.0.0.1", state="01")  # a client's connection: not a listener
    proc.listen(9000, 9003, "0.0.0.0")
    proc.process(4242, ppid=1, comm="nc", uid=1001, sockets=(9003,))
    assert owner.key_refusal(URL, rank(inspect), proc.root) == ""


def test_a_squatter_on_the_api_port_is_named_with_the_fix(proc):
    inspect = proc.rank_container()
    proc.listen(8000, 9001, "0.0.0.0")
    proc.process(4242, ppid=1, comm="nc", uid=1001, sockets=(9001,))
    refusal = owner.key_refusal(URL, rank(inspect), proc.root)
    assert refusal.startswith("port 8000 on this node is held by process 4242 (nc, uid 1001), not by the rank "
                              "container lk-r0: the lane's API key was not sent to it.")
    assert "Stop that process" in refusal and "restart" in refusal


def test_a_squatter_before_the_rank_runs_is_named_too(proc):
    proc.listen(8000, 9001, "10.0.0.1")
    proc.process(4242, ppid=1, comm="nc", uid=1001, sockets=(9001,))
    refusal = owner.key_refusal(URL, rank({"Id": CONTAINER_ID, "State": {"Running": False, "Pid": 0}}), proc.root)
    assert "held by process 4242 (nc, uid 1001), not by the rank container lk-r0 (it does not run)" in refusal
    assert "held by process 4242" in owner.key_refusal(URL, rank(None), proc.root)


def test_a_cgroup_named_after_the_container_is_not_the_containers(proc):
    # A user with a delegated cgroup tree can name a cgroup after the id: only the container's own
    # cgroup (its init's) and what lies beneath it count.
    inspect = proc.rank_container()
    proc.listen(8000, 9001, "0.0.0.0")
    proc.process(4242, ppid=1, comm="python3", uid=1001, sockets=(9001,),
                 cgroup=f"0::/user.slice/user-1001.slice/user@1001.service/app.slice/{CONTAINER_ID}")
    assert "held by process 4242 (python3, uid 1001)" in owner.key_refusal(URL, rank(inspect), proc.root)


def test_a_process_in_the_containers_cgroup_is_the_containers(proc):
    # docker exec: not a descendant of the container's init, but in its cgroup.
    inspect = proc.rank_container()
    proc.listen(8000, 9001, "::")
    proc.process(77, ppid=40, comm="python3", sockets=(9001,), cgroup=ENGINE_CGROUP)
    assert owner.key_refusal(URL, rank(inspect), proc.root) == ""


def test_only_the_listeners_a_connection_to_the_address_reaches_count(proc):
    inspect = proc.rank_container(inode=9001)
    proc.listen(8000, 9001, "10.0.0.1")
    proc.listen(8000, 9002, "127.0.0.1")  # another service on loopback: not where the probe goes
    proc.process(4242, ppid=1, comm="nc", uid=1001, sockets=(9002,))
    assert owner.key_refusal(URL, rank(inspect), proc.root) == ""
    assert "held by process 4242" in owner.key_refusal("http://127.0.0.1:8000", rank(inspect), proc.root)
    # A wildcard listener of someone else faces every address, IPv6 ones too.
    proc.listen(8000, 9003, "::")
    proc.process(4343, ppid=1, comm="socat", uid=1002, sockets=(9003,))
    assert "held by process 4343 (socat, uid 1002)" in owner.key_refusal(URL, rank(inspect), proc.root)


def test_a_holder_this_probe_cannot_see_keeps_the_key(proc):
    inspect = proc.rank_container()
    proc.listen(8000, 9001, "0.0.0.0")
    refusal = owner.key_refusal(URL, rank(inspect), proc.root)
    assert refusal.startswith("port 8000 on this node is held by a process this probe cannot see")
    assert "the lane's API key was not sent" in refusal


def test_an_address_no_socket_of_this_node_listens_on_keeps_the_key(proc):
    inspect = proc.rank_container(inode=9001)
    proc.listen(8000, 9001, "10.0.0.1")
    refusal = owner.key_refusal("http://10.0.0.9:8000", rank(inspect), proc.root)
    assert refusal.startswith("nothing on this node listens on 10.0.0.9:8000")
    assert "api.address" in refusal


def test_no_known_rank_container_keeps_the_key(proc):
    proc.listen(8000, 9001, "0.0.0.0")
    refusal = owner.key_refusal(URL, None, proc.root)
    assert refusal.startswith("no rank container on this node is named as the one answering port 8000")


def test_kernel_addresses_read_as_text():
    assert owner.hex_address("0100007F") == "127.0.0.1"
    assert owner.hex_address("0000000000000000FFFF00000BD51FAC") == "172.31.213.11"
    assert owner.hex_address("00000000000000000000000000000000") == "::"
