"""Cross-node rendezvous and barriers over TCP: the stand-in for the torch.distributed store.

The head (node rank 0) listens on the rendezvous address (vLLM --master-addr:--master-port,
SGLang --dist-init-addr); the other ranks connect, retrying until the timeout. Messages are
JSON lines:

  rank -> head: {"op": "hello", "rank", "nnodes", "fingerprint", "host"}
                {"op": "arrive", "name"}                      (barrier)
  head -> rank: {"op": "status", "joined": [...]}             (after every join/leave)
                {"op": "world"}                               (all nnodes ranks joined)
                {"op": "reject", "reason"}                    (mismatch or late join)
                {"op": "dup", "reason"}                       (rank already taken: wait, time out)
                {"op": "release", "name"}                     (barrier passed)
                {"op": "abort", "reason"}                     (the group failed)
                {"op": "shutdown"}                            (rank 0 stops: ShutdownReq)

Once the world has formed, losing a peer is fatal for the head (which aborts the others), and
losing the head is reported to the worker through `on_head_gone`.
"""
from __future__ import annotations

import json
import socket
import threading
import time

from .common import Fatal, Runtime


class RendezvousTimeout(Exception):
    def __init__(self, joined, missing, nnodes, connected_to_head=True):
        super().__init__(f"missing node ranks {missing}")
        self.joined = sorted(joined)
        self.missing = sorted(missing)
        self.nnodes = nnodes
        self.connected_to_head = connected_to_head


class BarrierTimeout(Exception):
    def __init__(self, name, missing):
        super().__init__(f"barrier {name}: missing {missing}")
        self.name = name
        self.missing = sorted(missing)


class GroupAborted(Exception):
    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


class _Conn:
    def __init__(self, sock: socket.socket, peer: str):
        self.sock = sock
        self.peer = peer
        self.lock = threading.Lock()
        self.rank: int | None = None
        self.closed = False

    def send(self, msg: dict) -> None:
        data = (json.dumps(msg) + "\n").encode()
        with self.lock:
            if self.closed:
                return
            try:
                self.sock.sendall(data)
            except OSError:
                self.closed = True

    def close(self) -> None:
        with self.lock:
            self.closed = True
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                self.sock.close()
            except OSError:
                pass

    def lines(self):
        buf = b""
        while True:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.strip():
                    try:
                        yield json.loads(line)
                    except ValueError:
                        continue


def _resolve(addr: str, port: int):
    infos = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM)
    if not infos:
        raise OSError(f"cannot resolve {addr}")
    family, socktype, proto, _canonname, sockaddr = infos[0]
    return family, socktype, proto, sockaddr


class Group:
    """One node's membership in the rank group. `rank` is the node rank, `nnodes` the size."""

    def __init__(self, rt: Runtime, *, rank: int, nnodes: int, addr: str, port: int,
                 fingerprint: dict, on_peer_lost=None, on_head_gone=None):
        self.rt = rt
        self.rank = rank
        self.nnodes = nnodes
        self.addr = addr
        self.port = port
        self.fingerprint = fingerprint
        self.on_peer_lost = on_peer_lost
        self.on_head_gone = on_head_gone
        self.on_abort = None
        self.closing = False
        # head state
        self._listener: socket.socket | None = None
        self._members: dict[int, _Conn | None] = {}
        self._arrivals: dict[str, set[int]] = {}
        self._released: set[str] = set()
        self.world = False
        # worker state
        self._head: _Conn | None = None
        self._joined_view: list[int] = []
        self._dup_reason: str | None = None
        self._reject_reason: str | None = None
        self._abort_reason: str | None = None
        self.shutdown_requested = False
        self.head_gone = False

    @property
    def is_head(self) -> bool:
        return self.rank == 0

    # ------------------------------------------------------------------------------------
    # head
    def listen(self) -> None:
        """Bind and listen on the rendezvous address (head only). Raises Fatal with a
        torch-like message if that is impossible."""
        try:
            family, socktype, proto, sockaddr = _resolve(self.addr, self.port)
            sock = socket.socket(family, socktype, proto)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(sockaddr)
            sock.listen(128)
        except OSError as exc:
            errno_name = {98: "EADDRINUSE", 99: "EADDRNOTAVAIL", 13: "EACCES"}.get(exc.errno or 0, "EUNKNOWN")
            raise Fatal([
                "torch.distributed.DistNetworkError: The server socket has failed to listen on "
                f"{self.addr}:{self.port} (the rendezvous address of node rank 0). "
                f"code: -{exc.errno or 0}, name: {errno_name}, message: {exc.strerror or exc}",
            ]) from None
        self._listener = sock
        self._members[0] = None
        threading.Thread(target=self._accept_loop, name="rdzv-accept", daemon=True).start()

    def _accept_loop(self) -> None:
        while not self.closing:
            try:
                sock, peer = self._listener.accept()
            except OSError:
                return
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            conn = _Conn(sock, f"{peer[0]}:{peer[1]}")
            threading.Thread(target=self._serve_conn, args=(conn,), name="rdzv-peer", daemon=True).start()

    def _broadcast(self, msg: dict, exclude: int | None = None) -> None:
        for r, conn in list(self._members.items()):
            if conn is not None and r != exclude:
                conn.send(msg)

    def _status(self) -> None:
        self._broadcast({"op": "status", "joined": sorted(self._members)})

    def _serve_conn(self, conn: _Conn) -> None:
        registered = False
        for msg in conn.lines():
            op = msg.get("op")
            if op == "hello":
                with self.rt.cond:
                    rank = int(msg.get("rank", -1))
                    theirs = msg.get("fingerprint") or {}
                    mismatch = [f"{k}={theirs.get(k)!r} (node rank 0 has {v!r})"
                                for k, v in self.fingerprint.items() if theirs.get(k) != v]
                    if int(msg.get("nnodes", -1)) != self.nnodes:
                        mismatch.insert(0, f"nnodes={msg.get('nnodes')!r} (node rank 0 has {self.nnodes})")
                    if mismatch:
                        conn.send({"op": "reject", "reason": "configuration differs from node rank 0: " + ", ".join(mismatch)})
                        break
                    if self.world:
                        conn.send({"op": "reject", "reason": f"node rank {rank} joined after the group formed; "
                                   "a rank cannot rejoin: restart every rank of the lane"})
                        break
                    if not 0 < rank < self.nnodes:
                        conn.send({"op": "reject", "reason": f"node rank {rank} is out of range for nnodes={self.nnodes}"})
                        break
                    if rank in self._members:
                        holder = self._members[rank]
                        conn.send({"op": "dup", "reason": f"node rank {rank} is already held by "
                                   f"{holder.peer if holder else 'this process'}"})
                        continue
                    conn.rank = rank
                    self._members[rank] = conn
                    registered = True
                    self._status()
                    if len(self._members) == self.nnodes:
                        self.world = True
                        self._broadcast({"op": "world"})
                    self.rt.cond.notify_all()
            elif op == "arrive" and registered:
                with self.rt.cond:
                    self._arrivals.setdefault(msg.get("name", ""), set()).add(conn.rank)
                    self._check_barrier(msg.get("name", ""))
                    self.rt.cond.notify_all()
        # connection closed
        conn.close()
        if not registered:
            return
        with self.rt.cond:
            if self._members.get(conn.rank) is conn:
                del self._members[conn.rank]
            lost_after_world = self.world
            if not lost_after_world:
                self._status()
            self.rt.cond.notify_all()
        if lost_after_world and not self.closing and self.on_peer_lost:
            self.on_peer_lost(conn.rank, conn.peer)

    def _check_barrier(self, name: str) -> None:
        if name in self._released:
            return
        if len(self._arrivals.get(name, set())) >= self.nnodes:
            self._released.add(name)
            self._broadcast({"op": "release", "name": name})

    def abort_all(self, reason: str) -> None:
        with self.rt.cond:
            self._broadcast({"op": "abort", "reason": reason})

    # ------------------------------------------------------------------------------------
    # worker
    def _connect(self, deadline: float) -> None:
        last_err = None
        while True:
            self.rt.check()
            left = deadline - time.monotonic()
            if left <= 0:
                raise RendezvousTimeout([], [0], self.nnodes, connected_to_head=False)
            try:
                family, socktype, proto, sockaddr = _resolve(self.addr, self.port)
                sock = socket.socket(family, socktype, proto)
                sock.settimeout(min(2.0, max(0.1, left)))
                sock.connect(sockaddr)
                sock.settimeout(None)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
                self._head = _Conn(sock, f"{self.addr}:{self.port}")
                return
            except OSError as exc:
                last_err = exc
                try:
                    sock.close()
                except Exception:  # noqa: BLE001
                    pass
            self.rt.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
        del last_err

    def _reader(self) -> None:
        for msg in self._head.lines():
            op = msg.get("op")
            if op == "abort" and self.on_abort and not self.closing:
                with self.rt.cond:
                    self._abort_reason = msg.get("reason")
                self.on_abort(msg.get("reason"))
            with self.rt.cond:
                if op == "status":
                    self._joined_view = list(msg.get("joined", []))
                elif op == "world":
                    self.world = True
                elif op == "dup":
                    self._dup_reason = msg.get("reason")
                elif op == "reject":
                    self._reject_reason = msg.get("reason")
                elif op == "release":
                    self._released.add(msg.get("name", ""))
                elif op == "abort":
                    self._abort_reason = msg.get("reason")
                elif op == "shutdown":
                    self.shutdown_requested = True
                self.rt.cond.notify_all()
        with self.rt.cond:
            self.head_gone = True
            self.rt.cond.notify_all()
        self._head.close()
        if not self.closing and self._reject_reason is None and self.on_head_gone:
            self.on_head_gone()

    # ------------------------------------------------------------------------------------
    # both
    def join(self, timeout: float) -> None:
        """Block until all nnodes ranks joined. Raises RendezvousTimeout / Fatal."""
        deadline = time.monotonic() + timeout
        if self.nnodes <= 1:
            self.world = True
            return
        if self.is_head:
            ok = self.rt.wait_for(lambda: self.world, max(0.0, deadline - time.monotonic()))
            if not ok:
                with self.rt.cond:
                    joined = sorted(self._members)
                raise RendezvousTimeout(joined, sorted(set(range(self.nnodes)) - set(joined)), self.nnodes)
            return
        self._connect(deadline)
        self._head.send({"op": "hello", "rank": self.rank, "nnodes": self.nnodes,
                         "fingerprint": self.fingerprint, "host": socket.gethostname()})
        threading.Thread(target=self._reader, name="rdzv-head", daemon=True).start()
        ok = self.rt.wait_for(lambda: self.world or self._reject_reason or self._abort_reason or self.head_gone,
                              max(0.0, deadline - time.monotonic()))
        if self._reject_reason:
            raise GroupAborted(self._reject_reason)
        if self._abort_reason:
            raise GroupAborted(self._abort_reason)
        if not ok or not self.world:
            joined = sorted(set(self._joined_view) - ({self.rank} if self._dup_reason else set()))
            missing = sorted(set(range(self.nnodes)) - set(joined))
            if self.head_gone and not self.world:
                raise GroupAborted(f"node rank 0 ({self.addr}:{self.port}) closed the rendezvous connection "
                                   "before all ranks joined")
            exc = RendezvousTimeout(joined, missing, self.nnodes)
            exc.dup_reason = self._dup_reason
            raise exc

    def barrier(self, name: str, timeout: float) -> None:
        """All ranks arrive at `name` or BarrierTimeout(missing) after `timeout` seconds."""
        if self.nnodes <= 1:
            return
        if self.is_head:
            with self.rt.cond:
                self._arrivals.setdefault(name, set()).add(0)
                self._check_barrier(name)
            ok = self.rt.wait_for(lambda: name in self._released, timeout)
            if not ok:
                with self.rt.cond:
                    arrived = set(self._arrivals.get(name, set()))
                raise BarrierTimeout(name, sorted(set(range(self.nnodes)) - arrived))
            return
        self._head.send({"op": "arrive", "name": name})
        ok = self.rt.wait_for(lambda: name in self._released or self._abort_reason or self.head_gone, timeout)
        if self._abort_reason:
            raise GroupAborted(self._abort_reason)
        if name in self._released:
            return
        if self.head_gone:
            raise GroupAborted(f"node rank 0 ({self.addr}:{self.port}) went away")
        if not ok:
            raise BarrierTimeout(name, [])

    def close(self, send_shutdown: bool) -> None:
        self.closing = True
        if self.is_head:
            with self.rt.cond:
                if send_shutdown:
                    self._broadcast({"op": "shutdown"})
                conns = [c for c in self._members.values() if c is not None]
            for c in conns:
                c.close()
            if self._listener is not None:
                try:
                    self._listener.close()
                except OSError:
                    pass
        elif self._head is not None:
            self._head.close()

    @property
    def abort_reason(self) -> str | None:
        return self._abort_reason
