# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""An ASGI middleware that asks for the lane's API key on every path but ``/health`` and ``/metrics``.

Why: vLLM's own ``--api-key`` check covers only the paths under ``/v1``, ``/v2``, ``/inference``
and ``/cohere`` (vllm/entrypoints/serve/middleware/authenticate.py, 0.32.0), so a lane "with a
key" still answers ``/tokenize``, ``/pooling``, ``/score``, ``/rerank`` and ``/invocations`` to
anyone. vLLM loads extra middleware by import path (``--middleware module.Class``); the rank's
launcher (``_secrets.LAUNCH_PROGRAM``) writes this file into the container and adds the flag, so
no image needs rebuilding.

This file is copied into the rank's container as it is: standard library only, no lanekit imports.
"""
from __future__ import annotations

import hashlib
import hmac
import os
from typing import Any

# Left open: the load balancer's and the readiness probes' health check, and Prometheus.
OPEN_PATHS = ("/health", "/metrics")
# Where the key is read from in the engine's environment (vLLM's own variable; the node's
# root-only env file sets it).
KEY_ENV = "VLLM_API_KEY"
UNAUTHORIZED = b'{"error":"Unauthorized"}'


def is_open(path: str) -> bool:
    """``/health`` and ``/metrics`` (with or without a trailing part: ``/metrics/`` is the mounted
    Prometheus app) need no key; every other path does."""
    return any(path == p or path.startswith(p + "/") for p in OPEN_PATHS)


def key_matches(headers: list, wanted: bytes) -> bool:
    """True when an ``Authorization: Bearer <key>`` header carries the key (compared as digests, in
    constant time). ``wanted``: the SHA-256 of the key; an empty one matches nothing."""
    if not wanted:
        return False
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _sep, token = value.partition(b" ")
            if scheme.lower() == b"bearer":
                return hmac.compare_digest(hashlib.sha256(token).digest(), wanted)
    return False


class KeyGuard:
    """Answers 401 to a request without the key on any path but the open ones; passes the rest on.

    With no key in the environment it refuses every guarded path (fails closed): the launcher adds
    this middleware only to a lane that has a key, so a missing one is a broken rank, not an open
    lane.
    """

    def __init__(self, app: Any, key_env: str = KEY_ENV) -> None:
        self.app = app
        key = os.environ.get(key_env, "")
        self.wanted = hashlib.sha256(key.encode("utf-8")).digest() if key else b""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> Any:
        if scope.get("type") not in ("http", "websocket") or scope.get("method") == "OPTIONS":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root):]
        if is_open(path) or key_matches(scope.get("headers") or [], self.wanted):
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            return await send({"type": "websocket.close", "code": 1008})
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(UNAUTHORIZED)).encode())]})
        return await send({"type": "http.response.body", "body": UNAUTHORIZED})
