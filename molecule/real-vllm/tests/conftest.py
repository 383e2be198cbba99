"""real-vllm: a real vLLM (its CPU build) serving the tiny Llama as a two-node lane on the sim's two
CPU nodes, and the fabric gate for real between them.
Test code only (not part of the collection)."""
from __future__ import annotations

import os
import sys

# The scenarios' shared helpers (simlib) and fixtures live in molecule/shared/tests.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "shared", "tests"))

from lanefixtures import order_and_tier  # noqa: E402

# The order of this scenario's tests (molecule/seed-lanes/tests/conftest.py says how an entry places a test).
ORDER = ("test_scenario_13_real_vllm.py", "test_scenario_14_fabric.py")


def pytest_collection_modifyitems(items):
    order_and_tier(items, ORDER)
