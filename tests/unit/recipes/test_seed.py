"""The seed recipe shipped in recipes/: its recommended command, and every choice it offers compiles or is refused."""
from __future__ import annotations

import itertools

import pytest

from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe import _rules as R
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._choice import Choice
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._compose import compile_recipe, public
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._load import load_recipe
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._rules import RecipeRefusal
from tests.unit.helpers.recipes import SEED

SRC = load_recipe(SEED)
RECIPE = SRC.recipe
RULES = {
    "omni_recipe", "unknown_variant", "unknown_hardware", "unknown_strategy", "restricted_hardware",
    "hardware_unsupported", "precision_gate", "variant_supported_hardware", "strategy_not_offered",
    "strategy_unsupported_on_hardware", "strategy_unreachable", "not_clusterable", "node_count", "below_min_gpus",
    "pd_pool_mode", "pd_pool_below_min_gpus", "pd_pool_mode_unreachable", "pd_pool_nodes",
    "feature_strategy_excluded", "mode_variant_excluded", "mode_hardware_unsupported", "no_mode_available",
    "does_not_fit_workstation",
}
MATRIX = list(itertools.product(sorted(RECIPE["meta"]["hardware"]), R.offered_strategies(RECIPE), sorted(RECIPE["variants"])))


def test_seed_resolves_against_the_collections_recipe_tree():
    assert SRC.form == "json"
    assert SRC.root.endswith("recipes")
    assert "mi350x" in SRC.profiles  # lanekit's tree adds the profile the seed names


def test_recommended_command_is_reproduced_exactly():
    rec = RECIPE["recommended_command"]
    result = public(compile_recipe(SRC, Choice(hardware=rec["hardware"], strategy=rec["strategy"],
                                               variant=rec["variant"], nodes=rec["node_count"])))
    assert result["deployType"] == rec["deploy_type"]
    (command,) = result["commands"]
    assert command["argv"] == rec["argv"]
    assert command["env"] == rec["env"]
    # The seed's display string indents continuations by one space, the builder by two.
    assert command["command"].replace(" \\\n  ", " \\\n ") == rec["command"]


@pytest.mark.parametrize("hardware,strategy,variant", [pytest.param(*m, id="-".join(m)) for m in MATRIX])
def test_every_offered_choice_compiles_or_is_refused_with_its_rule(hardware, strategy, variant):
    try:
        result = public(compile_recipe(SRC, Choice(hardware=hardware, strategy=strategy, variant=variant)))
    except RecipeRefusal as err:
        assert err.rule in RULES
        assert str(err).startswith(f"recipe {SRC.name} refuses the choice hardware={hardware} strategy={strategy}")
        return
    assert result["commands"] and all(c["argv"][:3] == ["vllm", "serve", result["model"]] for c in result["commands"])


def test_the_matrix_both_compiles_and_refuses():
    outcomes = {}
    for hardware, strategy, variant in MATRIX:
        try:
            compile_recipe(SRC, Choice(hardware=hardware, strategy=strategy, variant=variant))
            outcomes[(hardware, strategy, variant)] = "ok"
        except RecipeRefusal as err:
            outcomes[(hardware, strategy, variant)] = err.rule
    assert outcomes[("gb300", "single_node_tp", "default")] == "ok"
    assert outcomes[("h200", "multi_node_tp", "fp8")] == "ok"
    assert outcomes[("mi350x", "single_node_tp", "mxfp4")] == "ok"
    assert outcomes[("h200", "single_node_tp", "fp8")] == "strategy_unsupported_on_hardware"
    assert outcomes[("h200", "multi_node_tp", "default")] == "precision_gate"
    assert outcomes[("b200", "single_node_tp", "mxfp4")] == "variant_supported_hardware"


@pytest.mark.parametrize("preset", [pytest.param(p, id=p) for p in RECIPE["presets"]])
def test_every_preset_compiles_on_its_own_hardware_and_strategy(preset):
    spec = RECIPE["presets"][preset]
    for variant in spec.get("variants") or [None]:
        result = compile_recipe(SRC, Choice(preset=preset, variant=variant))
        assert result["choice"]["hardware"] == spec["hardware"]
        assert result["choice"]["strategy"] == spec["strategy"]
        argv = result["commands"][0]["argv"]
        for flag in spec.get("args") or []:
            if flag.startswith("-"):
                assert flag in argv


def test_preset_role_args_remove_args_and_json_args_shape_the_pd_pools():
    result = public(compile_recipe(SRC, Choice(preset="gb300_pd_dep_tp")))
    prefill, decode = result["commands"]
    assert result["pools"]["prefill"]["parallelism"] == "dep" and result["pools"]["decode"]["parallelism"] == "tp"
    assert prefill["argv"][prefill["argv"].index("--kernel-config") + 1] == '{"moe_backend":"flashinfer_moe_ep_cutedsl"}'
    # json_args: a merge patch selected by connector; null deletes the key.
    for command in (prefill, decode):
        kv = command["argv"][command["argv"].index("--kv-transfer-config") + 1]
        assert kv == '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    assert "--compilation-config" not in decode["argv"]


def test_preset_tp_env_and_feature_selection_apply():
    compiled = compile_recipe(SRC, Choice(preset="mi355x_tp4_specialized"))
    assert compiled["choice"]["variant"] == "fp8"
    (command,) = public(compiled)["commands"]
    assert command["argv"][command["argv"].index("--tensor-parallel-size") + 1] == "4"
    assert command["env"]["VLLM_FP8_MOE_REQUANT_ACT"] == "a4w4"  # the preset's env beats the variant's a8w4
    agentic = public(compile_recipe(SRC, Choice(preset="gb300_pd_agentic")))
    assert all("--speculative-config" not in c["argv"] for c in agentic["commands"])


def test_a_preset_for_other_hardware_is_refused():
    with pytest.raises(RecipeRefusal) as err:
        compile_recipe(SRC, Choice(preset="gb300_dcp8", hardware="b200"))
    assert err.value.rule == "preset_mismatch"
    with pytest.raises(RecipeRefusal) as err:
        compile_recipe(SRC, Choice(preset="no_such_preset"))
    assert err.value.rule == "unknown_preset"


def test_a_missing_strategy_names_the_offered_ones_and_never_none():
    # Issue 23: the refusal read "refuses the choice hardware=gb300 strategy=None".
    with pytest.raises(RecipeRefusal) as err:
        compile_recipe(SRC, Choice(hardware="gb300"))
    text = str(err.value)
    assert "refuses the choice hardware=gb300 variant=default" in text and "None" not in text
    assert "no strategy was given; pass -e recipe_strategy=NAME, on gb300 one of single_node_tp, multi_node_tp" in text
