"""Loading recipes in both forms and finding the tree they resolve against."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._load import (
    load_recipe,
    read_data,
    resolve_recipe,
)
from tests.unit.helpers.recipes import SEED, TINY, TREE


def _tree(tmp_path):
    shutil.copy(os.path.join(TREE, "taxonomy.yaml"), tmp_path / "taxonomy.yaml")
    shutil.copytree(os.path.join(TREE, "strategies"), tmp_path / "strategies")
    (tmp_path / "models" / "acme").mkdir(parents=True)
    shutil.copy(TINY, tmp_path / "models" / "acme" / "Tiny-MoE.yaml")
    return tmp_path / "models" / "acme" / "Tiny-MoE.yaml"


def test_an_upstream_recipe_resolves_against_its_nearest_tree_root(tmp_path):
    src = load_recipe(str(_tree(tmp_path)))
    assert src.form == "yaml" and src.root == str(tmp_path) and src.name == "acme/Tiny-MoE"
    assert len(src.strategies) == 9 and "gb300" in src.profiles


def test_an_upstream_recipe_outside_a_tree_needs_a_root(tmp_path):
    shutil.copy(TINY, tmp_path / "r.yaml")
    with pytest.raises(LanekitError, match="recipe_root"):
        load_recipe(str(tmp_path / "r.yaml"))
    assert load_recipe(str(tmp_path / "r.yaml"), TREE).root == TREE
    with pytest.raises(LanekitError, match="holds no taxonomy.yaml"):
        load_recipe(str(tmp_path / "r.yaml"), str(tmp_path))


def test_a_rendered_json_outside_a_tree_uses_the_collections_tree(tmp_path):
    shutil.copy(SEED, tmp_path / "seed.json")
    src = load_recipe(str(tmp_path / "seed.json"))
    assert src.form == "json" and src.root == TREE


def test_yaml_is_read_with_yaml_1_2_booleans(tmp_path):
    (tmp_path / "x.yaml").write_text("a: on\nb: no\nc: true\n", encoding="utf-8")
    assert read_data(str(tmp_path / "x.yaml")) == {"a": "on", "b": "no", "c": True}


@pytest.mark.parametrize("content,words", [
    ("a: [1", "is not valid YAML at line"),
    ("model: {}\n", "is not a vLLM recipe"),
])
def test_bad_recipe_files_are_one_sentence(tmp_path, content, words):
    (tmp_path / "r.yaml").write_text(content, encoding="utf-8")
    with pytest.raises(LanekitError, match=words):
        load_recipe(str(tmp_path / "r.yaml"), TREE)


def test_missing_and_empty_recipe_paths_are_one_sentence(tmp_path):
    with pytest.raises(LanekitError, match="does not exist"):
        load_recipe(str(tmp_path / "nope.json"))
    with pytest.raises(LanekitError, match="pass -e recipe=PATH"):
        load_recipe("")
    (tmp_path / "bad.json").write_text(json.dumps([1]), encoding="utf-8")
    with pytest.raises(LanekitError, match="is not a vLLM recipe"):
        load_recipe(str(tmp_path / "bad.json"))


# --- -e recipe=NAME: the user's recipes/, then the collection's (issue 23) ---------------------------

def test_a_recipe_name_resolves_against_the_collections_recipes(tmp_path):
    # A user's repository with no recipes/ of its own: the name finds the recipe the collection ships.
    assert resolve_recipe("mistralai/Mistral-Large-4-1T-A52B", str(tmp_path)) == SEED
    assert resolve_recipe("mistralai/Mistral-Large-4-1T-A52B.json", str(tmp_path)) == SEED
    # The docs' path of the shipped recipe works from a repository that has no such file.
    assert resolve_recipe("recipes/mistralai/Mistral-Large-4-1T-A52B.json", str(tmp_path)) == SEED
    assert load_recipe(resolve_recipe("mistralai/Mistral-Large-4-1T-A52B", str(tmp_path))).root == TREE


def test_the_users_own_recipes_come_first_and_upstream_source_names_are_found_under_models(tmp_path):
    (tmp_path / "recipes" / "mistralai").mkdir(parents=True)
    shutil.copy(SEED, tmp_path / "recipes" / "mistralai" / "Mistral-Large-4-1T-A52B.json")
    mine = str(tmp_path / "recipes" / "mistralai" / "Mistral-Large-4-1T-A52B.json")
    assert resolve_recipe("mistralai/Mistral-Large-4-1T-A52B", str(tmp_path)) == mine
    _tree(tmp_path / "recipes")  # an upstream tree: models/acme/Tiny-MoE.yaml
    assert resolve_recipe("acme/Tiny-MoE", str(tmp_path)) == str(tmp_path / "recipes" / "models" / "acme" / "Tiny-MoE.yaml")
    # lanekit_recipes_dir names another directory (relative to the working directory).
    (tmp_path / "elsewhere").mkdir()
    shutil.copy(SEED, tmp_path / "elsewhere" / "seed.json")
    assert resolve_recipe("seed", str(tmp_path), "elsewhere") == str(tmp_path / "elsewhere" / "seed.json")
    # A path is still a path.
    assert resolve_recipe("elsewhere/seed.json", str(tmp_path)) == str(tmp_path / "elsewhere" / "seed.json")


def test_an_unknown_recipe_name_lists_the_names_there_are(tmp_path):
    with pytest.raises(LanekitError) as err:
        resolve_recipe("mistralai/Nope", str(tmp_path))
    assert str(err.value) == (f"recipe mistralai/Nope is neither a file ({tmp_path}/mistralai/Nope) nor a recipe name in "
                              f"{tmp_path}/recipes or the collection's recipes/; pass the path of a recipe file or one "
                              "of these names: mistralai/Mistral-Large-4-1T-A52B.")
