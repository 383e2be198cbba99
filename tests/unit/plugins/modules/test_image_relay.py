"""The image relay (module_utils/_image/_relay.py, _image/_relay_node.py; image_distribute method=relay):
the chain's links and re-route order, the builder's per-node origin signatures, the relay window, and
a chain builder -> node-0 -> node-1 -> node-2 end to end over loopback, with a node whose docker load
dies mid-chain and a relay that alters the bytes."""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._image._relay import (
    BUILDER,
    RelayAborted,
    RelayBehind,
    RelayServer,
    RelayWindow,
    chain_links,
    check_origin,
    origin_key,
    origin_map,
    relay_sources,
    size_announcement,
)
from ansible_collections.lanekit.serving.plugins.module_utils._image._stream import StreamError, StreamRefused
from tests.unit.plugins.modules.test_image_distribute import (
    HASH,
    REF,
    LoadingNode,
    free_port,
    save_argv,
    start_server,
)

SECRET = "o" * 64
BLOB = 3 << 20


# -- pure logic -----------------------------------------------------------------------------------
def test_chain_links_and_the_re_route_order():
    chain = ["n1", "n2", "n3"]
    assert chain_links(chain, "n1") == (None, "n2")
    assert chain_links(chain, "n2") == ("n1", "n3")
    assert chain_links(chain, "n3") == ("n2", None)
    with pytest.raises(StreamError, match="not in the relay chain"):
        chain_links(chain, "n9")
    peers = {"n1": "10.0.0.1:47111", "n2": "10.0.0.2:47111"}
    assert relay_sources(chain, "n1", peers, "b:47110") == [(BUILDER, "b:47110")]
    # The predecessor first, then the builder, which holds the whole spool.
    assert relay_sources(chain, "n3", peers, "b:47110") == [("n2", "10.0.0.2:47111"), (BUILDER, "b:47110")]


def test_an_origin_signature_is_only_good_for_its_node_and_its_bytes():
    digest = hashlib.sha256(b"archive").hexdigest()
    end = {"total": 7, "origin": origin_map(SECRET, ["n1", "n2"], REF, HASH, 7, digest)}
    check_origin(end, "n2", origin_key(SECRET, "n2"), REF, HASH, 7, digest, "n1")
    # n1 holds its own key, not n2's: it cannot sign altered bytes for n2.
    with pytest.raises(StreamRefused, match="relayed by n1 is not the one the builder sent"):
        check_origin(end, "n2", origin_key(SECRET, "n2"), REF, HASH, 7, hashlib.sha256(b"archivE").hexdigest(), "n1")
    with pytest.raises(StreamRefused, match="not the one the builder sent"):
        check_origin(end, "n2", origin_key(SECRET, "n1"), REF, HASH, 7, digest, "n1")
    with pytest.raises(StreamRefused, match="announced 7 bytes"):
        check_origin(end, "n2", origin_key(SECRET, "n2"), REF, HASH, 8, digest, "n1")


def test_the_origin_key_is_an_hmac_of_the_name_and_the_role_s_filter_makes_the_same():
    from ansible_collections.lanekit.serving.plugins.filter.origin_key import FilterModule
    expected = hmac.new(SECRET.encode(), b"lanekit-image-origin-key/1:n1", hashlib.sha256).hexdigest()
    assert origin_key(SECRET, "n1") == expected
    assert FilterModule().filters()["origin_key"](SECRET, "n1") == expected  # what the role gives node n1
    # Not the old sha256(secret:name), which a length extension or a ':' in a name could play with.
    assert origin_key(SECRET, "n1") != hashlib.sha256(f"{SECRET}:n1".encode()).hexdigest()
    assert origin_key(SECRET, "n1") != origin_key(SECRET, "n2")


def test_the_window_serves_readers_from_their_offset_and_keeps_only_its_limit():
    window = RelayWindow(1 << 20, stall=5)
    for _third in range(3):
        window.append(b"x" * (1 << 19))
    reader = window.join(1 << 19)
    got = window.read(reader, 0.01) + window.read(reader, 0.01)
    assert got == b"x" * (1 << 20)  # from its offset to the end
    assert window.read(reader, 0.01) is None  # nothing new yet: a keep-alive
    window.finish({"total": 3 << 19})
    assert window.read(reader, 0.01) == b""
    window.leave(reader)
    with pytest.raises(RelayBehind):
        window.join(0)  # trimmed: that successor must ask the builder
    window.abort("load failed")
    with pytest.raises(RelayAborted, match="load failed"):
        window.join(3 << 19)


def join_late(window, delay=0.3):
    """A first successor that joins the window at offset 0 after ``delay`` s: (its thread, {"reader": ...})."""
    late = {}

    def join():
        time.sleep(delay)
        late["reader"] = window.join(0)

    joiner = threading.Thread(target=join)
    joiner.start()
    return joiner, late


def test_the_window_waits_for_a_late_first_reader_instead_of_trimming_what_it_needs():
    window = RelayWindow(1 << 20, stall=5, wait_first=10)
    window.append(b"z" * (1 << 20))
    joiner, late = join_late(window)
    window.append(b"z" * 10)  # would trim offset 0: waits for the reader instead
    joiner.join()
    assert window.base == 0 and window.read(late["reader"], 0.01)[:1] == b"z"
    nobody = RelayWindow(1 << 20, stall=5, wait_first=0.2)
    nobody.append(b"z" * (1 << 20))
    nobody.append(b"z" * (1 << 20))  # nobody came within wait_first: the window moves on
    assert nobody.base > 0


def test_a_reader_that_stalls_is_dropped_instead_of_stalling_the_node():
    window = RelayWindow(1 << 20, stall=0.3)
    reader = window.join(0)
    window.append(b"y" * (1 << 20))
    window.append(b"y" * 10)  # now more than the limit ahead of the reader
    assert window.append(b"y" * 10) == [reader]  # waited the stall, then dropped it
    assert reader in window.dropped
    with pytest.raises(RelayAborted, match="dropped"):
        window.read(reader, 0.01)


# -- the chain end to end over loopback ---------------------------------------------------------
def relay_params(port, names, relay_ports, me):
    return dict(method="relay", delta=False, relay_chain=names, relay_bind="127.0.0.1",
                relay_port=relay_ports[me], relay_peers={n: f"127.0.0.1:{p}" for n, p in relay_ports.items()},
                relay_stall=10.0, relay_connect_timeout=20, relay_buffer_mib=1, origin_key=origin_key(SECRET, me),
                source=f"127.0.0.1:{port}")


def run_chain(tmp_path, names, loads=None, stop=True):
    port = free_port()
    stop_file = tmp_path / "stop"
    thread, outcome, _module = start_server(tmp_path, port, save_argv(blob_size=BLOB), clients=len(names),
                                            blob_size=BLOB, origin_secret=SECRET, origin_nodes=names,
                                            stop_file=str(stop_file), idle_timeout=30)
    relay_ports = {name: free_port() for name in names}
    nodes = {name: LoadingNode(tmp_path, name, blob_size=BLOB) for name in names}
    results = {}

    def run(name):
        try:
            extra = relay_params(port, names, relay_ports, name)
            if loads and name in loads:
                results[name] = nodes[name].run_with_load(port, loads[name], **extra)
            else:
                results[name] = nodes[name].run(port, **extra)
        except LanekitError as err:
            results[name] = {"error": str(err)}

    threads = [threading.Thread(target=run, args=(name,)) for name in names]
    for worker in threads:
        worker.start()
    for worker in threads:
        worker.join(timeout=90)
    if stop:
        stop_file.write_text("")
    thread.join(timeout=30)
    return nodes, results, outcome


def _run_with_load(self, port, load, **extra):
    """LoadingNode.run with another docker load (a failing one)."""
    from ansible_collections.lanekit.serving.plugins.modules.image_distribute import ImageDistributor
    from tests.unit.helpers.docker import FakeModule
    from tests.unit.plugins.modules.test_image_distribute import StreamDocker
    params = dict(ref=REF, content_hash=HASH, rootfs=self.pin["rootfs"], config=self.pin["config"],
                  registry_ref=None, token="s3cret", client_name=self.name, connect_timeout=10, stream_timeout=10,
                  probe="arrival", probe_command=["/bin/sh", "-c", "true"], probe_timeout=10, docker_cli=None,
                  spool_dir=str(self.spool_dir))
    params.update(extra)
    self.module = FakeModule(params, responder=self.responder)
    return ImageDistributor(self.module, StreamDocker(self.module, lambda args: load)).run()


LoadingNode.run_with_load = _run_with_load


def test_a_chain_loads_every_node_and_the_builder_serves_only_the_first(tmp_path):
    names = ["node-0", "node-1", "node-2"]
    nodes, results, outcome = run_chain(tmp_path, names)
    for name in names:
        assert results[name].get("action") == "loaded", results[name]
        assert nodes[name].tagged() == [REF]
        assert results[name]["bytes"] > BLOB and results[name]["rerouted"] == []
    assert [item["client"] for item in outcome["served"]] == ["node-0"]
    assert [item["client"] for item in results["node-0"]["relayed"]] == ["node-1"]
    assert results["node-1"]["relayed"][0]["loaded"] is True
    assert "loaded" in results["node-2"]["summary"] and "from the relay" in results["node-2"]["summary"]


def test_a_node_whose_load_dies_mid_chain_fails_by_name_and_still_relays(tmp_path):
    names = ["node-0", "node-1", "node-2"]
    # docker load on node-1 reads 256 KiB of the archive and dies.
    dying = [sys.executable, "-c", "import sys, time; sys.stdin.buffer.read(262144); sys.exit(1)"]
    nodes, results, outcome = run_chain(tmp_path, names, loads={"node-1": dying})
    assert "docker load on" in results["node-1"]["error"] and "exit 1" in results["node-1"]["error"]
    assert not nodes["node-1"].tagged()
    for name in ("node-0", "node-2"):
        assert results[name].get("action") == "loaded", results[name]
        assert nodes[name].tagged() == [REF]
    # node-1 loads from its spool once the bytes are proven; its successor already has them (or gets
    # them from its window) whatever node-1's own load does, so nobody re-routes.
    assert results["node-2"]["rerouted"] == []
    assert [item["client"] for item in outcome["served"]] == ["node-0"]


def test_a_relay_that_alters_the_bytes_is_caught_and_the_node_loads_from_the_builder(tmp_path):
    archive = subprocess.run(save_argv(blob_size=BLOB), capture_output=True, check=True).stdout
    names = ["evil", "node-1"]
    port = free_port()
    thread, outcome, _module = start_server(tmp_path, port, save_argv(blob_size=BLOB), clients=2, blob_size=BLOB,
                                            origin_secret=SECRET, origin_nodes=names, idle_timeout=30,
                                            stop_file=str(tmp_path / "stop"))
    # The evil relay holds the run's token (every node does) and forwards the builder's signatures,
    # but one byte of a layer is changed.
    altered = bytearray(archive)
    altered[len(altered) // 2] ^= 0xFF
    window = RelayWindow(64 << 20, stall=5)
    window.announce(size_announcement(SECRET, names, REF, HASH, len(archive)))  # the builder's, passed on
    window.append(bytes(altered))
    signatures = origin_map(SECRET, names, REF, HASH, len(archive), hashlib.sha256(archive).hexdigest())
    window.finish({"total": len(archive), "origin": signatures})
    evil = RelayServer(window, "s3cret", "evil", REF, HASH, keepalive=0.2, ack_timeout=10)
    evil_port = free_port()
    evil.listen("127.0.0.1", evil_port)
    node = LoadingNode(tmp_path, "node-1", blob_size=BLOB)
    try:
        result = node.run(port, **relay_params(port, names, {"evil": evil_port, "node-1": free_port()}, "node-1"))
    finally:
        evil.close()
        (tmp_path / "stop").write_text("")
        thread.join(timeout=30)
    assert result["action"] == "loaded" and node.tagged() == [REF]
    assert result["rerouted"][0]["node"] == "evil" and "not the one the builder sent" in result["rerouted"][0]["reason"]
    assert [item["client"] for item in outcome["served"]] == ["node-1"]  # it started over from the builder


def test_the_wait_for_the_first_reader_counts_from_the_first_byte_not_from_the_window():
    """The builder's docker save may take longer than the wait before any byte flows: the wait
    must still hold the start of the stream for a successor that joins soon after the bytes."""
    clock = {"now": 0.0}
    window = RelayWindow(1 << 20, stall=5, clock=lambda: clock["now"], wait_first=10)
    clock["now"] = 60.0  # a minute of docker save before the first byte
    window.append(b"z" * (1 << 20))
    assert window.first_deadline == 70.0
    reader = window.join(0)  # the successor joins now: offset 0 is still in the window
    assert window.read(reader, 0.01)[:1] == b"z"


def test_the_append_that_would_overfill_the_window_waits_for_the_first_reader_too():
    """Not only a full window: the bytes coming in count, or the step from almost full to over full
    trims offset 0 before the first successor joins (the chain then degrades to a star for it)."""
    window = RelayWindow(1 << 20, stall=5, wait_first=10)
    for _piece in range(16):  # a stream arrives in pieces; the window trims whole pieces
        window.append(b"a" * 65528)
    joiner, late = join_late(window)
    window.append(b"b" * 223224)  # over the limit: waits for the reader instead of trimming
    joiner.join()
    assert window.base == 0 and window.read(late["reader"], 0.01)[:1] == b"a"


# -- issue 22 ------------------------------------------------------------------------------------------
def evil_window(data, names, genuine):
    """A relay window holding ``data`` with the builder's size announcement and signatures of ``genuine``."""
    window = RelayWindow(64 << 20, stall=5)
    window.announce(size_announcement(SECRET, names, REF, HASH, len(genuine)))
    window.append(data)
    window.finish({"total": len(genuine), "origin": origin_map(SECRET, names, REF, HASH, len(genuine),
                                                               hashlib.sha256(genuine).hexdigest())})
    return window


def test_a_relay_hiding_an_archive_behind_a_pax_size_never_reaches_docker_load(tmp_path):
    """The crafted archive of issue 22: a member whose PAX size hides a whole archive (manifest.json
    naming another tag, and its own end marker). docker load would tag at that end marker; the node
    hands docker nothing before the builder's signature over every byte matched."""
    from tests.unit.plugins.module_utils._image.test__targate import crafted, hidden_archive
    genuine = subprocess.run(save_argv(blob_size=BLOB), capture_output=True, check=True).stdout
    names = ["evil", "node-1"]
    port = free_port()
    thread, outcome, _module = start_server(tmp_path, port, save_argv(blob_size=BLOB), clients=2, blob_size=BLOB,
                                            origin_secret=SECRET, origin_nodes=names, idle_timeout=30,
                                            stop_file=str(tmp_path / "stop"))
    evil = RelayServer(evil_window(crafted(outer=genuine, hidden=hidden_archive()), names, genuine),
                       "s3cret", "evil", REF, HASH, keepalive=0.2, ack_timeout=10)
    evil_port = free_port()
    evil.listen("127.0.0.1", evil_port)
    node = LoadingNode(tmp_path, "node-1", blob_size=BLOB)
    try:
        result = node.run(port, **relay_params(port, names, {"evil": evil_port, "node-1": free_port()}, "node-1"))
    finally:
        evil.close()
        (tmp_path / "stop").write_text("")
        thread.join(timeout=30)
    assert result["action"] == "loaded" and result["rerouted"][0]["node"] == "evil"
    assert node.loads() == [len(genuine)]  # docker load ran once, on the builder's bytes only
    assert node.tagged() == [REF]  # the hidden archive's tags never reached it


def test_a_relay_that_corrupts_then_drops_makes_its_successor_start_over_not_fail(tmp_path):
    from ansible_collections.lanekit.serving.plugins.module_utils._image._stream import (
        DATA,
        HEADER,
        SIZE,
        StreamMac,
        server_handshake,
    )
    genuine = subprocess.run(save_argv(blob_size=BLOB), capture_output=True, check=True).stdout
    altered = bytearray(genuine[:len(genuine) // 2])
    altered[len(altered) // 2] ^= 0xFF
    names = ["evil", "node-1"]
    port, evil_port = free_port(), free_port()
    thread, outcome, _module = start_server(tmp_path, port, save_argv(blob_size=BLOB), clients=2, blob_size=BLOB,
                                            origin_secret=SECRET, origin_nodes=names, idle_timeout=30,
                                            stop_file=str(tmp_path / "stop"))
    listener = socket.create_server(("127.0.0.1", evil_port))

    def corrupt_then_drop():  # half the archive, one byte changed, then gone
        conn, _addr = listener.accept()
        with conn:
            _request, _client, key = server_handshake(conn, "s3cret")
            mac = StreamMac(key)
            conn.sendall(mac.frame(HEADER, b'{"ok": true, "offset": 0, "skipped_layers": 0}'))
            conn.sendall(mac.frame(SIZE, json.dumps(size_announcement(SECRET, names, REF, HASH, len(genuine))).encode()))
            conn.sendall(mac.frame(DATA, bytes(altered)))
        listener.close()

    evil = threading.Thread(target=corrupt_then_drop)
    evil.start()
    node = LoadingNode(tmp_path, "node-1", blob_size=BLOB)
    try:
        result = node.run(port, **relay_params(port, names, {"evil": evil_port, "node-1": free_port()}, "node-1"))
    finally:
        evil.join(timeout=10)
        (tmp_path / "stop").write_text("")
        thread.join(timeout=30)
    # Dropped: the rest from the builder; the builder's signature fails over the whole; start over at 0.
    assert result["action"] == "loaded" and node.tagged() == [REF] and node.loads() == [len(genuine)]
    assert [item["node"] for item in result["rerouted"]] == ["evil", "evil"]
    assert "not the one the builder sent" in result["rerouted"][1]["reason"]
    assert [item["client"] for item in outcome["served"]] == ["node-1", "node-1"]


def fetch_from(port, name, token="s3cret", ack_mac_wrong=False):
    """A client of a relay listener: handshake as ``name``, read to the end, acknowledge."""
    from ansible_collections.lanekit.serving.plugins.module_utils._image._stream import (
        AUTH,
        END,
        ERROR,
        ack_mac,
        client_handshake,
        json_frame,
        read_head,
        recv_exact,
    )
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(10)
    try:
        key = client_handshake(sock, token, name, {"content_hash": HASH, "have": [], "offset": 0, "relay": True})
        got = 0
        while True:
            kind, length = read_head(sock)
            payload = recv_exact(sock, length)
            if kind == ERROR:
                return payload.decode()
            got += length if kind == b"D" else 0
            if kind == END:
                break
        ack = {"loaded": True, "error": ""}
        ack["mac"] = "0" * 64 if ack_mac_wrong else ack_mac(key, ack)
        sock.sendall(json_frame(AUTH, ack))
        return got
    finally:
        sock.close()


def served_records(server, count):
    with server.lock:
        server.lock.wait_for(lambda: len(server.records) >= count and server.active == 0, 10)
        return list(server.records)


def test_a_relay_serves_only_its_named_successor_and_checks_its_acknowledgement():
    window = RelayWindow(1 << 20, stall=5)
    window.append(b"q" * 1000)
    window.finish({"total": 1000, "origin": {}})
    server = RelayServer(window, "s3cret", "n1", REF, HASH, keepalive=0.2, ack_timeout=5, successor="n2")
    port = free_port()
    server.listen("127.0.0.1", port)
    try:
        # Another token holder (every node holds the run's secret) is not n1's successor.
        assert "relays only to n2" in fetch_from(port, "n3")
        assert fetch_from(port, "n2", ack_mac_wrong=True) == 1000
        # The client returns once its acknowledgement is sent; the server may still be checking
        # it (a loaded machine), and until then a second connection is "already relays".
        deadline = time.monotonic() + 10
        while server.reading and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fetch_from(port, "n2") == 1000
        records = served_records(server, 3)
    finally:
        server.close()
    assert records[0]["client"] == "n3" and records[0]["bytes"] == 0 and "not the successor" in records[0]["error"]
    assert not records[1]["acked"] and not records[1]["loaded"] and "not signed" in records[1]["error"]
    assert records[2]["acked"] and records[2]["loaded"]


def test_a_successor_that_reads_below_the_minimum_rate_is_dropped():
    window = RelayWindow(1 << 20, stall=0.4, min_rate=50 << 20)  # 50 MiB/s: far above this reader's pace
    reader = window.join(0)
    window.append(b"y" * (1 << 20))
    window.append(b"y" * (1 << 20))  # now 2 MiB ahead of the reader: the next append waits for it
    stop = threading.Event()

    def crawl():  # keeps reading, a few KiB at a time: never stalled, just slow
        while not stop.is_set():
            try:
                with window.cond:
                    if reader in window.dropped:
                        return
                    window.readers[reader] += 4096
                    window.cond.notify_all()
            except KeyError:
                return
            time.sleep(0.05)

    crawler = threading.Thread(target=crawl)
    crawler.start()
    start = time.monotonic()
    dropped = window.append(b"y" * 10)
    stop.set()
    crawler.join()
    assert dropped == [reader] and 0.3 < time.monotonic() - start < 10  # dropped, not waited for forever
    fast = RelayWindow(1 << 20, stall=0.4, min_rate=0)  # min rate 0: a crawling reader is waited for
    assert fast.min_rate == 0


# -- issue 38, item 4: a token holder cannot make a node take more than the builder announced -----------
def test_an_announced_size_is_only_good_with_the_builder_s_signature_for_the_node():
    from ansible_collections.lanekit.serving.plugins.module_utils._image._relay import (
        check_size_announcement,
        size_announcement,
    )
    size = size_announcement(SECRET, ["n1", "n2"], REF, HASH, 7)
    assert size["bytes"] == 7
    assert check_size_announcement(size, "n2", origin_key(SECRET, "n2"), REF, HASH, "n1") == 7
    # n1 holds its own key, not n2's: it cannot announce a larger archive to n2.
    with pytest.raises(StreamRefused, match="n1 announced 8 bytes without the builder's signature for n2"):
        check_size_announcement(dict(size, bytes=8), "n2", origin_key(SECRET, "n2"), REF, HASH, "n1")
    with pytest.raises(StreamRefused, match="without the builder's signature"):
        check_size_announcement(size, "n2", origin_key(SECRET, "n1"), REF, HASH, "n1")
    # An announcement is not an end frame's signature of the same count, nor another image's.
    end_signature = origin_map(SECRET, ["n2"], REF, HASH, 7, hashlib.sha256(b"archive").hexdigest())["n2"]
    with pytest.raises(StreamRefused, match="without the builder's signature"):
        check_size_announcement({"bytes": 7, "origin": {"n2": end_signature}}, "n2", origin_key(SECRET, "n2"),
                                REF, HASH, "n1")
    with pytest.raises(StreamRefused, match="without the builder's signature"):
        check_size_announcement(size, "n2", origin_key(SECRET, "n2"), REF, "b" * 64, "n1")


@pytest.mark.parametrize("forged", [False, True])
def test_a_relay_that_sends_more_than_the_builder_announced_is_cut_off_and_the_node_loads_from_the_builder(
        tmp_path, monkeypatch, forged):
    """A predecessor holds the run's secret: it forwards the builder's announced size and then sends
    on and on (or announces a larger size of its own). The node takes no byte beyond the builder's
    announcement, forgets what it got, and loads from the builder; its spool never held more."""
    from ansible_collections.lanekit.serving.plugins.module_utils._image import _spool
    from ansible_collections.lanekit.serving.plugins.module_utils._image._stream import (
        DATA,
        HEADER,
        StreamMac,
        server_handshake,
    )
    genuine = subprocess.run(save_argv(blob_size=BLOB), capture_output=True, check=True).stdout
    names = ["evil", "node-1"]
    if forged:
        size = {"bytes": 1 << 40, "origin": {name: "0" * 64 for name in names}}
    else:  # the builder's own announcement, as the relay received it
        size = {"bytes": len(genuine), "origin": {
            name: hmac.new(origin_key(SECRET, name).encode(), "\0".join(
                ["lanekit-image-size/1", REF, HASH, str(len(genuine))]).encode(), hashlib.sha256).hexdigest()
            for name in names}}
    spooled = []
    write = _spool.ReceiveSpool.write

    def counting_write(self, data):
        write(self, data)
        spooled.append(self.size)

    monkeypatch.setattr(_spool.ReceiveSpool, "write", counting_write)
    port, evil_port = free_port(), free_port()
    thread, _outcome, _module = start_server(tmp_path, port, save_argv(blob_size=BLOB), clients=2, blob_size=BLOB,
                                             origin_secret=SECRET, origin_nodes=names, idle_timeout=30,
                                             stop_file=str(tmp_path / "stop"))
    listener = socket.create_server(("127.0.0.1", evil_port))

    def on_and_on():  # the archive, then 32 MiB more (bounded only so the old code ends too)
        conn, _addr = listener.accept()
        with conn:
            _request, _client, key = server_handshake(conn, "s3cret")
            mac = StreamMac(key)
            try:
                conn.sendall(mac.frame(HEADER, b'{"ok": true, "offset": 0, "skipped_layers": 0}'))
                conn.sendall(mac.frame(b"S", json.dumps(size).encode()))
                conn.sendall(mac.frame(DATA, genuine))
                for _mib in range(32):
                    conn.sendall(mac.frame(DATA, bytes(1 << 20)))
                conn.sendall(mac.end_frame({"total": len(genuine) + (32 << 20), "origin": {}}))
            except OSError:
                pass  # the node hung up once it had enough
        listener.close()

    evil = threading.Thread(target=on_and_on)
    evil.start()
    node = LoadingNode(tmp_path, "node-1", blob_size=BLOB)
    try:
        result = node.run(port, **relay_params(port, names, {"evil": evil_port, "node-1": free_port()}, "node-1"))
    finally:
        evil.join(timeout=30)
        (tmp_path / "stop").write_text("")
        thread.join(timeout=30)
    assert result["action"] == "loaded" and node.tagged() == [REF] and node.loads() == [len(genuine)]
    reason = result["rerouted"][0]["reason"]
    assert result["rerouted"][0]["node"] == "evil"
    if forged:
        assert "evil announced 1099511627776 bytes without the builder's signature for node-1" in reason
    else:
        assert f"more than the {len(genuine)} bytes the builder announced" in reason
    assert max(spooled) == len(genuine)  # never more than the builder's size in the spool
    assert os.listdir(node.spool_dir) == []  # and nothing left under a name
