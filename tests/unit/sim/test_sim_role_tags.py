"""tests/test-all.sh builds the real vLLM image on a running cluster with `sim_up.yml --tags
sim_cluster_images`: that reaches the included tasks only when each include of the role's main.yml
applies its tags to them (a dynamic include's own tags stay on the include)."""
from __future__ import annotations

import os

import yaml

ROLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sim", "roles", "sim_cluster")


def test_every_include_of_sim_up_applies_its_tags_to_the_included_tasks():
    with open(os.path.join(ROLE, "tasks", "main.yml"), encoding="utf-8") as handle:
        tasks = yaml.safe_load(handle)
    includes = [task for task in tasks if "ansible.builtin.include_tasks" in task]
    assert includes
    for task in includes:
        include = task["ansible.builtin.include_tasks"]
        assert isinstance(include, dict) and include["apply"]["tags"] == task["tags"], task["name"]
    assert any(task["ansible.builtin.include_tasks"]["file"] == "images.yml" and task["tags"] == ["sim_cluster_images"]
               for task in includes)
