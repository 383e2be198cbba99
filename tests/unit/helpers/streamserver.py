"""A local OpenAI-style streaming server for the watch's tests: it streams five tokens, stalls after
three, hangs before the first, or answers 503, as its ``mode`` says (switchable while it runs)."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    mode = "stream"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
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
    return srv


def stop_server(srv: ThreadingHTTPServer) -> None:
    srv.shutdown()
    srv.server_close()
