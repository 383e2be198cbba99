"""ssh-faults: the seed vLLM lane reached over SSH as a real cluster is (login user, sudo), and the
faults of that path (a silent node, a changed host key, sudo that asks for a password) refused up
front. Each fault is undone inside its test: the scenario leaves the lane serving as it found it.
Test code only (not part of the collection)."""
from __future__ import annotations

import os
import sys

# The scenarios' shared helpers (simlib) and fixtures live in molecule/shared/tests.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "shared", "tests"))

from lanefixtures import order_and_tier, staging_host_alone, vllm_serving  # noqa: E402

# The shared fixtures this scenario's tests ask for: pytest finds a fixture by its name in conftest.
__all__ = ["staging_host_alone", "vllm_serving"]

# The order of this scenario's tests (molecule/seed-lanes/tests/conftest.py says how an entry places a test).
ORDER = ("test_scenario_12_ssh.py",)


def pytest_collection_modifyitems(items):
    order_and_tier(items, ORDER)
