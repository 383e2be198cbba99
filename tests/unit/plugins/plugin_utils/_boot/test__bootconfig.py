# Copyright: lanekit developers
# Apache-2.0
"""The boot figures read from the plan (plugin_utils/_boot/_bootconfig.py): budget, stall, poll, barrier."""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines as engines
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _bootconfig as boot


def test_boot_config_from_plan():
    plan = {"engine": "sglang", "boot": {"budget_s": 5400, "stall_s": 900, "poll_s": 20, "expected_load_s": 3000},
            "barrier_timeout_s": 7200.0, "ranks": [{"env": {"SGLANG_UNBALANCED_LOAD_TIMEOUT_S": "999"}}]}
    config = boot.BootConfig.from_plan(plan, poll_s=5.0)
    assert (config.budget_s, config.stall_s, config.poll_s, config.expected_load_s) == (5400, 900, 5.0, 3000)
    assert config.barrier_timeout_s == 7200


def test_the_barrier_comes_from_the_plan_not_the_rank_env():
    env = {"SGLANG_UNBALANCED_LOAD_TIMEOUT_S": "7200"}
    assert boot.BootConfig.from_plan({"engine": "sglang", "barrier_timeout_s": 4800,
                                      "ranks": [{"env": env}]}).barrier_timeout_s == 4800
    # the plan says the engine has no barrier: no barrier note, whatever a rank's env holds
    assert boot.BootConfig.from_plan({"engine": "sglang", "barrier_timeout_s": None,
                                      "ranks": [{"env": env}]}).barrier_timeout_s is None
    assert boot.BootConfig.from_plan({"engine": "vllm", "barrier_timeout_s": None}).barrier_timeout_s is None


def test_a_plan_without_the_barrier_key_gets_the_engine_records_stock_barrier():
    stock = engines.get("sglang").timeout("barrier").stock_s
    assert boot.BootConfig.from_plan({"engine": "sglang", "ranks": [
        {"env": {"SGLANG_UNBALANCED_LOAD_TIMEOUT_S": "7200"}}]}).barrier_timeout_s == stock
    assert boot.BootConfig.from_plan({"engine": "vllm"}).barrier_timeout_s is None
    assert boot.BootConfig.from_plan({}).barrier_timeout_s is None
