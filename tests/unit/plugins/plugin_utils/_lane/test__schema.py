"""Lanes as data: schema errors are sentences naming the file, the key, the value and the fix."""
from __future__ import annotations

import os
import shutil

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._schema import (
    deep_merge,
    load_lane,
    parse_overrides,
    render_args,
)
from tests.unit.helpers.plans import LANES, SGLANG, VLLM


@pytest.fixture
def lanes_copy(tmp_path):
    for name in os.listdir(LANES):
        shutil.copy(os.path.join(LANES, name), tmp_path / name)
    return tmp_path


def edit(lanes_copy, lane, old, new):
    path = lanes_copy / f"{lane}.yml"
    text = path.read_text()
    assert old in text, f"fixture text {old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))
    return str(path)


@pytest.mark.parametrize("lane", [VLLM, SGLANG])
def test_report_lanes_validate(lane):
    data = load_lane(LANES, lane)
    assert data["lane"] == lane
    assert data["model"]["id"] == "mistralai/Mistral-Large-4-1T-A52B-NVFP4"
    assert data["model"]["served_name"] == "mistral-large-4"
    assert data["topology"]["tensor_parallel"] == 8 and data["topology"]["nodes"] == 8


def test_wrong_type_names_file_key_value_and_expectation(lanes_copy):
    path = edit(lanes_copy, VLLM, "  nodes: 8\n", "  nodes: eight\n")
    with pytest.raises(LanekitError) as err:
        load_lane(str(lanes_copy), VLLM)
    text = str(err.value)
    assert path in text and "'topology.nodes'" in text and "'eight' (a string)" in text and "whole number" in text


def test_unknown_key_suggests_where_flags_go(lanes_copy):
    edit(lanes_copy, VLLM, "serve:\n", "serve:\n  max-model-len: 1\n")
    with pytest.raises(LanekitError, match=r"'serve.max-model-len' is not a known setting.*serve.args"):
        load_lane(str(lanes_copy), VLLM)


def test_missing_required_key(lanes_copy):
    edit(lanes_copy, SGLANG, "  served_name: mistral-large-4\n", "")
    with pytest.raises(LanekitError, match=r"'model.served_name' is missing"):
        load_lane(str(lanes_copy), SGLANG)


def test_bad_yaml_gives_line_and_no_traceback(lanes_copy):
    path = edit(lanes_copy, VLLM, "engine: vllm\n", "engine: [vllm\n")
    with pytest.raises(LanekitError) as err:
        load_lane(str(lanes_copy), VLLM)
    assert path in str(err.value) and "line" in str(err.value)


def test_lane_name_must_match_file(lanes_copy):
    edit(lanes_copy, VLLM, "lane: mistral-large4-nvfp4-8x-vllm", "lane: other")
    with pytest.raises(LanekitError, match="the file name without .yml"):
        load_lane(str(lanes_copy), VLLM)


def test_unknown_lane_lists_known_ones():
    with pytest.raises(LanekitError) as err:
        load_lane(LANES, "no-such-lane")
    assert "known lanes" in str(err.value) and VLLM in str(err.value)


def test_short_revision_is_not_a_pin():
    with pytest.raises(LanekitError, match="not a pin"):
        load_lane(LANES, VLLM, [("lane_cli_overrides given with -e", {"model": {"revision": "main"}})])


def test_flag_without_dashes_is_refused():
    with pytest.raises(LanekitError, match=r"serve.args.max-model-len' is not a flag"):
        load_lane(LANES, VLLM, [("x", {"serve": {"args": {"max-model-len": 1}}})])


def test_layers_merge_in_order_and_error_names_the_layer():
    layers = [("inventory", {"serve": {"args": {"--max-num-seqs": 64}}}),
              ("cli", {"serve": {"args": {"--max-num-seqs": 32, "--dtype": None}}})]
    lane = load_lane(LANES, VLLM, layers)
    assert lane["serve"]["args"]["--max-num-seqs"] == 32
    assert "--dtype" not in render_args(lane["serve"]["args"])
    assert lane["serve"]["args"]["--kv-cache-dtype"] == "fp8_ds_mla"  # untouched keys survive the merge
    with pytest.raises(LanekitError, match=r"^cli: key 'serve.port'"):
        load_lane(LANES, VLLM, [("inventory", {}), ("cli", {"serve": {"port": "http"}})])


def test_render_args_bare_removed_json_and_lists():
    argv = render_args({"--a": True, "--b": None, "--c": False, "--d": {"method": "dspark", "k": 3},
                        "--e": [1, 2], "--f": 0.0})
    assert argv == ["--a", "--d", '{"method":"dspark","k":3}', "--e", "1", "2", "--f", "0.0"]


def test_deep_merge_replaces_lists():
    assert deep_merge({"a": {"b": [1, 2], "c": 1}}, {"a": {"b": [3]}}) == {"a": {"b": [3], "c": 1}}


def test_overrides_from_command_line_string():
    assert parse_overrides('{"serve": {"args": {"--x": 1}}}', "cli") == {"serve": {"args": {"--x": 1}}}
    with pytest.raises(LanekitError, match="lane_group_overrides is 3 \\(a number\\)"):
        parse_overrides("3", "cli")


def test_parse_overrides_names_the_layer_variable():
    with pytest.raises(LanekitError, match="^src: lane_cli_overrides is a list"):
        parse_overrides([1], "src", "lane_cli_overrides")
