# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The watch's probe: one real streamed chat completion with a deadline, timed.

One job: ask the lane's API for a few tokens, streamed, and say whether they all came before the
deadline, the time to the first token and the decode rate after it. A wedged lane keeps its
port, ``/health`` and ``/v1/models`` (the status calls it serving) while a completion never
ends: only a generation proves the lane serves. Standard library only.
"""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._boot._probes import _opener, auth_headers

PROMPT = "Count from one to twenty in words, separated by spaces."


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


def stream_probe(base: str, model: str, deadline_s: float, max_tokens: int = 16,
                 api_key: str | None = None) -> dict[str, Any]:
    """``ok`` (the stream ended within the deadline with tokens), ``ttft_s``, ``tokens``, ``tps``, ``total_s``, ``error``."""
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": max_tokens,
                       "temperature": 0, "stream": True}).encode()
    req = urllib.request.Request(f"{base.rstrip('/')}/v1/chat/completions", data=body, method="POST",
                                 headers={"Content-Type": "application/json", "Accept": "text/event-stream",
                                          **auth_headers(api_key)})
    start = time.monotonic()
    result: dict[str, Any] = {"url": base, "ok": False, "ttft_s": None, "tokens": 0, "tps": None, "total_s": None,
                              "deadline_s": deadline_s, "error": ""}
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
    if first is not None:
        result["ttft_s"] = round(first - start, 3)
        if last is not None and result["tokens"] > 1 and last > first:
            result["tps"] = round((result["tokens"] - 1) / (last - first), 2)
    if not result["error"]:
        result["ok"] = result["tokens"] > 0
        if not result["ok"]:
            result["error"] = "the stream ended without a token"
    return result
