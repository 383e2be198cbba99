"""The project's own recipe fixture (tests/fixtures/recipes) in the corpus's case format, against the shipped tree."""
from __future__ import annotations

import os

import pytest

from tests.unit.helpers.recipes import FIXTURES, TREE, check_case, load_cases


@pytest.mark.parametrize("case", [pytest.param(c, id=c["id"]) for c in load_cases(os.path.join(FIXTURES, "cases.json"))])
def test_fixture_case_composes_or_refuses_with_its_rule(case):
    check_case(case, os.path.join(FIXTURES, case["recipe"]), TREE)
