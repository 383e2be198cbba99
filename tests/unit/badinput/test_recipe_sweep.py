"""A sweep over recipes: every field of every recipe set, one at a time, to a value of the wrong kind.

For each recipe (the project's fixture recipe and the collection's rendered seed always; the shared
conformance corpus ``../shared/recipes`` when it is there) and a choice it renders, each key path is
set in turn to text, a list, a mapping, a number written as text, NaN and a boolean. The recipe
must then compile (and, for a strategy lanes support, become a lane that renders) or be refused
with one LanekitError sentence; any other exception is what the user would have read as
"Task failed: ..." and fails the test. The chosen hardware profile and serving strategy of the
tree get the same treatment.

Runtime: every mapping- or list-valued section is swept with every value. Scalar leaves (and
list items past the first) are many and mostly text the compiler copies; they are sampled
deterministically (a fixed share chosen by a SHA-256 of the key path, so every run sweeps the same
ones) to keep the sweep near 10 s on one core.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe import _lane as _recipe_lane
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._choice import Choice
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._compose import compile_recipe
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._load import (
    load_recipe,
    load_tree,
    read_data,
    recipe_from_data,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._rules import RecipeRefusal
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._schema import check_strategy, check_taxonomy
from tests.unit.helpers.recipes import FIXTURES, SEED, TREE, choice_of, load_cases, shared_corpus

WRONG = ["some text", ["a", "b"], {"k": "v"}, "733", float("nan"), True]
# Share of scalar leaves swept (out of 16): deterministic by key path.
LEAF_SHARE = 2


def paths_of(data, prefix=()):
    """(key path, is a section) of every value; list items past the second are left out."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield prefix + (key,), isinstance(value, (dict, list))
            yield from paths_of(value, prefix + (key,))
    elif isinstance(data, list):
        for index, value in enumerate(data[:2]):
            yield prefix + (index,), isinstance(value, (dict, list))
            yield from paths_of(value, prefix + (index,))


def sampled(paths):
    for path, section in paths:
        digest = hashlib.sha256(repr(path).encode()).digest()[0] % 16
        if section or digest < LEAF_SHARE:
            yield path


def set_path(data, path, value):
    out = copy.deepcopy(data)
    node = out
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = copy.deepcopy(value)
    return out


def compile_or_sentence(src_factory, choice_factory, what: str) -> None:
    try:
        src = src_factory()
        result = compile_recipe(src, choice_factory())
        if result["choice"]["strategy"] in _recipe_lane.LANE_STRATEGIES:
            name = _recipe_lane.lane_name_for(src, result)
            lane, comments = _recipe_lane.build_lane(src, result, name)
            _recipe_lane.render(lane, comments, ["sweep"])
    except RecipeRefusal as err:
        assert "\n" not in str(err), (what, str(err))
    except LanekitError as err:
        message = str(err)
        assert "\n" not in message and "Traceback" not in message and "internal" not in message, (what, message)
    except Exception as exc:  # noqa: BLE001 - any other exception is the finding
        raise AssertionError(f"{what}: {type(exc).__name__}: {exc}") from exc


def recipes_and_choices():
    """(label, recipe path, tree root, case) for each recipe swept: one rendered case per recipe."""
    out = [("fixture Tiny-MoE", os.path.join(FIXTURES, "models", "acme", "Tiny-MoE.yaml"), TREE,
            load_cases(os.path.join(FIXTURES, "cases.json"))[0])]
    out.append(("seed", SEED, TREE, {"hardware": "gb300", "strategy": "multi_node_dep", "variant": None,
                                     "features": None, "feature_modes": {}, "nodes": 2, "pd": None}))
    corpus = shared_corpus()
    if corpus:
        seen = set()
        for case in load_cases(os.path.join(corpus, "expected", "cases.json")):
            if case["expected"].get("refused") or case["recipe"] in seen:
                continue
            seen.add(case["recipe"])
            out.append((case["recipe"], os.path.join(corpus, "upstream", case["recipe"]),
                        os.path.join(corpus, "upstream"), case))
    return out


def _choice(case):
    if case.get("features") is None:  # the seed: the recipe's defaults
        return lambda: Choice(hardware=case["hardware"], strategy=case["strategy"], nodes=case["nodes"])
    return lambda: choice_of(case)


CASES = recipes_and_choices()


def test_the_sweep_covers_the_corpus_when_it_is_there():
    if not shared_corpus():
        pytest.skip("../shared/recipes (the conformance corpus) is absent: only the project's own recipes are swept")
    assert len(CASES) >= 20


@pytest.mark.parametrize("label,path,root,case", CASES, ids=[c[0] for c in CASES])
def test_every_recipe_field_of_the_wrong_kind_compiles_or_is_one_sentence(label, path, root, case):
    data = read_data(path)
    tree = load_tree(root)
    choice = _choice(case)
    # The unmutated recipe compiles: the sweep starts from a working input.
    compile_or_sentence(lambda: recipe_from_data(copy.deepcopy(data), path, root, tree=copy.deepcopy(tree)),
                        choice, f"{label} as shipped")
    count = 0
    for key_path in sampled(list(paths_of(data))):
        for value in WRONG:
            mutated = set_path(data, key_path, value)
            compile_or_sentence(lambda m=mutated: recipe_from_data(m, path, root, tree=copy.deepcopy(tree)),
                                choice, f"{label}: {'.'.join(map(str, key_path))} = {value!r}")
            count += 1
    assert count > 50


@pytest.mark.parametrize("label,path,root,case", CASES[:2], ids=[c[0] for c in CASES[:2]])
def test_every_profile_and_strategy_field_of_the_wrong_kind_compiles_or_is_one_sentence(label, path, root, case):
    data = read_data(path)
    profiles, strategies = load_tree(root)
    choice = _choice(case)
    targets = [("taxonomy", ("hardware_profiles", case["hardware"]), {"hardware_profiles": profiles}),
               ("strategy", (), strategies[case["strategy"]])]
    for what, base, doc in targets:
        node = doc
        for part in base:
            node = node[part]
        for sub, _section in paths_of(node):
            for value in WRONG:
                mutated = set_path(doc, base + sub, value)
                tree_of = _taxonomy_tree if what == "taxonomy" else _strategy_tree
                tree_args = (mutated, profiles, strategies, case["strategy"])
                compile_or_sentence(
                    lambda t=tree_of, a=tree_args: recipe_from_data(copy.deepcopy(data), path, root, tree=t(*a)),
                    choice, f"{label} {what}: {'.'.join(map(str, base + sub))} = {value!r}")


def _taxonomy_tree(mutated, _profiles, strategies, _strategy):
    return check_taxonomy(mutated, "taxonomy.yaml")["hardware_profiles"], copy.deepcopy(strategies)


def _strategy_tree(mutated, profiles, strategies, strategy):
    out = copy.deepcopy(strategies)
    out[strategy] = check_strategy(mutated, f"strategies/{strategy}.yaml")
    return copy.deepcopy(profiles), out


def test_the_shipped_recipes_still_load():
    assert load_recipe(SEED).name
    assert json.dumps(read_data(os.path.join(TREE, "taxonomy.yaml")))
