"""Shared helpers: where the recipes are, compile a corpus case, compare a result with its expected entry."""
from __future__ import annotations

import json
import os

from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._choice import Choice
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._compose import compile_recipe, public
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._load import load_recipe
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._rules import RecipeRefusal

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TREE = os.path.join(REPO, "recipes")
SEED = os.path.join(TREE, "mistralai", "Mistral-Large-4-1T-A52B.json")
FIXTURES = os.path.join(REPO, "tests", "fixtures", "recipes")
TINY = os.path.join(FIXTURES, "models", "acme", "Tiny-MoE.yaml")


def shared_corpus() -> str | None:
    """The shared conformance corpus: $LANEKIT_SHARED_RECIPES, else <checkout>/../shared/recipes (None when absent)."""
    path = os.environ.get("LANEKIT_SHARED_RECIPES") or os.path.join(os.path.dirname(REPO), "shared", "recipes")
    return path if os.path.isfile(os.path.join(path, "expected", "cases.json")) else None


def load_cases(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)["cases"]


def choice_of(case: dict) -> Choice:
    nodes = None if case["strategy"] == "pd_cluster" else case.get("nodes")
    return Choice(hardware=case["hardware"], strategy=case["strategy"], variant=case["variant"],
                  features=list(case["features"]), feature_modes=dict(case["feature_modes"]), nodes=nodes,
                  pd=case.get("pd"))


def check_case(case: dict, recipe_path: str, root: str) -> None:
    """Compile ``case`` and assert it matches its ``expected`` entry (refusals: refused, naming the rule)."""
    src = load_recipe(recipe_path, root)
    expected = case["expected"]
    if expected.get("refused"):
        try:
            compile_recipe(src, choice_of(case))
        except RecipeRefusal as err:
            assert err.rule == expected["rule"], str(err)
            message = str(err)
            assert "\n" not in message and message.endswith(".")
            assert src.name in message and f"rule {expected['rule']}" in message
            return
        raise AssertionError(f"{case['id']}: compiled, but the corpus refuses it ({expected['rule']})")
    result = public(compile_recipe(src, choice_of(case)))
    for key in ("deployType", "model", "modes", "pools", "router"):
        assert result.get(key) == expected.get(key), key
    assert [(c["role"], c["node"]) for c in result["commands"]] == [(c["role"], c["node"]) for c in expected["commands"]]
    for got, want in zip(result["commands"], expected["commands"], strict=True):
        assert got["argv"] == want["argv"], (got["role"], got["node"])
        assert got["env"] == want["env"], (got["role"], got["node"])
        if case.get("source") != "json":  # the seed's own string indents continuations by one space
            assert got["command"] == want["command"]
