"""The image stream protocol (module_utils/_image/_stream.py): both ends prove the run's secret, the
keyed digest catches an altered stream, and the one frame loop of each end (receive, Sender)."""
from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._image._stream import (
    AUTH,
    DATA,
    MAGIC,
    MAX_HELLO,
    PreAuth,
    Sender,
    StreamError,
    StreamMac,
    StreamRefused,
    client_handshake,
    json_frame,
    new_nonce,
    read_json,
    receive,
    refuse,
    send_ack,
    server_handshake,
)

REF = "lanekit/thin:aaaaaaaaaaaa"
HASH = "a" * 64


def run_pair(server_side, client_side):
    left, right = socket.socketpair()
    left.settimeout(5)
    right.settimeout(5)
    outcome = {}

    def serve():
        try:
            outcome["server"] = server_side(left)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            outcome["server_error"] = exc

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        outcome["client"] = client_side(right)
    except Exception as exc:  # noqa: BLE001
        outcome["client_error"] = exc
    right.close()
    thread.join(timeout=10)
    left.close()
    return outcome


def test_both_ends_with_the_secret_agree_on_a_session_key():
    out = run_pair(lambda s: server_handshake(s, "s3cret"),
                   lambda s: client_handshake(s, "s3cret", "node-1", {"content_hash": HASH, "have": []}))
    request, client, key = out["server"]
    assert request == {"content_hash": HASH, "have": []} and client == "node-1"
    assert out["client"] == key and len(key) == 32


def test_a_server_without_the_secret_is_refused_before_the_client_proves_anything():
    seen = []

    def fake_server(sock):
        seen.append(read_json(sock))
        sock.sendall(json_frame(AUTH, {"magic": MAGIC, "nonce": new_nonce(), "proof": "0" * 64}))
        sock.settimeout(1)
        try:
            seen.append(sock.recv(100))
        except TimeoutError:
            seen.append(b"(nothing)")

    out = run_pair(fake_server, lambda s: client_handshake(s, "s3cret", "n", {"content_hash": HASH}))
    assert isinstance(out["client_error"], StreamRefused)
    assert "could not prove it holds this run's secret" in str(out["client_error"])
    assert "proof" not in seen[0] and seen[1] in (b"", b"(nothing)")  # the client sent no proof


def test_a_server_speaking_the_old_protocol_is_refused():
    def old_server(sock):
        sock.recv(1000)
        sock.sendall(b'{"ok": true}\n' + bytes(100))

    out = run_pair(old_server, lambda s: client_handshake(s, "s3cret", "n", {}))
    assert isinstance(out["client_error"], StreamRefused)


def test_a_client_without_the_secret_is_refused():
    out = run_pair(lambda s: server_handshake(s, "s3cret"),
                   lambda s: client_handshake(s, "guess", "intruder", {"content_hash": HASH}))
    assert isinstance(out["client_error"], StreamRefused)  # it cannot check the server's proof either
    out = run_pair(lambda s: server_handshake(s, "s3cret"), _client_that_skips_the_server_check)
    assert isinstance(out["server_error"], StreamRefused) and "intruder" in str(out["server_error"])


def _client_that_skips_the_server_check(sock):
    sock.sendall(json_frame(AUTH, {"magic": MAGIC, "client": "intruder", "nonce": new_nonce()}))
    read_json(sock)
    sock.sendall(json_frame(AUTH, {"request": {"content_hash": HASH}, "proof": "f" * 64}))
    return read_json(sock)


def test_the_stream_digest_catches_an_altered_byte_and_a_short_stream():
    key = b"k" * 32
    sender = StreamMac(key)
    sent = sender.frame(DATA, b"hello world")
    end = json.loads(sender.end_frame()[9:])
    good = StreamMac(key)
    good.head(DATA, 11)
    good.update(sent[9:])
    good.check_end(end)
    altered = StreamMac(key)
    altered.head(DATA, 11)
    altered.update(b"hellO world")
    with pytest.raises(StreamRefused, match="altered"):
        altered.check_end(end)
    short = StreamMac(key)
    with pytest.raises(StreamRefused, match="announced 11"):
        short.check_end(end)


# -- issue 22: the handshake before the peer proved anything ------------------------------------------
def test_an_over_long_hello_is_refused_before_it_is_read():
    def client(sock):
        sock.sendall(b"A" + (MAX_HELLO + 1).to_bytes(8, "big"))  # and never the payload
        return sock.recv(100)

    def server(sock):
        try:
            return server_handshake(sock, "s3cret", 5)
        finally:
            sock.close()

    out = run_pair(server, client)
    assert out["client"] == b""  # closed at once, not after the deadline
    assert isinstance(out["server_error"], StreamRefused) and "over-long" in str(out["server_error"])


def test_the_handshake_has_one_deadline_however_slowly_the_bytes_come():
    def trickle(sock):
        for byte in b"A" + (50).to_bytes(8, "big") + b"{" * 50:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                return
            time.sleep(0.1)  # far inside any per-read timeout

    took = {}

    def server(sock):
        start = time.monotonic()
        try:
            return server_handshake(sock, "s3cret", 0.5)
        finally:
            took["seconds"] = time.monotonic() - start
            sock.close()  # the trickling client then sees the connection gone

    out = run_pair(server, trickle)
    assert isinstance(out["server_error"], StreamRefused) and "in time" in str(out["server_error"])
    assert 0.4 < took["seconds"] < 1.5


def test_pre_auth_admits_a_few_per_address_and_frees_a_slot_when_one_proves_itself():
    limit = PreAuth(per_peer=2, total=3)
    assert limit.admit("10.0.0.9") and limit.admit("10.0.0.9")
    assert not limit.admit("10.0.0.9")  # a third from that address
    assert limit.admit("10.0.0.2")
    assert not limit.admit("10.0.0.3")  # all three slots held
    limit.release("10.0.0.9")
    assert limit.admit("10.0.0.3") and limit.count() == 3


# -- issue 24: one frame loop for the plain stream and every relay hop ---------------------------------
KEY = b"k" * 32


def sent_by(steps, key=KEY):
    """Run ``steps(sender)`` against a Sender on one end of a socket pair; returns the other end."""
    left, right = socket.socketpair()
    left.settimeout(5)
    right.settimeout(5)
    steps(Sender(left, key))
    left.close()
    return right


def received(sock, **kw):
    chunks = []
    headers = []
    header, end, count = receive(sock, KEY, headers.append, lambda chunk: chunks.append(bytes(chunk)), **kw)
    return header, end, count, headers, b"".join(chunks)


def test_what_a_sender_sends_the_receive_loop_reads_through_keep_alives():
    def steps(sender):
        sender.header({"ok": True, "offset": 0})
        sender.keepalive()
        sender.size({"bytes": 11})
        sender.data(b"hello ")
        sender.data_head(5)
        sender.data_piece(b"wo")
        sender.data_piece(b"rld")
        sender.keepalive()
        sender.end({"total": 11})

    header, end, count, headers, data = received(sent_by(steps))
    assert header == headers[0] == {"ok": True, "offset": 0} and len(headers) == 1
    assert data == b"hello world" and count == 11 and end["total"] == 11 and end["bytes"] == 11


def test_the_receive_loop_refuses_data_before_the_header_and_an_altered_digest():
    with pytest.raises(StreamRefused, match="D frame out of order"):
        received(sent_by(lambda sender: sender.data(b"x")))
    with pytest.raises(StreamRefused, match="without a header"):
        received(sent_by(lambda sender: sender.end()))
    # Another key (as good as an altered byte): the end frame's digest does not match.
    with pytest.raises(StreamRefused, match="altered"):
        received(sent_by(lambda sender: (sender.header({}), sender.size({"bytes": 1}), sender.data(b"x"), sender.end()),
                         key=b"o" * 32))


def test_an_error_frame_refuses_before_the_header_and_fails_after_it_or_on_a_relay_hop():
    with pytest.raises(StreamRefused, match="go away"):
        received(sent_by(lambda sender: refuse(sender.conn, "go away")))
    with pytest.raises(StreamError, match="go away") as failed:
        received(sent_by(lambda sender: refuse(sender.conn, "go away")), relay_hop=True)
    assert not isinstance(failed.value, StreamRefused)  # a hop's refusal is re-routed around, not a forgery
    with pytest.raises(StreamError, match="the save failed") as failed:
        received(sent_by(lambda sender: (sender.header({}), refuse(sender.conn, "the save failed"))))
    assert not isinstance(failed.value, StreamRefused)


def test_a_frame_cut_short_says_how_far_the_stream_got():
    def cut(sender):
        sender.header({})
        sender.size({"bytes": 13})
        sender.data(b"abc")
        sender.data_head(10)
        sender.data_piece(b"de")

    with pytest.raises(StreamError, match="ended after 5 bytes, before its end marker"):
        received(sent_by(cut))
    with pytest.raises(StreamError, match="closed in the middle of a frame"):
        received(sent_by(cut), relay_hop=True)


def test_the_end_frame_reaches_on_end_after_the_digest_matched():
    seen = []
    sock = sent_by(lambda sender: (sender.header({}), sender.size({"bytes": 3}), sender.data(b"abc"),
                                   sender.end({"origin": {"n": "sig"}})))
    receive(sock, KEY, lambda header: None, lambda chunk: None, on_end=lambda end, count: seen.append((end["origin"], count)))
    assert seen == [({"n": "sig"}, 3)]


def test_the_ack_counts_only_when_signed_with_the_connections_key():
    left, right = socket.socketpair()
    left.settimeout(5)
    right.settimeout(5)
    try:
        send_ack(right, KEY, {"loaded": True})
        ack = Sender(left, KEY).read_ack(5)
        assert ack["loaded"] is True and ack["mac"]
        send_ack(right, b"o" * 32, {"loaded": True})
        with pytest.raises(StreamRefused, match="not signed with this connection's key"):
            Sender(left, KEY).read_ack(5)
    finally:
        left.close()
        right.close()


# -- issue 38, item 4: no byte beyond the size the builder announced ------------------------------------
def announce(sender, fields):
    """An ``S`` frame (the archive's announced size) under the stream's digest, as a source sends it."""
    sender.conn.sendall(sender.mac.frame(b"S", json.dumps(fields).encode()))


def test_the_receive_loop_refuses_data_before_the_source_announced_the_size():
    with pytest.raises(StreamRefused, match="before it announced the size"):
        received(sent_by(lambda sender: (sender.header({}), sender.data(b"x" * 1000), sender.end())))


def test_the_receive_loop_takes_no_byte_beyond_the_announced_size():
    chunks = []

    def endless(sender):
        sender.header({})
        announce(sender, {"bytes": 5})
        sender.data(b"hello")
        sender.data(b"and on and on")
        sender.end()

    with pytest.raises(StreamRefused, match="more than the 5 bytes the builder announced"):
        receive(sent_by(endless), KEY, lambda header: None, lambda chunk: chunks.append(bytes(chunk)))
    assert b"".join(chunks) == b"hello"  # the frame beyond it was refused before a byte of it was read
    # A hop that starts at byte 3 of the archive (a re-routed relay node) may carry 2 of the 5.
    with pytest.raises(StreamRefused, match="more than the 5 bytes"):
        receive(sent_by(lambda sender: (sender.header({}), announce(sender, {"bytes": 5}), sender.data(b"lo!"))),
                KEY, lambda header: None, lambda chunk: None, start=3)


@pytest.mark.parametrize("fields", [{}, {"bytes": "5"}, {"bytes": -1}, {"bytes": True}])
def test_a_size_that_is_not_a_byte_count_is_refused(fields):
    with pytest.raises(StreamRefused, match="not a byte count"):
        received(sent_by(lambda sender: (sender.header({}), announce(sender, fields), sender.data(b"x"))))


def test_a_keep_alive_frame_carries_no_data():
    """A keep-alive with a payload is not data the end frame counts: it is refused, not spooled."""
    chunks = []
    sock = sent_by(lambda sender: (sender.header({}), sender.conn.sendall(sender.mac.frame(b"K", b"x" * 4096)),
                                   sender.end()))
    with pytest.raises(StreamRefused, match="keep-alive"):
        receive(sock, KEY, lambda header: None, lambda chunk: chunks.append(bytes(chunk)))
    assert chunks == []
