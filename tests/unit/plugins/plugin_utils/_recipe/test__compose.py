"""Composition details of the recipe compiler: dedupe, quoting, JSON patches, refusal sentences."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._choice import Choice
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._compose import (
    _apply_json_args,
    compile_recipe,
    dedupe,
    public,
    shell_quote,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._load import load_recipe
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._rules import RecipeRefusal
from tests.unit.helpers.recipes import TINY, TREE


def _tokens(*values):
    return [(v, "test") for v in values]


def test_the_last_occurrence_of_a_flag_wins_at_its_own_position():
    out = dedupe(_tokens("--a", "1", "--b", "--a", "2", "pos", "--c", "", "--b"))
    assert [token for token, _origin in out] == ["--a", "2", "pos", "--c", "--b"]


def test_flags_compare_as_text_and_empty_tokens_are_dropped_first():
    out = dedupe(_tokens("--block-size=64", "--block-size", "32", None, "--x", "", "v"))
    assert [token for token, _origin in out] == ["--block-size=64", "--block-size", "32", "--x", "v"]


def test_a_kept_token_keeps_its_origin():
    out = dedupe([("--a", "base"), ("1", "base"), ("--a", "feature"), ("2", "feature")])
    assert out == [("--a", "feature"), ("2", "feature")]


@pytest.mark.parametrize("value,quoted", [
    ("$HEAD_IP", "$HEAD_IP"), ("fp8", "fp8"), ("a=b,c:d", "a=b,c:d"),
    ('{"a":1}', "'{\"a\":1}'"), ("it's", "'it'\\''s'"), ("$HEAD_IP:8000", "'$HEAD_IP:8000'"),
])
def test_display_values_are_shell_quoted_like_the_site(value, quoted):
    assert shell_quote(value) == quoted


def test_json_args_patch_by_connector_and_delete_with_null():
    toks = _tokens("--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_producer","x":1}')
    out = _apply_json_args(toks, {"--kv-transfer-config": {"NixlConnector": {"kv_role": "kv_both", "x": None}}}, "p")
    assert out[1] == ('{"kv_connector":"NixlConnector","kv_role":"kv_both"}', "p")
    plain = _apply_json_args(_tokens("--c", '{"a":{"b":1}}'), {"--c": {"a": {"c": 2}}}, "p")
    assert plain[1][0] == '{"a":{"b":1,"c":2}}'


def test_every_argv_token_and_env_key_names_its_layer():
    src = load_recipe(TINY, TREE)
    result = compile_recipe(src, Choice(hardware="dgx_spark_gb10", strategy="multi_node_tp", variant="fp8", nodes=2))
    head = result["commands"][0]
    origins = dict(zip(head["argv"][3:], head["origins"]["args"], strict=True))
    assert origins["--gpu-memory-utilization"] == "variant fp8 hardware_overrides.dgx_spark_gb10"
    assert origins["--attention-backend"] == "hardware_overrides (blackwell)"
    assert origins["--speculative-config"] == "feature spec_decoding (mode eagle)"
    assert origins["--nnodes"] == "strategy multi_node_tp parallel flags"
    assert head["origins"]["env"]["VLLM_USE_DEEP_GEMM"] == "variant fp8"
    assert "origins" not in public(result)["commands"][0] and "choice" not in public(result)


def test_defaults_fill_the_features_and_the_node_count():
    src = load_recipe(TINY, TREE)
    result = compile_recipe(src, Choice(hardware="h200", strategy="multi_node_tp", variant="fp8"))
    # The h200 floor of 24 GPUs for multi_node_tp needs 3 nodes; text_only stays opt-in.
    assert result["choice"]["nodes"] == 3 and len(result["commands"]) == 3
    assert result["choice"]["features"] == ["tool_calling", "reasoning", "spec_decoding"]
    assert result["modes"] == {"spec_decoding": "eagle"}


def test_pd_pools_default_to_the_sites_sizing():
    src = load_recipe(TINY, TREE)
    result = compile_recipe(src, Choice(hardware="b200", strategy="pd_cluster"))
    assert result["choice"]["pd"] == {"prefill": {"nodes": 1, "parallelism": "dep"},
                                      "decode": {"nodes": 1, "parallelism": "tp"}}


@pytest.mark.parametrize("choice,rule", [
    (dict(hardware="b200", strategy="single_node_tp", features=["tool_calling", "tool_calling"]), "duplicate_feature"),
    (dict(hardware="b200", strategy="single_node_tp", features=["tool_calling"], feature_modes={"tool_calling": "x"}),
     "mode_for_non_modal_feature"),
    (dict(hardware="b200", strategy="single_node_tp", features=[], feature_modes={"spec_decoding": "mtp"}),
     "mode_feature_not_enabled"),
    (dict(hardware="b200", strategy="single_node_tp", pd={"prefill": 1}), "pd_for_non_pd_strategy"),
    (dict(hardware="b200", strategy="pd_cluster", nodes=2), "node_count"),
    (dict(hardware="b200", strategy="pd_cluster", pd={"prefill": {"nodes": 17}}), "pd_pool_nodes"),
    (dict(hardware="b200", strategy="kv_store_centralized_mooncake"), "unknown_strategy"),
    (dict(hardware="b200", strategy="single_node_tp", variant="int4"), "unknown_variant"),
    (dict(hardware="h20", strategy="single_node_tp"), "unknown_hardware"),
])
def test_input_rules_refuse_with_one_sentence(choice, rule):
    src = load_recipe(TINY, TREE)
    with pytest.raises(RecipeRefusal) as err:
        compile_recipe(src, Choice(**choice))
    assert err.value.rule == rule
    assert str(err.value).startswith("recipe acme/Tiny-MoE refuses the choice ") and "\n" not in str(err.value)


def test_a_pool_size_keyed_by_hardware_compiles_as_the_site_reads_it(tmp_path):
    """Issue 37: `strategy_overrides.pd_cluster.prefill.nodes: {default: 2, gb300: 1}` is a valid upstream
    recipe (a hardware-keyed map, read exact id > generation > brand > default); it was refused as "is a
    mapping; expected a whole number"."""
    import yaml

    with open(TINY, encoding="utf-8") as handle:
        recipe = yaml.safe_load(handle)
    recipe["strategy_overrides"]["pd_cluster"]["prefill"] = {"parallelism": "dep", "nodes": {"default": 2, "b200": 1}}
    path = tmp_path / "Tiny-MoE.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    src = load_recipe(str(path), TREE)
    assert compile_recipe(src, Choice(hardware="b200", strategy="pd_cluster"))["choice"]["pd"]["prefill"]["nodes"] == 1
    assert compile_recipe(src, Choice(hardware="h200", strategy="pd_cluster"))["choice"]["pd"]["prefill"]["nodes"] == 2
