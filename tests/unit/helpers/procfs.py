"""A fake /proc tree (under tmp_path) for the port-owner check, and a loopback API that records who sent
which Authorization header to which path.

The fake tree has what the check reads: ``net/tcp`` and ``net/tcp6`` (listening sockets with their
inodes, in the kernel's hex notation), and per process ``fd/<n>`` links to ``socket:[inode]``,
``status`` (PPid, Uid), ``comm`` and ``cgroup``.
"""
from __future__ import annotations

import json
import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
CONTAINER_ID = "c0ffee" + "0" * 58
ENGINE_CGROUP = f"0::/system.slice/docker-{CONTAINER_ID}.scope"


def _hex(address: str) -> str:
    """An address as /proc/net/tcp{,6} prints it: each 32-bit word in host (little endian) order."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    raw = socket.inet_pton(family, address)
    return "".join(f"{int.from_bytes(raw[i:i + 4], 'little'):08X}" for i in range(0, len(raw), 4))


class FakeProc:
    """A /proc of one node: listening sockets and the processes that hold them."""

    def __init__(self, root: str) -> None:
        self.root = str(root)
        os.makedirs(os.path.join(self.root, "net"), exist_ok=True)
        self.lines: dict[str, list[str]] = {"tcp": [], "tcp6": []}
        self._write_net()

    def _write_net(self) -> None:
        for name, lines in self.lines.items():
            with open(os.path.join(self.root, "net", name), "w", encoding="ascii") as handle:
                handle.write(HEADER + "".join(lines))

    def listen(self, port: int, inode: int, address: str = "0.0.0.0", state: str = "0A") -> None:
        """A socket listening on address:port (state 0A), or in another state (01 established)."""
        table = "tcp6" if ":" in address else "tcp"
        row = len(self.lines[table])
        remote = "0" * len(_hex(address))
        self.lines[table].append(f"   {row}: {_hex(address)}:{port:04X} {remote}:0000 {state} 00000000:00000000 "
                                 f"00:00000000 00000000     0        0 {inode} 1 0000000000000000 100 0 0 10 0\n")
        self._write_net()

    def process(self, pid: int, ppid: int, comm: str = "python3", uid: int = 0, cgroup: str = "0::/",
                sockets: tuple[int, ...] = ()) -> None:
        base = os.path.join(self.root, str(pid))
        os.makedirs(os.path.join(base, "fd"), exist_ok=True)
        with open(os.path.join(base, "status"), "w", encoding="ascii") as handle:
            handle.write(f"Name:\t{comm}\nPid:\t{pid}\nPPid:\t{ppid}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
        with open(os.path.join(base, "comm"), "w", encoding="ascii") as handle:
            handle.write(comm + "\n")
        with open(os.path.join(base, "cgroup"), "w", encoding="ascii") as handle:
            handle.write(cgroup + "\n")
        os.symlink("/dev/null", os.path.join(base, "fd", "0"))
        for n, inode in enumerate(sockets, start=3):
            os.symlink(f"socket:[{inode}]", os.path.join(base, "fd", str(n)))

    def rank_container(self, init_pid: int = 50, engine_pid: int = 60, inode: int = 0) -> dict:
        """The rank container's init and its engine (holding ``inode``), and its docker inspect object."""
        self.process(init_pid, ppid=40, comm="docker-init", cgroup=ENGINE_CGROUP)
        self.process(engine_pid, ppid=init_pid, comm="python3", cgroup=ENGINE_CGROUP,
                     sockets=(inode,) if inode else ())
        return {"Id": CONTAINER_ID, "State": {"Running": True, "Pid": init_pid}}


class Recorder(BaseHTTPRequestHandler):
    """An OpenAI-like API that answers everything and records (method, path, Authorization); ``/metrics``
    answers the server's ``metrics`` text."""

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self) -> None:
        self.server.seen.append((self.command, self.path, self.headers.get("Authorization")))  # type: ignore[attr-defined]
        if self.command == "POST":
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            chunks = [{"choices": [{"delta": {"content": f"w{i} "}}]} for i in range(3)]
            body = ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()
            ctype = "text/event-stream"
        elif self.path == "/v1/models":
            body, ctype = json.dumps({"data": [{"id": "m"}]}).encode(), "application/json"
        elif self.path == "/metrics" and self.server.metrics:  # type: ignore[attr-defined]
            body, ctype = self.server.metrics.encode(), "text/plain"  # type: ignore[attr-defined]
        else:
            body, ctype = b"", "application/json"
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = _answer
    do_POST = _answer


def start_recorder() -> ThreadingHTTPServer:
    """The recording API on 127.0.0.1 (its ``seen`` list, its port in ``server_address[1]``)."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    srv.daemon_threads = True
    srv.seen = []  # type: ignore[attr-defined]
    srv.metrics = ""  # type: ignore[attr-defined]  # the /metrics text, when a test wants the engine's counter
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def stop_recorder(srv: ThreadingHTTPServer) -> None:
    srv.shutdown()
    srv.server_close()
