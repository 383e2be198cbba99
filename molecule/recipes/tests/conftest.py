"""recipes: lanes compiled from vLLM recipe files (multi-node data parallel, prefill/decode with a
router, tensor plus pipeline parallel) on the sim's two CPU nodes posing as GB10s.
Test code only (not part of the collection)."""
from __future__ import annotations

import os
import sys

# The scenarios' shared helpers (simlib) and fixtures live in molecule/shared/tests.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "shared", "tests"))

from lanefixtures import order_and_tier  # noqa: E402

# The order of this scenario's tests (molecule/seed-lanes/tests/conftest.py says how an entry places a test).
ORDER = ("test_scenario_06_recipes.py",)


def pytest_collection_modifyitems(items):
    order_and_tier(items, ORDER)
