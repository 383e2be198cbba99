"""Issue 23: -e recipe_list=true lists what a recipe offers (_recipe_offer), and every listed choice compiles."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._choice import Choice
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._compose import compile_recipe
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._load import load_recipe
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._offer import lines, offer
from tests.unit.helpers.recipes import SEED

SRC = load_recipe(SEED)
OFFER = offer(SRC)
LISTED = [(hw, s, v) for hw, entry in OFFER["hardware"].items() for s in entry["strategies"] for v in entry["variants"]]


def test_the_seed_offers_its_hardware_strategies_variants_features_and_presets():
    assert OFFER["hardware"]["gb300"]["strategies"][:2] == ["single_node_tp", "multi_node_tp"]
    assert OFFER["hardware"]["h200"] == {"strategies": ["multi_node_tp", "multi_node_tp_pp"], "variants": ["fp8"]}
    assert OFFER["recommended"] == {"hardware": "gb300", "strategy": "single_node_tp", "variant": "default",
                                    "node_count": 1}
    assert "text_only" in OFFER["opt_in_features"] and "gb300_pd_dep_tp" in OFFER["presets"]
    text = "\n".join(lines(OFFER))
    assert "h200: strategies multi_node_tp (at least 16 GPUs)" in text and "features: " in text
    assert "None" not in text


@pytest.mark.parametrize(("hardware", "strategy", "variant"), LISTED)
def test_every_listed_choice_compiles(hardware, strategy, variant):
    result = compile_recipe(SRC, Choice(hardware=hardware, strategy=strategy, variant=variant))
    assert result["choice"]["strategy"] == strategy
