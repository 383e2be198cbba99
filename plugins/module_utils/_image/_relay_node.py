# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""One node of the image relay: receive the stream from the predecessor (or the builder) into a
private spool and into the window its successor reads, re-route to the builder when the predecessor
stalls or dies, check the builder's origin signature over every byte, and only then hand the spool
to ``docker load``.

Used by ``image_distribute`` with ``method=relay``; the chain logic and the successor's listener are
in ``_relay``, the frame loop of each hop is the stream's own (``_stream.receive``), shared with the
plain stream (``_stream_client``).
"""
from __future__ import annotations

import hashlib
import socket
import time
from collections.abc import Callable
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._image._relay import (
    BUILDER,
    RelayServer,
    RelayWindow,
    chain_links,
    check_origin,
    check_size_announcement,
    relay_sources,
)
from ansible_collections.lanekit.serving.plugins.module_utils._image._spool import ReceiveSpool, docker_load
from ansible_collections.lanekit.serving.plugins.module_utils._image._stream import (
    StreamError,
    StreamRefused,
    client_handshake,
    receive,
    send_ack,
)
from ansible_collections.lanekit.serving.plugins.module_utils._image._targate import TarGate

BUILDER_ATTEMPTS = 3


class RelayNode:
    """Receive, check, forward and load the image on one node of the chain."""

    def __init__(self, params: dict, host: str, popen: Callable[..., Any], tail: Callable[..., str],
                 connect: Callable[[str, int, float], socket.socket]) -> None:
        self.params = params
        self.host = host
        self.me = params["client_name"] or host
        self.popen = popen
        self.tail = tail
        self.connect = connect  # (host, port, seconds) -> socket
        self.rerouted: list = []
        self.served: list = []
        self.spool: ReceiveSpool | None = None
        self._reset()

    def _spool(self) -> ReceiveSpool:
        """The spool of this run (made by :meth:`run` before anything is received)."""
        if self.spool is None:
            raise StreamError("the relay node received before it had a spool")  # not reached: run() makes it first
        return self.spool

    def _reset(self) -> None:
        self.digest = hashlib.sha256()
        self.received = 0
        self.from_relay = ""  # the predecessor whose bytes are among those received, if any
        self.gate = TarGate(self.params["ref"], self.params["content_hash"], self.params["rootfs"] or "",
                            self.params["config"] or "")
        if self.spool is not None:
            self.spool.reset()

    def run(self) -> int:
        params = self.params
        _before, after = chain_links(params["relay_chain"], self.me)
        window = RelayWindow(params["relay_buffer_mib"] << 20, params["relay_stall"],
                             wait_first=params["relay_connect_timeout"] if after is not None else 0.0,
                             min_rate=float(params.get("relay_min_rate") or 0.0) * (1 << 20))
        self.spool = ReceiveSpool(params["spool_dir"])
        server = None
        try:
            if after is not None:
                server = RelayServer(window, params["token"], self.me, params["ref"], params["content_hash"],
                                     successor=after)
                try:
                    server.listen(params["relay_bind"], params["relay_port"])
                except OSError as exc:
                    raise LanekitError(
                        f"{self.host} cannot listen on {params['relay_bind']}:{params['relay_port']} to relay the image "
                        f"({exc}); set image_relay_port to a free port."
                    ) from None
            try:
                sock, key = self._receive(window)
            except BaseException as exc:
                window.abort(str(exc) or type(exc).__name__)
                raise
            try:
                # Proven to be the builder's bytes: the successor reads on from the window while this
                # node loads, and is served to the end even if this node's own load fails.
                self._load(sock, key)
            finally:
                self._close(sock)
                if server is not None and after is not None:
                    server.wait_successor(after, time.monotonic() + params["stream_timeout"])
                    self.served = list(server.records)
            return self.received
        finally:
            if server is not None:
                server.close()
            self.spool.close()

    def _receive(self, window: RelayWindow) -> tuple[socket.socket, bytes]:
        """Receive until the builder's signature over every byte matched; returns (socket, key)."""
        params = self.params
        sources = relay_sources(params["relay_chain"], self.me, params["relay_peers"], params["source"])
        index = 0
        builder_failures = 0
        while True:
            name, source = sources[min(index, len(sources) - 1)]
            sock = None
            try:
                sock, key, end = self._hop(name, source, window)
                check_origin(end, self.me, params["origin_key"], params["ref"], params["content_hash"],
                             self.received, self.digest.hexdigest(), BUILDER if name == BUILDER else name)
                break
            except StreamRefused as exc:
                self._close(sock)
                if name == BUILDER and not self.from_relay:
                    raise LanekitError(f"{self.host} refused the image stream from the builder ({source}): {exc}. "
                                       f"docker load never saw it; nothing from it was tagged. Check that image_serve "
                                       f"of this run holds that port on the builder (image_stream_port) and that "
                                       f"nothing else listens there, then re-run.") from None
                # A relay sent something the builder did not: caught on its own hop, or only by the
                # builder's signature after the relay dropped and the builder sent the rest. Forget
                # every byte and start over from the builder at offset 0; what went on to this node's
                # successors is refused by them the same way.
                culprit = name if name != BUILDER else self.from_relay
                self.rerouted.append({"node": culprit, "reason": f"refused: {exc}"})
                window.abort(f"{self.me} refused what {culprit} relayed")
                self._reset()
                index = len(sources) - 1
            except (StreamError, OSError, ValueError) as exc:
                self._close(sock)
                if name != BUILDER:
                    self.rerouted.append({"node": name, "reason": str(exc) or type(exc).__name__})
                    index += 1
                    continue
                builder_failures += 1
                if builder_failures >= BUILDER_ATTEMPTS:
                    raise LanekitError(
                        f"the image stream from the builder ({source}) to {self.host} failed: "
                        f"{exc or type(exc).__name__}. Nothing incomplete was loaded; re-run to try again."
                    ) from None
                time.sleep(1.0)
        try:
            self.gate.verify()
        except StreamRefused as exc:
            self._close(sock)
            raise LanekitError(f"{self.host} refused the image: {exc}. docker load never saw it; nothing from it "
                               f"was tagged.") from None
        # The bytes are the builder's: successors may finish while this node loads.
        window.finish({"origin": end.get("origin") or {}, "total": self.received})
        return sock, key

    def _load(self, sock: socket.socket, key: bytes) -> None:
        try:
            rc, out, err = docker_load(self.popen, self._spool())
        except OSError as exc:
            rc, out, err = 127, b"", str(exc).encode()
        message = self.tail(err or out, 6)
        send_ack(sock, key, {"loaded": rc == 0, "error": message if rc else ""})
        if rc != 0:
            raise LanekitError(f"docker load on {self.host} failed (exit {rc}) on the relayed image: {message}")

    def _hop(self, name: str, source: str, window: RelayWindow) -> tuple[socket.socket, bytes, dict]:
        """One connection: returns (socket, session key, end frame) once the hop digest matched."""
        params = self.params
        host, _sep, port = source.rpartition(":")
        relay = name != BUILDER
        sock = self.connect(host.strip("[]"), int(port), params["relay_connect_timeout"] if relay else params["connect_timeout"])
        try:
            sock.settimeout(params["relay_stall"] if relay else params["stream_timeout"])
            hop_start = self.received
            key = client_handshake(sock, params["token"], self.me,
                                   {"content_hash": params["content_hash"], "have": [], "offset": hop_start,
                                    "relay": True})

            def on_header(header: dict) -> None:
                if int(header.get("offset") or 0) != self.received or header.get("skipped_layers"):
                    raise StreamRefused(f"the source answered from offset {header.get('offset')}, not {self.received}")

            def on_size(size: dict) -> int:
                # Only the builder's signature bounds what this node takes in: every node holds the
                # run's secret, and a predecessor could otherwise send on and on.
                total = check_size_announcement(size, self.me, params["origin_key"], params["ref"],
                                                params["content_hash"], BUILDER if name == BUILDER else name)
                window.announce(size)
                return total

            def on_data(chunk: memoryview) -> None:
                if relay:
                    self.from_relay = name
                self.digest.update(chunk)
                self.received += len(chunk)
                self._spool().write(chunk)
                window.append(chunk)
                self.gate.feed(chunk)

            _header, end, _bytes = receive(sock, key, on_header, on_data, relay_hop=True, on_size=on_size,
                                           start=hop_start)
            return sock, key, end
        except BaseException:
            self._close(sock)
            raise

    @staticmethod
    def _close(sock: socket.socket | None) -> None:
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass


def connect_socket(host: str, port: int, seconds: float) -> socket.socket:
    """Keep trying to reach ``host:port`` for ``seconds`` (the peer's module may start a moment later)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return socket.create_connection((host, port), timeout=10)
        except OSError as exc:
            if time.monotonic() > deadline:
                raise StreamError(f"could not reach {host}:{port} for {seconds} s ({exc})") from None
        time.sleep(0.5)
