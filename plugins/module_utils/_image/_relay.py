# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The relay of the image stream: nodes in a chain (builder -> n1 -> n2 -> ...) each pipe what they
receive into ``docker load`` and forward the same bytes to the next node, over the same protocol.

Every hop is a lanekit image stream (``_stream``: its sender and its frame loop are the plain
stream's too): both ends prove the run's secret and the hop's keyed digest is checked. Because every
node holds that secret, the hop digest alone cannot tell a relay's forgery from the builder's bytes;
so the builder also signs the whole archive for each node with a key only that node and the builder
know (``origin_key``: HMAC-SHA256 of the node's name under a secret only the builder receives, made
on the controller). The relays pass those signatures on unchanged; a node checks its own over the
sha256 of every byte it received before it lets ``docker load`` see the archive's manifests. A relay
that alters a byte is caught by its successor.

A request may carry an ``offset``: a node whose predecessor failed mid-stream asks the builder
(which still holds the spool) for the rest. If the builder's signature then fails over the whole,
the predecessor had altered a byte before it dropped: the node starts over from the builder at 0.
Each node holds what it received in a private spool and hands it to ``docker load`` only after its
signature matched.

A relay serves only its successor in the chain (by name), one connection at a time, and drops a
reader that holds the window up at less than a minimum rate.

The builder also announces the archive's size, signed the same way (:func:`size_announcement`),
before the data it covers; relays pass the latest announcement on with the window, and a node takes
no byte beyond it (``_stream.receive``), so a relay cannot fill a node's disk with bytes the builder
never sent.

Pure logic (chain links, re-route order, origin signatures, the relay window) is free of sockets;
:class:`RelayServer` is the node's listener for its successor.
"""
from __future__ import annotations

import collections
import hashlib
import hmac
import socket
import threading
import time
from collections.abc import Callable

from ansible_collections.lanekit.serving.plugins.module_utils._image._stream import (
    PreAuth,
    Sender,
    StreamError,
    StreamRefused,
    announced_bytes,
    refuse,
    server_handshake,
)

BUILDER = "builder"
CHUNK = 1 << 20
ORIGIN_KEY_CONTEXT = "lanekit-image-origin-key/1:"


class RelayAborted(StreamError):
    """The relaying node gave up (its own upstream or load failed); the successor re-routes."""


class RelayBehind(StreamError):
    """The successor asked for bytes the relay no longer (or not yet) holds."""


# --- the chain ------------------------------------------------------------------------------------
def chain_links(chain: list, me: str) -> tuple[str | None, str | None]:
    """(predecessor, successor) of ``me`` in ``chain``; None for the builder end / the last node."""
    names = [str(name) for name in chain]
    if me not in names:
        raise StreamError(f"{me} is not in the relay chain {names}")
    index = names.index(me)
    return (names[index - 1] if index else None), (names[index + 1] if index + 1 < len(names) else None)


def relay_sources(chain: list, me: str, peers: dict, builder_source: str) -> list[tuple[str, str]]:
    """Where ``me`` gets the stream, in the order to try: its predecessor's relay, then the builder.

    Only the builder is a fallback: it holds the whole spool and can serve any offset, while a
    relay only holds a window of the last bytes it passed on."""
    before, _after = chain_links(chain, me)
    sources = []
    if before is not None:
        address = (peers or {}).get(before)
        if address:
            sources.append((before, str(address)))
    sources.append((BUILDER, builder_source))
    return sources


# --- origin signatures ----------------------------------------------------------------------------
def origin_key(secret: str, name: str) -> str:
    """The per-node key: HMAC-SHA256 of the node's name under the builder-only secret, as hex (the
    controller makes the same with the filter ``lanekit.serving.origin_key``). A keyed MAC rather than
    a hash of ``secret:name``: no length extension, no ambiguity between secret and name. A node
    cannot derive another's key."""
    if not secret:
        raise StreamError("the origin secret is empty")
    return hmac.new(secret.encode("utf-8"), (ORIGIN_KEY_CONTEXT + str(name)).encode("utf-8"), hashlib.sha256).hexdigest()


def origin_mac(key: str, ref: str, content_hash: str, total: int, sha256_hex: str) -> str:
    body = "\0".join(["lanekit-image-origin/1", ref, content_hash, str(int(total)), sha256_hex])
    return hmac.new(key.encode("utf-8"), body.encode("utf-8"), hashlib.sha256).hexdigest()


def origin_map(secret: str, names: list, ref: str, content_hash: str, total: int, sha256_hex: str) -> dict:
    """The builder's signature of the whole archive for each node of the chain."""
    return {str(name): origin_mac(origin_key(secret, str(name)), ref, content_hash, total, sha256_hex)
            for name in names}


def check_origin(end: dict, me: str, key: str, ref: str, content_hash: str, total: int, sha256_hex: str,
                 via: str) -> None:
    """Refuse unless the end frame carries the builder's signature of exactly these bytes for ``me``."""
    origin = end.get("origin")
    signatures = origin if isinstance(origin, dict) else {}
    given = signatures.get(me)
    if end.get("total") != total:
        raise StreamRefused(f"{via} announced {end.get('total')} bytes in all but {total} arrived")
    if not isinstance(given, str) or not hmac.compare_digest(
            given.encode("ascii", "replace"), origin_mac(key, ref, content_hash, total, sha256_hex).encode("ascii")):
        raise StreamRefused(f"the archive relayed by {via} is not the one the builder sent (its origin signature "
                            f"for {me} does not match)")


def size_mac(key: str, ref: str, content_hash: str, total: int) -> str:
    # Its own context: neither an end frame's signature nor another image's size passes for one.
    body = "\0".join(["lanekit-image-size/1", ref, content_hash, str(int(total))])
    return hmac.new(key.encode("utf-8"), body.encode("utf-8"), hashlib.sha256).hexdigest()


def size_announcement(secret: str, names: list, ref: str, content_hash: str, total: int) -> dict:
    """The builder's word that its archive (or shortened stream) is at most ``total`` bytes, signed
    for each node of the chain: the payload of an ``S`` frame."""
    return {"bytes": int(total), "origin": {str(name): size_mac(origin_key(secret, str(name)), ref, content_hash, total)
                                            for name in names}}


def check_size_announcement(size: dict, me: str, key: str, ref: str, content_hash: str, via: str) -> int:
    """The byte count of an ``S`` frame, refused unless the builder signed it for ``me``."""
    total = announced_bytes(size)
    origin = size.get("origin")
    given = origin.get(me) if isinstance(origin, dict) else None
    if not isinstance(given, str) or not hmac.compare_digest(
            given.encode("ascii", "replace"), size_mac(key, ref, content_hash, total).encode("ascii")):
        raise StreamRefused(f"{via} announced {total} bytes without the builder's signature for {me}")
    return total


# --- the relay window -----------------------------------------------------------------------------
class RelayWindow:
    """The last ``limit`` bytes a node received, for its successor to read at its own pace.

    ``append`` blocks while a reader lags more than ``limit`` bytes (back-pressure: the chain runs
    at its slowest link). A reader that holds it up is measured over each ``stall`` seconds: one that
    made no progress, or less than ``min_rate`` bytes per second, is dropped, so neither a stuck nor a
    throttling successor can hold the chain (the successor then re-routes to the builder).

    Until the first reader joins (its module may start a few seconds after this node's), ``append``
    also waits, for at most ``wait_first`` seconds counted from the first byte received, rather than
    trim bytes that reader will ask for. Counted from the first byte, not from the window's creation:
    the builder's ``docker save`` may take minutes before any byte flows, and a deadline spent by then
    would let the window trim the start of the stream and send a late successor to the builder."""

    def __init__(self, limit: int, stall: float, clock: Callable[[], float] = time.monotonic, wait_first: float = 0.0,
                 min_rate: float = 0.0) -> None:
        self.limit = max(int(limit), CHUNK)
        self.stall = stall
        self.min_rate = max(0.0, float(min_rate))
        self.clock = clock
        self.cond = threading.Condition()
        self.chunks: collections.deque = collections.deque()  # (start offset, bytes)
        self.base = 0
        self.end = 0
        self.readers: dict = {}
        self.dropped: set = set()
        self.done: dict | None = None
        self.error = ""
        self._ids = 0
        self.wait_first = wait_first
        self.first_deadline: float | None = None  # set by the first append
        # The builder's latest size announcement, as received: set before the bytes it covers are
        # appended, so whatever a successor reads is covered by the announcement it was sent.
        self.size: dict | None = None

    def join(self, offset: int) -> int:
        with self.cond:
            if self.error:
                raise RelayAborted(self.error)
            if offset < self.base or offset > self.end:
                raise RelayBehind(f"offset {offset} is outside the relay's window ({self.base}-{self.end})")
            self._ids += 1
            self.readers[self._ids] = offset
            self.cond.notify_all()
            return self._ids

    def leave(self, reader: int) -> None:
        with self.cond:
            self.readers.pop(reader, None)
            self.dropped.discard(reader)
            self._trim()
            self.cond.notify_all()

    def _lagging(self) -> bool:
        return bool(self.readers) and self.end - min(self.readers.values()) > self.limit

    def append(self, data: bytes | bytearray | memoryview) -> list:
        """Add received bytes; returns the readers dropped for stalling or crawling (usually none)."""
        data = bytes(data)
        dropped = []
        with self.cond:
            if self.first_deadline is None:
                self.first_deadline = self.clock() + self.wait_first
            # The bytes about to come in count: the window must not trim past offset 0 on the way to full.
            while not self._ids and self.end + len(data) - self.base > self.limit and self.clock() < self.first_deadline:
                self.cond.wait(min(0.5, max(0.01, self.first_deadline - self.clock())))
            marks: dict = {}  # reader -> (its offset, the time) when it last proved its pace
            while self._lagging():
                now = self.clock()
                for reader, offset in list(self.readers.items()):
                    if self.end - offset <= self.limit:
                        marks.pop(reader, None)
                        continue
                    start, since = marks.setdefault(reader, (offset, now))
                    elapsed = now - since
                    if elapsed < self.stall:
                        continue
                    if offset - start < max(1.0, self.min_rate * elapsed):
                        del self.readers[reader]
                        self.dropped.add(reader)
                        dropped.append(reader)
                        marks.pop(reader, None)
                    else:
                        marks[reader] = (offset, now)
                if self._lagging():
                    self.cond.wait(min(1.0, self.stall))
            self.chunks.append((self.end, data))
            self.end += len(data)
            self._trim()
            self.cond.notify_all()
        return dropped

    def _trim(self) -> None:
        keep = min([*self.readers.values(), self.end - self.limit])
        while self.chunks and self.chunks[0][0] + len(self.chunks[0][1]) <= keep:
            self.chunks.popleft()
        self.base = self.chunks[0][0] if self.chunks else self.end

    def read(self, reader: int, timeout: float) -> bytes | None:
        """Next bytes for ``reader``: data, b"" at the end of a finished stream, None on timeout."""
        with self.cond:
            for attempt in (0, 1):
                if reader in self.dropped:
                    raise RelayAborted("the successor fell too far behind and was dropped")
                if self.error:
                    raise RelayAborted(self.error)
                offset = self.readers[reader]
                if offset < self.end:
                    break
                if self.done is not None:
                    return b""
                if attempt:
                    return None
                self.cond.wait(timeout)
            for start, data in self.chunks:
                if start <= offset < start + len(data):
                    piece = data[offset - start:offset - start + CHUNK]
                    self.readers[reader] = offset + len(piece)
                    self._trim()
                    self.cond.notify_all()
                    return piece
            raise RelayBehind(f"offset {offset} left the relay's window")

    def announce(self, size: dict) -> None:
        """Keep the builder's size announcement (the ``S`` frame's payload) for the successors."""
        with self.cond:
            self.size = dict(size)

    def announced(self) -> dict | None:
        with self.cond:
            return self.size

    def finish(self, info: dict) -> None:
        with self.cond:
            self.done = dict(info)
            self.cond.notify_all()

    def abort(self, reason: str) -> None:
        with self.cond:
            self.error = reason or "the relay gave up"
            self.cond.notify_all()


# --- the node's listener for its successor --------------------------------------------------------
class RelayServer:
    """Serve the window to the successor (the same protocol as ``image_serve``, from any offset).

    Only the successor named in the chain is served, one connection at a time: every node holds the
    run's secret, and a node that could read any relay window could hold any part of the chain up.
    Before a client proved the secret it gets ``handshake_seconds`` in all and one of
    ``PreAuth(per_peer=2, total=4)``'s slots."""

    def __init__(self, window: RelayWindow, token: str, me: str, ref: str, content_hash: str,
                 keepalive: float = 2.0, ack_timeout: float = 600.0, successor: str | None = None,
                 handshake_seconds: float | None = None) -> None:
        self.window = window
        self.token = token
        self.me = me
        self.ref = ref
        self.content_hash = content_hash
        self.keepalive = keepalive
        self.ack_timeout = ack_timeout
        self.successor = successor
        self.handshake_seconds = handshake_seconds
        self.preauth = PreAuth(per_peer=2, total=4)
        self.lock = threading.Condition()
        self.records: list = []
        self.active = 0
        self.reading = False  # the successor has a connection reading the window
        self.listener: socket.socket | None = None
        self.closed = False
        self.threads: list = []

    def listen(self, bind: str, port: int) -> None:
        listener = socket.socket(socket.AF_INET6 if ":" in bind else socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((bind, port))
        listener.listen(8)
        listener.settimeout(0.5)
        self.listener = listener
        thread = threading.Thread(target=self._accept, name="relay-accept", daemon=True)
        thread.start()
        self.threads.append(thread)

    def _accept(self) -> None:
        listener = self.listener
        if listener is None:  # not reached: listen() sets it before it starts this thread
            return
        while not self.closed:
            try:
                conn, address = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            peer = address[0]
            with self.lock:
                full = self.active >= 6 or not self.preauth.admit(peer)
                if not full:
                    self.active += 1
            if full:  # the successor (and a re-connect); a knocking host holds two slots at most
                conn.close()
                continue
            thread = threading.Thread(target=self._serve, args=(conn, peer), daemon=True)
            thread.start()
            self.threads.append(thread)

    def _serve(self, conn: socket.socket, peer: str) -> None:
        record = {"peer": peer, "client": "", "offset": 0, "bytes": 0, "loaded": False, "error": "", "valid": False,
                  "acked": False}
        reader = None
        preauth = True
        reading = False
        try:
            try:
                request, record["client"], key = server_handshake(conn, self.token, self.handshake_seconds)
            finally:
                self.preauth.release(peer)
                preauth = False
            record["valid"] = True
            if self.successor is not None and record["client"] != self.successor:
                refuse(conn, f"{self.me} relays only to {self.successor}, its successor")
                record["error"] = f"not the successor {self.successor}"
                return
            with self.lock:
                if self.reading:
                    busy = True
                else:
                    busy, self.reading, reading = False, True, True
            if busy:
                refuse(conn, f"{self.me} already relays to {self.successor}")
                record["error"] = "a second connection for the successor"
                return
            if request.get("content_hash") != self.content_hash:
                refuse(conn, f"{self.me} relays content hash {self.content_hash[:12]}")
                record["error"] = "asked for another image"
                return
            record["offset"] = offset = int(request.get("offset") or 0)
            try:
                reader = self.window.join(offset)
            except StreamError as exc:
                refuse(conn, f"{self.me} cannot relay from offset {offset}: {exc}")
                record["error"] = str(exc)
                return
            sender = Sender(conn, key)
            conn.settimeout(max(60.0, 4 * self.keepalive))
            sender.header({"ok": True, "ref": self.ref, "content_hash": self.content_hash, "skipped_layers": 0,
                           "offset": offset, "relay": self.me})
            forwarded: dict | None = None  # the size announcement the successor has
            while True:
                piece = self.window.read(reader, self.keepalive)
                if piece is None:
                    sender.keepalive()
                elif piece:
                    # The builder's announcement, unchanged, ahead of the bytes it covers (the
                    # successor takes no data beyond it; its own signature in it is the builder's).
                    size = self.window.announced()
                    if size is not None and size is not forwarded:
                        sender.size(size)
                        forwarded = size
                    sender.data(piece)
                else:
                    break
            record["bytes"] = sender.data_bytes
            done = self.window.done or {}
            sender.end({"origin": done.get("origin") or {}, "total": done.get("total")})
            # Only the successor's own acknowledgement counts as "served to the end".
            ack = sender.read_ack(self.ack_timeout)
            record["acked"] = True
            record["loaded"] = bool(ack.get("loaded"))
            record["error"] = str(ack.get("error", ""))[:500]
        except RelayAborted as exc:
            record["error"] = str(exc)
            try:
                refuse(conn, f"{self.me} stopped relaying: {exc}")
            except OSError:
                pass
        except (OSError, StreamError, ValueError) as exc:
            record["error"] = record["error"] or str(exc) or type(exc).__name__
        finally:
            if preauth:
                self.preauth.release(peer)
            if reader is not None:
                self.window.leave(reader)
            try:
                conn.close()
            except OSError:
                pass
            with self.lock:
                if reading:
                    self.reading = False
                self.records.append(record)
                self.active -= 1
                self.lock.notify_all()

    def wait_successor(self, name: str, deadline: float, clock: Callable[[], float] = time.monotonic) -> bool:
        """After this node finished: wait until ``name`` has been served to the end (or gave up on
        us and left), or until ``deadline``. True when it was served to the end."""
        with self.lock:
            while clock() < deadline:
                mine = [record for record in self.records if record["client"] == name and record["valid"]]
                if self.active == 0 and mine:
                    return any(record["loaded"] for record in mine)
                self.lock.wait(min(1.0, max(0.0, deadline - clock())))
        return False

    def close(self) -> None:
        self.closed = True
        if self.listener is not None:
            try:
                self.listener.close()
            except OSError:
                pass
