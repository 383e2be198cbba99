"""Issue 23: docs/node-prerequisites.md and the README's --limit section cite the tasks that check (or
meet) each prerequisite; every cited task still exists under that name in that file."""
from __future__ import annotations

import os
import re

import pytest
import yaml

from tests.unit.helpers.plans import REPO

CITED = re.compile(r'`((?:roles|playbooks)/[^`]+\.yml)` task "([^"]+)"(?:, then "([^"]+)")?')
LOOSE = re.compile(r'"([^"]+)"')
DOCS = ("docs/node-prerequisites.md", "README.md")


def _names(tasks):
    for task in tasks or []:
        if isinstance(task, dict):
            if task.get("name"):
                yield " ".join(str(task["name"]).split())
            for key in ("block", "rescue", "always", "tasks"):
                yield from _names(task.get(key))


def citations(doc):
    with open(os.path.join(REPO, doc), encoding="utf-8") as handle:
        text = " ".join(handle.read().split())
    return [(path, name) for path, first, second in CITED.findall(text) for name in (first, second) if name]


@pytest.mark.parametrize("doc", DOCS)
def test_every_cited_task_exists(doc):
    found = citations(doc)
    assert found, f"{doc} cites no task"
    for path, name in found:
        with open(os.path.join(REPO, path), encoding="utf-8") as handle:
            names = set(_names(yaml.safe_load(handle)))
        assert name in names, f"{doc} cites {path} task {name!r}, which is not there: {sorted(names)}"


def test_the_prerequisites_page_cites_a_check_for_each_prerequisite():
    paths = {cited[0] for cited in citations("docs/node-prerequisites.md")}
    assert {"roles/preflight/tasks/reach.yml", "roles/preflight/tasks/nodes.yml", "roles/weights/tasks/main.yml",
            "roles/ranks/tasks/main.yml"} <= paths
