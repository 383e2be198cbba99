"""SGLang stand-in: 2-rank rendezvous, 503-then-200 readiness, worker health server, SIGTERM
semantics, and the post-load barrier constant (unpatched vs. patched like the image patch)."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
from standin_helpers import PKGS, STANDIN, base_env, free_port, http, sglang_cmd, wait_http

LMU = os.path.join("sglang", "srt", "model_executor", "model_runner_components", "load_model_utils.py")
CONSTANT = "UNBALANCED_MODEL_LOADING_TIMEOUT_S = 480  # leave more time for post data processing"


def two_rank_argv(ckpt, rdzv, head_port, worker_port, extra=()):
    common = ["--model-path", ckpt, "--tokenizer-mode", "mistral", "--tp", "2", "--nnodes", "2",
              "--dist-init-addr", f"127.0.0.1:{rdzv}", "--dist-timeout", "20", "--host", "127.0.0.1",
              "--served-model-name", "mistral-large-4", "--context-length", "32768", "--reasoning-parser", "mistral",
              "--tool-call-parser", "mistral", "--attention-backend", "dsa", "--dsa-prefill-backend", "tilelang",
              "--dsa-decode-backend", "tilelang", "--moe-runner-backend", "flashinfer_cutlass", *extra]
    return (sglang_cmd(*common, "--node-rank", "0", "--port", str(head_port)),
            sglang_cmd(*common, "--node-rank", "1", "--port", str(worker_port)))


def test_source_carries_the_real_constant():
    with open(os.path.join(PKGS, LMU), encoding="utf-8") as fh:
        src = fh.read()
    assert CONSTANT + "\n" in src
    assert "timeout=datetime.timedelta(seconds=UNBALANCED_MODEL_LOADING_TIMEOUT_S)" in src


def test_two_ranks_ready_health_and_chat(ranks, ckpt):
    rdzv, hp, wp = free_port(), free_port(), free_port()
    head_argv, worker_argv = two_rank_argv(ckpt, rdzv, hp, wp)
    env = base_env({"STANDIN_PHASE_S": "0.3"})   # a visible warm-up window
    head = ranks.start("head", head_argv, env)
    worker = ranks.start("worker", worker_argv, env)
    seen, _body = wait_http(f"http://127.0.0.1:{hp}/health", 200, rank=head)
    assert seen[0] == 0 and 503 in seen, seen          # refused during load, 503 during warm-up, then 200
    head.wait_line(r"The server is fired up and ready to roll!")
    assert wait_http(f"http://127.0.0.1:{wp}/health", 200, rank=worker)[0][-1] == 200
    log = head.text()
    for milestone in (r"\[\S+ \S+ TP0\] Load weight begin\. avail mem=108\.78 GB",
                      r"Loading safetensors checkpoint shards: 100% Completed \| 2/2",
                      r"\[\S+ \S+ TP0\] Load weight end\. type=MistralForCausalLM, dtype=torch\.bfloat16, "
                      r"avail mem=34\.98 GB, mem usage=73\.80 GB\.",
                      r"monitored_barrier timeout in effect: 480 s", r"Memory pool end\. avail mem=",
                      r"max_total_num_tokens=\d+, chunked_prefill_size=\d+, .*context_len=32768",
                      r"Capture cuda graph begin", r"Uvicorn running on http://127\.0\.0\.1:\d+"):
        assert re.search(milestone, log), milestone
    worker.wait_line(rf"Dummy health check server started in background thread at 127\.0\.0\.1:{wp}")
    assert "TP1] Load weight end." in worker.text()

    status, _headers, body = http("GET", f"http://127.0.0.1:{hp}/v1/models")
    assert status == 200 and json.loads(body)["data"][0]["id"] == "mistral-large-4"
    chat = {"model": "mistral-large-4", "messages": [{"role": "user", "content": "hello"}]}
    status, _headers, body = http("POST", f"http://127.0.0.1:{hp}/v1/chat/completions", chat)
    msg = json.loads(body)["choices"][0]["message"]
    assert status == 200 and "stand-in" in msg["content"] and msg["reasoning_content"]
    assert http("GET", f"http://127.0.0.1:{wp}/v1/models")[0] == 404   # workers serve no API

    # SIGTERM on a worker: logged, ignored while rank 0 lives
    worker.proc.send_signal(signal.SIGTERM)
    worker.wait_line(r"waiting for the rank-0 ShutdownReq broadcast")
    time.sleep(0.5)
    assert worker.proc.poll() is None
    head.proc.send_signal(signal.SIGTERM)
    assert head.wait_exit(10) == 0
    assert worker.wait_exit(10) == 0


def test_tokenizer_mode_auto_without_config_json_fails_like_the_report(ranks, ckpt):
    r = ranks.start("auto", sglang_cmd("--model-path", ckpt, "--port", str(free_port())), base_env())
    assert r.wait_exit(15) == 1
    assert "couldn't find them in the cached files" in r.text()


def test_missing_rank_times_out_naming_it(ranks, ckpt):
    head_argv, _worker_argv = two_rank_argv(ckpt, free_port(), free_port(), free_port())
    head_argv[head_argv.index("--dist-timeout") + 1] = "1"
    head = ranks.start("head", head_argv, base_env())
    assert head.wait_exit(15) == 1
    assert "1/2 clients joined. Missing node ranks: 1." in head.text()


def test_hung_rank_and_patched_barrier_timeout(ranks, ckpt, tmp_path):
    """Apply the image patch's effect with a regex on a copy of the package: the barrier then reads
    SGLANG_UNBALANCED_LOAD_TIMEOUT_S; unpatched, the same env is ignored (480 s)."""
    patched = tmp_path / "patched"
    shutil.copytree(os.path.join(PKGS, "sglang"), patched / "sglang")
    path = patched / LMU
    src = path.read_text()
    new, n = re.subn(r"^UNBALANCED_MODEL_LOADING_TIMEOUT_S = 480\b.*$",
                     'UNBALANCED_MODEL_LOADING_TIMEOUT_S = int(os.environ.get("SGLANG_UNBALANCED_LOAD_TIMEOUT_S", '
                     '"480"))  # leave more time for post data processing', src, flags=re.M)
    assert n == 1
    path.write_text(new)

    # unpatched: env set but ignored
    single = ranks.start("unpatched", sglang_cmd("--model-path", ckpt, "--tokenizer-mode", "mistral",
                                                 "--port", str(free_port()), "--skip-server-warmup"),
                         base_env({"SGLANG_UNBALANCED_LOAD_TIMEOUT_S": "1"}))
    single.wait_line(r"monitored_barrier timeout in effect: 480 s")

    # patched, rank 1 hangs before the barrier: rank 0 gives up after 1 s with SGLang's message
    rdzv = free_port()
    head_argv, worker_argv = two_rank_argv(ckpt, rdzv, free_port(), free_port())
    env = base_env({"SGLANG_UNBALANCED_LOAD_TIMEOUT_S": "1", "STANDIN_HANG_RANK": "1",
                    "STANDIN_HANG_PHASE": "barrier"}, pythonpath=[STANDIN, str(patched)])
    head = ranks.start("head", head_argv, env)
    worker = ranks.start("worker", worker_argv, env)
    assert head.wait_exit(15) == 1
    out = head.text()
    assert "monitored_barrier timeout in effect: 1 s" in out
    assert "[Rank 0]: Ranks 1 failed to pass monitoredBarrier in 1000 ms" in out
    assert ("ValueError: TP rank 0 could finish the model loading, but there are other ranks that didn't finish "
            "loading. It is likely due to unexpected failures (e.g., OOM) or a slow node.") in out
    assert worker.wait_exit(10) == 1   # the hung rank dies when the group breaks
    single.terminate()
    assert single.wait_exit(10) == 0


def test_the_collections_barrier_patch_applies_to_the_stand_in(ranks, ckpt, tmp_path):
    """If the image's baked patch exists, run it on a copy of the stand-in package: it must find the
    stock line, and the barrier must then honour SGLANG_UNBALANCED_LOAD_TIMEOUT_S."""
    patch = os.path.join(os.path.dirname(STANDIN), "..", "..", "images", "mistral-large4-sglang", "patches",
                         "patch_barrier_timeout.py")
    if not os.path.isfile(patch):
        pytest.skip("images/mistral-large4-sglang/patches/patch_barrier_timeout.py not present")
    shutil.copytree(os.path.join(PKGS, "sglang"), tmp_path / "sglang")
    r = subprocess.run([sys.executable, patch, str(tmp_path / LMU)], capture_output=True, text=True, timeout=30, check=False)
    assert r.returncode == 0, r
    single = ranks.start("patched", sglang_cmd("--model-path", ckpt, "--tokenizer-mode", "mistral",
                                               "--port", str(free_port()), "--skip-server-warmup"),
                         base_env({"SGLANG_UNBALANCED_LOAD_TIMEOUT_S": "7200"}, pythonpath=[STANDIN, str(tmp_path)]))
    single.wait_line(r"monitored_barrier timeout in effect: 7200 s")


def test_a_head_with_an_api_key_warms_up_and_refuses_requests_without_it(ranks, ckpt):
    rdzv, hp, wp = free_port(), free_port(), free_port()
    head_argv, worker_argv = two_rank_argv(ckpt, rdzv, hp, wp, extra=("--api-key", "sk-standin-1"))
    head = ranks.start("head", head_argv, base_env())
    ranks.start("worker", worker_argv, base_env())
    head.wait_line(r"The server is fired up and ready to roll!")  # its own warm-up sent the key
    assert http("GET", f"http://127.0.0.1:{hp}/v1/models")[0] == 401
    assert http("GET", f"http://127.0.0.1:{hp}/health")[0] == 200
