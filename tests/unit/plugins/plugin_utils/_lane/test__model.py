"""The validated lane's type (plugin_utils/_lane/_model.py): the lane carries its engine record, and
every reader takes the record from the lane instead of looking the engine up by name."""
from __future__ import annotations

import copy

from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._flags import budget_env, effective_env
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._load import load_lane
from tests.unit.helpers.plans import LANES, SGLANG, VLLM


def test_the_loaded_lane_carries_its_engine_record():
    assert load_lane(LANES, VLLM)["_engine"] is _engines.VLLM
    assert load_lane(LANES, SGLANG)["_engine"] is _engines.SGLANG


def test_readers_use_the_record_on_the_lane_not_the_engine_name():
    lane = load_lane(LANES, VLLM)
    swapped = dict(lane, _engine=_engines.SGLANG)  # the name still says vllm
    assert budget_env(swapped) == {"SGLANG_UNBALANCED_LOAD_TIMEOUT_S": lane["boot"]["budget_s"]}
    assert effective_env(swapped)["SGLANG_UNBALANCED_LOAD_TIMEOUT_S"] == lane["boot"]["budget_s"]


def test_a_deep_copied_lane_shares_the_record():
    lane = load_lane(LANES, VLLM)
    assert copy.deepcopy(lane)["_engine"] is lane["_engine"]


def test_the_layout_renders_the_argv_of_the_record_on_the_lane():
    from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _layout
    lane = load_lane(LANES, VLLM)
    swapped = dict(lane, _engine=_engines.SGLANG, serve=dict(lane["serve"], args={}))
    argv = _layout.processes(swapped, [{"name": "solo", "fabric_ip": "10.0.0.1"}], "/m")[0]["argv"]
    assert argv[:2] == ["--model-path", "/m"]  # SGLang's form, although the name still says vllm
