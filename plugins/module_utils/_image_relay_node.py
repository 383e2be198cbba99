# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""One node of the image relay: receive the stream from the predecessor (or the builder), pipe it
into ``docker load`` and into the window its successor reads, re-route to the builder when the
predecessor stalls or dies, and check the builder's origin signature before tagging anything.

Used by ``image_distribute`` with ``method=relay``; the chain logic and the successor's listener are
in ``_image_relay``.
"""
from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import threading
import time

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._image_relay import (
    BUILDER,
    RelayServer,
    RelayWindow,
    chain_links,
    check_origin,
    relay_sources,
)
from ansible_collections.lanekit.serving.plugins.module_utils._image_stream import (
    AUTH,
    DATA,
    END,
    ERROR,
    HEADER,
    KEEPALIVE,
    StreamError,
    StreamMac,
    StreamRefused,
    TarGate,
    ack_mac,
    client_handshake,
    json_frame,
    read_head,
    recv_exact,
    write_all,
)

BUFFER = 1 << 20
BUILDER_ATTEMPTS = 3


class LoadFailed(Exception):
    """This node's own ``docker load`` stopped reading or failed."""


class Loader:
    """``docker load`` fed through the tar gate; started on the first header."""

    def __init__(self, popen, tail) -> None:
        self.popen = popen
        self.tail = tail
        self.proc = None
        self.outputs = {"out": b"", "err": b""}
        self.readers: list = []

    def start(self) -> None:
        self.proc = self.popen(["image", "load"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

        def drain(stream, name):
            self.outputs[name] = stream.read()

        self.readers = [threading.Thread(target=drain, args=(self.proc.stdout, "out"), daemon=True),
                        threading.Thread(target=drain, args=(self.proc.stderr, "err"), daemon=True)]
        for reader in self.readers:
            reader.start()

    def message(self) -> str:
        for reader in self.readers:
            reader.join(timeout=10)
        return self.tail(self.outputs["err"] or self.outputs["out"], 6)

    def write(self, chunks) -> None:
        try:
            write_all(self.proc.stdin.fileno(), chunks)
        except OSError:
            self.kill()
            raise LoadFailed(f"docker load stopped reading the stream: {self.message() or 'it exited without output (killed?)'}") from None

    def finish(self) -> tuple[int, str]:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        rc = self.proc.wait()
        return rc, self.message()

    def kill(self) -> None:
        # Killing docker load before the held manifests reached it leaves nothing tagged.
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class RelayNode:
    """Receive, load and forward the image on one node of the chain."""

    def __init__(self, params: dict, host: str, popen, tail, connect) -> None:
        self.params = params
        self.host = host
        self.me = params["client_name"] or host
        self.popen = popen
        self.tail = tail
        self.connect = connect  # (host, port, seconds) -> socket
        self.rerouted: list = []
        self.served: list = []
        self._reset()

    def _reset(self) -> None:
        self.digest = hashlib.sha256()
        self.received = 0
        self.gate = TarGate(self.params["ref"], self.params["content_hash"], self.params["rootfs"] or "",
                            self.params["config"] or "")
        self.loader = Loader(self.popen, self.tail)

    def run(self) -> int:
        params = self.params
        _before, after = chain_links(params["relay_chain"], self.me)
        window = RelayWindow(params["relay_buffer_mib"] << 20, params["relay_stall"],
                             wait_first=params["relay_connect_timeout"] if after is not None else 0.0)
        server = None
        if after is not None:
            server = RelayServer(window, params["token"], self.me, params["ref"], params["content_hash"])
            try:
                server.listen(params["relay_bind"], params["relay_port"])
            except OSError as exc:
                raise LanekitError(
                    f"{self.host} cannot listen on {params['relay_bind']}:{params['relay_port']} to relay the image "
                    f"({exc}); set image_relay_port to a free port."
                ) from None
        try:
            received = self._receive(window)
            if server is not None:
                # Stay until the successor has everything (it reads at its own pace from the window).
                server.wait_successor(after, time.monotonic() + params["stream_timeout"])
                self.served = list(server.records)
            return received
        except BaseException as exc:
            window.abort(str(exc) or type(exc).__name__)
            raise
        finally:
            if server is not None:
                server.close()

    def _receive(self, window: RelayWindow) -> int:
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
            except LoadFailed as exc:
                self._close(sock)
                raise LanekitError(f"docker load on {self.host} failed on the relayed stream ({exc}); the nodes "
                                   f"after it re-route to the builder.") from None
            except StreamRefused as exc:
                self._close(sock)
                if name == BUILDER:
                    self.loader.kill()
                    raise LanekitError(f"{self.host} refused the image stream from the builder ({source}): {exc}. "
                                       f"Nothing from it was tagged.") from None
                # A relay sent something the builder did not: start over from the builder; what went
                # to this node's successors is refused by them the same way.
                self.rerouted.append({"node": name, "reason": f"refused: {exc}"})
                self.loader.kill()
                window.abort(f"{self.me} refused what {name} relayed")
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
                    self.loader.kill()
                    raise LanekitError(
                        f"the image stream from the builder ({source}) to {self.host} failed: "
                        f"{exc or type(exc).__name__}. Nothing incomplete was tagged; re-run to try again."
                    ) from None
                time.sleep(1.0)
        try:
            if self.loader.proc is None:
                raise LanekitError(f"the stream to {self.host} ended without a header")
            try:
                self.gate.verify()
            except StreamRefused as exc:
                self.loader.kill()
                raise LanekitError(f"{self.host} refused the image: {exc}. Nothing from it was tagged.") from None
            # The bytes are the builder's: successors may finish while this node's docker load does.
            window.finish({"origin": end.get("origin") or {}, "total": self.received})
            try:
                self.loader.write([self.gate.finish()])
            except LoadFailed as exc:
                raise LanekitError(f"docker load on {self.host} failed on the relayed stream ({exc}).") from None
            rc, message = self.loader.finish()
            self._ack(sock, key, {"loaded": rc == 0, "error": message if rc else ""})
            if rc != 0:
                raise LanekitError(f"docker load on {self.host} failed (exit {rc}) on the relayed stream: {message}")
            return self.received
        finally:
            self._close(sock)

    def _hop(self, name: str, source: str, window: RelayWindow):
        """One connection: returns (socket, session key, end frame) once the hop digest matched."""
        params = self.params
        host, _sep, port = source.rpartition(":")
        relay = name != BUILDER
        sock = self.connect(host.strip("[]"), int(port), params["relay_connect_timeout"] if relay else params["connect_timeout"])
        try:
            sock.settimeout(params["relay_stall"] if relay else params["stream_timeout"])
            key = client_handshake(sock, params["token"], self.me,
                                   {"content_hash": params["content_hash"], "have": [], "offset": self.received,
                                    "relay": True})
            mac = StreamMac(key)
            buf = bytearray(BUFFER)
            view = memoryview(buf)
            header = None
            while True:
                kind, length = read_head(sock)
                if kind == ERROR:
                    reason = json.loads(recv_exact(sock, length).decode("utf-8", "replace") or "{}").get("error", "")
                    raise StreamError(str(reason)[:500] or "the source gave up without a reason")
                if kind == END:
                    end = json.loads(recv_exact(sock, length).decode("utf-8", "replace") or "{}")
                    mac.check_end(end)
                    if header is None:
                        raise StreamRefused("the source ended the stream without a header")
                    return sock, key, end
                if kind not in (HEADER, DATA, KEEPALIVE) or (kind == DATA and header is None) or (kind == HEADER and header):
                    raise StreamRefused(f"the source sent a {kind.decode('ascii', 'replace')} frame out of order")
                mac.head(kind, length)
                if kind == HEADER:
                    payload = recv_exact(sock, length)
                    mac.update(payload)
                    header = json.loads(payload.decode("utf-8"))
                    if int(header.get("offset") or 0) != self.received or header.get("skipped_layers"):
                        raise StreamRefused(f"the source answered from offset {header.get('offset')}, not {self.received}")
                    if self.loader.proc is None:
                        self.loader.start()
                    continue
                remaining = length
                while remaining:
                    got = sock.recv_into(view, min(BUFFER, remaining))
                    if not got:
                        raise StreamError("the connection closed in the middle of a frame")
                    chunk = view[:got]
                    mac.update(chunk)
                    self.digest.update(chunk)
                    self.received += got
                    window.append(chunk)
                    self.loader.write(self.gate.feed(chunk))
                    remaining -= got
        except BaseException:
            self._close(sock)
            raise

    @staticmethod
    def _ack(sock, key: bytes, ack: dict) -> None:
        ack = dict(ack)
        ack["mac"] = ack_mac(key, ack)
        try:
            sock.sendall(json_frame(AUTH, ack))
        except OSError:
            pass  # the acknowledgement only feeds the source's report

    @staticmethod
    def _close(sock) -> None:
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
