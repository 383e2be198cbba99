"""Issue 23: a flag the lane's engine does not have is refused from the engine record (_engines.distinct_args).

The report: the SGLang seed lane accepted ``--max-model-len 1`` (vLLM's spelling) without a word;
SGLang would have stopped at start with 'unrecognized arguments'.
"""
from __future__ import annotations

import os

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._schema import CLI_SOURCE, GROUP_SOURCE
from tests.unit.helpers.plans import LANES, SGLANG, VLLM, plan, plan_cpu


def refusal(lane, **kw) -> str:
    with pytest.raises(LanekitError) as err:
        plan(lane, **kw)
    return str(err.value)


def test_a_vllm_flag_on_the_sglang_lane_is_refused_with_sglangs_spelling():
    text = refusal(SGLANG, overrides={"serve": {"args": {"--max-model-len": 1}}})
    assert text == (f"{CLI_SOURCE}: key 'serve.args.--max-model-len' is a vLLM flag that SGLang does not have (lane "
                    "engine sglang; it would stop at start with 'unrecognized arguments'); use --context-length for "
                    "that setting.")


def test_an_sglang_flag_on_a_vllm_lane_is_refused_naming_the_layer():
    text = refusal(VLLM, group_overrides={"serve": {"args": {"--mem_fraction_static": 0.8}}})
    assert text.startswith(GROUP_SOURCE + ": key 'serve.args.--mem_fraction_static' is a SGLang flag")
    assert text.endswith("use --gpu-memory-utilization for that setting.")


def test_a_flag_without_an_equivalent_says_to_remove_it():
    text = refusal(VLLM, overrides={"serve": {"args": {"--disable-radix-cache": True}}})
    assert "lanekit knows no vLLM flag for it" in text and "None" not in text


def test_a_foreign_flag_removed_with_null_is_no_problem():
    _plan, findings = plan(SGLANG, overrides={"serve": {"args": {"--max-model-len": None}}})
    assert not findings["errors"]


def test_a_flag_lanekit_does_not_know_is_left_to_the_engine():
    _plan, findings = plan(SGLANG, overrides={"serve": {"args": {"--enable-metrics": True}}})
    assert not findings["errors"]


def test_the_engines_distinct_flags_do_not_overlap():
    assert not set(_engines.VLLM.distinct_args) & set(_engines.SGLANG.distinct_args)
    for engine in _engines.ENGINES.values():
        assert not set(engine.distinct_args) & set(engine.plan_owned)
        assert engine.memory_fraction_flag in engine.distinct_args and engine.max_len_flag in engine.distinct_args


@pytest.mark.parametrize("lane", sorted(f[:-4] for f in os.listdir(LANES) if f.endswith(".yml")))
def test_every_shipped_lane_still_plans(lane):
    if lane.startswith("tiny-llama-cpu"):
        result, findings = plan_cpu()
    else:
        result, findings = plan(lane)
    assert result is not None and not findings["errors"], findings["errors"]
