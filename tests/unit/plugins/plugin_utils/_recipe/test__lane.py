"""Lane files written from a compiled recipe choice: schema, flag mapping, provenance, notes, refusals."""
from __future__ import annotations

import pytest
import yaml

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines
from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import PROFILES
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._schema import load_lane, render_args
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._choice import Choice
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._compose import compile_recipe
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._lane import build_lane, lane_name_for, render
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._load import load_recipe
from tests.unit.helpers.recipes import SEED, TINY, TREE

OWNED = _engines.get("vllm").plan_owned


def _compile(**choice):
    src = load_recipe(TINY, TREE)
    return src, compile_recipe(src, Choice(**choice))


def _write(tmp_path, src, result):
    name = lane_name_for(src, result)
    lane, comments = build_lane(src, result, name)
    text = render(lane, comments, ["test header"])
    (tmp_path / f"{name}.yml").write_text(text, encoding="utf-8")
    return name, text


def _without_plan_owned(argv_tail):
    out, i = [], 0
    while i < len(argv_tail):
        has_value = i + 1 < len(argv_tail) and not argv_tail[i + 1].startswith("-")
        if argv_tail[i] not in OWNED:
            out += argv_tail[i:i + (2 if has_value else 1)]
        i += 2 if has_value else 1
    return out


@pytest.mark.parametrize("strategy,nodes,variant", [
    ("multi_node_tp", 4, "fp8"), ("single_node_tp", 1, "default"), ("multi_node_tp_pp", 2, "default"),
])
def test_a_compiled_lane_validates_and_renders_the_compiled_flags(tmp_path, strategy, nodes, variant):
    src, result = _compile(hardware="dgx_spark_gb10", strategy=strategy, variant=variant, nodes=nodes)
    name, _text = _write(tmp_path, src, result)
    lane = load_lane(str(tmp_path), name)
    head = result["commands"][0]
    assert render_args(lane["serve"]["args"]) == _without_plan_owned(head["argv"][3:])
    assert lane["model"]["id"] == result["model"] and lane["hardware"] == "dgx_spark_gb10"
    topo = lane["topology"]
    assert topo["nodes"] == nodes
    assert topo["tensor_parallel"] * topo["pipeline_parallel"] == topo["nodes"] * topo["gpus_per_node"]
    if strategy == "multi_node_tp_pp":
        assert (topo["tensor_parallel"], topo["pipeline_parallel"]) == (1, 2)


def test_the_lane_says_where_each_value_came_from_and_carries_the_notes(tmp_path):
    src, result = _compile(hardware="dgx_spark_gb10", strategy="multi_node_tp", variant="fp8", nodes=2)
    name, text = _write(tmp_path, src, result)
    assert "--gpu-memory-utilization: 0.8  # variant fp8 hardware_overrides.dgx_spark_gb10" in text
    assert '--speculative-config: {"method": "eagle3", "num_speculative_tokens": 2}  # feature spec_decoding (mode eagle)' in text
    notes = load_lane(str(tmp_path), name)["notes"]
    assert notes[0] == "Spark clusters: Give every Spark the same driver."
    assert "Troubleshooting: Eagle on fp8 only: The eagle head ships with the FP8 checkpoint only." in notes
    # Fabric variables are the plan's (per host); other placeholders cannot ride in a lane.
    env = load_lane(str(tmp_path), name)["serve"]["env"]
    assert "NCCL_SOCKET_IFNAME" not in env and "MN_IF_NAME" not in env
    assert any(n.startswith("Not carried into the lane: MN_IF_NAME=$IFACE_NAME") for n in notes)


def test_a_second_compile_renders_byte_identical_text(tmp_path):
    src, result = _compile(hardware="dgx_spark_gb10", strategy="multi_node_tp", variant="fp8", nodes=2)
    _name, first = _write(tmp_path, src, result)
    src, result = _compile(hardware="dgx_spark_gb10", strategy="multi_node_tp", variant="fp8", nodes=2)
    _name, second = _write(tmp_path, src, result)
    assert first == second
    assert yaml.safe_load(first)["lane"] == "tiny-moe-fp8-dgx-spark-gb10-multi-node-tp-2n"


@pytest.mark.parametrize("choice,words", [
    (dict(hardware="b200", strategy="single_node_tp"), "hardware b200 compiles"),
])
def test_layouts_the_plan_cannot_deploy_are_refused_with_a_sentence(choice, words, monkeypatch):
    # Hardware without a lanekit profile: every taxonomy profile of recipes/ has one now, so drop b200's.
    monkeypatch.delitem(PROFILES, "b200")
    src, result = _compile(**choice)
    with pytest.raises(LanekitError) as err:
        build_lane(src, result, "x")
    message = str(err.value)
    assert words in message and "commands_file" in message and "\n" not in message


def test_the_seed_recommended_choice_writes_a_gb300_lane():
    src = load_recipe(SEED)
    result = compile_recipe(src, Choice(hardware="gb300", strategy="single_node_tp"))
    lane, _comments = build_lane(src, result, "x")
    assert lane["hardware"] == "gb300" and lane["image"] == "mistral-large-4-1t-a52b-vllm"
    assert lane["topology"] == {"nodes": 1, "gpus_per_node": 4, "tensor_parallel": 4, "pipeline_parallel": 1,
                                "data_parallel": 1}
    amd = compile_recipe(src, Choice(hardware="mi355x", strategy="single_node_tp"))
    assert build_lane(src, amd, "y")[0]["image"] == "mistral-large-4-1t-a52b-vllm-rocm"


def test_co_located_pd_pools_compile_but_are_refused_as_a_lane_with_a_sentence():
    src = load_recipe(SEED)
    result = compile_recipe(src, Choice(hardware="gb300", strategy="pd_cluster",
                                        pd={"prefill": {"nodes": 0, "parallelism": "tp"},
                                            "decode": {"nodes": 0, "parallelism": "tp"}}))
    with pytest.raises(LanekitError) as err:
        build_lane(src, result, "x")
    message = str(err.value)
    assert "co-located pools" in message and "commands_file" in message and "\n" not in message
