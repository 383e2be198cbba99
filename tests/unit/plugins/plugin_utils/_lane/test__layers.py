"""Engine flags in their canonical spelling before anything merges, lints or hashes them (issue 37, item 2)."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._layers import CLI_SOURCE, Layers, canonical_flag
from tests.unit.helpers.plans import SGLANG, VLLM, plan


def test_an_underscored_override_replaces_the_lanes_dashed_flag_and_the_kv_lint_sees_it():
    """Before: both spellings on every rank's argv (vLLM obeys the last, 0.80) while the KV-budget lint read
    the lane's 0.9 and passed the plan."""
    _result, findings = plan(VLLM, overrides={"serve": {"args": {"--gpu_memory_utilization": 0.80}}})
    errors = {e["id"]: e["message"] for e in findings["errors"]}
    assert "kv-budget" in errors and "at least 0.87" in errors["kv-budget"], findings


def test_an_underscored_flag_renders_once_dashed_on_every_rank():
    result, _findings = plan(VLLM, overrides={"serve": {"args": {"--max_num_seqs": 40}}})
    for argv in (rank["docker_argv"] for rank in result["ranks"]):
        assert "--max_num_seqs" not in argv
        assert argv.count("--max-num-seqs") == 1 and argv[argv.index("--max-num-seqs") + 1] == "40"
    dashed, _findings = plan(VLLM, overrides={"serve": {"args": {"--max-num-seqs": 40}}})
    assert dashed["plan_hash"] == result["plan_hash"], "one flag in two spellings must be one plan"


def test_one_flag_in_two_spellings_in_one_layer_is_refused_naming_both():
    with pytest.raises(LanekitError) as err:
        Layers("lanes/x.yml", {"serve": {"args": {"--max-model-len": 4096}}},
               [(CLI_SOURCE, {"serve": {"args": {"--max-num-seqs": 8, "--max_num_seqs": 9}}})])
    text = str(err.value)
    assert text.startswith(CLI_SOURCE) and "'--max-num-seqs'" in text and "'--max_num_seqs'" in text
    with pytest.raises(LanekitError, match="lanes/x.yml: serve.args sets"):
        Layers("lanes/x.yml", {"serve": {"args": {"--max-model-len": 4096, "--max_model_len": 1}}})


def test_a_boolean_and_its_opposite_in_one_layer_are_refused_and_a_later_layer_replaces_the_earlier():
    with pytest.raises(LanekitError, match="both '--enable-prefix-caching' and '--no-enable-prefix-caching'"):
        Layers("lanes/x.yml", {"serve": {"args": {"--enable-prefix-caching": True, "--no-enable-prefix-caching": True}}})
    layers = Layers("lanes/x.yml", {"serve": {"args": {"--enable-prefix-caching": True, "--max-model-len": 8}}},
                    [(CLI_SOURCE, {"serve": {"args": {"--no_enable_prefix_caching": True}}})])
    assert layers.merged["serve"]["args"] == {"--max-model-len": 8, "--no-enable-prefix-caching": True}
    assert layers.source_of(("serve", "args", "--no-enable-prefix-caching")) == CLI_SOURCE


def test_pool_flags_are_canonical_and_the_routers_are_left_as_written():
    layers = Layers("lanes/x.yml", {"pd": {"prefill": {"args": {"--max_num_seqs": 4}},
                                           "router": {"args": {"--policy_name": "x"}}}})
    assert layers.merged["pd"]["prefill"]["args"] == {"--max-num-seqs": 4}
    assert layers.merged["pd"]["router"]["args"] == {"--policy_name": "x"}


def test_sglang_gets_the_dashed_spelling_its_parser_knows():
    result, _findings = plan(SGLANG, overrides={"serve": {"args": {"--max_running_requests": 12}}})
    argv = result["ranks"][0]["docker_argv"]
    assert "--max-running-requests" in argv and "--max_running_requests" not in argv


@pytest.mark.parametrize("flag, canonical", [("--gpu_memory_utilization", "--gpu-memory-utilization"),
                                             ("--no_enable_x", "--no-enable-x"), ("-tp", "-tp"),
                                             ("--tp", "--tp")])
def test_canonical_flag(flag, canonical):
    assert canonical_flag(flag) == canonical
