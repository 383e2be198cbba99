"""The stand-ins' run-time wedge (STANDIN_WEDGE_FILE): the API stays up while generation hangs, switched
on and off while the rank runs, healed by a restart unless the file says 'persist'; the watch's probe
(module_utils/_boot/_probes.stream_probe, run on the head) tells the wedged rank from a serving one."""
from __future__ import annotations

import json
import urllib.error

import pytest
from standin_helpers import base_env, free_port, http, vllm_cmd, wait_http

from ansible_collections.lanekit.serving.plugins.module_utils._boot._probes import stream_probe
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _watch as watch

CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 4}


def start(ranks, ckpt, wedge, name="one"):
    api = free_port()
    rank = ranks.start(name, vllm_cmd(ckpt, "--tokenizer-mode", "mistral", "--host", "127.0.0.1", "--port", str(api),
                                      "--max-model-len", "32768", "--served-model-name", "tiny"),
                       base_env({"STANDIN_WEDGE_FILE": str(wedge)}))
    wait_http(f"http://127.0.0.1:{api}/health", 200, rank=rank)
    return rank, api


def chat_status(api, timeout):
    try:
        return http("POST", f"http://127.0.0.1:{api}/v1/chat/completions", CHAT, timeout=timeout)[0]
    except (TimeoutError, urllib.error.URLError):
        return "timeout"


def test_a_running_rank_wedges_and_unwedges_with_its_api_up(ranks, ckpt, tmp_path):
    wedge = tmp_path / "wedge"
    wedge.write_text("")  # left from before this process: a start removes it
    rank, api = start(ranks, ckpt, wedge)
    assert not wedge.exists()
    base = f"http://127.0.0.1:{api}"
    healthy = stream_probe(base, "tiny", deadline_s=10)
    assert healthy["ok"] and healthy["tokens"] > 0 and healthy["ttft_s"] is not None, healthy
    # The engine's counter, read from its /metrics around the stream, counts the probe's own tokens.
    assert healthy["engine_tokens_after"] - healthy["engine_tokens_before"] == healthy["tokens"], healthy

    wedge.touch()
    assert chat_status(api, timeout=1.5) == "timeout"
    assert http("GET", f"{base}/health")[0] == 200
    status, _headers, body = http("GET", f"{base}/v1/models")
    assert status == 200 and [m["id"] for m in json.loads(body)["data"]] == ["tiny"]
    wedged = stream_probe(base, "tiny", deadline_s=1.5)
    assert not wedged["ok"] and wedged["error"] == "no first token within 1.5 s", wedged
    # A wedge generates for nobody: the counter stands still, so the watch's counter rule finds no progress.
    assert wedged["engine_tokens_before"] == wedged["engine_tokens_after"] == healthy["engine_tokens_after"], wedged
    assert watch.verdict([wedged], watch.Floors(30.0, None, "the test's")).state == "wedged"
    assert rank.text().count(f"[lanekit stand-in] wedged by {wedge}: inference requests hang") == 1

    wedge.unlink()
    assert chat_status(api, timeout=5) == 200
    assert stream_probe(base, "tiny", deadline_s=10)["ok"]


@pytest.mark.parametrize("content, heals", [("", True), ("persist", False)])
def test_a_restart_heals_a_wedge_unless_it_persists(ranks, ckpt, tmp_path, content, heals):
    wedge = tmp_path / "wedge"
    rank, api = start(ranks, ckpt, wedge)
    wedge.write_text(content)
    assert chat_status(api, timeout=1.0) == "timeout"
    rank.kill()
    _again, api = start(ranks, ckpt, wedge, name="again")
    assert wedge.exists() is not heals
    assert (chat_status(api, timeout=3.0) == 200) is heals
