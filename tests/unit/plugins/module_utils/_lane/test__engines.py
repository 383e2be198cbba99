"""The engine table: lookups, budget defaults and the orders, as the plan and lint read them."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._schema import (
    ENGINES,
    budget_args,
    budget_env,
    effective_args,
    load_lane,
    timeout_value,
)
from tests.unit.helpers.plans import LANES, SGLANG, VLLM


def test_unknown_engine_is_one_sentence_naming_the_known_ones():
    with pytest.raises(LanekitError) as err:
        _engines.get("trtllm")
    message = str(err.value)
    assert message == "engine 'trtllm' is not one lanekit knows; known engines: sglang, vllm."


def test_lane_schema_accepts_exactly_the_engines_of_the_table():
    assert set(ENGINES) == set(_engines.ENGINES) == {"vllm", "sglang"}


def test_engine_records_carry_the_facts_the_plan_and_lint_need():
    vllm, sglang = _engines.get("vllm"), _engines.get("sglang")
    assert vllm.host_ip_env == "VLLM_HOST_IP" and sglang.host_ip_env == "SGLANG_HOST_IP"
    assert vllm.timeout("engine_ready").key == "VLLM_ENGINE_READY_TIMEOUT_S"
    assert sglang.timeout("watchdog").stock_s == 300.0 and sglang.timeout("barrier").stock_s == 480.0
    assert vllm.timeout("barrier") is None and vllm.timeout("watchdog") is None
    assert vllm.memory_fraction_flag == "--gpu-memory-utilization" and sglang.max_len_flag == "--context-length"
    assert "--master-port" in vllm.plan_owned and "--dist-init-addr" in sglang.plan_owned


def test_budget_defaults_split_env_and_flags():
    assert _engines.get("vllm").budget_defaults(9000) == (
        {"VLLM_ENGINE_READY_TIMEOUT_S": 9000}, {"--distributed-timeout-seconds": 9000})
    assert _engines.get("sglang").budget_defaults(9000) == (
        {"SGLANG_UNBALANCED_LOAD_TIMEOUT_S": 9000}, {"--dist-timeout": 9000})


def test_budget_flags_follow_the_lanes_own_flags_and_never_replace_them():
    lane = load_lane(LANES, VLLM)
    assert budget_env(lane) == {"VLLM_ENGINE_READY_TIMEOUT_S": lane["boot"]["budget_s"]}
    assert budget_args(lane) == {"--distributed-timeout-seconds": lane["boot"]["budget_s"]}
    args = effective_args(lane)
    assert list(args)[-1] == "--distributed-timeout-seconds"  # appended after the lane's flags
    assert list(args)[:-1] == list(lane["serve"]["args"])
    lane = load_lane(LANES, SGLANG, [("cli", {"serve": {"args": {"--dist-timeout": 1234}}})])
    assert effective_args(lane)["--dist-timeout"] == 1234
    lane = load_lane(LANES, SGLANG, [("cli", {"serve": {"args": {"--dist-timeout": None}}})])
    assert effective_args(lane)["--dist-timeout"] is None  # null drops it; the budget does not come back


def test_timeout_values_as_the_ranks_get_them():
    sglang = load_lane(LANES, SGLANG)
    assert timeout_value(sglang, "barrier") == 7200.0  # the lane's own value
    unset = load_lane(LANES, SGLANG, [("cli", {"serve": {"env": {"SGLANG_UNBALANCED_LOAD_TIMEOUT_S": None}}})])
    assert timeout_value(unset, "barrier") == float(unset["boot"]["budget_s"])  # the boot budget
    assert timeout_value(load_lane(LANES, VLLM), "barrier") is None  # vLLM has no such barrier
    no_watchdog = load_lane(LANES, SGLANG, [("cli", {"serve": {"args": {"--watchdog-timeout": None}}})])
    assert timeout_value(no_watchdog, "watchdog") == 300.0  # the engine's stock value


@pytest.mark.parametrize("name", ["vllm", "sglang"])
def test_head_starts_and_stops_first(name):
    engine = _engines.get(name)
    roles = ["head", "worker", "worker", "worker"]
    assert engine.batches(roles, engine.start_first) == [[0], [1, 2, 3]]
    assert engine.batches(roles, engine.stop_first) == [[0], [1, 2, 3]]
    assert engine.batches(["head"], engine.start_first) == [[0]]  # a single-node lane has one batch
