"""Bad input, second pass (issue 29): one table per surface with the broken inputs found and valid
look-alikes that must keep working. Recipes, taxonomy, recipe output paths, bench settings,
inventory values, image specs and the day-2 options (logs-lane, bench-lane)."""
from __future__ import annotations

import json
import os
import shutil

import pytest
import yaml

from ansible_collections.lanekit.serving.plugins.action import bench_run as bench_action
from ansible_collections.lanekit.serving.plugins.action import lane_logs as logs_action
from ansible_collections.lanekit.serving.plugins.action import recipe_compile as action
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._image import _spec as spec_mod
from ansible_collections.lanekit.serving.plugins.plugin_utils._bench import _settings as bset
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _logmerge as logmerge
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._render import check_cluster, device_requests, table
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._choice import Choice
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._cluster import Cluster, cluster_choice
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._compose import compile_recipe
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._load import load_recipe
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._rules import RecipeRefusal
from tests.unit.helpers.lane_fakes import action_module
from tests.unit.helpers.plans import plan
from tests.unit.helpers.recipes import TINY, TREE

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CLI = "lane_cli_overrides given with -e"
CHOICE = {"hardware": "h200", "strategy": "single_node_tp", "variant": "default"}


def one_sentence(err) -> str:
    text = str(err.value if hasattr(err, "value") else err)
    assert "\n" not in text and "Traceback" not in text and "object has no attribute" not in text, text
    return text


# --- recipes ---------------------------------------------------------------------------------------

@pytest.fixture(name="tree")
def fixture_tree(tmp_path):
    """A recipe tree: the collection's taxonomy and strategies, and a models/ folder for the recipe under test."""
    root = tmp_path / "tree"
    shutil.copytree(os.path.join(TREE, "strategies"), root / "strategies")
    shutil.copy(os.path.join(TREE, "taxonomy.yaml"), root / "taxonomy.yaml")
    (root / "models" / "acme").mkdir(parents=True)
    return root


def tiny():
    with open(TINY, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def put(data: dict, path: str, value) -> dict:
    node = data
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = value
    return data


def compile_tiny(tree, data, suffix=".yaml", **choice):
    path = tree / "models" / "acme" / f"Tiny{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps(data), encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return compile_recipe(load_recipe(str(path)), Choice(**dict(CHOICE, **choice)))


BROKEN_RECIPES = [
    ("model", "acme/Tiny-MoE", "key 'model' is 'acme/Tiny-MoE' (a string); expected a mapping"),
    ("meta", ["text"], "key 'meta' is a list; expected a mapping"),
    ("variants.default", "bf16", "key 'variants.default' is 'bf16' (a string); expected a mapping"),
    ("hardware_overrides.blackwell", ["--x"], "key 'hardware_overrides.blackwell' is a list"),
    ("features.reasoning", "on", "key 'features.reasoning' is 'on' (a string)"),
    ("features.spec_decoding.modes.mtp", ["--x"], "key 'features.spec_decoding.modes.mtp' is a list"),
    ("presets", {"fast": "yes"}, "key 'presets.fast' is 'yes' (a string); expected a mapping"),
    ("strategy_overrides.single_node_tep", ["--x"], "key 'strategy_overrides.single_node_tep' is a list"),
    ("strategy_hardware", "all", "key 'strategy_hardware' is 'all' (a string)"),
    ("strategy_hardware.single_node_dep", ["b200"], "key 'strategy_hardware.single_node_dep' is a list"),
    ("variants.default.vram_minimum_gb", "733",
     "key 'variants.default.vram_minimum_gb' is '733' (a string); expected a finite number of at least 0 "
     "(write the number without quotes)"),
    ("variants.fp8.extra_args", "--max-model-len 16384",
     "key 'variants.fp8.extra_args' is '--max-model-len 16384' (a string); expected a list of text tokens"),
    ("opt_in_features", "text_only", "key 'opt_in_features' is 'text_only' (a string); expected a list of names"),
    ("variants.fp8.default_modes.spec_decoding", ["eagle"], "key 'variants.fp8.default_modes.spec_decoding' is a list"),
    ("features.spec_decoding.modes", ["mtp"], "key 'features.spec_decoding.modes' is a list"),
    ("model.base_env.VLLM_ENGINE_READY_TIMEOUT_S", {"s": 1}, "key 'model.base_env.VLLM_ENGINE_READY_TIMEOUT_S'"),
    ("strategy_min_gpus.h200.multi_node_tp", "24", "key 'strategy_min_gpus.h200.multi_node_tp' is '24' (a string)"),
    ("notes", {"title": "x"}, "key 'notes' is a mapping; expected a list of notes"),
]


@pytest.mark.parametrize("path,value,words", BROKEN_RECIPES, ids=[b[0] for b in BROKEN_RECIPES])
def test_a_recipe_section_of_the_wrong_kind_is_one_sentence_naming_file_key_and_kind(tree, path, value, words):
    with pytest.raises(LanekitError) as err:
        compile_tiny(tree, put(tiny(), path, value))
    text = one_sentence(err)
    assert text.startswith(str(tree / "models" / "acme" / "Tiny.yaml") + ": ") and words in text, text


def test_a_nan_memory_minimum_in_a_rendered_recipe_names_the_key_not_a_render_mismatch(tree):
    data = put(tiny(), "variants.default.vram_minimum_gb", float("nan"))
    with pytest.raises(LanekitError) as err:
        compile_tiny(tree, data, suffix=".json")
    text = one_sentence(err)
    assert "key 'variants.default.vram_minimum_gb' is nan (not a finite number)" in text and "internal" not in text


LOOK_ALIKES = [
    ("variants.default.extra_args", ["--max-num-seqs", 8], ["--max-num-seqs", "8"]),  # a number token becomes text
    ("variants.default.vram_minimum_gb", 100.0, None),
    ("strategy_overrides", None, None),  # null sections read as absent
    ("meta.default_variant", {"nvidia": "default"}, None),
    ("model.base_env.VLLM_ENGINE_READY_TIMEOUT_S", 1800, None),  # a number env value becomes text
]


@pytest.mark.parametrize("path,value,tokens", LOOK_ALIKES, ids=[a[0] for a in LOOK_ALIKES])
def test_valid_look_alikes_still_compile(tree, path, value, tokens):
    result = compile_tiny(tree, put(tiny(), path, value))
    argv = result["commands"][0]["argv"]
    if tokens:
        assert argv[argv.index(tokens[0]):argv.index(tokens[0]) + 2] == tokens
    assert all(isinstance(v, str) for v in result["commands"][0]["env"].values())


def test_yaml_1_2_words_stay_text_in_a_recipe(tree):
    path = tree / "models" / "acme" / "Tiny.yaml"
    text = yaml.safe_dump(tiny()).replace("tool_calling:\n", "tool_calling:\n    label: on\n", 1)
    path.write_text(text, encoding="utf-8")
    assert load_recipe(str(path)).recipe["features"]["tool_calling"]["label"] == "on"


LOADER_LIMITS = [
    ("non-UTF-8", b"meta: {title: \"caf\xe9\"}\n", "is not UTF-8 text: byte 18 (line 1) is 0xe9"),
    ("48 MB", b"# " + b"x" * (48 << 20) + b"\n", "more than the 1,048,576 a lanekit YAML file may hold"),
    ("alias bomb", b"a: &a [x, x, x, x, x, x, x, x, x, x]\n" + b"".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [".encode() + b", ".join([f"*{chr(97 + i)}".encode()] * 10) + b"]\n"
        for i in range(8)) + b"notes: [{title: t, body: *i}]\n", "alias bomb"),
    ("deep YAML", b"model: " + b"[" * 100 + b"]" * 100 + b"\n", "nests deeper than 64 levels"),
    ("duplicate key", b"model: {model_id: a}\nmodel: {model_id: b}\nvariants: {}\n", "sets the key 'model' twice"),
]


@pytest.mark.parametrize("name,data,words", LOADER_LIMITS, ids=[x[0] for x in LOADER_LIMITS])
def test_recipes_meet_the_collection_loaders_limits(tree, name, data, words):
    path = tree / "models" / "acme" / "Bad.yaml"
    path.write_bytes(data)
    with pytest.raises(LanekitError) as err:
        load_recipe(str(path))
    assert words in one_sentence(err) and str(path) in str(err.value)


def test_json_nested_100000_deep_is_refused_with_a_sentence(tree):
    path = tree / "models" / "acme" / "Deep.json"
    path.write_text('{"model": ' + "[" * 100000 + "]" * 100000 + "}", encoding="utf-8")
    with pytest.raises(LanekitError) as err:
        load_recipe(str(path))
    assert "nests deeper than 64 levels" in one_sentence(err)


def test_a_recipe_path_that_is_a_directory_says_so(tree):
    with pytest.raises(LanekitError) as err:
        load_recipe(str(tree / "models"))
    assert "is a directory" in one_sentence(err) and "does not exist" not in str(err.value)


def test_a_list_valued_feature_mode_choice_is_a_refusal_not_unhashable():
    with pytest.raises(RecipeRefusal) as err:
        compile_recipe(load_recipe(TINY, TREE), Choice(**CHOICE, feature_modes={"spec_decoding": ["mtp"]}))
    assert err.value.rule == "bad_input" and "feature_modes.spec_decoding is a list" in one_sentence(err)


def test_an_unknown_hardware_lists_the_known_profiles():
    with pytest.raises(RecipeRefusal) as err:
        compile_recipe(load_recipe(TINY, TREE), Choice(**{**CHOICE, "hardware": "h100x"}))
    assert "known: " in one_sentence(err) and "h200" in str(err.value)


# --- taxonomy --------------------------------------------------------------------------------------

def taxonomy_with(tree, path: str, value):
    with open(tree / "taxonomy.yaml", encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    (tree / "taxonomy.yaml").write_text(yaml.safe_dump(put(data, path, value)), encoding="utf-8")
    (tree / "models" / "acme" / "Tiny.yaml").write_text(yaml.safe_dump(tiny()), encoding="utf-8")
    return str(tree / "models" / "acme" / "Tiny.yaml")


BROKEN_TAXONOMY = [
    ("hardware_profiles.gb300.vram_gb", "1152", "key 'hardware_profiles.gb300.vram_gb' is '1152' (a string)"),
    ("hardware_profiles.h200.gpu_count", 0, "key 'hardware_profiles.h200.gpu_count' is 0 (a number); expected a whole "
                                            "number of at least 1"),
    ("hardware_profiles.h200", "H200", "key 'hardware_profiles.h200' is 'H200' (a string); expected a mapping"),
    ("hardware_profiles.h200.generation", 9, "key 'hardware_profiles.h200.generation' is 9 (a number)"),
    ("hardware_profiles", ["h200"], "has no 'hardware_profiles' mapping"),
]


@pytest.mark.parametrize("path,value,words", BROKEN_TAXONOMY, ids=[b[0] for b in BROKEN_TAXONOMY])
def test_a_taxonomy_value_of_the_wrong_kind_is_one_sentence(tree, path, value, words):
    recipe = taxonomy_with(tree, path, value)
    with pytest.raises(LanekitError) as err:
        load_recipe(recipe)
    assert str(tree / "taxonomy.yaml") in one_sentence(err) and words in str(err.value)


@pytest.mark.parametrize("path,value", [("hardware_profiles.h200.vram_gb", 1128.5),
                                        ("hardware_profiles.h200.generation", ["hopper"])])
def test_taxonomy_look_alikes_still_compile(tree, path, value):
    src = load_recipe(taxonomy_with(tree, path, value))
    assert compile_recipe(src, Choice(**CHOICE))["commands"]


# --- recipe output paths ---------------------------------------------------------------------------

def _args(**extra):
    return dict({"recipe": TINY, "recipe_root": TREE, "hardware": "dgx_spark_gb10", "strategy": "multi_node_tp",
                 "variant": "fp8", "nodes": "2"}, **extra)


def test_output_paths_that_cannot_be_files_get_the_plan_files_sentences(tmp_path):
    (tmp_path / "lanes" / "tiny.yml").mkdir(parents=True)
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    (tmp_path / "cmds.json").mkdir()
    cases = [({"lane_file": "lanes/tiny.yml"}, "lane_file", "is a directory; give the path of a file"),
             ({"lane_file": "afile/tiny.yml"}, "lane_file", "is a file, not a directory"),
             ({"commands_file": "cmds.json"}, "commands_file", "is a directory"),
             ({"commands_file": "afile/deeper/c.json"}, "commands_file", "is a file, not a directory")]
    for extra, option, words in cases:
        with pytest.raises(LanekitError) as err:
            action.compile_and_write(_args(**extra), str(tmp_path))
        assert one_sentence(err).startswith(option) and words in str(err.value), (extra, str(err.value))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_an_unwritable_lane_directory_is_a_sentence(tmp_path):
    (tmp_path / "ro").mkdir()
    os.chmod(tmp_path / "ro", 0o500)
    with pytest.raises(LanekitError) as err:
        action.compile_and_write(_args(lane_file="ro/tiny.yml"), str(tmp_path))
    assert one_sentence(err).startswith("lane_file") and "cannot be written" in str(err.value)


def test_a_reports_dir_under_a_file_is_a_sentence(tmp_path):
    (tmp_path / "reports").write_text("not a directory", encoding="utf-8")
    cluster = Cluster(hosts=["n1", "n2"], hardware="dgx_spark_gb10", where="inventory x")
    with pytest.raises(LanekitError) as err:
        action.compile_for_cluster(_args(nodes=None), str(tmp_path), cluster, str(tmp_path / "reports"))
    assert "is a file, not a directory" in one_sentence(err) and "lanekit_reports_dir" in str(err.value)


# --- bench settings --------------------------------------------------------------------------------

@pytest.mark.parametrize("layer,words", [
    ({"pp": "2048²"}, "key pp is '2048²' (a string); expected a whole number >= 1"),
    ({"depths": "0,4096²"}, "key depths is '0,4096²'"),
    ({"runs": True}, "key runs is true (a boolean)"),
])
def test_broken_bench_settings_are_one_sentence(layer, words):
    with pytest.raises(LanekitError) as err:
        bset.check_layer(layer, "The command line's bench_settings")
    assert words in one_sentence(err)


def test_bench_look_alikes_still_work():
    assert bset.check_layer({"pp": "2048", "depths": "0,4096", "concurrency": [2, 1]}, "x") == {
        "pp": 2048, "depths": [0, 4096], "concurrency": [1, 2]}


def test_a_lanes_bench_written_as_text_is_refused_naming_the_key():
    with pytest.raises(LanekitError) as err:
        plan(overrides={"bench": "depths=0"})
    text = one_sentence(err)
    assert text.startswith(CLI) and "key 'bench' is 'depths=0' (a string); expected a mapping" in text


def test_a_bench_key_set_by_the_command_line_layer_is_blamed_on_that_layer():
    with pytest.raises(LanekitError) as err:
        plan(overrides={"bench": {"pp": "x"}})
    assert one_sentence(err).startswith(CLI) and "key 'bench' key pp is 'x'" in str(err.value)


# --- inventory values ------------------------------------------------------------------------------

def test_gpus_per_node_zero_is_refused_not_taken_as_unset():
    src = load_recipe(TINY, TREE)
    with pytest.raises(LanekitError) as err:
        cluster_choice(src, Choice(strategy="single_node_tp"), Cluster(hosts=["n1"], hardware="h200", gpus_per_node=0))
    assert "lanekit_gpus_per_node to 0 (a number)" in one_sentence(err)


@pytest.mark.parametrize("value,ok", [("8²", False), ("٨", False), ("4", True), (None, True), (4, True)])
def test_gpus_per_node_text_is_read_only_as_ascii_digits(value, ok):
    task_vars = {"groups": {"lane_nodes": ["n1"]}, "hostvars": {"n1": {"lanekit_hardware": "h200",
                                                                       "lanekit_gpus_per_node": value}}}
    cluster = action.cluster_from_vars(task_vars, "lane_nodes", lambda v: v)
    src = load_recipe(TINY, TREE)
    if ok:
        sized, _choice = cluster_choice(src, Choice(strategy="single_node_tp"), cluster)
        assert sized.profiles["h200"]["gpu_count"] == (8 if value is None else 4)
    else:
        with pytest.raises(LanekitError) as err:
            cluster_choice(src, Choice(strategy="single_node_tp"), cluster)
        assert "lanekit_gpus_per_node" in one_sentence(err)


def test_a_list_valued_lanekit_hardware_is_a_sentence_not_unhashable():
    with pytest.raises(LanekitError) as err:
        cluster_choice(load_recipe(TINY, TREE), Choice(strategy="single_node_tp"),
                       Cluster(hosts=["n1"], hardware=["h200"]))
    assert "lanekit_hardware to a list" in one_sentence(err)


def _cluster(**values):
    base = {"weights_root": "/mnt", "rank_gpus": "all", "rank_devices": [], "rank_cap_add": [], "rank_ulimits": [],
            "rank_group_add": [], "rank_security_opt": [], "rank_shm_size": None, "head_host": None,
            "rank_visible_devices": None}
    base.update(values)
    return base


@pytest.mark.parametrize("values,words", [
    ({"rank_devices": ["/dev/infiniband/uverbs0 /dev/infiniband/rdma_cm"]}, "lanekit_rank_devices[0]"),
    ({"rank_cap_add": ["IPC_LOCK\n"]}, "lanekit_rank_cap_add[0]"),
    ({"rank_gpus": "8²"}, "lanekit_rank_gpus is '8²'"),
])
def test_broken_inventory_values_are_one_sentence(values, words):
    with pytest.raises(LanekitError) as err:
        check_cluster(_cluster(**values))
    assert words in one_sentence(err)


def test_inventory_look_alikes_still_work():
    check_cluster(_cluster(rank_devices=["/dev/infiniband/uverbs0", "/dev/infiniband/rdma_cm"], rank_gpus="device=0,1"))
    assert device_requests("8")[0]["count"] == 8 and device_requests("all")[0]["count"] == -1


# --- image specs -----------------------------------------------------------------------------------

DIGEST = "sha256:" + "ab" * 32


@pytest.fixture(name="images")
def fixture_images(tmp_path):
    spec_dir = tmp_path / "images" / "demo"
    (spec_dir / "patches").mkdir(parents=True)
    (spec_dir / "patches" / "fix.py").write_text("print('patched')\n", encoding="utf-8")
    (tmp_path / "outside.py").write_text("print('not reviewed')\n", encoding="utf-8")
    return tmp_path / "images"


def write_spec(images, **extra):
    spec = {"name": "demo", "upstream": {"repository": "vllm/vllm-openai", "tag": "v1", "digests": {"amd64": DIGEST}},
            "entrypoint": ["vllm", "serve"]}
    spec.update(extra)
    (images / "demo" / "image.yml").write_text(yaml.safe_dump(spec), encoding="utf-8")


def test_a_patch_that_is_a_symlink_out_of_the_spec_folder_is_refused(images):
    os.symlink(images.parent / "outside.py", images / "demo" / "patches" / "evil.py")
    write_spec(images, patches=[{"file": "patches/evil.py"}])
    with pytest.raises(LanekitError) as err:
        spec_mod.load_image_spec(str(images), "demo")
    assert "outside" in one_sentence(err) and "patches[0].file" in str(err.value)


def test_a_patch_symlink_inside_the_spec_folder_still_works(images):
    os.symlink("fix.py", images / "demo" / "patches" / "alias.py")
    write_spec(images, patches=[{"file": "patches/alias.py"}])
    assert spec_mod.load_image_spec(str(images), "demo")["patches"]


@pytest.mark.parametrize("labels,words", [
    ({"io.lanekit.base-digest": DIGEST}, "lanekit's own label prefix"),
    ({"io.lanekit": "x"}, "lanekit's own label prefix"),
    ({"org.example.team": {"name": "infra"}}, "is a mapping; a label value is one line of text"),
    ({"org.example.n": 3}, "is 3 (a number)"),
    ({"org.example.x": "a\nLABEL io.lanekit.base=forged"}, "one line of text"),
])
def test_broken_labels_are_refused(images, labels, words):
    write_spec(images, labels=labels)
    with pytest.raises(LanekitError) as err:
        spec_mod.load_image_spec(str(images), "demo")
    assert words in one_sentence(err)


def test_a_label_look_alike_still_works_and_cannot_replace_the_pin(images):
    write_spec(images, labels={"org.opencontainers.image.source": "https://example.org/x"})
    spec = spec_mod.load_image_spec(str(images), "demo")
    spec["labels"]["io.lanekit.base-digest"] = "sha256:forged"  # as if passed as data past the loader
    resolved = spec_mod.resolve_image(spec, "amd64")
    assert resolved["labels"]["io.lanekit.base-digest"] == DIGEST
    assert resolved["labels"]["org.opencontainers.image.source"] == "https://example.org/x"


def test_a_digest_with_a_trailing_newline_is_not_a_pin(images):
    write_spec(images, upstream={"repository": "vllm/vllm-openai", "tag": "v1", "digests": {"amd64": DIGEST + "\n"}})
    resolved = spec_mod.resolve_image(spec_mod.load_image_spec(str(images), "demo"), "amd64")
    assert not resolved["pinned"] and "not a full digest" in resolved["pin_problem"]


def test_an_image_yml_that_is_a_directory_says_so(images):
    (images / "demo" / "image.yml").mkdir()
    with pytest.raises(LanekitError) as err:
        spec_mod.load_image_spec(str(images), "demo")
    assert "is a directory" in one_sentence(err) and "does not exist" not in str(err.value)


def _lock_params(images, lock_update=False):
    write_spec(images)
    old = spec_mod.resolve_image(spec_mod.load_image_spec(str(images), "demo"), "amd64")
    entry = spec_mod.lock_entry(old, rootfs="sha256:" + "cd" * 32)
    return {"lock_file": "images/demo/image.lock.yml", "lock": spec_mod.merge_lock(None, "demo", "amd64", entry),
            "lock_update": lock_update}, entry


def test_a_tag_changed_without_its_digest_is_refused_with_the_fix(images):
    params, entry = _lock_params(images)
    assert entry["base_tag"] == "v1"
    write_spec(images, upstream={"repository": "vllm/vllm-openai", "tag": "v2", "digests": {"amd64": DIGEST}})
    resolved = spec_mod.resolve_image(spec_mod.load_image_spec(str(images), "demo"), "amd64")
    with pytest.raises(LanekitError) as err:
        spec_mod.lock_verdict(params, resolved, {"content_hash": resolved["content_hash"], "base_digest": DIGEST})
    text = one_sentence(err)
    assert "upstream.tag is now 'v2'" in text and "docker buildx imagetools inspect vllm/vllm-openai:v2" in text
    params["lock_update"] = True
    status, sentence = spec_mod.lock_verdict(params, resolved, {"content_hash": resolved["content_hash"],
                                                                "base_digest": DIGEST})
    assert status == "update" and "base_tag: locked v1, now v2" in sentence


def test_a_tag_and_digest_changed_together_and_an_old_lock_say_nothing_of_the_tag(images):
    params, _entry = _lock_params(images)
    new = "sha256:" + "ef" * 32
    write_spec(images, upstream={"repository": "vllm/vllm-openai", "tag": "v2", "digests": {"amd64": new}})
    resolved = spec_mod.resolve_image(spec_mod.load_image_spec(str(images), "demo"), "amd64")
    assert spec_mod.tag_problem("lock", params["lock"]["arches"]["amd64"], resolved) is None
    old_lock = {k: v for k, v in params["lock"]["arches"]["amd64"].items() if k != "base_tag"}
    assert spec_mod.tag_problem("lock", old_lock, dict(resolved, base_digest=DIGEST)) is None


def test_the_plan_table_shows_the_tag_beside_the_digest():
    the_plan, _findings = plan()
    assert f", tag {the_plan['image']['tag']})" in table(the_plan)


# --- day-2 options ---------------------------------------------------------------------------------

@pytest.mark.parametrize("options,words", [
    ({"lines": -5}, "lines=-5 is not a count of lines"),
    ({"lines": "-5"}, "lines='-5' is not a count of lines"),
    ({"lines": "all"}, "lines='all' is not a count of lines"),
    ({"lines": 0}, "lines=0"),
    ({"lines": "5²"}, "lines='5²'"),
    ({"ranks": "9²"}, "is not a list of node ranks"),
    ({"ranks": "5-2"}, "low to high"),
    ({"ranks": "0-99999999"}, "asks for rank 99999999"),
    ({"since": "١٠m"}, "is not a duration"),
    ({"grep": "("}, "is not a regular expression"),
])
def test_broken_logs_options_are_one_sentence(options, words):
    with pytest.raises(LanekitError) as err:
        logmerge.check_options(**options)
    assert words in one_sentence(err)


def test_logs_look_alikes_still_work():
    assert logmerge.check_options(lines="100", ranks="r0,3-4", since="10m")["lines"] == 100
    assert logmerge.check_options()["lines"] == 100 and logmerge.parse_ranks([0, 3]) == [0, 3]


def _found(ranks):
    return {f"spark-0{r + 1}": {"containers": [{"exists": True, "rank": r, "lines": ["2026-11-30T17:09:01Z hi"]}]}
            for r in ranks}


def test_ranks_the_lane_does_not_have_are_refused_naming_the_ones_it_has():
    result = action_module(logs_action.ActionModule, {"lane": "l", "found": _found(range(8)), "ranks": "9"}).run(
        task_vars={})
    assert result["failed"] and "no rank 9 (its logs hold ranks 0, 1, 2, 3, 4, 5, 6, 7)" in result["msg"]


def test_logs_options_are_checked_alone_before_any_node_is_read():
    result = action_module(logs_action.ActionModule, {"lane": "l", "lines": "all", "check_only": True}).run(
        task_vars={})
    assert result["failed"] and "lines='all'" in result["msg"]
    assert not action_module(logs_action.ActionModule, {"lane": "l", "lines": "50", "check_only": True}).run(
        task_vars={}).get("failed")


def test_bench_settings_are_checked_alone_before_any_host_is_contacted():
    result = action_module(bench_action.ActionModule, {"plan": {"lane": "l"}, "cli_settings": {"pp": "2048²"},
                                                       "settings_only": True}).run(task_vars={})
    assert result["failed"] and "key pp is '2048²'" in result["msg"]
    ok = action_module(bench_action.ActionModule, {"plan": {"lane": "l"}, "lane_settings": {"depths": [0]},
                                                   "settings_only": True}).run(task_vars={})
    assert not ok.get("failed") and ok["settings"]["depths"] == [0]


def _tasks(path):
    with open(os.path.join(REPO, path), encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    return data[0]["tasks"] if isinstance(data[0], dict) and "tasks" in data[0] else data


def test_the_day2_playbooks_check_their_options_before_the_first_task_that_reaches_a_host():
    logs = [next(k for k in t if k.startswith("lanekit.") or k.startswith("ansible.")) for t in
            _tasks("playbooks/logs_lane.yml")]
    assert logs.index("lanekit.serving.lane_logs") < logs.index("lanekit.serving.rank_status")
    check = _tasks("playbooks/logs_lane.yml")[logs.index("lanekit.serving.lane_logs")]
    assert check["lanekit.serving.lane_logs"]["check_only"] is True
    bench = [next(k for k in t if k.startswith("lanekit.") or k.startswith("ansible.")) for t in
             _tasks("roles/bench/tasks/main.yml")]
    first_host = min(bench.index(m) for m in ("lanekit.serving.bench_host_venv", "lanekit.serving.rank_status"))
    assert bench.index("lanekit.serving.bench_run") < first_host
    assert _tasks("roles/bench/tasks/main.yml")[bench.index("lanekit.serving.bench_run")][
        "lanekit.serving.bench_run"]["settings_only"] is True
