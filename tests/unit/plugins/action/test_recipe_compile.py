"""The recipe_compile action: argument handling, the files it writes, idempotence, refusals."""
from __future__ import annotations

import json

import pytest
import yaml

from ansible_collections.lanekit.serving.plugins.action import recipe_compile as action
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.modules import recipe_compile as doc
from tests.unit.helpers.recipes import SEED, TINY, TREE


def test_the_argument_spec_matches_the_documented_options():
    assert set(action.ARGUMENT_SPEC) == set(yaml.safe_load(doc.DOCUMENTATION)["options"])


def test_arguments_from_the_command_line_become_lists_and_mappings():
    choice = action.choice_from_args({"hardware": "b200", "strategy": "pd_cluster", "features": "tool_calling, reasoning",
                                      "feature_modes": '{"spec_decoding": "mtp"}', "nodes": "",
                                      "pd": '{"prefill": {"nodes": 1, "parallelism": "dep"}, "decode": 1}'})
    assert choice.features == ["tool_calling", "reasoning"]
    assert choice.feature_modes == {"spec_decoding": "mtp"}
    assert choice.pd == {"prefill": {"nodes": 1, "parallelism": "dep"}, "decode": 1}
    assert choice.nodes is None and choice.variant is None
    assert action.choice_from_args({"features": ""}).features == []
    assert action.choice_from_args({}).features is None  # the recipe's defaults


@pytest.mark.parametrize("args,words", [
    ({"pd": "{prefill: [1"}, "^recipe_pd is not valid JSON or YAML"),
    ({"feature_modes": "[mtp]"}, "^recipe_feature_modes must be a mapping"),
    ({"features": [1, 2]}, "^recipe_features must be a comma-separated list"),
])
def test_malformed_arguments_are_one_sentence(args, words):
    with pytest.raises(LanekitError, match=words):
        action.choice_from_args(args)


def test_json_cut_by_ansibles_key_value_split_is_read_back_whole():
    raw = ['recipe_pd={"prefill": {"nodes": 1}, "decode": {"nodes": 1}}', "recipe_hardware=b200"]
    args = action.whole_cli_values({"pd": '{"prefill":', "hardware": "b200"}, raw)
    assert json.loads(args["pd"]) == {"prefill": {"nodes": 1}, "decode": {"nodes": 1}}
    # A task argument that is not a cut of the command line is left alone.
    assert action.whole_cli_values({"pd": {"prefill": 1}}, raw)["pd"] == {"prefill": 1}


def _args(**extra):
    base = {"recipe": TINY, "recipe_root": TREE, "hardware": "dgx_spark_gb10", "strategy": "multi_node_tp",
            "variant": "fp8", "nodes": "2"}
    base.update(extra)
    return base


def test_writes_the_lane_and_the_commands_then_changes_nothing(tmp_path):
    args = _args(lane_file="lanes/tiny.yml", commands_file="out/commands.json")
    first = action.compile_and_write(args, str(tmp_path))
    assert first["changed"] is True and first["lane"] == "tiny"
    lane_text = (tmp_path / "lanes" / "tiny.yml").read_text(encoding="utf-8")
    commands = json.loads((tmp_path / "out" / "commands.json").read_text(encoding="utf-8"))
    assert commands["deployType"] == "multi_node" and [c["role"] for c in commands["commands"]] == ["head", "worker"]
    assert set(commands) == {"deployType", "model", "modes", "commands"}
    second = action.compile_and_write(args, str(tmp_path))
    assert second["changed"] is False
    assert (tmp_path / "lanes" / "tiny.yml").read_text(encoding="utf-8") == lane_text


def test_the_default_lane_file_is_named_after_the_choice(tmp_path):
    result = action.compile_and_write(_args(), str(tmp_path))
    assert result["lane_file"] == str(tmp_path / "lanes" / "tiny-moe-fp8-dgx-spark-gb10-multi-node-tp-2n.yml")
    assert result["notes"][0].startswith("Spark clusters:")


def test_check_mode_compiles_but_writes_nothing(tmp_path):
    result = action.compile_and_write(_args(commands_file="c.json"), str(tmp_path), check_mode=True)
    assert result["changed"] is False and not list(tmp_path.iterdir())


def test_a_lane_refusal_still_leaves_the_commands_file(tmp_path):
    args = {"recipe": SEED, "hardware": "gb300", "strategy": "pd_cluster", "commands_file": "pd.json",
            "lane_file": "pd.yml", "pd": {"prefill": {"nodes": 0, "parallelism": "tp"},
                                          "decode": {"nodes": 0, "parallelism": "tp"}}}
    with pytest.raises(LanekitError, match="co-located pools .* compiles"):
        action.compile_and_write(args, str(tmp_path))
    assert json.loads((tmp_path / "pd.json").read_text(encoding="utf-8"))["router"].startswith("vllm-router")
    assert not (tmp_path / "pd.yml").exists()


def test_a_bad_lane_file_name_is_refused(tmp_path):
    with pytest.raises(LanekitError, match="must be <name>.yml"):
        action.compile_and_write(_args(lane_file="Lanes/My Lane.yaml"), str(tmp_path))


def test_cluster_mode_reads_the_nodes_from_the_inventory_group_and_the_head_hosts_variables():
    task_vars = {"groups": {"lane_nodes": ["h1", "h2"]}, "inventory_dir": "/inv/h200",
                 "hostvars": {"h1": {"lanekit_hardware": "{{ kind }}", "lanekit_gpus_per_node": "8",
                                     "lanekit_node_arch": "amd64"}, "h2": {}}}
    cluster = action.cluster_from_vars(task_vars, "lane_nodes", lambda v: "h200" if v == "{{ kind }}" else v)
    assert (cluster.hosts, cluster.hardware, cluster.gpus_per_node, cluster.arch) == (["h1", "h2"], "h200", 8, "amd64")
    assert cluster.where == "inventory /inv/h200"
    with pytest.raises(LanekitError, match="no hosts in group 'gpu'"):
        action.cluster_from_vars(task_vars, "gpu", lambda v: v)


# --- issue 23: a recipe by name from an installed collection, its image spec beside the lane ----------

def test_a_recipe_name_from_the_collection_writes_the_lane_and_its_image_spec_so_the_next_plan_finds_both(tmp_path):
    from ansible_collections.lanekit.serving.plugins.module_utils._image._spec import load_image_spec
    from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._schema import load_lane
    from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._render import find_spec_dir
    from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._load import COLLECTION_ROOT

    args = {"recipe": "mistralai/Mistral-Large-4-1T-A52B", "hardware": "gb300", "strategy": "multi_node_tp", "nodes": "2"}
    result = action.compile_and_write(args, str(tmp_path))
    lane = result["lane"]
    spec_path = tmp_path / "images" / "mistral-large-4-1t-a52b-vllm" / "image.yml"
    assert result["recipe"] == SEED and result["image_spec"] == str(spec_path)
    assert result["image_spec_written"] and result["images_dir_created"] and result["changed"]
    # What the plan reads from this working directory: the user's lanes/ and images/, holding both files.
    lanes_dir = find_spec_dir("lanes", None, None, str(tmp_path), COLLECTION_ROOT)
    images_dir = find_spec_dir("images", None, None, str(tmp_path), COLLECTION_ROOT)
    assert (lanes_dir, images_dir) == (str(tmp_path / "lanes"), str(tmp_path / "images"))
    image_name = load_lane(lanes_dir, lane)["image"]
    spec = load_image_spec(images_dir, image_name)
    assert spec["upstream"]["repository"] == "vllm/vllm-openai" and spec["upstream"]["tag"] == "mistral-large-4"
    assert "lanekit_image_digests['mistral-large-4-1t-a52b-vllm']['arm64']" in spec_path.read_text(encoding="utf-8")
    # A second run changes nothing; a spec the user pinned by hand is never rewritten.
    assert action.compile_and_write(args, str(tmp_path))["changed"] is False
    spec_path.write_text(spec_path.read_text(encoding="utf-8") + "# pinned by me\n", encoding="utf-8")
    again = action.compile_and_write(args, str(tmp_path))
    assert not again["image_spec_written"] and spec_path.read_text(encoding="utf-8").endswith("# pinned by me\n")
    assert not again["changed"]


def test_the_composed_commands_come_back_as_printable_lines(tmp_path):
    result = action.compile_and_write(_args(commands_file="c.json"), str(tmp_path), check_mode=True)
    lines = result["command_lines"]
    assert lines[0] == "# node 0 (head)" and "# node 1 (worker)" in lines
    head = lines[1:lines.index("# node 1 (worker)")]
    assert head[0].endswith(" \\") and not head[-1].endswith("\\") and head[1].startswith("vllm serve ")
    # $PLACEHOLDERs stay bare for the shell; JSON values are quoted.
    assert all("'$" not in line for line in lines)
    assert not list(tmp_path.iterdir())
