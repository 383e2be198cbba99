"""OpenAI-compatible HTTP API of the stand-ins (http.server / ThreadingHTTPServer).

Every answer is deterministic text that says it comes from a stand-in; every response carries
the header `X-Lanekit-Standin`.
"""
from __future__ import annotations

import asyncio
import hashlib
import importlib
import inspect
import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import STANDIN_LABEL

# The run-time wedge switch (STANDIN_WEDGE_FILE): while this file exists, inference requests hang
# with the API up (/health 200, /v1/models listed), as a wedged engine's do. A process that starts
# removes a wedge left from before (a restart heals a wedge) unless the file says "persist".
DEFAULT_WEDGE_FILE = "/tmp/lanekit-standin.wedge"
WEDGE_POLL_S = 0.2


def wedge_file() -> str:
    return os.environ.get("STANDIN_WEDGE_FILE") or DEFAULT_WEDGE_FILE


def clear_stale_wedge(path: str) -> bool:
    """At start: remove a wedge file that does not say 'persist'; True if one was removed."""
    try:
        with open(path, encoding="utf-8") as fh:
            if fh.read().strip() == "persist":
                return False
        os.unlink(path)
        return True
    except OSError:
        return False


class ApiState:
    def __init__(self, *, engine: str, version: str, served_names: list[str], model_path: str,
                 max_model_len: int, reasoning_parser: str | None = None, tool_call_parser: str | None = None,
                 auto_tool_choice: bool = False, nnodes: int = 1, access_log=None, metrics_enabled: bool = True,
                 extra_info: dict | None = None):
        self.engine = engine
        self.version = version
        self.served_names = served_names
        self.model_path = model_path
        self.max_model_len = max_model_len
        self.reasoning_parser = reasoning_parser
        self.tool_call_parser = tool_call_parser
        self.auto_tool_choice = auto_tool_choice
        self.nnodes = nnodes
        self.access_log = access_log
        self.metrics_enabled = metrics_enabled
        self.extra_info = extra_info or {}
        self.ready = False            # SGLang: /health 503 until warm-up is over
        self.hang_requests = False    # STANDIN_HANG_PHASE=serve: inference never completes
        self.created = int(time.time())
        self.lock = threading.Lock()
        self.counters = {"requests": 0, "prompt_tokens": 0, "generation_tokens": 0, "errors": 0}
        self.hang_event = threading.Event()
        self.wedge_file = wedge_file()
        self.wedge_noted = False
        clear_stale_wedge(self.wedge_file)
        # vLLM: set when the engine lost a rank while idle (real 0.32.0 notices it at the next request):
        # called to print the engine's failure lines; after_failure then ends the process.
        self.engine_failure = None
        self.after_failure = None
        # Simulated compute (see bench_delays): seconds per prompt token and per generated token.
        self.prefill_s_per_token = _env_float("STANDIN_PREFILL_US_PER_TOKEN", 200.0) / 1e6
        self.decode_s_per_token = _env_float("STANDIN_DECODE_MS_PER_TOKEN", 10.0) / 1e3

    @property
    def served(self) -> str:
        return self.served_names[0]


def _words(text: str) -> list[str]:
    return text.split()


def _message_text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _placeholder(schema: dict, name: str):
    kind = (schema or {}).get("type")
    if "enum" in (schema or {}) and schema["enum"]:
        return schema["enum"][0]
    if kind == "integer":
        return 1
    if kind == "number":
        return 1.0
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return {}
    return f"stand-in value for {name}"


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


# --- bench serving: what tool-eval-bench and llama-benchy need (../shared/reference/bench.md) ----

def schema_value(schema: dict, name: str = "value", depth: int = 0):
    """A value that satisfies a JSON schema well enough for a client to parse it (objects filled
    with their required properties, recursively): tool arguments and response_format replies."""
    schema = schema if isinstance(schema, dict) else {}
    if depth > 6:
        return None
    if schema.get("enum"):
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return schema_value(schema[key][0], name, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties") or {}
        required = schema.get("required") or list(props)
        return {k: schema_value(props.get(k, {}), k, depth + 1) for k in required}
    if kind == "array":
        items = schema.get("items") or {}
        return [schema_value(items, name, depth + 1)] if schema.get("minItems") else []
    return _placeholder({**schema, "type": kind}, name)


def response_format_schema(body: dict) -> dict | None:
    """The JSON schema a `response_format` asks for ({} for json_object), None without one."""
    fmt = body.get("response_format")
    if not isinstance(fmt, dict) or fmt.get("type") not in ("json_schema", "json_object"):
        return None
    if fmt.get("type") == "json_object":
        return {}
    spec = fmt.get("json_schema") or {}
    return (spec.get("schema") if isinstance(spec, dict) else None) or {}


def wants_tool_call(messages: list, tools: list, tool_choice) -> bool:
    """A tool call unless tools are absent or refused, or the last message is a tool result and
    the choice is not forced (the model answers in text after reading it)."""
    if not tools or tool_choice == "none":
        return False
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    forced = tool_choice == "required" or isinstance(tool_choice, dict)
    return forced or last.get("role") != "tool"


def coherent_prefix(messages: list) -> str:
    """The one fact the stand-in knows: llama-benchy's coherence check asks for France's capital."""
    last_user = ""
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "user":
            last_user = _message_text(m.get("content"))
    return "Paris is the capital of France." if "capital of france" in last_user.lower() else ""


def pad_to(text: str, finish: str, body: dict, max_tokens: int | None) -> tuple[str, str]:
    """Honour `min_tokens` / `ignore_eos` (llama-benchy --exact-tg): pad with filler words."""
    want = body.get("min_tokens") or 0
    if body.get("ignore_eos") and isinstance(max_tokens, int):
        want = max(int(want), max_tokens)
    words = _words(text)
    if not isinstance(want, int) or len(words) >= want:
        return text, finish
    filler = [f"token{i % 97}" for i in range(want - len(words))]
    return " ".join(words + filler), "length"


def token_ids(words: list[str]) -> list[int]:
    """Stable fake token ids (one per word: the stand-in's tokenizer is whitespace)."""
    return [int(hashlib.md5(w.encode()).hexdigest()[:4], 16) % 30000 + 1000 for w in words]


def bench_delays(state: ApiState, prompt_tokens: int) -> float:
    """Simulated prefill time: proportional to the prompt, so pp figures move with depth."""
    return max(0.0, prompt_tokens * state.prefill_s_per_token)


def tool_call_chunks(call: dict, pieces: int = 3) -> list[dict]:
    """A tool call as vLLM streams it: index, id, type and name first, then argument fragments."""
    args = call["function"]["arguments"]
    out = [{"index": 0, "id": call["id"], "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""}}]
    size = max(1, -(-len(args) // pieces))
    for i in range(0, len(args), size):
        out.append({"index": 0, "function": {"arguments": args[i:i + size]}})
    return out


def standin_answer(state: ApiState, messages: list, max_tokens: int | None):
    digest = hashlib.sha256(json.dumps(messages, sort_keys=True, default=str).encode()).hexdigest()[:12]
    last_user = ""
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "user":
            last_user = _message_text(m.get("content"))
    snippet = " ".join(_words(last_user)[:16])
    text = (f"[{state.engine} {STANDIN_LABEL}] No model ran: this fixed reply comes from the lanekit "
            f"stand-in serving '{state.served}' across {state.nnodes} node(s). Request {digest}, "
            f"{len(messages)} message(s); last user message begins: \"{snippet}\".")
    words = _words(text)
    finish = "stop"
    if max_tokens is not None and max_tokens >= 0 and len(words) > max_tokens:
        words = words[:max_tokens]
        finish = "length"
    prompt_tokens = sum(len(_words(_message_text(m.get("content")))) + 4 for m in messages if isinstance(m, dict))
    reasoning = (f"Stand-in reasoning for request {digest}: nothing was reasoned; this is a test instrument."
                 if state.reasoning_parser else None)
    return digest, " ".join(words), finish, prompt_tokens, reasoning


def _tool_call(tools: list, tool_choice, digest: str):
    chosen = None
    if isinstance(tool_choice, dict):
        name = (tool_choice.get("function") or {}).get("name")
        chosen = next((t for t in tools if (t.get("function") or {}).get("name") == name), None)
    if chosen is None:
        chosen = tools[0]
    fn = chosen.get("function") or {}
    params = fn.get("parameters") or {}
    args = schema_value({"type": "object", **params}, fn.get("name", "arguments"))
    return {"id": f"chatcmpl-tool-{digest}", "type": "function",
            "function": {"name": fn.get("name", "unknown"), "arguments": json.dumps(args, sort_keys=True)}}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def server_bind(self):
        # no getfqdn(): reverse DNS may hang in a container without a resolver
        if self.allow_reuse_address:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind(self.server_address)
        self.server_address = self.socket.getsockname()[:2]
        self.server_name = str(self.server_address[0])
        self.server_port = self.server_address[1]


def make_server(host: str, port: int, handler_cls) -> _Server:
    """Create the server socket and bind it, without listening (vLLM binds early and listens
    only when ready: connection refused meanwhile)."""
    host = host or "0.0.0.0"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET

    class S(_Server):
        address_family = family

    return S((host, port), handler_cls, bind_and_activate=False)


def bind(server: _Server) -> None:
    try:
        server.server_bind()
    except OSError:
        server.server_close()
        raise


def start(server: _Server) -> threading.Thread:
    server.server_activate()
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="http", daemon=True)
    t.start()
    return t


def load_middlewares(names: list[str]) -> list:
    """The classes named by vLLM's ``--middleware module.Class`` (imported as vLLM's register.py does).

    Real vLLM also takes a coroutine function (``@app.middleware("http")`` style); that needs
    starlette's Request, which the stand-in has not, so it is refused with a sentence.
    """
    loaded = []
    for name in names or []:
        module_path, _sep, object_name = name.rpartition(".")
        imported = getattr(importlib.import_module(module_path), object_name)
        if not inspect.isclass(imported):
            raise ValueError(f"Invalid middleware {name}. The lanekit stand-in takes ASGI middleware classes only.")
        loaded.append(imported)
    return loaded


def middleware_answer(state: ApiState, method: str, path: str, headers) -> tuple[int, bytes, str] | None:
    """What the ``--middleware`` classes answer themselves, or None when they pass the request on.

    Each class wraps the app as Starlette's ``add_middleware`` does; the request runs through them
    as an ASGI call whose innermost app only notes that it was reached (the stand-in then serves
    the request as usual).
    """
    if not getattr(state, "middlewares", None):
        return None
    seen: dict = {}

    async def inner(scope, receive, send):
        seen["passed"] = True

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        if message["type"] == "http.response.start":
            seen["status"], seen["headers"] = message["status"], message.get("headers") or []
        elif message["type"] == "http.response.body":
            seen["body"] = seen.get("body", b"") + message.get("body", b"")

    app = inner
    for cls in state.middlewares:
        app = cls(app)
    scope = {"type": "http", "method": method, "path": path, "root_path": "", "query_string": b"",
             "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]}
    asyncio.run(app(scope, receive, send))
    if seen.get("passed"):
        return None
    ctype = next((v.decode("latin-1") for k, v in seen.get("headers", []) if k.lower() == b"content-type"), "")
    return seen.get("status", 500), seen.get("body", b""), ctype


# Real vLLM 0.32.0 checks its --api-key under these prefixes only
# (vllm/entrypoints/serve/middleware/authenticate.py GUARDED_PREFIX).
VLLM_GUARDED_PREFIX = ("/v1", "/v2", "/inference", "/cohere")


def refuses_key(state: ApiState, path: str, headers) -> bool:
    """True when the request lacks the server's --api-key (VLLM_API_KEY for vLLM).

    Like the engines: vLLM checks only the VLLM_GUARDED_PREFIX paths; SGLang every path but
    /health*, /metrics and /ping.
    """
    key = getattr(state, "api_key", None)
    if not key:
        return False
    if state.engine == "vllm":
        guarded = path.startswith(VLLM_GUARDED_PREFIX)
    else:
        guarded = not (path.startswith("/health") or path in ("/metrics", "/ping"))
    return guarded and headers.get("Authorization") != f"Bearer {key}"


def handler_for(state: ApiState, worker_health_only: bool = False):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "uvicorn"
        sys_version = ""

        def log_message(self, fmt, *args):  # access log in uvicorn's style
            pass

        def setup(self):
            super().setup()
            # Without TCP_NODELAY small SSE writes meet delayed ACKs: ~40 ms stalls per chunk.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def _access(self, code: int):
            if state.access_log:
                phrase = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
                          503: "Service Unavailable", 500: "Internal Server Error"}.get(code, "")
                state.access_log(f'INFO:     {self.client_address[0]}:{self.client_address[1]} - '
                                 f'"{self.command} {self.path} {self.request_version}" {code} {phrase}')

        def _send(self, code: int, body=None, ctype="application/json"):
            if body is None:
                data = b""
            elif isinstance(body, (bytes, bytearray)):
                data = bytes(body)
            elif isinstance(body, str):
                data = body.encode()
            else:
                data = json.dumps(body).encode()
            self.send_response(code)
            if ctype:
                self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-Lanekit-Standin", f"{state.engine} {STANDIN_LABEL}")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            self._access(code)

        def _error(self, code: int, message: str, etype: str = "BadRequestError", param=None):
            with state.lock:
                state.counters["errors"] += 1
            error = {"message": message, "type": etype, "param": param, "code": code}
            if state.engine == "vllm":
                # Real vLLM 0.32.0: the error object alone at the top level.
                return self._send(code, {"error": error})
            return self._send(code, {"error": error, "object": "error", "message": message, "type": etype,
                                     "param": param, "code": code})

        def _engine_dead(self):
            """A request to a vLLM engine that lost a rank: its failure lines, a 500, then the exit."""
            failure, state.engine_failure = state.engine_failure, None
            if failure is not None:
                failure()
            self._error(500, "EngineCore encountered an issue. See stack trace (above) for the root cause.",
                        "InternalServerError")
            if state.after_failure is not None:
                state.after_failure()

        def _json_body(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                return None
            return body if isinstance(body, dict) else None

        # ------------------------------------------------------------------------------
        def do_HEAD(self):
            self.do_GET()

        def do_GET(self):
            path = self.path.split("?", 1)[0]
            answer = middleware_answer(state, self.command, path, self.headers)
            if answer is not None:
                return self._send(*answer)
            if refuses_key(state, path, self.headers):
                return self._send(401, {"error": "Unauthorized"})
            if path in ("/health", "/ping", "/health_generate"):
                if state.engine == "vllm" and not worker_health_only:
                    return self._send(200, b"", None)  # real vLLM: empty body, no content-type
                if worker_health_only or state.ready:
                    return self._send(200, b"", "application/json")
                return self._send(503, b"", "application/json")
            if worker_health_only:
                if path == "/metrics" and state.metrics_enabled:
                    return self._send(200, self._metrics(), "text/plain; version=0.0.4")
                return self._send(404, {"detail": "Not Found"})
            if path == "/v1/models":
                data = [{"id": name, "object": "model", "created": state.created, "owned_by": state.engine,
                         "root": state.model_path, "parent": None, "max_model_len": state.max_model_len,
                         "permission": [], "lanekit_standin": STANDIN_LABEL} for name in state.served_names]
                return self._send(200, {"object": "list", "data": data})
            if path == "/version":
                return self._send(200, {"version": state.version})
            if path == "/metrics":
                if not state.metrics_enabled:
                    return self._send(404, {"detail": "Not Found"})
                return self._send(200, self._metrics(), "text/plain; version=0.0.4")
            if path == "/load":
                return self._send(200, {"server_load": 0})
            if path in ("/model_info", "/get_model_info"):
                return self._send(200, {"model_path": state.model_path, "tokenizer_path": state.model_path,
                                        "served_model_name": state.served, "is_generation": True,
                                        "weight_version": "default", "load_format": "auto",
                                        "reasoning_parser": state.reasoning_parser,
                                        "tool_call_parser": state.tool_call_parser,
                                        "lanekit_standin": STANDIN_LABEL, **state.extra_info})
            if path in ("/server_info", "/get_server_info"):
                return self._send(200, {"version": state.version, "model_path": state.model_path,
                                        "served_model_name": state.served, "nnodes": state.nnodes,
                                        "lanekit_standin": STANDIN_LABEL, **state.extra_info})
            return self._send(404, {"detail": "Not Found"})

        def do_POST(self):
            path = self.path.split("?", 1)[0]
            answer = middleware_answer(state, self.command, path, self.headers)
            if answer is not None:
                self._json_body()  # drain the body so the connection stays usable
                return self._send(*answer)
            if refuses_key(state, path, self.headers):
                self._json_body()  # drain the body so the connection stays usable
                return self._send(401, {"error": "Unauthorized"})
            if path == "/ping" and not worker_health_only:
                return self.do_GET()
            if worker_health_only:
                return self._send(404, {"detail": "Not Found"})
            if path == "/v1/chat/completions":
                return self._chat()
            if path == "/v1/completions":
                return self._completion()
            if path == "/generate":
                return self._generate()
            return self._send(404, {"detail": "Not Found"})

        # ------------------------------------------------------------------------------
        def _check_model(self, body):
            model = body.get("model")
            if model not in (None, "") and model not in state.served_names:
                message = f"The model `{model}` does not exist."
                if state.engine == "vllm":
                    message += f" Valid aliases: {', '.join(state.served_names)}."
                self._error(404, message, "NotFoundError", "model")
                return False
            if state.engine_failure is not None:
                self._engine_dead()
                return False
            return True

        def _maybe_hang(self):
            if state.hang_requests:
                state.hang_event.wait()  # never set: the engine stopped making progress
            # The run-time wedge: the request waits while the file exists (removing it un-wedges).
            noted = False
            while os.path.exists(state.wedge_file):
                if not noted and not state.wedge_noted:
                    state.wedge_noted = noted = True
                    print(f"[lanekit stand-in] wedged by {state.wedge_file}: inference requests hang, the API "
                          "stays up", file=sys.stderr, flush=True)
                time.sleep(WEDGE_POLL_S)
            if noted:
                state.wedge_noted = False

        def _count(self, prompt, completion):
            with state.lock:
                state.counters["requests"] += 1
                state.counters["prompt_tokens"] += prompt
                state.counters["generation_tokens"] += completion

        def _chat(self):
            body = self._json_body()
            if body is None:
                return self._error(400, "Invalid JSON body")
            if not self._check_model(body):
                return None
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                return self._error(400, "`messages` must be a non-empty list", param="messages")
            tools = body.get("tools") or []
            tool_choice = body.get("tool_choice", "auto" if tools else "none")
            use_tool = wants_tool_call(messages, tools, tool_choice)
            if use_tool and tool_choice == "auto" and state.engine == "vllm" and not (
                    state.auto_tool_choice and state.tool_call_parser):
                return self._error(400, '"auto" tool choice requires --enable-auto-tool-choice and '
                                        "--tool-call-parser to be set")
            if body.get("stream") and body.get("return_token_ids") is True and state.engine == "sglang":
                # SGLang's OpenAI server refuses this vLLM-only field (bench.md pitfalls).
                return self._error(400, "return_token_ids is not supported for streaming requests",
                                   param="return_token_ids")
            self._maybe_hang()
            max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
            digest, text, finish, ptoks, reasoning = standin_answer(state, messages, max_tokens)
            text = " ".join(w for w in (coherent_prefix(messages), text) if w)
            schema = response_format_schema(body)
            if schema is not None and not use_tool:
                text = json.dumps(schema_value(schema))
                reasoning = None
            text, finish = pad_to(text, finish, body, max_tokens)
            reasoning_key = "reasoning" if state.engine == "vllm" else "reasoning_content"
            call = _tool_call(tools, tool_choice, digest) if use_tool else None
            if call:
                finish = "tool_calls"
            ctoks = len(_words(text)) + (len(_words(reasoning)) if reasoning else 0)
            self._count(ptoks, ctoks)
            cid = f"chatcmpl-{digest}"
            created = int(time.time())
            time.sleep(bench_delays(state, ptoks))
            if body.get("stream"):
                return self._stream_chat(cid, created, text, reasoning, reasoning_key, call, finish, ptoks, ctoks, body)
            time.sleep(ctoks * state.decode_s_per_token)
            message = {"role": "assistant", "content": None if call else text, reasoning_key: reasoning}
            if call or tools or state.engine != "vllm":
                # real vLLM 0.32.0 has no tool_calls key in a message when no tools were given
                message["tool_calls"] = [call] if call else []
            return self._send(200, {
                "id": cid, "object": "chat.completion", "created": created, "model": state.served,
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish,
                             "stop_reason": None}],
                "usage": {"prompt_tokens": ptoks, "total_tokens": ptoks + ctoks, "completion_tokens": ctoks},
                "system_fingerprint": "lanekit-standin", "lanekit_standin": STANDIN_LABEL})

        def _sse_start(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.send_header("X-Lanekit-Standin", f"{state.engine} {STANDIN_LABEL}")
            self.end_headers()
            self.close_connection = True

        def _sse(self, obj):
            data = obj if isinstance(obj, str) else json.dumps(obj)
            self.wfile.write(f"data: {data}\n\n".encode())
            self.wfile.flush()

        def _stream_chat(self, cid, created, text, reasoning, reasoning_key, call, finish, ptoks, ctoks, body):
            self._sse_start()
            with_ids = body.get("return_token_ids") is True
            step = state.decode_s_per_token

            def chunk(delta, fin=None, words=None):
                choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": fin}
                if fin is not None and state.engine == "vllm":
                    choice["stop_reason"] = None
                if with_ids and words is not None:
                    choice["token_ids"] = token_ids(words)
                return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": state.served,
                        "choices": [choice]}

            try:
                self._sse(chunk({"role": "assistant", "content": ""}, words=[]))
                pieces = []
                if reasoning:
                    pieces += [({reasoning_key: w + " "}, [w]) for w in _words(reasoning)]
                if call:
                    pieces += [({"tool_calls": [piece]}, []) for piece in tool_call_chunks(call)]
                else:
                    pieces += [({"content": w if i == 0 else " " + w}, [w]) for i, w in enumerate(_words(text))]
                # real vLLM 0.32.0: the finish reason rides on the last content chunk (no empty-delta chunk)
                last_carries = state.engine == "vllm" and bool(pieces)
                for i, (delta, words) in enumerate(pieces):
                    time.sleep(step)
                    fin = finish if last_carries and i == len(pieces) - 1 else None
                    self._sse(chunk(delta, fin, words=words))
                if not last_carries:
                    self._sse(chunk({}, finish, words=[]))
                if (body.get("stream_options") or {}).get("include_usage"):
                    self._sse({"id": cid, "object": "chat.completion.chunk", "created": created,
                               "model": state.served, "choices": [],
                               "usage": {"prompt_tokens": ptoks, "total_tokens": ptoks + ctoks,
                                         "completion_tokens": ctoks}})
                self._sse("[DONE]")
            except (BrokenPipeError, ConnectionResetError):
                pass
            self._access(200)

        def _completion(self):
            body = self._json_body()
            if body is None:
                return self._error(400, "Invalid JSON body")
            if not self._check_model(body):
                return None
            self._maybe_hang()
            prompt = body.get("prompt", "")
            prompt = prompt if isinstance(prompt, str) else json.dumps(prompt)
            digest, text, finish, ptoks, _usage = standin_answer(state, [{"role": "user", "content": prompt}],
                                                                 body.get("max_tokens", 16))
            ctoks = len(_words(text))
            self._count(ptoks, ctoks)
            return self._send(200, {"id": f"cmpl-{digest}", "object": "text_completion", "created": int(time.time()),
                                    "model": state.served,
                                    "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}],
                                    "usage": {"prompt_tokens": ptoks, "total_tokens": ptoks + ctoks,
                                              "completion_tokens": ctoks}})

        def _generate(self):  # SGLang native API (used by its warm-up)
            body = self._json_body()
            if body is None:
                return self._error(400, "Invalid JSON body")
            self._maybe_hang()
            text_in = body.get("text", "")
            text_in = text_in if isinstance(text_in, str) else json.dumps(text_in)
            sp = body.get("sampling_params") or {}
            digest, text, finish, ptoks, _usage = standin_answer(state, [{"role": "user", "content": text_in}],
                                                                 sp.get("max_new_tokens", 16))
            ctoks = len(_words(text))
            self._count(ptoks, ctoks)
            return self._send(200, {"text": text, "meta_info": {"id": digest, "prompt_tokens": ptoks,
                                                                "completion_tokens": ctoks,
                                                                "finish_reason": {"type": finish}}})

        def _metrics(self) -> str:
            c = dict(state.counters)
            name = state.served
            if state.engine == "vllm":
                lab = f'engine="0",model_name="{name}"'
                lines = [
                    f"# lanekit stand-in metrics ({STANDIN_LABEL})",
                    "# HELP vllm:num_requests_running Number of requests in model execution batches.",
                    "# TYPE vllm:num_requests_running gauge",
                    f"vllm:num_requests_running{{{lab}}} 0.0",
                    "# TYPE vllm:num_requests_waiting gauge",
                    f"vllm:num_requests_waiting{{{lab}}} 0.0",
                    "# TYPE vllm:kv_cache_usage_perc gauge",
                    f"vllm:kv_cache_usage_perc{{{lab}}} 0.0",
                    "# TYPE vllm:prompt_tokens_total counter",
                    f"vllm:prompt_tokens_total{{{lab}}} {float(c['prompt_tokens'])}",
                    "# TYPE vllm:generation_tokens_total counter",
                    f"vllm:generation_tokens_total{{{lab}}} {float(c['generation_tokens'])}",
                    "# TYPE vllm:request_success_total counter",
                    f'vllm:request_success_total{{{lab},finished_reason="stop"}} {float(c["requests"])}',
                ]
            else:
                lab = f'model_name="{name}"'
                lines = [
                    f"# lanekit stand-in metrics ({STANDIN_LABEL})",
                    "# TYPE sglang:num_running_reqs gauge",
                    f"sglang:num_running_reqs{{{lab}}} 0.0",
                    "# TYPE sglang:num_queue_reqs gauge",
                    f"sglang:num_queue_reqs{{{lab}}} 0.0",
                    "# TYPE sglang:prompt_tokens_total counter",
                    f"sglang:prompt_tokens_total{{{lab}}} {float(c['prompt_tokens'])}",
                    "# TYPE sglang:generation_tokens_total counter",
                    f"sglang:generation_tokens_total{{{lab}}} {float(c['generation_tokens'])}",
                    "# TYPE sglang:num_requests_total counter",
                    f"sglang:num_requests_total{{{lab}}} {float(c['requests'])}",
                ]
            return "\n".join(lines) + "\n"

    return Handler
