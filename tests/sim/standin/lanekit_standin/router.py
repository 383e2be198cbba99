"""Stand-in for `vllm-router` in P/D disaggregation mode (`--vllm-pd-disaggregation`). A TEST INSTRUMENT.

It takes the recipe site's router command line (`--policy`, `--prefill URL`, `--decode URL`,
`--host`, `--port`, `--intra-node-data-parallel-size`), waits until every prefill and decode
endpoint answers `/health`, then answers the OpenAI API by sending each request through a prefill
endpoint first (one token, `kv_transfer_params.do_remote_decode`) and then through a decode
endpoint (`do_remote_prefill`, the prefill's transfer parameters), streaming the decode answer
back. Every answer carries `X-Lanekit-Router-Path: prefill=URL decode=URL` and the router logs
one line per routed request, so a test can see that both pools took part.

Environment: STANDIN_ROUTER_WAIT_S (default 1800) bounds the wait for the endpoints' health.
Failure injection: STANDIN_ROUTER_FAULT makes the router fail the way the real vllm-router does,
with its real texts (vllm-project/router):

* ``workers_unreachable``: the endpoints' health is never checked; after STANDIN_ROUTER_WAIT_S
  (here default 2 s) the router gives up with "Timeout ... waiting for hosts [...] to become healthy"
  and exits 1.
* ``port_in_use``: binding its port fails as if taken: ``Error: Os { code: 98, kind: AddrInUse, ...}``,
  exit 1 (a port really taken gives the same line).
* ``bad_argument``: the command line is refused as clap refuses an unknown flag
  (``error: unexpected argument '--lanekit-fault' found``), exit 2. Unknown flags given for real are
  refused with the same text.
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
from .common import emit, env_float, env_str
from .http_api import bind, make_server, start

VERSION = "0.1.9+lanekit.standin"
POLICIES = ("round_robin", "random", "cache_aware", "power_of_two", "consistent_hash")
FAULTS = ("workers_unreachable", "port_in_use", "bad_argument")


class ClapStyleParser(argparse.ArgumentParser):
    """argparse that refuses a command line with clap 4's texts, as the real (Rust) router does."""

    def error(self, message: str):  # noqa: D102 - argparse's hook
        unknown = message.split("unrecognized arguments: ", 1)
        if len(unknown) == 2:
            message = f"unexpected argument '{unknown[1].split()[0]}' found"
        print(f"error: {message}\n\nUsage: vllm-router [OPTIONS]\n\nFor more information, try '--help'.",
              file=sys.stderr)
        sys.exit(2)


def _log(level: str, msg: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    emit(f"{stamp}.{int(time.time() * 1000) % 1000:03d}Z {level:>5} vllm_router: {msg}")


def parser() -> argparse.ArgumentParser:
    p = ClapStyleParser(prog="vllm-router", description="lanekit stand-in for vllm-router (runs no model)")
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

    def wait_for_workers(self, fault: str | None = None) -> bool:
        pending = self.prefill + self.decode
        _log("INFO", f"Waiting for {len(pending)} workers to become healthy")
        wait_s = env_float("STANDIN_ROUTER_WAIT_S", 2.0 if fault else 1800.0) or 1800.0
        if fault == "workers_unreachable":
            # vllm-project/router src/routers/http/router.rs: the startup wait's timeout error.
            self.stop.wait(wait_s)
            if self.stop.is_set():
                return False
            text = (f"Timeout {int(wait_s)}s waiting for hosts {pending!r} to become healthy. Please set "
                    "--router-worker-startup-timeout-secs (vllm_router.launch_server) or "
                    "--worker-startup-timeout-secs (vllm_worker.router) to a larger value")
            _log("ERROR", text.replace("'", '"'))
            emit(f"Error: {text}".replace("'", '"'), sys.stderr)
            return False
        deadline = time.monotonic() + wait_s
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
    fault = (env_str("STANDIN_ROUTER_FAULT") or "").lower() or None
    if fault and fault not in FAULTS:
        emit(f"[lanekit stand-in] STANDIN_ROUTER_FAULT={fault!r} names no fault (one of: {', '.join(FAULTS)})",
             sys.stderr)
        fault = None
    argv = list(sys.argv[1:] if argv is None else argv)
    if fault == "bad_argument":
        argv.append("--lanekit-fault")
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
    if not router.wait_for_workers(fault):
        if router.stop.is_set():
            _log("INFO", "Shutting down router")
            return 0
        return 1
    server = make_server(args.host, args.port, handler_for(router))
    try:
        if fault == "port_in_use":
            raise OSError(98, "Address already in use")
        bind(server)
    except OSError as exc:
        # vllm-project/router src/server.rs: `TcpListener::bind(&addr).await?` ends main() with
        # the io error, which Rust prints in its Debug form.
        kind = "AddrInUse" if exc.errno == 98 else "Other"
        emit(f'Error: Os {{ code: {exc.errno}, kind: {kind}, message: "{exc.strerror or exc}" }}', sys.stderr)
        return 1
    start(server)
    _log("INFO", f"Starting router on {args.host}:{args.port}")
    router.stop.wait()
    _log("INFO", "Shutting down router")
    server.shutdown()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
