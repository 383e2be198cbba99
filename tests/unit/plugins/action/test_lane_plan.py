"""The lane_plan action's command-line override layer (action/lane_plan.py): lane_cli_overrides,
and the refusal of -e lane_overrides."""
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


def test_inventory_layer_reads_the_host_variable():
    host_vars = {"lane_overrides": {"boot": {"budget_s": 10}}}
    assert lp.ActionModule._inventory_overrides(_action(), "spark-01", host_vars) == {"boot": {"budget_s": 10}}
    assert lp.ActionModule._inventory_overrides(_action(), "spark-01", {}) == {}


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
    host_layer = {"spark-01": {"serve": {"args": {"--max-num-seqs": 64, "--max-num-batched-tokens": 4096}}}}
    result, _findings = plan(VLLM, overrides={"serve": {"args": {"--max-num-seqs": 8}}}, host_overrides=host_layer)
    cmd = result["ranks"][0]["command"]
    assert cmd[cmd.index("--max-num-seqs") + 1] == "8"  # the command line wins
    assert cmd[cmd.index("--max-num-batched-tokens") + 1] == "4096"  # the inventory's other key survives
    assert result["layers"][-1] == "lane_cli_overrides given with -e"
