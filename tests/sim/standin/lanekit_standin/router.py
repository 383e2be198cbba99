"""Stand-in for `vllm-router` in P/D disaggregation mode (`--vllm-pd-disaggregation`). A TEST INSTRUMENT.

It takes the recipe site's router command line (`--policy`, `--prefill URL`, `--decode URL`,
`--host`, `--port`, `--intra-node-data-parallel-size`), waits until every prefill and decode
endpoint answers `/health`, then answers the OpenAI API by sending each request through a prefill
endpoint first (one token, `kv_transfer_params.do_remote_decode`) and then through a decode
endpoint (`do_remote_prefill`, the prefill's transfer parameters), streaming the decode answer
back. Every answer carries `X-Lanekit-Router-Path: prefill=URL decode=URL` and the router logs
one line per routed request, so a test can see that both pools took part.

Environment: STANDIN_ROUTER_WAIT_S (default 1800) bounds the wait for the endpoints' health.
"""
from __future__ import annotations

import argparse
import http.client
import itertools
import json
import signal
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler

from . import STANDIN_LABEL
from .common import emit, env_float
from .http_api import bind, make_server, start

VERSION = "0.1.9+lanekit.standin"
POLICIES = ("round_robin", "random", "cache_aware", "power_of_two", "consistent_hash")


def _log(level: str, msg: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    emit(f"{stamp}.{int(time.time() * 1000) % 1000:03d}Z {level:>5} vllm_router: {msg}")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vllm-router", description="lanekit stand-in for vllm-router (runs no model)")
    p.add_argument("--policy", choices=POLICIES, default="round_robin")
    p.add_argument("--vllm-pd-disaggregation", action="store_true")
    p.add_argument("--pd-disaggregation", action="store_true")
    # sgl-router style: URL, optionally followed by a bootstrap port.
    p.add_argument("--prefill", nargs="+", action="append", default=[], metavar=("URL", "BOOTSTRAP_PORT"))
    p.add_argument("--decode", action="append", default=[], metavar="URL")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--intra-node-data-parallel-size", type=int, default=1)
    p.add_argument("--request-timeout-secs", type=int, default=1800)
    p.add_argument("--log-level", default="info")
    p.add_argument("--version", action="store_true")
    return p


def _health(url: str, timeout: float = 3.0) -> int | None:
    parts = urllib.parse.urlsplit(url)
    try:
        conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
        conn.request("GET", "/health")
        status = conn.getresponse().status
        conn.close()
        return status
    except OSError:
        return None


class Router:
    def __init__(self, args):
        self.args = args
        self.prefill = [entry[0] for entry in args.prefill]
        self.decode = list(args.decode)
        self.p_cycle = itertools.cycle(self.prefill)
        self.d_cycle = itertools.cycle(self.decode)
        self.lock = threading.Lock()
        self.count = 0
        self.stop = threading.Event()

    def pick(self) -> tuple[str, str, int]:
        with self.lock:
            self.count += 1
            return next(self.p_cycle), next(self.d_cycle), self.count

    def wait_for_workers(self) -> bool:
        pending = self.prefill + self.decode
        _log("INFO", f"Waiting for {len(pending)} workers to become healthy")
        deadline = time.monotonic() + (env_float("STANDIN_ROUTER_WAIT_S", 1800.0) or 1800.0)
        while pending and not self.stop.is_set():
            for url in list(pending):
                if _health(url) == 200:
                    _log("INFO", f"Worker {url} is healthy")
                    pending.remove(url)
            if pending:
                if time.monotonic() > deadline:
                    _log("ERROR", f"Timeout waiting for workers to become healthy: {', '.join(pending)}")
                    return False
                self.stop.wait(2.0)
        if self.stop.is_set():
            return False
        _log("INFO", "All workers are healthy")
        return True


def handler_for(router: Router):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "vllm-router"
        sys_version = ""

        def log_message(self, fmt, *args):
            pass

        def _send(self, code: int, body, extra: dict | None = None):
            data = json.dumps(body).encode() if not isinstance(body, bytes) else body
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-Lanekit-Standin", f"vllm-router {STANDIN_LABEL}")
            for key, value in (extra or {}).items():
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def _proxy_get(self, path: str):
            url = router.decode[0]
            parts = urllib.parse.urlsplit(url)
            try:
                conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
                conn.request("GET", path)
                resp = conn.getresponse()
                data = resp.read()
                conn.close()
            except OSError as exc:
                return self._send(502, {"error": {"message": f"decode endpoint {url} unreachable: {exc}"}})
            return self._send(resp.status, data)

        def do_GET(self):
            path = self.path.split("?", 1)[0]
            if path in ("/health", "/liveness", "/readiness"):
                return self._send(200, {"status": "healthy", "lanekit_standin": STANDIN_LABEL})
            if path in ("/v1/models", "/version"):
                return self._proxy_get(path)
            return self._send(404, {"detail": "Not Found"})

        def do_HEAD(self):
            self.do_GET()

        def do_POST(self):
            path = self.path.split("?", 1)[0]
            if path not in ("/v1/chat/completions", "/v1/completions"):
                return self._send(404, {"detail": "Not Found"})
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                return self._send(400, {"error": {"message": "Invalid JSON body"}})
            if not isinstance(body, dict):
                return self._send(400, {"error": {"message": "Invalid JSON body"}})
            prefill_url, decode_url, n = router.pick()
            route = f"prefill={prefill_url} decode={decode_url}"
            # 1. prefill: one token, keep the KV for a remote decode.
            first = dict(body, stream=False, max_tokens=1, max_completion_tokens=1,
                         kv_transfer_params={"do_remote_decode": True, "do_remote_prefill": False})
            first.pop("stream_options", None)
            status, answer = self._post(prefill_url, path, first)
            if status != 200:
                _log("WARN", f"request {n}: prefill {prefill_url} answered {status}")
                return self._send(status or 502, answer or {"error": {"message": f"prefill {prefill_url} failed"}},
                                  {"X-Lanekit-Router-Path": route})
            params = (json.loads(answer) if answer else {}).get("kv_transfer_params") or {
                "remote_host": urllib.parse.urlsplit(prefill_url).hostname, "remote_engine_id": f"prefill-{n}"}
            # 2. decode: the whole request, reading the KV the prefill produced.
            second = dict(body, kv_transfer_params=dict(params, do_remote_prefill=True, do_remote_decode=False))
            parts = urllib.parse.urlsplit(decode_url)
            try:
                conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=router.args.request_timeout_secs)
                conn.request("POST", path, json.dumps(second), {"Content-Type": "application/json"})
                resp = conn.getresponse()
            except OSError as exc:
                _log("WARN", f"request {n}: decode {decode_url} unreachable: {exc}")
                return self._send(502, {"error": {"message": f"decode endpoint {decode_url} unreachable"}},
                                  {"X-Lanekit-Router-Path": route})
            _log("INFO", f"request {n}: {path} prefill {prefill_url} (200) -> decode {decode_url} ({resp.status})")
            self.send_response(resp.status)
            for key in ("Content-Type", "Cache-Control", "X-Lanekit-Standin"):
                if resp.getheader(key):
                    self.send_header(key, resp.getheader(key))
            self.send_header("X-Lanekit-Router-Path", route)
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            while True:
                chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(65536)
                if not chunk:
                    break
                self.wfile.write(chunk)
                self.wfile.flush()
            conn.close()
            return None

        def _post(self, url: str, path: str, body: dict) -> tuple[int | None, bytes | None]:
            parts = urllib.parse.urlsplit(url)
            try:
                conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=router.args.request_timeout_secs)
                conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
                resp = conn.getresponse()
                data = resp.read()
                conn.close()
                return resp.status, data
            except OSError:
                return None, None

    return Handler


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.version:
        print(f"vllm-router {VERSION}")
        return 0
    if not (args.vllm_pd_disaggregation or args.pd_disaggregation):
        print("vllm-router: error: this stand-in routes P/D only; pass --vllm-pd-disaggregation", file=sys.stderr)
        return 2
    if not args.prefill or not args.decode:
        print("vllm-router: error: P/D mode needs at least one --prefill and one --decode URL", file=sys.stderr)
        return 2
    router = Router(args)
    signal.signal(signal.SIGTERM, lambda *_a: router.stop.set())
    signal.signal(signal.SIGINT, lambda *_a: router.stop.set())
    _log("INFO", f"vllm-router {VERSION} (lanekit stand-in: runs no model)")
    _log("INFO", f"Router configuration: mode=pd_disaggregation policy={args.policy} prefill={router.prefill} "
                 f"decode={router.decode} intra_node_data_parallel_size={args.intra_node_data_parallel_size}")
    if not router.wait_for_workers():
        if router.stop.is_set():
            _log("INFO", "Shutting down router")
            return 0
        return 1
    server = make_server(args.host, args.port, handler_for(router))
    try:
        bind(server)
    except OSError as exc:
        _log("ERROR", f"Failed to bind {args.host}:{args.port}: {exc.strerror or exc}")
        return 1
    start(server)
    _log("INFO", f"Starting router on {args.host}:{args.port}")
    router.stop.wait()
    _log("INFO", "Shutting down router")
    server.shutdown()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
