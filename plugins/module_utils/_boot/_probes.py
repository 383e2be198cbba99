# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Readiness probes of a lane's OpenAI-compatible API: one GET, one streamed first token, and the
ladder (port accepts -> /health -> /v1/models -> first token) that says how far a lane has come.

Only the standard library is used, so the same code runs on a node (module rank_status) and on the
controller (action lane_wait with ``probe_from: controller``).
"""
from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8000"
# /health may take long while an engine compiles graphs; the probe waits at least this long for it.
HEALTH_TIMEOUT_FLOOR = 25.0
CHAT_PROMPT = "Reply with the single word: ready"


def api_url(plan: Mapping[str, Any], address: str | None = None) -> str:
    """The base URL of a lane's API from its plan (``address`` overrides the plan's)."""
    api = plan.get("api") or {}
    host = address or api.get("address") or "127.0.0.1"
    port = int(api.get("port") or 8000)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def _opener() -> urllib.request.OpenerDirector:
    # Probes go to the lane's own addresses: never through a proxy from the environment.
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


def auth_headers(api_key: str | None) -> dict[str, str]:
    """The header a lane with ``lanekit_api_key`` wants on every request (both engines take a bearer key)."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def http_get(url: str, timeout: float, api_key: str | None = None) -> tuple[int | None, str, str]:
    """(HTTP status or None, body text, error) of one GET; an HTTP error status is not an error."""
    try:
        request = urllib.request.Request(url, method="GET", headers=auth_headers(api_key))
        with _opener().open(request, timeout=timeout) as resp:
            return resp.status, resp.read(1 << 20).decode("utf-8", "replace"), ""
    except urllib.error.HTTPError as exc:
        return exc.code, "", ""
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return None, "", str(getattr(exc, "reason", exc))


def _token_of(chunk: dict) -> tuple[bool, str]:
    """(a token arrived, its text) for one streamed chat-completion chunk."""
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") or {}
        text = delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning")
        if text or delta.get("tool_calls"):
            return True, text or ""
    return False, ""


def first_token(base: str, model: str, timeout: float,
                api_key: str | None = None) -> tuple[bool, float | None, str, str]:
    """Stream one chat completion; (ok, seconds to the first token, token text, error)."""
    body = json.dumps({
        "model": model,
        "messages": [{"role": "user", "content": CHAT_PROMPT}],
        "max_tokens": 8,
        "temperature": 0,
        "stream": True,
    }).encode()
    req = urllib.request.Request(f"{base.rstrip('/')}/v1/chat/completions", data=body, method="POST",
                                 headers={"Content-Type": "application/json", "Accept": "text/event-stream",
                                          **auth_headers(api_key)})
    start = time.monotonic()
    try:
        with _opener().open(req, timeout=timeout) as resp:
            for raw in resp:
                if time.monotonic() - start > timeout:
                    return False, None, "", f"no first token within {timeout}s"
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                try:
                    chunk = json.loads(data)
                except ValueError:
                    continue
                arrived, text = _token_of(chunk)
                if arrived:
                    return True, round(time.monotonic() - start, 3), text[:40], ""
        return False, None, "", "the stream ended without a token"
    except urllib.error.HTTPError as exc:
        return False, None, "", f"chat completion answered HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return False, None, "", f"chat completion failed: {getattr(exc, 'reason', exc)}"


def _model_ids(status: int | None, body: str) -> list:
    if status != 200:
        return []
    try:
        return [m.get("id") for m in (json.loads(body).get("data") or [])]
    except (ValueError, AttributeError):
        return []


def probe_api(spec: dict) -> dict:
    """Climb the readiness ladder of the API at ``spec['url']`` and stop at the first rung missed.

    ``spec``: ``url``, ``model`` (served model name), ``chat`` (run one streamed completion),
    ``timeout`` and ``chat_timeout`` (seconds), ``api_key`` (sent as a bearer key, never returned).
    The result has ``accepts``, ``health_status``, ``models_status``, ``models``, ``model_listed``,
    ``chat_ok``, ``ttft_s``, ``first_token`` as far as the ladder went, and ``error`` saying why it
    stopped.
    """
    url = spec.get("url") or DEFAULT_URL
    timeout = float(spec.get("timeout") or 5)
    result: dict = {"url": url, "accepts": False}
    parsed = urllib.parse.urlparse(url)
    try:
        with socket.create_connection((parsed.hostname, parsed.port or 80), timeout=timeout):
            result["accepts"] = True
    except OSError as exc:
        result["error"] = str(exc)
        return result
    key = spec.get("api_key") or None
    status, _unused, error = http_get(f"{url.rstrip('/')}/health", timeout=max(timeout, HEALTH_TIMEOUT_FLOOR),
                                      api_key=key)
    result["health_status"] = status
    if status != 200:
        result["error"] = error or f"/health answered {status}"
        return result
    status, body, error = http_get(f"{url.rstrip('/')}/v1/models", timeout=timeout, api_key=key)
    result["models_status"] = status
    models = _model_ids(status, body)
    result["models"] = models
    wanted = spec.get("model")
    result["model_listed"] = bool(models) and (not wanted or wanted in models)
    if not result["model_listed"]:
        result["error"] = error or (
            f"/v1/models answered {status}: the API wants a key; set lanekit_api_key to the lane's key"
            if status in (401, 403) else f"/v1/models lists {models or 'nothing'}, not {wanted}")
        return result
    if spec.get("chat"):
        ok, ttft, token, error = first_token(url, wanted or models[0], float(spec.get("chat_timeout") or 120),
                                             api_key=key)
        result.update(chat_ok=ok, ttft_s=ttft, first_token=token)
        if error:
            result["error"] = error
    return result
