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
