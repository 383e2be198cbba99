# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The target's end of the plain image stream: one connection to ``image_serve``, the archive
spooled privately and checked, then handed to ``docker load``.

One job: receive one image on one node (``image_distribute`` with ``method=stream``). The frame
loop is the stream's own (``_stream.receive``, shared with every relay hop); what arrives goes
into a private spool and through the tar gate (``_targate``), and ``docker load`` sees the spool
only after the stream's digest matched, the builder's signature (when the run signs) matched,
and the gate found the pinned image and nothing else. The relay's node is ``_relay_node``.
"""
from __future__ import annotations

import hashlib
import socket
import time
from collections.abc import Callable
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._image._relay import check_origin, check_size_announcement
from ansible_collections.lanekit.serving.plugins.module_utils._image._spool import ReceiveSpool, docker_load
from ansible_collections.lanekit.serving.plugins.module_utils._image._stream import (
    StreamError,
    StreamRefused,
    announced_bytes,
    client_handshake,
    receive,
    send_ack,
)
from ansible_collections.lanekit.serving.plugins.module_utils._image._targate import TarGate


class DeltaFailed(Exception):
    """The shortened stream failed (docker load refused it, or it stalled); the whole one is asked for."""


def parse_source(source: str) -> tuple[str, int]:
    host, sep, port = (source or "").rpartition(":")
    if not sep or not host or not port.isdigit():
        raise LanekitError(f"source {source!r} is not 'host:port' (the address and port of the image_serve task).")
    return host.strip("[]"), int(port)


class StreamClient:
    """Receive the image from ``params["source"]`` and load it (the module's parameters, by name)."""

    def __init__(self, params: dict, host: str, popen: Callable[..., Any], tail: Callable[..., str]) -> None:
        self.params = params
        self.host = host
        self.popen = popen
        self.tail = tail
        self.skipped_layers = 0

    def connect(self, host: str, port: int) -> socket.socket:
        deadline = time.monotonic() + self.params["connect_timeout"]
        last = None
        while True:
            try:
                return socket.create_connection((host, port), timeout=min(30, self.params["stream_timeout"]))
            except OSError as exc:
                last = exc
            if time.monotonic() > deadline:
                raise LanekitError(
                    f"{self.host} could not reach the image source {host}:{port} for "
                    f"{self.params['connect_timeout']} s ({last}); check that image_serve runs there and that the "
                    f"port is open between the nodes (image_stream_port, image_stream_address)."
                )
            time.sleep(1.0)

    def receive(self, have: list) -> int:
        """Load the image once; ``have`` lists the chain IDs present here (a shortened stream is asked
        for when it is not empty, and its failure raises :class:`DeltaFailed`). Returns the bytes received."""
        params = self.params
        host, port = parse_source(params["source"])
        spool = ReceiveSpool(params["spool_dir"])
        sock = None
        stage = "auth"
        me = params["client_name"] or self.host
        try:
            sock = self.connect(host, port)
            sock.settimeout(params["stream_timeout"])
            key = client_handshake(sock, params["token"], me, {"content_hash": params["content_hash"], "have": have})
            digest = hashlib.sha256()
            gate = TarGate(params["ref"], params["content_hash"], params["rootfs"] or "", params["config"] or "")
            skipped = 0

            def on_header(header: dict) -> None:
                nonlocal skipped
                skipped = int(header.get("skipped_layers") or 0)
                self.skipped_layers = skipped

            def on_data(chunk: memoryview) -> None:
                digest.update(chunk)
                spool.write(chunk)
                gate.feed(chunk)

            def on_size(size: dict) -> int:
                if params.get("origin_key"):
                    # Whoever holds the port with the run's secret could send on and on: only the
                    # builder's signature bounds what goes into the spool.
                    return check_size_announcement(size, me, params["origin_key"], params["ref"],
                                                   params["content_hash"], "the source")
                return announced_bytes(size)

            def on_end(end: dict, data_bytes: int) -> None:
                if params.get("origin_key"):
                    # Every node holds the stream's secret; only the builder can sign for this one.
                    check_origin(end, me, params["origin_key"], params["ref"], params["content_hash"], data_bytes,
                                 digest.hexdigest(), "the source")

            stage = "stream"
            _header, _end, data_bytes = receive(sock, key, on_header, on_data, on_end, on_size=on_size)
            # The stream is the source's, unaltered, and the archive names only the pinned image:
            # only now does docker load (its own tar reader, and the tags it applies) see a byte of it.
            gate.verify()
            stage = "load"
            rc, out, err = docker_load(self.popen, spool)
            if rc != 0:
                message = self.tail(err or out, 6)
                send_ack(sock, key, {"loaded": False, "error": message, "retry": skipped > 0})
                if skipped:
                    raise DeltaFailed(message)
                raise LanekitError(f"docker load on {self.host} failed (exit {rc}) on the stream from {host}:{port}: {message}")
            send_ack(sock, key, {"loaded": True})
            return data_bytes
        except StreamRefused as exc:
            who = "the image source" if stage == "auth" else "the stream from"
            raise LanekitError(
                f"{self.host} refused {who} {host}:{port}: {exc}. docker load never saw it and nothing from it was "
                f"tagged; check that image_serve of this run holds the port (image_stream_port) and that nothing "
                f"else listens there."
            ) from None
        except (StreamError, OSError, ValueError) as exc:
            if have and stage in ("stream", "load"):
                raise DeltaFailed(str(exc) or type(exc).__name__) from None
            raise LanekitError(
                f"the image stream from {host}:{port} to {self.host} failed: {exc or type(exc).__name__}. Nothing "
                f"incomplete was loaded; re-run to try again."
            ) from None
        finally:
            if sock is not None:
                sock.close()
            spool.close()
