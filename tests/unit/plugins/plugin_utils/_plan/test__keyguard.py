"""lanekit's KeyGuard (plugin_utils/_plan/_keyguard.py), driven as an ASGI server drives it: every path but
/health and /metrics wants the lane's key, which vLLM's own check asks for under /v1 only."""
from __future__ import annotations

import asyncio

import pytest

from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _keyguard

KEY = "sk-guard-unit-3c9e"


def call(path: str, key: str | None = None, env_key: str | None = KEY, kind: str = "http", method: str = "GET",
         root_path: str = "", monkeypatch=None):
    """(status or close code or "passed", body) of one request through KeyGuard over a stub app."""
    if env_key is None:
        monkeypatch.delenv("VLLM_API_KEY", raising=False)
    else:
        monkeypatch.setenv("VLLM_API_KEY", env_key)
    sent, passed = [], []

    async def app(scope, receive, send):
        passed.append(scope["path"])

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    headers = [(b"host", b"x")] + ([(b"authorization", f"Bearer {key}".encode())] if key is not None else [])
    scope = {"type": kind, "method": method, "path": path, "root_path": root_path, "headers": headers}
    asyncio.run(_keyguard.KeyGuard(app)(scope, receive, send))
    if passed:
        return "passed", b""
    if kind == "websocket":
        return sent[0]["code"], b""
    return sent[0]["status"], sent[1]["body"]


# The paths vLLM 0.32.0 serves without checking its --api-key, and some it checks itself.
GUARDED = ["/tokenize", "/detokenize", "/pooling", "/score", "/rerank", "/invocations", "/v1/models",
           "/v1/chat/completions", "/v2/rerank", "/version", "/ping", "/load", "/healthz", "/metricsx", "/"]


@pytest.mark.parametrize("path", GUARDED)
def test_every_path_but_health_and_metrics_wants_the_key(path, monkeypatch):
    assert call(path, monkeypatch=monkeypatch) == (401, b'{"error":"Unauthorized"}')
    assert call(path, key="sk-wrong", monkeypatch=monkeypatch)[0] == 401
    assert call(path, key=KEY, monkeypatch=monkeypatch)[0] == "passed"


@pytest.mark.parametrize("path", ["/health", "/metrics", "/metrics/"])
def test_health_and_metrics_stay_open(path, monkeypatch):
    assert call(path, monkeypatch=monkeypatch)[0] == "passed"


def test_the_root_path_prefix_is_taken_off_before_the_check(monkeypatch):
    assert call("/api/health", root_path="/api", monkeypatch=monkeypatch)[0] == "passed"
    assert call("/api/tokenize", root_path="/api", monkeypatch=monkeypatch)[0] == 401


def test_a_websocket_without_the_key_is_closed_as_a_policy_violation(monkeypatch):
    assert call("/v1/realtime", kind="websocket", monkeypatch=monkeypatch)[0] == 1008
    assert call("/v1/realtime", kind="websocket", key=KEY, monkeypatch=monkeypatch)[0] == "passed"


def test_a_cors_preflight_passes_as_it_does_in_vllm(monkeypatch):
    assert call("/tokenize", method="OPTIONS", monkeypatch=monkeypatch)[0] == "passed"


def test_without_a_key_in_the_environment_the_guard_fails_closed(monkeypatch):
    assert call("/tokenize", key="", env_key=None, monkeypatch=monkeypatch)[0] == 401
    assert call("/health", env_key=None, monkeypatch=monkeypatch)[0] == "passed"


def test_a_non_bearer_scheme_is_refused(monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    assert not _keyguard.key_matches([(b"authorization", f"Basic {KEY}".encode())],
                                     _keyguard.KeyGuard(None).wanted)
