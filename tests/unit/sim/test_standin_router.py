"""The stand-in vllm-router: waits for its endpoints' health, then sends each request through a prefill
endpoint (one token, do_remote_decode) and a decode endpoint (do_remote_prefill), streaming decode's answer."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standin_helpers import PY, Rank, base_env, free_port, http, wait_http


def _backend(name: str, seen: list):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _send(self, body: dict):
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._send({"object": "list", "data": [{"id": "m"}]} if self.path == "/v1/models" else {})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((name, body))
            self._send({"choices": [{"message": {"content": f"from {name}"}}],
                        "kv_transfer_params": {"remote_engine_id": name} if name == "prefill" else None})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_request_goes_through_prefill_then_decode(tmp_path):
    seen: list = []
    prefill, decode = _backend("prefill", seen), _backend("decode", seen)
    port = free_port()
    urls = [f"http://127.0.0.1:{s.server_address[1]}" for s in (prefill, decode)]
    rank = Rank([PY, "-m", "lanekit_standin.router", "--policy", "round_robin", "--vllm-pd-disaggregation",
                 "--prefill", urls[0], "--decode", urls[1], "--host", "127.0.0.1", "--port", str(port),
                 "--intra-node-data-parallel-size", "1"], base_env(), str(tmp_path / "router.log"))
    try:
        wait_http(f"http://127.0.0.1:{port}/health", rank=rank)
        rank.wait_line("All workers are healthy")
        status, headers, text = http("POST", f"http://127.0.0.1:{port}/v1/chat/completions",
                                     {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 9})
        assert status == 200 and json.loads(text)["choices"][0]["message"]["content"] == "from decode"
        assert headers["X-Lanekit-Router-Path"] == f"prefill={urls[0]} decode={urls[1]}"
        assert [name for name, _body in seen] == ["prefill", "decode"]
        assert seen[0][1]["max_tokens"] == 1 and seen[0][1]["kv_transfer_params"]["do_remote_decode"] is True
        assert seen[1][1]["max_tokens"] == 9 and seen[1][1]["kv_transfer_params"] == {
            "remote_engine_id": "prefill", "do_remote_prefill": True, "do_remote_decode": False}
        assert http("GET", f"http://127.0.0.1:{port}/v1/models")[0] == 200
        rank.wait_line(r"request 1: /v1/chat/completions prefill .* \(200\) -> decode .* \(200\)")
        rank.terminate()
        assert rank.wait_exit() == 0 and "Shutting down router" in rank.text()
    finally:
        rank.kill()
        prefill.shutdown()
        decode.shutdown()


def test_the_router_refuses_a_command_without_pd_mode(tmp_path):
    rank = Rank([PY, "-m", "lanekit_standin.router", "--prefill", "http://x:1", "--decode", "http://y:2"],
                base_env(), str(tmp_path / "router.log"))
    try:
        assert rank.wait_exit() == 2 and "--vllm-pd-disaggregation" in rank.text()
    finally:
        rank.kill()


def _router_argv(urls: list[str], port: int) -> list[str]:
    return [PY, "-m", "lanekit_standin.router", "--policy", "round_robin", "--vllm-pd-disaggregation",
            "--prefill", urls[0], "--decode", urls[1], "--host", "127.0.0.1", "--port", str(port),
            "--intra-node-data-parallel-size", "1"]


def _scan_router(text: str) -> list[str]:
    from ansible_collections.lanekit.serving.plugins.module_utils._boot import _signatures as sigs
    return list(sigs.scan_text(text, "vllm", role="router"))


def test_an_injected_unreachable_pool_ends_the_router_with_the_real_timeout_line(tmp_path):
    rank = Rank(_router_argv(["http://127.0.0.1:9", "http://127.0.0.1:10"], free_port()),
                base_env({"STANDIN_ROUTER_FAULT": "workers_unreachable", "STANDIN_ROUTER_WAIT_S": "1"}),
                str(tmp_path / "router.log"))
    try:
        assert rank.wait_exit() == 1
        assert 'waiting for hosts ["http://127.0.0.1:9", "http://127.0.0.1:10"] to become healthy' in rank.text()
        assert _scan_router(rank.text()) == ["router_workers_unreachable"]
    finally:
        rank.kill()


def test_an_injected_port_conflict_ends_the_router_with_rusts_bind_error(tmp_path):
    seen: list = []
    prefill, decode = _backend("prefill", seen), _backend("decode", seen)
    urls = [f"http://127.0.0.1:{s.server_address[1]}" for s in (prefill, decode)]
    rank = Rank(_router_argv(urls, free_port()), base_env({"STANDIN_ROUTER_FAULT": "port_in_use"}),
                str(tmp_path / "router.log"))
    try:
        assert rank.wait_exit() == 1
        assert 'Error: Os { code: 98, kind: AddrInUse, message: "Address already in use" }' in rank.text()
        assert _scan_router(rank.text()) == ["router_port_in_use"]
    finally:
        rank.kill()
        prefill.shutdown()
        decode.shutdown()


def test_an_injected_bad_argument_is_refused_as_clap_refuses_it(tmp_path):
    rank = Rank(_router_argv(["http://x:1", "http://y:2"], free_port()),
                base_env({"STANDIN_ROUTER_FAULT": "bad_argument"}), str(tmp_path / "router.log"))
    try:
        assert rank.wait_exit() == 2
        assert "error: unexpected argument '--lanekit-fault' found" in rank.text()
        assert _scan_router(rank.text()) == ["router_bad_argument"]
    finally:
        rank.kill()
