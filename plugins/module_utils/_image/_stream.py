# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The node-to-node image stream protocol: mutual proof of the run's secret, typed frames under a
keyed digest of the whole stream, and the one frame loop of each end (:func:`receive` for a target,
:class:`Sender` for a source). The tar gate that keeps a ``docker save`` archive's tags away from
``docker load`` until the stream and the image it names are proven is ``_targate``.

Pure (sockets are any object with ``sendall``/``recv``): the plain stream (``_stream_server`` in
``image_serve``, ``_stream_client`` in ``image_distribute``) and every relay hop (``_relay``,
``_relay_node``) share it, and a node that forwards what it receives can run both ends with the
same secret (every hop authenticates and checks its own digest).

One TCP connection, frames of ``type (1 byte) + length (8 bytes, big endian) + payload``:

- ``A`` (auth, JSON) target -> source ``{"magic", "client", "nonce"}``; source -> target
  ``{"magic", "nonce", "proof"}`` with ``proof = HMAC(secret, "server" | nonces)``. The target
  checks it before it says anything else, so a process that took the port without the secret is
  refused and never learns a proof. Target -> source ``{"request": {...}, "proof"}`` with
  ``proof = HMAC(secret, "client" | nonces | request)``; the source refuses a wrong one.
- From then on every frame from the source (``K`` keep-alive, ``H`` header JSON, ``S`` size JSON,
  ``D`` data) goes into ``HMAC(session key, ...)``, the session key being ``HMAC(secret, "session" |
  nonces)``. The ``E`` frame carries the byte count and that digest; the target compares before it
  releases the archive's tag-bearing members to ``docker load``. ``X`` (JSON ``{"error"}``) ends a
  failed stream.
- ``S`` ``{"bytes", "origin"}``: how many bytes of the archive (counted from its first byte, whatever
  offset the stream starts at) the builder announced, signed for each node with its origin key
  (``_relay.size_announcement``); relays pass the builder's announcement on unchanged. It comes
  after the header and before any data, again whenever more of a growing save may go out, and the
  target refuses a data frame that would take it beyond the latest one before reading a byte of it:
  every node holds the run's secret, so only the builder's word bounds what a node takes in. A
  keep-alive carries no payload.
- The target ends with an ``A`` frame ``{"loaded", "error", "retry", "mac"}``.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any, TypeGuard

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError

MAGIC = "lanekit-image-stream/2"
NONCE_BYTES = 32
FRAME_HEAD = 9
MAX_CONTROL = 16 * 1024 * 1024  # a header or end frame (the end carries one signature per relay node)
MAX_DATA = 64 * 1024 * 1024
# Before the other end proved the secret it gets little: a hello is a magic, a name and a nonce, a
# request lists the chain IDs the target holds (about 70 bytes each), and the whole handshake has
# one deadline, however the bytes trickle in (a per-recv timeout let one byte every 14 s hold a slot).
MAX_HELLO = 4096
MAX_REQUEST = 4 * 1024 * 1024
HANDSHAKE_SECONDS = 15.0

AUTH, HEADER, SIZE, DATA, KEEPALIVE, END, ERROR = b"A", b"H", b"S", b"D", b"K", b"E", b"X"
_TYPES = {AUTH, HEADER, SIZE, DATA, KEEPALIVE, END, ERROR}


class StreamError(LanekitError):
    """The image stream between two nodes failed (the message says how)."""


class StreamRefused(StreamError):
    """The other end did not prove the run's secret, or the stream is not the pinned image."""


# --- framing ----------------------------------------------------------------------------------
def frame(kind: bytes, payload: bytes = b"") -> bytes:
    return kind + len(payload).to_bytes(8, "big") + payload


def frame_head(kind: bytes, length: int) -> bytes:
    return kind + int(length).to_bytes(8, "big")


def json_frame(kind: bytes, payload: dict) -> bytes:
    return frame(kind, json.dumps(payload, sort_keys=True).encode("utf-8"))


def recv_exact(sock: Any, count: int, deadline: float | None = None) -> bytes:
    """``count`` bytes; with ``deadline`` (``time.monotonic``) the last of them must come before it."""
    data = bytearray()
    while len(data) < count:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise StreamRefused("the peer did not finish the handshake in time")
            sock.settimeout(left)
        try:
            chunk = sock.recv(count - len(data))
        except TimeoutError:
            if deadline is not None:
                raise StreamRefused("the peer did not finish the handshake in time") from None
            raise
        if not chunk:
            raise StreamError(f"the peer closed the connection {count - len(data)} bytes early")
        data += chunk
    return bytes(data)


def read_head(sock: Any, limit: int | None = None, deadline: float | None = None) -> tuple[bytes, int]:
    head = recv_exact(sock, FRAME_HEAD, deadline)
    kind, length = head[:1], int.from_bytes(head[1:], "big")
    if kind not in _TYPES:
        raise StreamRefused("the peer does not speak the lanekit image stream protocol (version 2)")
    limit = limit if limit is not None else (MAX_DATA if kind == DATA else MAX_CONTROL)
    if length > limit:
        raise StreamRefused(f"the peer sent an over-long frame ({length} bytes, at most {limit} here)")
    return kind, length


def read_json(sock: Any, expect: bytes = AUTH, limit: int | None = None, deadline: float | None = None) -> dict:
    kind, length = read_head(sock, limit, deadline)
    payload = recv_exact(sock, length, deadline)
    if kind == ERROR:
        raise StreamRefused(_json(payload).get("error") or "the peer refused without a reason")
    if kind != expect:
        raise StreamRefused(f"the peer sent a {kind.decode('ascii', 'replace')} frame where {expect.decode()} was due")
    return _json(payload)


def _json(payload: bytes) -> dict:
    try:
        value = json.loads(payload.decode("utf-8"))
    except ValueError:
        raise StreamRefused("the peer sent something that is not a lanekit stream message") from None
    if not isinstance(value, dict):
        raise StreamRefused("the peer sent something that is not a lanekit stream message")
    return value


def announced_bytes(size: dict) -> int:
    """The byte count of an ``S`` frame; refuses anything but a whole number of bytes."""
    total = size.get("bytes")
    if not isinstance(total, int) or isinstance(total, bool) or total < 0:
        raise StreamRefused(f"the source announced the archive's size as {str(total)[:40]!r}, not a byte count")
    return total


# --- authentication ---------------------------------------------------------------------------
def new_nonce() -> str:
    return secrets.token_hex(NONCE_BYTES)


def _key(secret: str) -> bytes:
    if not secret:
        raise StreamError("the stream secret is empty")
    return secret.encode("utf-8")


def proof(secret: str, role: str, client_nonce: str, server_nonce: str, request: dict | None = None) -> str:
    """HMAC-SHA256 of the role, both nonces and (for the client) its request, as hex."""
    body = "\0".join([MAGIC, role, client_nonce, server_nonce, json.dumps(request or {}, sort_keys=True)])
    return hmac.new(_key(secret), body.encode("utf-8"), hashlib.sha256).hexdigest()


def session_key(secret: str, client_nonce: str, server_nonce: str) -> bytes:
    body = "\0".join([MAGIC, "session", client_nonce, server_nonce])
    return hmac.new(_key(secret), body.encode("utf-8"), hashlib.sha256).digest()


def check_proof(given: object, expected: str) -> bool:
    return isinstance(given, str) and hmac.compare_digest(given.encode("ascii", "replace"), expected.encode("ascii"))


def _valid_nonce(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and len(value) == 2 * NONCE_BYTES and all(c in "0123456789abcdef" for c in value)


def client_handshake(sock: Any, secret: str, client: str, request: dict) -> bytes:
    """The target's side: send a nonce, require the source's proof, then prove itself.
    Returns the session key. Raises StreamRefused when the source does not hold the secret."""
    cnonce = new_nonce()
    sock.sendall(json_frame(AUTH, {"magic": MAGIC, "client": client, "nonce": cnonce}))
    hello = read_json(sock, limit=MAX_HELLO)
    snonce = hello.get("nonce")
    if hello.get("magic") != MAGIC or not _valid_nonce(snonce) or snonce == cnonce:
        raise StreamRefused("the source does not speak the lanekit image stream protocol (version 2)")
    if not check_proof(hello.get("proof"), proof(secret, "server", cnonce, snonce)):
        raise StreamRefused("the source could not prove it holds this run's secret (another process may hold the port)")
    sock.sendall(json_frame(AUTH, {"request": request, "proof": proof(secret, "client", cnonce, snonce, request)}))
    return session_key(secret, cnonce, snonce)


def server_handshake(sock: Any, secret: str, seconds: float | None = None) -> tuple[dict, str, bytes]:
    """The source's side: answer the target's nonce with a proof, then require the target's.
    Returns (request, client name, session key); raises StreamRefused for a wrong proof, an
    over-long hello or request, or a handshake not finished within ``seconds`` in all
    (default ``HANDSHAKE_SECONDS``)."""
    deadline = time.monotonic() + (HANDSHAKE_SECONDS if seconds is None else seconds)
    hello = read_json(sock, limit=MAX_HELLO, deadline=deadline)
    cnonce = hello.get("nonce")
    client = str(hello.get("client", ""))[:200]
    if hello.get("magic") != MAGIC or not _valid_nonce(cnonce):
        raise StreamRefused("the client does not speak the lanekit image stream protocol (version 2)")
    snonce = new_nonce()
    sock.sendall(json_frame(AUTH, {"magic": MAGIC, "nonce": snonce, "proof": proof(secret, "server", cnonce, snonce)}))
    answer = read_json(sock, limit=MAX_REQUEST, deadline=deadline)
    request = answer.get("request")
    if not isinstance(request, dict) or not check_proof(answer.get("proof"), proof(secret, "client", cnonce, snonce, request)):
        raise StreamRefused(f"the client {client or '(unnamed)'} could not prove it holds this run's secret")
    return request, client, session_key(secret, cnonce, snonce)


def ack_mac(key: bytes, ack: dict) -> str:
    body = json.dumps({k: v for k, v in ack.items() if k != "mac"}, sort_keys=True)
    return hmac.new(key, b"ack\0" + body.encode("utf-8"), hashlib.sha256).hexdigest()


def check_ack(key: bytes, ack: dict) -> None:
    """Refuse an acknowledgement not signed with this connection's session key (in constant time)."""
    if not check_proof(ack.get("mac"), ack_mac(key, ack)):
        raise StreamRefused("the client's acknowledgement is not signed with this connection's key")


# --- connections that have not proven the secret yet ------------------------------------------------
class PreAuth:
    """Admission of connections before they proved the secret: at most ``per_peer`` from one
    address and ``total`` in all. A host that opens many silent connections then holds a few slots
    for one handshake deadline, not every slot the nodes need."""

    def __init__(self, per_peer: int, total: int) -> None:
        self.per_peer = per_peer
        self.total = total
        self.lock = threading.Lock()
        self.peers: dict = {}

    def admit(self, peer: str) -> bool:
        with self.lock:
            if self.peers.get(peer, 0) >= self.per_peer or sum(self.peers.values()) >= self.total:
                return False
            self.peers[peer] = self.peers.get(peer, 0) + 1
            return True

    def release(self, peer: str) -> None:
        """The connection proved itself, or ended: its slot is free."""
        with self.lock:
            count = self.peers.get(peer, 0) - 1
            if count > 0:
                self.peers[peer] = count
            else:
                self.peers.pop(peer, None)

    def count(self) -> int:
        with self.lock:
            return sum(self.peers.values())


class StreamMac:
    """The keyed digest of every frame the source sends after the handshake."""

    def __init__(self, key: bytes) -> None:
        self._mac = hmac.new(key, b"stream\0", hashlib.sha256)
        self.data_bytes = 0

    def head(self, kind: bytes, length: int) -> bytes:
        head = frame_head(kind, length)
        self._mac.update(head)
        if kind == DATA:
            self.data_bytes += length
        return head

    def update(self, payload: bytes | bytearray | memoryview) -> None:
        self._mac.update(payload)

    def frame(self, kind: bytes, payload: bytes = b"") -> bytes:
        head = self.head(kind, len(payload))
        self._mac.update(payload)
        return head + payload

    def end_frame(self, extra: dict | None = None) -> bytes:
        # ``extra`` (the relay's origin signatures) rides along; it is not under this hop's digest
        # because each entry is a signature of its own.
        return json_frame(END, dict(extra or {}, bytes=self.data_bytes, mac=self._mac.hexdigest()))

    def check_end(self, end: dict) -> None:
        if end.get("bytes") != self.data_bytes:
            raise StreamRefused(f"the stream carried {self.data_bytes} bytes but the source announced {end.get('bytes')}")
        if not check_proof(end.get("mac"), self._mac.hexdigest()):
            raise StreamRefused("the digest of the stream does not match the source's (the data was altered on the way)")


# --- one stream after the handshake: the frame loop, written once for every end ------------------
# A target reads into one reused buffer of this size (the data frames are larger: read in pieces).
BUFFER = 1 << 20


def receive(sock: Any, key: bytes, on_header: Callable[[dict], None], on_data: Callable[[memoryview], None],
            on_end: Callable[[dict, int], None] | None = None, relay_hop: bool = False,
            on_size: Callable[[dict], int] | None = None, start: int = 0) -> tuple[dict, dict, int]:
    """The target's side of one stream, from the first frame after the handshake to the end frame.

    Returns (header, end frame, data bytes) once the end frame's byte count and keyed digest matched
    every frame received. The header comes once and before any data; keep-alives are waited through
    (the socket's timeout is per frame, so a source that keeps sending is waited for). ``on_header``
    sees the header and may refuse it by raising; ``on_data`` gets every piece of data as it arrives,
    in a reused buffer (copy what you keep); ``on_end`` gets the end frame and the data byte count
    once the digest matched (the relay's origin signature is checked there).

    No data is taken beyond the archive's size the source announced last (``S`` frames): the stream
    starts at byte ``start`` of the archive (the offset the target asked for), and a data frame that
    would go beyond the announced size is refused before a byte of it is read, so neither the spool
    nor ``on_data`` ever sees it. ``on_size`` checks an announcement (the builder's signature for this
    node) and returns its byte count; without it the count is taken as announced.

    An ``X`` frame ends the stream with the source's reason: before the header a refusal
    (StreamRefused: nothing was sent) unless ``relay_hop``, where any ``X`` is a failure to re-route
    around (StreamError). Used by ``_stream_client`` (the plain stream) and ``_relay_node`` (each hop).
    """
    mac = StreamMac(key)
    view = memoryview(bytearray(BUFFER))
    header: dict | None = None
    announced: int | None = None  # the archive's size as the source announced it last
    while True:
        kind, length = read_head(sock)
        if kind == ERROR:
            try:
                reason = str(_json(recv_exact(sock, length)).get("error", ""))[:500]
            except StreamRefused:
                reason = ""  # a reason that is not one: the source still gave up
            if relay_hop:
                raise StreamError(reason or "the source gave up without a reason")
            raise StreamRefused(reason or "the source gave up without a reason") if header is None else StreamError(reason)
        if kind == END:
            end = _json(recv_exact(sock, length))
            mac.check_end(end)
            if on_end is not None:
                on_end(end, mac.data_bytes)
            if header is None:
                raise StreamRefused("the source ended the stream without a header")
            return header, end, mac.data_bytes
        if kind not in (HEADER, SIZE, DATA, KEEPALIVE) or (kind in (SIZE, DATA) and header is None) \
                or (kind == HEADER and header):
            raise StreamRefused(f"the source sent a {kind.decode('ascii', 'replace')} frame out of order")
        if kind == KEEPALIVE and length:
            # Its payload would reach the spool without counting as data in the end frame.
            raise StreamRefused(f"the source sent a keep-alive frame carrying {length} bytes (it carries none)")
        if kind == DATA:
            if announced is None:
                raise StreamRefused("the source sent data before it announced the size of the archive")
            if start + mac.data_bytes + length > announced:
                raise StreamRefused(f"the source sent more than the {announced} bytes the builder announced "
                                    f"for the archive")
        mac.head(kind, length)
        if kind == HEADER:
            payload = recv_exact(sock, length)
            mac.update(payload)
            header = _json(payload)
            on_header(header)
            continue
        if kind == SIZE:
            payload = recv_exact(sock, length)
            mac.update(payload)
            size = _json(payload)
            announced = on_size(size) if on_size is not None else announced_bytes(size)
            continue
        remaining = length
        while remaining:
            got = sock.recv_into(view, min(BUFFER, remaining))
            if not got:
                if relay_hop:
                    raise StreamError("the connection closed in the middle of a frame")
                raise StreamError(f"the stream ended after {mac.data_bytes - remaining} bytes, before its end marker")
            chunk = view[:got]
            mac.update(chunk)
            on_data(chunk)
            remaining -= got


def send_ack(sock: Any, key: bytes, ack: dict) -> None:
    """The target's last word, signed with the session key: loaded or not, and why."""
    ack = dict(ack)
    ack["mac"] = ack_mac(key, ack)
    try:
        sock.sendall(json_frame(AUTH, ack))
    except OSError:
        pass  # the acknowledgement only feeds the source's report


def refuse(conn: Any, error: str) -> None:
    """End a stream (or a connection before one) with the reason, unsigned: an ``X`` frame."""
    conn.sendall(json_frame(ERROR, {"error": error}))


class Sender:
    """The source's side of one stream after the handshake: one header, data and keep-alives, the end
    frame, then the target's signed acknowledgement. Every frame goes into the hop's keyed digest.
    Used by ``_stream_server`` (image_serve) and ``_relay.RelayServer`` (a relay's successor)."""

    def __init__(self, conn: Any, key: bytes) -> None:
        self.conn = conn
        self.key = key
        self.mac = StreamMac(key)

    @property
    def data_bytes(self) -> int:
        return self.mac.data_bytes

    def header(self, fields: dict) -> None:
        self.conn.sendall(self.mac.frame(HEADER, json.dumps(fields, sort_keys=True).encode("utf-8")))

    def size(self, announcement: dict) -> None:
        """The archive's size as the builder announced it (``{"bytes", "origin"}``): no data beyond it."""
        self.conn.sendall(self.mac.frame(SIZE, json.dumps(announcement, sort_keys=True).encode("utf-8")))

    def data(self, payload: bytes) -> None:
        self.conn.sendall(self.mac.frame(DATA, payload))

    def data_head(self, count: int) -> None:
        """Announce ``count`` bytes of data sent in pieces with :meth:`data_piece` (no copy of a whole frame)."""
        self.conn.sendall(self.mac.head(DATA, count))

    def data_piece(self, piece: bytes) -> None:
        self.mac.update(piece)
        self.conn.sendall(piece)

    def keepalive(self) -> None:
        self.conn.sendall(self.mac.frame(KEEPALIVE))

    def end(self, extra: dict | None = None) -> None:
        self.conn.sendall(self.mac.end_frame(extra))

    def read_ack(self, seconds: float) -> dict:
        """The target's acknowledgement, refused unless signed with this connection's key (constant time)."""
        self.conn.settimeout(seconds)
        ack = read_json(self.conn, AUTH)
        check_ack(self.key, ack)
        return ack
