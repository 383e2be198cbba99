"""The stand-ins' OpenAI serving as the bench tools need it (../shared/reference/bench.md):
streamed chat with token ids and usage, tool-call chunks, response_format, coherence, delays."""
from __future__ import annotations

import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))), "tests", "sim", "standin"))
from lanekit_standin import http_api  # noqa: E402

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "required": ["city", "opts"],
    "properties": {"city": {"type": "string"}, "opts": {"type": "object", "required": ["unit"],
                                                        "properties": {"unit": {"enum": ["c", "f"]}}}}}}}


def test_schema_value_fills_required_properties_recursively():
    assert http_api.schema_value(WEATHER["function"]["parameters"]) == {
        "city": "stand-in value for city", "opts": {"unit": "c"}}
    assert http_api.schema_value({"type": ["null", "integer"]}) == 1
    assert http_api.schema_value({"anyOf": [{"type": "boolean"}]}) is True


def test_tool_call_rules():
    user = [{"role": "user", "content": "x"}]
    after_tool = user + [{"role": "tool", "content": "{}"}]
    assert http_api.wants_tool_call(user, [WEATHER], "auto")
    assert not http_api.wants_tool_call(after_tool, [WEATHER], "auto")
    assert http_api.wants_tool_call(after_tool, [WEATHER], "required")
    assert not http_api.wants_tool_call(user, [WEATHER], "none") and not http_api.wants_tool_call(user, [], "auto")
    call = http_api._tool_call([WEATHER], "auto", "d")
    chunks = http_api.tool_call_chunks(call)
    assert chunks[0]["id"] == call["id"] and chunks[0]["function"] == {"name": "get_weather", "arguments": ""}
    assert "".join(c["function"]["arguments"] for c in chunks[1:]) == call["function"]["arguments"]


def test_pad_and_coherence():
    assert http_api.pad_to("a b", "stop", {"min_tokens": 5}, 10)[0].split()[:2] == ["a", "b"]
    assert len(http_api.pad_to("a b", "stop", {"ignore_eos": True}, 10)[0].split()) == 10
    assert http_api.pad_to("a b", "stop", {}, 10) == ("a b", "stop")
    assert http_api.coherent_prefix([{"role": "user", "content": "What is the capital of France?"}]).startswith("Paris")


@pytest.fixture(params=["vllm", "sglang"])
def server(request, monkeypatch):
    monkeypatch.setenv("STANDIN_DECODE_MS_PER_TOKEN", "1")
    state = http_api.ApiState(engine=request.param, version="0-test", served_names=["m"], model_path="/models/m",
                              max_model_len=4096, tool_call_parser="mistral", auto_tool_choice=True)
    state.ready = True
    srv = http_api.make_server("127.0.0.1", 0, http_api.handler_for(state))
    http_api.bind(srv)
    http_api.start(srv)
    yield request.param, f"http://127.0.0.1:{srv.server_address[1]}", state
    srv.shutdown()
    srv.server_close()


def post(url, body):
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.read().decode()


def events(text):
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]


def test_models_lists_root_owner_and_length(server):
    engine, url, _state = server
    with urllib.request.urlopen(url + "/v1/models", timeout=10) as resp:
        model = json.load(resp)["data"][0]
    assert (model["id"], model["root"], model["owned_by"], model["max_model_len"]) == ("m", "/models/m", engine, 4096)


def test_streamed_chat_with_token_ids_usage_and_min_tokens(server):
    engine, url, _state = server
    body = {"model": "m", "stream": True, "max_tokens": 20, "min_tokens": 20, "ignore_eos": True,
            "stream_options": {"include_usage": True}, "messages": [{"role": "user", "content": "one two three"}],
            "return_token_ids": engine == "vllm"}
    text = post(url, body)
    chunks = events(text)
    content = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]
    assert len(content) == 20 and text.rstrip().endswith("data: [DONE]")
    assert chunks[-1]["usage"]["completion_tokens"] == 20 and chunks[-1]["usage"]["prompt_tokens"] == 7
    if engine == "vllm":
        assert all(len(c["choices"][0]["token_ids"]) == 1 for c in content)
    else:  # SGLang refuses streamed token ids, as the real server does
        with pytest.raises(urllib.error.HTTPError) as err:
            post(url, dict(body, return_token_ids=True))
        assert err.value.code == 400


def test_streamed_tool_call_then_text_after_the_result(server):
    _engine, url, _state = server
    msgs = [{"role": "user", "content": "weather?"}]
    chunks = events(post(url, {"stream": True, "messages": msgs, "tools": [WEATHER]}))
    calls = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks if c["choices"][0]["delta"].get("tool_calls")]
    assert calls[0]["function"]["name"] == "get_weather" and "id" in calls[0]
    assert json.loads("".join(c["function"]["arguments"] for c in calls))["opts"] == {"unit": "c"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    msgs += [{"role": "assistant", "tool_calls": [calls[0]]}, {"role": "tool", "content": "{\"t\": 20}"}]
    reply = json.loads(post(url, {"messages": msgs, "tools": [WEATHER]}))
    assert reply["choices"][0]["message"]["content"] and reply["choices"][0]["finish_reason"] != "tool_calls"


def test_response_format_json(server):
    _engine, url, _state = server
    schema = {"type": "object", "required": ["answer"], "properties": {"answer": {"type": "integer"}}}
    reply = json.loads(post(url, {"messages": [{"role": "user", "content": "x"}],
                                  "response_format": {"type": "json_schema", "json_schema": {"schema": schema}}}))
    assert json.loads(reply["choices"][0]["message"]["content"]) == {"answer": 1}


def test_concurrent_streams_overlap_and_prefill_takes_time(server):
    _engine, url, state = server
    state.decode_s_per_token = 0.02
    body = {"stream": True, "max_tokens": 25, "ignore_eos": True, "messages": [{"role": "user", "content": "x"}]}
    started = time.monotonic()
    post(url, body)
    one = time.monotonic() - started
    assert one >= 25 * 0.02  # decode time is simulated per token
    started = time.monotonic()
    threads = [threading.Thread(target=post, args=(url, body)) for _unused in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # four streams in parallel take about as long as one (a thread each), not four times as long
    assert time.monotonic() - started < 2.5 * one
    state.prefill_s_per_token = 0.001
    started = time.monotonic()
    post(url, {"max_tokens": 1, "messages": [{"role": "user", "content": "w " * 500}]})
    assert time.monotonic() - started >= 0.5  # 504 prompt tokens at 1 ms each
