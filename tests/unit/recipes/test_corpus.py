"""The shared conformance corpus (vLLM's recipe site on real upstream recipes): every case, negatives included.

Reads ``$LANEKIT_SHARED_RECIPES`` or ``<checkout>/../shared/recipes``; skipped when it is absent
(a clean clone has no corpus; the project's own fixtures run in test_fixture_cases.py).
"""
from __future__ import annotations

import os

import pytest

from tests.unit.helpers.recipes import check_case, load_cases, shared_corpus

CORPUS = shared_corpus()


def _params(name: str):
    if CORPUS is None:
        return [pytest.param(None, marks=pytest.mark.skip(
            reason="the shared recipe corpus is absent (set LANEKIT_SHARED_RECIPES or put it at ../shared/recipes)"),
            id=f"{name}-absent")]
    return [pytest.param(case, id=case["id"]) for case in load_cases(os.path.join(CORPUS, "expected", name))]


@pytest.mark.parametrize("case", _params("cases.json"))
def test_upstream_case_composes_like_the_recipe_site(case):
    check_case(case, os.path.join(CORPUS, "upstream", case["recipe"]), os.path.join(CORPUS, "upstream"))


@pytest.mark.parametrize("case", _params("seed-cases.json"))
def test_seed_case_composes_like_the_recipe_site(case):
    # The seed JSON is the collection's own copy (recipes/); the corpus resolves it against its upstream tree.
    seed = os.path.join(os.path.dirname(CORPUS), "seeds", "vllm-recipe-mistral-large-4.json")
    if not os.path.isfile(seed):
        from .helpers import SEED as seed
    check_case(case, seed, os.path.join(CORPUS, "upstream"))
