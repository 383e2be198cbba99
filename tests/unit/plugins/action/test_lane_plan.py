"""The lane_plan action's override layers (action/lane_plan.py): the inventory's group and host
layers read apart, lane_cli_overrides, and the refusal of lane_overrides and of -e for the inventory's."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from ansible_collections.lanekit.serving.plugins.action import lane_plan as lp
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from tests.unit.helpers.plans import VLLM, plan

LAYER = {"serve": {"args": {"--max-num-seqs": 8}}}


def _action():
    # The layer methods need only a templar; plain values template to themselves.
    return SimpleNamespace(_templar=SimpleNamespace(template=lambda value: value))


def test_key_value_form_is_read_whole_from_the_command_line_text():
    texts = ["lane=x", "lane_cli_overrides=" + json.dumps(LAYER)]
    assert lp.cli_layer_text(texts) == json.dumps(LAYER)
    assert lp.ActionModule._cli_overrides(_action(), texts, {}) == LAYER


def test_json_form_arrives_as_the_variable():
    texts = [json.dumps({"lane_cli_overrides": LAYER})]
    assert lp.cli_layer_text(texts) is None
    assert lp.ActionModule._cli_overrides(_action(), texts, {"lane_cli_overrides": LAYER}) == LAYER


def test_no_command_line_layer_is_none():
    assert lp.ActionModule._cli_overrides(_action(), ["lane=x"], {}) is None


def test_command_line_layer_error_names_its_variable():
    with pytest.raises(LanekitError, match="^lane_cli_overrides given with -e: lane_cli_overrides is 3 \\(a number\\)"):
        lp.ActionModule._cli_overrides(_action(), ["lane_cli_overrides=3"], {})


def test_inventory_layers_read_the_group_and_the_host_variable_apart():
    host_vars = {"lane_group_overrides": {"boot": {"budget_s": 10}},
                 "lane_host_overrides": {"serve": {"env": {"NCCL_DEBUG": "INFO"}}}}
    assert lp.ActionModule._inventory_layers(_action(), "spark-03", host_vars) == [
        ("lane_group_overrides in the inventory's group_vars", {"boot": {"budget_s": 10}}),
        ("lane_host_overrides in the inventory's host_vars (host spark-03)", {"serve": {"env": {"NCCL_DEBUG": "INFO"}}}),
    ]
    assert [layer for _source, layer in lp.ActionModule._inventory_layers(_action(), "spark-01", {})] == [{}, {}]


def test_the_old_shared_inventory_name_is_refused_naming_the_new_ones():
    with pytest.raises(LanekitError) as err:
        lp.ActionModule._inventory_layers(_action(), "spark-03", {"lane_overrides": {"serve": {}}})
    message = str(err.value)
    assert message.startswith("lane_overrides is set in the inventory for host spark-03")
    assert "lane_group_overrides in group_vars" in message and "lane_host_overrides in host_vars" in message
    assert message.count(". ") == 0 and message.endswith(".")


@pytest.mark.parametrize("name", ["lane_group_overrides", "lane_host_overrides"])
def test_an_inventory_layer_given_with_e_is_refused(name):
    with pytest.raises(LanekitError, match=f"^{name} was given with -e.*-e lane_cli_overrides="):
        lp.refuse_cli_inventory_layer([f"{name}=" + json.dumps(LAYER)])


@pytest.mark.parametrize("text", [
    "lane_overrides=" + json.dumps(LAYER),
    "lane=x lane_overrides={}",
    json.dumps({"lane": "x", "lane_overrides": LAYER}),
    "{lane_overrides: {serve: {}}}",
])
def test_lane_overrides_on_the_command_line_is_refused_in_one_sentence(text):
    with pytest.raises(LanekitError) as err:
        lp.refuse_cli_inventory_layer(["lane=x", text])
    message = str(err.value)
    assert "-e lane_cli_overrides=" in message and message.count(". ") == 0 and message.endswith(".")


def test_lane_overrides_in_an_extra_vars_file_is_refused(tmp_path):
    path = tmp_path / "extra.yml"
    path.write_text("lane_overrides:\n  serve: {}\n", encoding="utf-8")
    with pytest.raises(LanekitError, match="lane_cli_overrides"):
        lp.refuse_cli_inventory_layer([f"@{path}"])


@pytest.mark.parametrize("texts", [
    ["lane=x", "lane_cli_overrides=" + json.dumps({"note": "lane_overrides=1"})],
    [json.dumps({"lane_cli_overrides": LAYER})],
    ["lint_skip=cuda-graph-sizes"],
])
def test_other_extra_vars_pass(texts):
    lp.refuse_cli_inventory_layer(texts)


def test_layers_deep_merge_inventory_then_command_line():
    group_layer = {"serve": {"args": {"--max-num-seqs": 64, "--max-num-batched-tokens": 4096}}}
    result, _findings = plan(VLLM, overrides={"serve": {"args": {"--max-num-seqs": 8}}}, group_overrides=group_layer)
    cmd = result["ranks"][0]["command"]
    assert cmd[cmd.index("--max-num-seqs") + 1] == "8"  # the command line wins
    assert cmd[cmd.index("--max-num-batched-tokens") + 1] == "4096"  # the inventory's other key survives
    assert result["layers"][-1] == "lane_cli_overrides given with -e"
