"""The bench's controller helpers: progress line, API check, venv check, versions, the chart."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._bench import _api as api
from ansible_collections.lanekit.serving.plugins.plugin_utils._bench import _report as report

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))))
BENCH_VENV = os.path.join(REPO, ".venv-bench")


def test_progress_counts_throughput_points_then_scenarios(tmp_path):
    events, benchy = tmp_path / "e.jsonl", tmp_path / "p.jsonl"
    prog = api.Progress("L", 4)
    prog.feed(str(events), str(benchy))
    assert prog.line() == "bench L: starting (warm-up, latency measurement)"
    start = {"type": "request_start", "context_size": 1024, "concurrency": 2, "run_index": 1}
    benchy.write_text(json.dumps({"type": "header"}) + "\n" + json.dumps(start) + "\n" + json.dumps(start) + "\n")
    prog.feed(str(events), str(benchy))
    assert prog.line() == "bench L: throughput scenario 1 of 4 (depth 1024, concurrency 2, run 1)"
    events.write_text(json.dumps({"event": "scenario_start", "index": 2, "total": 43, "scenario_id": "TC-03"})
                      + "\n" + '{"event": "half')  # a half-written line is read next time
    prog.feed(str(events), str(benchy))
    assert prog.line() == "bench L: quality scenario 3 of 43 (TC-03); throughput grid done"


class _Models(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.headers.get("Authorization") not in (None, "Bearer k"):
            self.send_response(401)
            self.end_headers()
            return
        body = json.dumps({"data": [{"id": "m"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def models_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Models)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()


def test_check_api(models_server, monkeypatch):
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")  # a proxy variable must not be used
    assert api.check_api(models_server, "m")["ok"]
    assert api.check_api(models_server, "m", "k")["ok"]
    assert api.check_api(models_server, "m", "wrong")["error"] == "HTTP 401 from /v1/models"
    assert "does not list 'x'" in api.check_api(models_server, "x")["error"]
    assert not api.check_api("http://127.0.0.1:9/v1", "m", timeout=2)["ok"]


def test_api_url_and_venv_problem(tmp_path):
    assert api.api_url({"api": {"address": "10.0.0.1", "port": 8000}}) == "http://10.0.0.1:8000/v1"
    assert api.api_url({"api": {"address": "fd00::1", "port": 8000}}) == "http://[fd00::1]:8000/v1"
    # The fix works without a checkout: no `make venv-bench` in the sentence.
    problem = api.venv_problem(str(tmp_path), "/c/requirements-bench.txt")
    assert "make venv-bench" not in problem and "checkout" not in problem
    assert f"({tmp_path}/bin/python -m pip install -r /c/requirements-bench.txt)" in problem
    assert "leave bench_venv unset" in problem
    assert api.collection_version(os.path.join(REPO, "plugins", "action")) not in ("", "unknown")


@pytest.mark.skipif(not os.path.exists(os.path.join(BENCH_VENV, "bin", "python")),
                    reason="needs the bench virtualenv (make venv-bench) for matplotlib")
def test_chart_is_a_png_with_one_series_per_metric_and_concurrency(tmp_path):
    result = {"scores": {"throughput": {"results": [
        {"depth": d, "concurrency": c, "pp_tps": 1000.0 + d, "tg_tps": 20.0 * c} for d in (0, 1024) for c in (1, 2)]}}}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report.build(result, {"lane": "L"}, [])))
    series, error = api.draw_chart(BENCH_VENV, str(tmp_path / "r.png"), [str(path), str(path)])
    assert error == ""
    assert series[:4] == ["L [0] pp c1", "L [0] pp c2", "L [0] tg c1", "L [0] tg c2"] and len(series) == 8
    data = (tmp_path / "r.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 400 and height > 300
    assert json.loads(png_text(data)["lanekit-series"]) == series


def png_text(data: bytes) -> dict[str, str]:
    """The PNG's tEXt/zTXt/iTXt chunks (stdlib only)."""
    out, pos = {}, 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"tEXt":
            key, _sep, value = body.partition(b"\0")
            out[key.decode()] = value.decode("latin-1")
        elif kind == b"zTXt":
            key, _sep, rest = body.partition(b"\0")
            out[key.decode()] = zlib.decompress(rest[1:]).decode("latin-1")
        elif kind == b"iTXt":
            key, _sep, rest = body.partition(b"\0")
            flag, rest = rest[0], rest[2:]
            _lang, _sep, rest = rest.partition(b"\0")
            _tkey, _sep, text = rest.partition(b"\0")
            out[key.decode()] = (zlib.decompress(text) if flag else text).decode()
        pos += 12 + length
    return out


def test_chart_script_usage_error_is_a_sentence():
    proc = subprocess.run(["python3", os.path.join(REPO, "plugins", "plugin_utils", "_bench", "_chart.py")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "usage:" in proc.stderr
