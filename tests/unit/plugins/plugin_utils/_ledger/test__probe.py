"""Issue 26: the watch's probe, one streamed completion with a deadline (_ledger/_probe.py), against a
local server that streams, stalls after a few tokens, hangs before the first, or refuses."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger._probe import stream_probe
from tests.unit.helpers.streamserver import start_server, stop_server


@pytest.fixture
def server():
    srv = start_server()
    yield srv
    stop_server(srv)


def probe(server, mode, deadline=1.0):
    server.mode = mode
    return stream_probe(f"http://127.0.0.1:{server.server_address[1]}", "m", deadline_s=deadline, api_key="k")


def test_a_stream_that_ends_in_time_is_timed(server):
    result = probe(server, "stream", deadline=5.0)
    assert result["ok"] and result["tokens"] == 5 and result["error"] == ""
    assert 0 <= result["ttft_s"] < 1 and result["tps"] > 5


def test_tokens_that_stop_before_the_deadline_fail_it(server):
    result = probe(server, "stall")
    assert not result["ok"] and result["tokens"] == 3
    assert result["error"] == "3 tokens, then nothing until the deadline of 1 s"
    assert result["total_s"] < 2.5


def test_no_first_token_and_an_error_status(server):
    hung = probe(server, "hang")
    assert (hung["ok"], hung["ttft_s"], hung["error"]) == (False, None, "no first token within 1 s")
    refused = probe(server, "refuse")
    assert refused["error"] == "the chat completion answered HTTP 503"
    closed = stream_probe("http://127.0.0.1:9", "m", deadline_s=1.0)
    assert closed["error"].startswith("the chat completion failed: ")
