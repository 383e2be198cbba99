"""No redirect for a request that carries the lane's key (urllib would resend Authorization to the new address)."""
from __future__ import annotations

import http.server
import threading

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._bench import _api
from ansible_collections.lanekit.serving.plugins.module_utils._boot import _probes


class _Server:
    """A loopback HTTP server; ``redirect_to`` makes it answer 302 with that location."""

    def __init__(self, redirect_to: str = "") -> None:
        seen = self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server name
                seen.append((self.path, self.headers.get("Authorization")))
                if redirect_to:
                    self.send_response(302)
                    self.send_header("Location", redirect_to + self.path)
                    self.end_headers()
                    return
                body = b'{"data": [{"id": "m"}]}'
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def collector_and_redirector():
    collector = _Server()
    redirector = _Server(redirect_to=collector.url)
    yield collector, redirector
    redirector.close()
    collector.close()


def test_the_bench_api_check_does_not_follow_a_redirect_with_the_key(collector_and_redirector):
    collector, redirector = collector_and_redirector
    result = _api.check_api(redirector.url + "/v1", "m", api_key="sk-lane-key")
    assert not result["ok"] and "302" in result["error"]
    assert collector.seen == [], "the key followed the redirect to another address"


def test_a_probe_does_not_follow_a_redirect_with_the_key(collector_and_redirector):
    collector, redirector = collector_and_redirector
    with pytest.raises(Exception) as err:
        _probes._opener().open(_probes.urllib.request.Request(
            redirector.url + "/v1/models", headers=_probes.auth_headers("sk-lane-key")), timeout=5)
    assert "302" in str(err.value)
    assert collector.seen == []
