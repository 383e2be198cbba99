"""The stand-ins' API key check (tests/sim/standin http_api.refuses_key): what the engines refuse without it."""
from __future__ import annotations

import sys

from standin_helpers import STANDIN

sys.path.insert(0, STANDIN)
from lanekit_standin.http_api import ApiState, refuses_key  # noqa: E402


def _state(engine, key):
    state = ApiState(engine=engine, version="x", served_names=["m"], model_path="/m", max_model_len=1)
    state.api_key = key
    return state


def test_vllm_guards_v1_only():
    state = _state("vllm", "sk-1")
    assert refuses_key(state, "/v1/models", {}) and refuses_key(state, "/v1/models", {"Authorization": "Bearer no"})
    assert not refuses_key(state, "/v1/models", {"Authorization": "Bearer sk-1"})
    assert not refuses_key(state, "/health", {})


def test_sglang_guards_everything_but_health():
    state = _state("sglang", "sk-2")
    assert refuses_key(state, "/generate", {}) and refuses_key(state, "/v1/chat/completions", {})
    assert not refuses_key(state, "/health_generate", {}) and not refuses_key(state, "/metrics", {})


def test_no_key_no_check():
    assert not refuses_key(_state("sglang", None), "/v1/models", {})


def test_vllm_leaves_the_paths_outside_its_prefixes_open_as_real_vllm_does():
    state = _state("vllm", "sk-1")
    for path in ("/v2/rerank", "/inference/v1/generate", "/cohere/v1/chat"):
        assert refuses_key(state, path, {}), path
    for path in ("/tokenize", "/pooling", "/score", "/rerank", "/invocations", "/version"):
        assert not refuses_key(state, path, {}), path


def test_a_middleware_class_answers_before_the_stand_in_as_in_vllm(monkeypatch):
    from lanekit_standin.http_api import load_middlewares, middleware_answer

    from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _keyguard

    monkeypatch.setenv("VLLM_API_KEY", "sk-1")
    monkeypatch.setitem(sys.modules, "lanekit_keyguard", _keyguard)
    state = _state("vllm", "sk-1")
    state.middlewares = load_middlewares(["lanekit_keyguard.KeyGuard"])
    status, body, ctype = middleware_answer(state, "POST", "/tokenize", {})
    assert (status, body, ctype) == (401, b'{"error":"Unauthorized"}', "application/json")
    assert middleware_answer(state, "POST", "/tokenize", {"Authorization": "Bearer sk-1"}) is None
    assert middleware_answer(state, "GET", "/health", {}) is None


def test_a_middleware_that_is_not_a_class_is_refused_by_name():
    from lanekit_standin.http_api import load_middlewares

    try:
        load_middlewares(["os.getcwd"])
    except ValueError as error:
        assert "Invalid middleware os.getcwd" in str(error)
    else:
        raise AssertionError("a function middleware was taken")
