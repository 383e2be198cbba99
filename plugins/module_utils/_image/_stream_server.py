# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The source's end of the plain image stream: serve one ``docker save`` spool to every target that
proves the run's secret, whole or shortened by the bottom layers the target holds.

One job: handle one target's connection (``image_serve`` accepts them and runs one handler per
connection). The frames go out through the stream's one sender (``_stream.Sender``, shared with the
relay's ``RelayServer``); the bytes come from the spool as ``docker save`` writes it, with keep-alives
while the target would otherwise wait. The end frame carries the builder's per-node signatures when
the run signs (``_relay.origin_map``). Before any data, and again before data beyond it, the
builder announces the archive's size (``S`` frames, signed for every node like the end frame): a
node takes no byte beyond the latest announcement. A record per connection says what was served.
"""
from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
from typing import IO, Any

from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import chain_ids
from ansible_collections.lanekit.serving.plugins.module_utils._image._layers import held_prefix
from ansible_collections.lanekit.serving.plugins.module_utils._image._relay import origin_map, size_announcement
from ansible_collections.lanekit.serving.plugins.module_utils._image._spool import CHUNK, SaveSpool
from ansible_collections.lanekit.serving.plugins.module_utils._image._stream import (
    PreAuth,
    Sender,
    StreamError,
    StreamRefused,
    refuse,
    server_handshake,
)

AUTH_TIMEOUT = 15.0       # in all, for the whole handshake (not per read)
PREAUTH_PER_PEER = 2      # unproven connections one address may hold at once
# While docker save runs, its size is not known: the builder announces what the save has written
# and this much more, so a target that keeps up with the save gets one signed announcement per
# 64 MiB rather than one per piece of the save. A relay that replays the last announcement can
# thus make a node take at most this much beyond the whole save; once the save finished, the
# announcement is its exact size.
AHEAD_OF_SAVE = 64 << 20


class StreamServer:
    """The connections of one ``image_serve`` run: who is served, who is active, and the handler.

    ``params`` are the module's (token, content_hash, ref, keepalive, max_seconds, origin_secret,
    origin_nodes); ``cap`` the proven connections served at once. The module's accept loop admits
    connections through ``preauth`` and reads ``served``, ``active`` and ``last_activity`` under ``lock``.
    """

    def __init__(self, params: dict, cap: int) -> None:
        self.params = params
        self.layers: list = []
        self.chains: list = []
        self.lock = threading.Lock()
        self.served: list[dict] = []
        self.active = 0
        self.preauth = PreAuth(per_peer=PREAUTH_PER_PEER, total=cap)
        self.last_activity = time.monotonic()

    def use_layers(self, layers: list) -> None:
        """The layers of the image served (``RootFS.Layers``), bottom first: a target that holds a
        bottom stack of them gets the shortened stream."""
        self.layers = list(layers)
        self.chains = chain_ids(self.layers)

    def present_layers(self, have: Any) -> int:
        """How many bottom layers of the image the target already holds (by chain ID)."""
        if not isinstance(have, list) or not have:
            return 0
        return held_prefix(self.chains, have)

    def touch(self) -> None:
        with self.lock:
            self.last_activity = time.monotonic()

    def _send_file(self, sender: Sender, handle: IO[bytes], offset: int, count: int,
                   digest: Any | None = None) -> None:
        sender.data_head(count)
        done = 0
        while done < count:
            data = os.pread(handle.fileno(), min(count - done, CHUNK), offset + done)
            if not data:
                raise StreamError(f"the spool ended at {offset + done} bytes")
            if digest is not None:
                digest.update(data)
            sender.data_piece(data)
            done += len(data)
        self.touch()

    def _size(self, total: int) -> dict:
        """The announcement that the archive (or the shortened stream) is at most ``total`` bytes,
        signed for every node when the run signs."""
        params = self.params
        if not params.get("origin_secret"):
            return {"bytes": total, "origin": {}}
        return size_announcement(params["origin_secret"], params["origin_nodes"], params["ref"], params["content_hash"],
                                 total)

    def _announce(self, sender: Sender, announced: int, written: int, done: bool) -> int:
        """Announce the size before data goes beyond the last announcement (``announced``); returns
        the size announced now. ``written`` is what the save holds, ``done`` whether it finished."""
        if done:
            if written != announced:
                sender.size(self._size(written))
            return written
        if written <= announced:
            return announced
        sender.size(self._size(written + AHEAD_OF_SAVE))
        return written + AHEAD_OF_SAVE

    def _send_ranges(self, sender: Sender, spool: SaveSpool, ranges: list) -> str:
        """Send the shortened stream; returns the sha256 of its bytes (signed for the target)."""
        # The save has finished (the ranges are read from it): the size is known before any byte.
        sender.size(self._size(sum(end - start for start, end in ranges) + 1024))
        digest = hashlib.sha256()
        with open(spool.path, "rb") as handle:
            for start, end in ranges:
                offset = start
                while offset < end:
                    count = min(end - offset, CHUNK)
                    self._send_file(sender, handle, offset, count, digest)
                    offset += count
        # The end-of-archive marker: two zero blocks.
        digest.update(bytes(1024))
        sender.data(bytes(1024))
        return digest.hexdigest()

    def _wait_for_delta(self, sender: Sender, spool: SaveSpool, skip: int) -> list | None:
        """Byte ranges of the shortened stream, or None (send everything). Keep-alive frames go out
        while the save runs, so the target sees progress however long the save takes."""
        deadline = time.monotonic() + self.params["max_seconds"]
        while not spool.wait_done(self.params["keepalive"]):
            if time.monotonic() > deadline:
                return None
            sender.keepalive()
            self.touch()
        if spool.error:
            return None
        return spool.delta_ranges(skip, len(self.layers))

    def handle(self, conn: socket.socket, peer: str, spool: SaveSpool) -> None:
        """Serve one connection to its end; its record joins ``served`` whatever happened."""
        params = self.params
        record: dict[str, Any] = {"peer": peer, "client": "", "bytes": 0, "seconds": 0.0, "loaded": False, "error": "",
                                  "skipped_layers": 0, "retry": False, "valid": False, "acked": False}
        start = time.monotonic()
        preauth = True
        try:
            try:
                request, record["client"], key = server_handshake(conn, params["token"], AUTH_TIMEOUT)
            except StreamRefused as exc:
                record["error"] = f"refused: {exc}"
                refuse(conn, "refused: the client did not prove this run's secret")
                return
            finally:
                self.preauth.release(peer)
                preauth = False
            record["valid"] = True
            sender = Sender(conn, key)
            conn.settimeout(max(60.0, 4 * params["keepalive"]))
            if request.get("content_hash") != params["content_hash"]:
                refuse(conn, f"this source serves content hash {params['content_hash'][:12]}, "
                             f"not {str(request.get('content_hash'))[:12]}")
                record["error"] = "asked for another image"
                return
            # A relayed node that re-routes asks for the rest of the stream from the byte it reached.
            start_at = max(0, int(request.get("offset") or 0))
            skip = 0 if start_at else self.present_layers(request.get("have"))
            ranges = self._wait_for_delta(sender, spool, skip) if skip else None
            record["skipped_layers"] = skip if ranges is not None else 0
            sender.header({"ok": True, "ref": params["ref"], "content_hash": params["content_hash"],
                           "skipped_layers": record["skipped_layers"], "offset": start_at})
            conn.settimeout(600)
            shortened = ""
            if ranges is not None:
                shortened = self._send_ranges(sender, spool, ranges)
            else:
                offset = start_at
                announced = 0  # nothing may go out before the first announcement
                with open(spool.path, "rb") as handle:
                    while True:
                        end, done, error = spool.wait_beyond(offset, params["keepalive"])
                        if error:
                            record["error"] = error
                            refuse(conn, f"the source failed: {error[:500]}")
                            return
                        if end > offset:
                            announced = self._announce(sender, announced, end, done)
                            count = min(end - offset, CHUNK)
                            self._send_file(sender, handle, offset, count)
                            offset += count
                        elif done:
                            # Exact once the save finished, even when every byte is out already.
                            self._announce(sender, announced, end, done)
                            break
                        else:
                            sender.keepalive()
            record["bytes"] = sender.data_bytes
            extra = {}
            if params.get("origin_secret"):
                # Signed per node with a key no other node holds: the whole save (a relayed or
                # re-routed node hashes it from byte 0 across hops), or this shortened stream.
                total, sha = (spool.written, spool.sha256) if ranges is None else (sender.data_bytes, shortened)
                extra = {"total": total, "origin": origin_map(
                    params["origin_secret"], params["origin_nodes"], params["ref"],
                    params["content_hash"], total, sha)}
            sender.end(extra)
            ack = sender.read_ack(params["max_seconds"])  # constant time: the MAC is not probed byte by byte
            record["acked"] = True
            record["loaded"] = bool(ack.get("loaded"))
            record["retry"] = bool(ack.get("retry"))
            record["error"] = str(ack.get("error", ""))[:2000]
        except (OSError, StreamError) as exc:
            record["error"] = record["error"] or str(exc)
        finally:
            if preauth:
                self.preauth.release(peer)
            record["seconds"] = round(time.monotonic() - start, 2)
            try:
                conn.close()
            except OSError:
                pass
            with self.lock:
                self.served.append(record)
                self.active -= 1
                self.last_activity = time.monotonic()
