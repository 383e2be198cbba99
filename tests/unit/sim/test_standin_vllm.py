"""vLLM stand-in: 2-rank rendezvous over loopback, readiness, API, failures."""
from __future__ import annotations

import json
import os
import re
import signal

from standin_helpers import base_env, free_port, http, vllm_cmd, wait_http

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
    head = ranks.start("head", head_argv, base_env())
    head.wait_line(r"Waiting for 1 node\(s\) to join")
    # bound, not listening: connection refused while the engine is not ready
    assert http("GET", f"http://127.0.0.1:{api}/health")[0] == 0
    worker = ranks.start("worker", worker_argv, base_env())
    worker.wait_line(r"Launching vLLM \(v[^)]+\) headless multiproc executor, with head node address 127\.0\.0\.1")
    wait_http(f"http://127.0.0.1:{api}/health", 200, rank=head)
    log = head.text()
    for milestone in (r"Loading safetensors checkpoint shards:   0% Completed \| 0/2 \[00:00<\?, \?it/s\]",
                      r"Loading safetensors checkpoint shards: 100% Completed \| 2/2 \[\d\d:\d\d<\d\d:\d\d, ",
                      r"Loading weights took \d+\.\d\d seconds", r"Model loading took 73\.80 GiB memory and ",
                      r"Available KV cache memory: 28\.45 GiB", r"Capturing CUDA graphs",
                      r"Graph capturing finished in \d+ secs, took 5\.00 GiB",
                      r"Starting vLLM server on http://127\.0\.0\.1:\d+", r"Application startup complete\."):
        assert re.search(milestone, log), milestone
    assert "Loading safetensors checkpoint shards" not in worker.text()  # tqdm on global rank 0 only
    worker.wait_line(r"Loading weights took")

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
    assert http("POST", f"http://127.0.0.1:{api}/v1/chat/completions", {**chat, "model": "nope"})[0] == 404

    head.proc.send_signal(signal.SIGTERM)
    assert head.wait_exit(10) == 0
    assert worker.wait_exit(10) == 0
    assert "Head node shut down; worker exiting." in worker.text()


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


def test_fault_injected_rank_exits_with_its_line_and_head_follows(ranks, ckpt):
    head_argv, worker_argv = two_rank_argv(ckpt, free_port(), free_port())
    env = base_env({"STANDIN_FAULT_RANK": "1", "STANDIN_FAULT_PHASE": "load", "STANDIN_FAULT_LINE": G1})
    head = ranks.start("head", head_argv, env)
    worker = ranks.start("worker", worker_argv, env)
    assert worker.wait_exit(15) == 1
    assert G1 in worker.text().splitlines()
    assert head.wait_exit(15) == 1
    assert "Worker proc on node rank 1" in head.text() and G1 not in head.text()


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
