"""Roles read what the plan publishes and derive none of it again in Jinja (issue 24, part 4):
the API URL (IPv6 brackets included), the image pin, and "this node's ranks"."""
from __future__ import annotations

import os
import re

import pytest

from tests.unit.helpers.recipes import REPO

# What a role once composed itself, and what it reads instead.
REDERIVED = {
    r"api\.address": "lanekit_plan.api.url",
    r"http://\{\{": "lanekit_plan.api.url",
    r"selectattr\('host', 'equalto', inventory_hostname\)": "the filter lanekit.serving.node_ranks",
    r"hosts\[inventory_hostname\]": "the filter lanekit.serving.node_ranks",
    r"ref: \"\{\{ (lanekit_plan|image_plan)\.(image\.)?ref \}\}\"": "the plan's image.pin",
}


def _task_files():
    for top in ("roles", "playbooks"):
        for base, _dirs, files in os.walk(os.path.join(REPO, top)):
            for name in files:
                if name.endswith(".yml"):
                    yield os.path.join(base, name)


@pytest.mark.parametrize("pattern", sorted(REDERIVED))
def test_no_role_or_playbook_derives_a_published_value_again(pattern):
    found = []
    for path in _task_files():
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if re.search(pattern, line) and not line.lstrip().startswith("#"):
                    found.append(f"{os.path.relpath(path, REPO)}:{number}")
    assert not found, f"use {REDERIVED[pattern]} instead: {found}"


def test_the_rerun_probe_and_the_image_role_read_the_published_values():
    with open(os.path.join(REPO, "roles", "preflight", "tasks", "serving.yml"), encoding="utf-8") as handle:
        serving = handle.read()
    assert "'url': lanekit_plan.api.url" in serving
    assert "lanekit_plan.image.pin.ref" in serving and "lanekit_plan.image.pin.content_hash" in serving
    with open(os.path.join(REPO, "roles", "image", "tasks", "build.yml"), encoding="utf-8") as handle:
        assert "image_plan.pin | combine(" in handle.read()
