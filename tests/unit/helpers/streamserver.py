"""A local OpenAI-style streaming server for the watch's tests: it streams five tokens, stalls after
three, hangs before the first, or answers 503, as its ``mode`` says (switchable while it runs).

With ``metrics`` set (``vllm_metrics`` or ``sglang_metrics``, or any function of the count to text) it
also serves the engine's open ``/metrics``: a generated-token counter that counts the tokens it
streamed plus ``load`` for each read (other clients' tokens, generated while the probe waits).
``metrics_delay`` holds the answer back, ``metrics_trickle`` sends its lines that many seconds apart.
Every request is recorded in ``seen`` as (method, path, Authorization).
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def vllm_metrics(count: float) -> str:
    return ("# HELP vllm:generation_tokens_total Number of generation tokens processed.\n"
            "# TYPE vllm:generation_tokens_total counter\n"
            f'vllm:generation_tokens_total{{engine="0",model_name="m"}} {count}\n'
            f'vllm:generation_tokens_created{{engine="0",model_name="m"}} 1.7e9\n')


def sglang_metrics(count: float) -> str:
    return ("# TYPE sglang:generation_tokens_total counter\n"
            f'sglang:generation_tokens_total{{model_name="m"}} {count}\n')


class Handler(BaseHTTPRequestHandler):
    mode = "stream"

    def log_message(self, *args):
        pass

    def do_GET(self):
        srv = self.server
        srv.seen.append(("GET", self.path, self.headers.get("Authorization")))
        if self.path != "/metrics" or srv.metrics is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        srv.generated += srv.load
        lines = srv.metrics(float(srv.generated)).encode().splitlines(keepends=True)
        try:
            time.sleep(srv.metrics_delay)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(sum(len(line) for line in lines)))
            self.end_headers()
            for line in lines:
                self.wfile.write(line)
                self.wfile.flush()
                time.sleep(srv.metrics_trickle)
        except OSError:
            pass  # the probe gave up on a slow endpoint, as it should

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.seen.append(("POST", self.path, self.headers.get("Authorization")))
        assert body["stream"] is True and self.headers.get("Authorization") == "Bearer k"
        if self.server.mode == "refuse":
            self.send_response(503)
            self.end_headers()
            return
        if self.server.mode == "hang":
            time.sleep(3)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for i in range(5):
            chunk = {"choices": [{"delta": {"content": f"w{i} "}}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
            self.server.generated += 1
            if self.server.mode == "stall" and i == 2:
                time.sleep(3)
                return
            time.sleep(0.02)
        self.wfile.write(b"data: [DONE]\n\n")


def start_server() -> ThreadingHTTPServer:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    srv.mode = "stream"
    srv.seen = []
    srv.metrics = None
    srv.generated = 0
    srv.load = 0
    srv.metrics_delay = 0.0
    srv.metrics_trickle = 0.0
    return srv


def stop_server(srv: ThreadingHTTPServer) -> None:
    srv.shutdown()
    srv.server_close()
