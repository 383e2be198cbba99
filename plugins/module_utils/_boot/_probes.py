# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Probes of a lane's OpenAI-compatible API: one GET, one streamed first token, the ladder (port
accepts -> /health -> /v1/models -> first token) that says how far a lane has come, and the
watch's timed stream (``stream_probe``) with the engine's generated-token counter read around it.

The lane's key goes only to the paths that want it, never to ``/health`` or ``/metrics``. On a
node the caller passes ``key_check`` (``_portowner.key_refusal`` for the rank container that must
hold the port): it runs before the key is first sent, and a port someone else holds gets no key.
From the controller (action lane_wait with ``probe_from: controller``) no such check can run.

Only the standard library is used, so the same code runs on a node (modules rank_status and
lane_probe) and on the controller.
"""
from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._boot._metrics import engine_generated_tokens
from ansible_collections.lanekit.serving.plugins.module_utils._http import direct_opener

DEFAULT_URL = "http://127.0.0.1:8000"
# /health may take long while an engine compiles graphs; the probe waits at least this long for it.
HEALTH_TIMEOUT_FLOOR = 25.0
CHAT_PROMPT = "Reply with the single word: ready"
WATCH_PROMPT = "Count from one to twenty in words, separated by spaces."
# Paths both engines (and lanekit's KeyGuard) serve without the key: it is never sent there.
OPEN_PATHS = ("/health", "/metrics")
# "" when the key may be sent, else the sentence why not (_portowner.key_refusal on a node).
KeyCheck = Callable[[], str]
# The engine's /metrics around a watch probe: a counter that cannot be had quickly and whole is no reading,
# never a failed probe, and never a probe held up much longer than its own deadline.
METRICS_TIMEOUT_S = 5.0
METRICS_MAX_BYTES = 4 << 20


def api_url(plan: Mapping[str, Any], address: str | None = None) -> str:
    """The base URL of a lane's API from its plan (``address`` overrides the plan's)."""
    api = plan.get("api") or {}
    host = address or api.get("address") or "127.0.0.1"
    port = int(api.get("port") or 8000)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def _opener() -> urllib.request.OpenerDirector:
    # Probes go to the lane's own addresses: never through a proxy, never after a redirect (_http).
    return direct_opener()


def auth_headers(api_key: str | None) -> dict[str, str]:
    """The header a lane with ``lanekit_api_key`` wants on every request (both engines take a bearer key)."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def wants_key(url: str) -> bool:
    """Whether ``url``'s path is one the key belongs on (not /health*, /metrics: whoever holds the port gets it)."""
    path = urllib.parse.urlparse(url).path or "/"
    return not any(path.startswith(open_path) for open_path in OPEN_PATHS)


def http_get(url: str, timeout: float, api_key: str | None = None) -> tuple[int | None, str, str]:
    """(HTTP status or None, body text, error) of one GET; an HTTP error status is not an error."""
    try:
        request = urllib.request.Request(url, method="GET", headers=auth_headers(api_key if wants_key(url) else None))
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


def probe_api(spec: dict, key_check: KeyCheck | None = None) -> dict:
    """Climb the readiness ladder of the API at ``spec['url']`` and stop at the first rung missed.

    ``spec``: ``url``, ``model`` (served model name), ``chat`` (run one streamed completion),
    ``timeout`` and ``chat_timeout`` (seconds), ``api_key`` (sent as a bearer key to /v1 only, never
    returned). With a key, ``key_check`` runs before it is first sent; a refusal ends the ladder
    with ``key_withheld`` and the refusal as ``error``. The result has ``accepts``,
    ``health_status``, ``models_status``, ``models``, ``model_listed``, ``chat_ok``, ``ttft_s``,
    ``first_token`` as far as the ladder went, and ``error`` saying why it stopped.
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
    status, _unused, error = http_get(f"{url.rstrip('/')}/health", timeout=max(timeout, HEALTH_TIMEOUT_FLOOR))
    result["health_status"] = status
    if status != 200:
        result["error"] = error or f"/health answered {status}"
        return result
    refusal = key_check() if key and key_check is not None else ""
    if refusal:
        result.update(model_listed=False, key_withheld=True, error=refusal)
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


def _chunk_tokens(line: str) -> int:
    """Tokens in one server-sent-events line (0 for keep-alives, usage, [DONE])."""
    if not line.startswith("data:"):
        return 0
    data = line[5:].strip()
    if not data or data == "[DONE]":
        return 0
    try:
        chunk = json.loads(data)
    except ValueError:
        return 0
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") or {}
        if delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning"):
            return 1
    return 0


def generated_tokens(base: str) -> float | None:
    """The engine's generated-token counter from ``base``'s ``/metrics`` (``_metrics.engine_generated_tokens``).

    Asked without the key, whatever the lane's: the path is open on both engines and on lanekit's
    KeyGuard, and the key goes only to the paths that want it. An endpoint that is absent (SGLang
    without ``--enable-metrics``, a router), slower than ``METRICS_TIMEOUT_S`` in all, larger than
    ``METRICS_MAX_BYTES`` or without the counter gives None.
    """
    deadline = time.monotonic() + METRICS_TIMEOUT_S
    try:
        parsed = urllib.parse.urlparse(base)
        kind = http.client.HTTPSConnection if parsed.scheme == "https" else http.client.HTTPConnection
        # http.client, not urllib: no proxy from the environment, no redirect followed, and the socket's
        # timeout can be cut to what is left, so an answer that trickles in ends at the deadline too.
        conn = kind(parsed.hostname or "", parsed.port, timeout=METRICS_TIMEOUT_S)
    except ValueError:
        return None
    try:
        conn.connect()
        sock = conn.sock
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        conn.request("GET", f"{parsed.path.rstrip('/')}/metrics", headers={"Accept": "text/plain"})
        resp = conn.getresponse()
        if resp.status != 200:
            return None
        body = bytearray()
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            chunk = resp.read1(1 << 16)
            if not chunk:
                return engine_generated_tokens(body.decode("utf-8", "replace"))
            body += chunk
            # A counter cut off in the middle would be a wrong reading: past the bound there is none.
            if len(body) > METRICS_MAX_BYTES:
                return None
    except (http.client.HTTPException, OSError, ValueError):
        pass
    finally:
        conn.close()
    return None


def stream_probe(base: str, model: str, deadline_s: float, max_tokens: int = 16, api_key: str | None = None,
                 key_check: KeyCheck | None = None) -> dict[str, Any]:
    """The watch's probe: one streamed chat completion with a deadline, timed.

    A wedged lane keeps its port, ``/health`` and ``/v1/models`` while a completion never ends: only
    a generation proves the lane serves. Returns ``ok`` (the stream ended within the deadline with
    tokens), ``ttft_s``, ``last_token_s`` (both from the request's start; None without a token),
    ``tokens`` (stream chunks with text), ``tps``, ``total_s``, ``deadline_s``, ``max_tokens`` and
    ``error``; with a key that ``key_check`` refuses, nothing is sent and ``key_withheld`` is set.

    ``engine_tokens_before`` and ``engine_tokens_after``: the engine's generated-token counter
    (:func:`generated_tokens`, None when it cannot be read) just before the request and just after
    the stream ends. A loaded lane may queue the probe past its deadline; the counter still shows
    it generating for its other clients, and the watch then calls it slow, not wedged.
    """
    result: dict[str, Any] = {"url": base, "ok": False, "ttft_s": None, "last_token_s": None, "tokens": 0,
                              "tps": None, "total_s": None, "deadline_s": deadline_s, "max_tokens": max_tokens,
                              "error": "", "engine_tokens_before": None, "engine_tokens_after": None}
    refusal = key_check() if api_key and key_check is not None else ""
    if refusal:
        # Not even the open /metrics: a counter from whoever squats the port would say nothing of the lane.
        result.update(error=refusal, key_withheld=True, total_s=0.0)
        return result
    result["engine_tokens_before"] = generated_tokens(base)
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": WATCH_PROMPT}],
                       "max_tokens": max_tokens, "temperature": 0, "stream": True}).encode()
    req = urllib.request.Request(f"{base.rstrip('/')}/v1/chat/completions", data=body, method="POST",
                                 headers={"Content-Type": "application/json", "Accept": "text/event-stream",
                                          **auth_headers(api_key)})
    start = time.monotonic()
    first = last = None
    try:
        with _opener().open(req, timeout=deadline_s) as resp:
            for raw in resp:
                now = time.monotonic()
                if now - start > deadline_s:
                    raise TimeoutError
                count = _chunk_tokens(raw.decode("utf-8", "replace").strip())
                if count:
                    first = first if first is not None else now
                    last = now
                    result["tokens"] += count
    except TimeoutError:
        result["error"] = (f"no first token within {deadline_s:g} s" if first is None else
                           f"{result['tokens']} tokens, then nothing until the deadline of {deadline_s:g} s")
    except urllib.error.HTTPError as exc:
        result["error"] = f"the chat completion answered HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        result["error"] = (f"no first token within {deadline_s:g} s" if isinstance(reason, TimeoutError)
                           else f"the chat completion failed: {reason}")
    result["total_s"] = round(time.monotonic() - start, 3)
    result["engine_tokens_after"] = generated_tokens(base)
    if first is not None and last is not None:
        result["ttft_s"] = round(first - start, 3)
        # The watch tells a stream that stopped (a wedge mid-stream) from one cut off while flowing by it.
        result["last_token_s"] = round(last - start, 3)
        if result["tokens"] > 1 and last > first:
            result["tps"] = round((result["tokens"] - 1) / (last - first), 2)
    if not result["error"]:
        result["ok"] = result["tokens"] > 0
        if not result["ok"]:
            result["error"] = "the stream ended without a token"
    return result
