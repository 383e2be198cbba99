# Copyright: lanekit developers
# Apache-2.0
"""rank_status helpers: stream merge, meminfo, and the readiness probes against a loopback server."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.lanekit.serving.plugins.modules import rank_status as rs


def test_merge_streams_orders_by_time_with_nanoseconds():
    out = ["2026-10-30T06:00:01.000000100Z a", "2026-10-30T06:00:03.000000000Z c"]
    err = ["2026-10-30T06:00:01.000000020Z before-a", "2026-10-30T06:00:02.500000000Z b"]
    assert [line.split(" ", 1)[1] for line in rs.merge_streams(out, err)] == ["before-a", "a", "b", "c"]


def test_meminfo_figures():
    text = "MemTotal:       125000000 kB\nMemFree:         1600000 kB\nMemAvailable:   31000000 kB\nHugePages_Total: 0\n"
    assert rs.parse_meminfo(text) == {"MemTotal": 125000000, "MemFree": 1600000, "MemAvailable": 31000000}


class Engine(BaseHTTPRequestHandler):
    """A loopback stand-in for an OpenAI-compatible server in a chosen state."""

    state = {"health": 200, "models": ["mistral-large-4"], "stream": True}

    def log_message(self, *args):
        pass

    def _send(self, code, body=b"", ctype="application/json"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            self._send(self.state["health"])
        elif self.path == "/v1/models":
            self._send(200, json.dumps({"data": [{"id": m} for m in self.state["models"]]}).encode())
        else:
            self._send(404)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length))
        assert body["stream"] is True
        chunks = [{"choices": [{"delta": {"role": "assistant"}}]}, {"choices": [{"delta": {"content": "ready"}}]}]
        payload = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        self._send(200, payload.encode(), "text/event-stream")


@pytest.fixture
def engine():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Engine)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Engine.state = {"health": 200, "models": ["mistral-large-4"]}
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_probe_api_ready(engine):
    result = rs.probe_api({"url": engine, "model": "mistral-large-4", "chat": True, "timeout": 2, "chat_timeout": 5})
    assert result["accepts"] and result["health_status"] == 200 and result["model_listed"]
    assert result["chat_ok"] and result["first_token"] == "ready" and result["ttft_s"] >= 0


def test_probe_api_warming_up(engine):
    Engine.state = {"health": 503, "models": []}
    result = rs.probe_api({"url": engine, "model": "mistral-large-4", "chat": True, "timeout": 2})
    assert result["accepts"] and result["health_status"] == 503 and "chat_ok" not in result


def test_probe_api_wrong_model(engine):
    Engine.state = {"health": 200, "models": ["other"]}
    result = rs.probe_api({"url": engine, "model": "mistral-large-4", "chat": True, "timeout": 2})
    assert not result["model_listed"] and "other" in result["error"]


def test_probe_api_refused():
    # a port nobody listens on (bound then closed)
    import socket
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    result = rs.probe_api({"url": f"http://127.0.0.1:{port}", "timeout": 1})
    assert result["accepts"] is False and result["error"]


PROC_TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:733D 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 0BD51FAC:733D 10D51FAC:C8A2 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0 20 4 30 10 -1
   2: 0BD51FAC:733D 0CD51FAC:A001 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0 20 4 30 10 -1
   3: 0BD51FAC:1F40 0DD51FAC:A002 01 00000000:00000000 00:00000000 00000000     0        0 4 1 0 20 4 30 10 -1
   4: 0BD51FAC:733D 0ED51FAC:A003 06 00000000:00000000 00:00000000 00000000     0        0 5 1 0 20 4 30 10 -1
"""
PROC_TCP6 = """  sl  local_address                         remote_address                        st
   0: 0000000000000000FFFF00000BD51FAC:733D 0000000000000000FFFF000011D51FAC:B000 01 0
"""


def test_established_peers_of_the_rendezvous_port():
    # listening socket, other ports and TIME_WAIT connections do not count
    assert rs.parse_proc_tcp(PROC_TCP, [29501]) == {29501: ["172.31.213.12", "172.31.213.16"]}
    assert rs.parse_proc_tcp(PROC_TCP6, [29501]) == {29501: ["172.31.213.17"]}
