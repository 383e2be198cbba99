"""Issue 23: shipped text points only at what an installed collection's user has.

The tarball ships no ``playbooks/<name>.yml`` path a user can run from their own repository and no
dashed wrapper (``deploy-lane.yml``, see galaxy.yml build_ignore): hints name FQCN playbooks,
``ansible-playbook lanekit.serving.deploy_lane ...``. Nor does it ship the reference notes
(``launch.md §4.2``) or the bring-up report's boot numbers ("(boot 2)") that old messages cited.
"""
from __future__ import annotations

import os
import re

import pytest

from tests.unit.helpers.plans import REPO

PLAYBOOKS = sorted(f[:-4] for f in os.listdir(os.path.join(REPO, "playbooks")) if f.endswith(".yml"))
WRAPPERS = [name for name in PLAYBOOKS if "-" in name]
FORBIDDEN = [
    (re.compile(r"playbooks/[\w-]+\.ya?ml"), "a checkout path; name the FQCN playbook (lanekit.serving.<name>)"),
    (re.compile(r"(?<![\w/-])(?:" + "|".join(map(re.escape, WRAPPERS)) + r")\.ya?ml"),
     "a dashed wrapper the tarball does not ship; name the FQCN playbook"),
    (re.compile(r"§|launch\.md|\(boot \d+\b|\bboot \d+ of the\b"), "a reference users do not have"),
]
# Shipped directories (galaxy.yml); the simulated clusters' inventories are test instruments.
SHIPPED = ("plugins", "roles", "lanes", "images", "inventories", "meta", "recipes")
NOT_SHIPPED = (os.path.join("inventories", "sim"), os.path.join("inventories", "sim-cpu"))
# Files baked into an image: a comment changed there changes the image's content hash, so every
# user rebuilds and redeploys; their comments are read by maintainers only.
BAKED = (os.path.join("images", "mistral-large4-sglang", "patches", "patch_barrier_timeout.py"),)


def shipped_files():
    for top in SHIPPED:
        for root, dirs, files in os.walk(os.path.join(REPO, top)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            rel_root = os.path.relpath(root, REPO)
            if rel_root.startswith(NOT_SHIPPED):
                continue
            for name in files:
                if os.path.join(rel_root, name) not in BAKED:
                    yield os.path.join(rel_root, name)
    for name in PLAYBOOKS:
        if name not in WRAPPERS:
            yield os.path.join("playbooks", f"{name}.yml")


def offences(text: str) -> list[str]:
    return [f"{m.group(0)!r}: {why}" for pattern, why in FORBIDDEN for m in pattern.finditer(text)]


def test_the_scan_finds_what_it_must():
    assert WRAPPERS and "deploy-lane" in WRAPPERS
    assert offences("fix: ansible-playbook playbooks/deploy-lane.yml -i inv -e lane=x")
    assert offences("run playbooks/bench_lane.yml again")
    assert offences("read the head's log (logs-lane.yml -e ranks=0)")
    assert offences("(launch.md §4.2: device + IPC_LOCK)") and offences("after an 80-minute load (boot 5).")
    assert not offences("ansible-playbook lanekit.serving.deploy_lane -i inv -e lane=x")


@pytest.mark.parametrize("path", sorted(set(shipped_files())))
def test_shipped_text_names_only_what_users_have(path):
    try:
        with open(os.path.join(REPO, path), encoding="utf-8") as handle:
            text = handle.read()
    except UnicodeDecodeError:
        return  # binary (a chart, a compiled file): no hint text
    found = [f"line {number}: {offence}" for number, line in enumerate(text.splitlines(), 1)
             for offence in offences(line)]
    assert not found, f"{path}: " + "; ".join(found)


DOCS = ["README.md"] + sorted(os.path.join("docs", n) for n in os.listdir(os.path.join(REPO, "docs")) if n.endswith(".md"))


@pytest.mark.parametrize("path", DOCS)
def test_the_readme_and_docs_cite_nothing_users_do_not_have(path):
    # They name checkout paths on purpose (a developer's commands), but never the project's private
    # references or the bring-up report's boot numbers.
    with open(os.path.join(REPO, path), encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    found = [f"line {number}: {m.group(0)!r}" for number, line in enumerate(lines, 1)
             for m in FORBIDDEN[-1][0].finditer(line)]
    assert not found, f"{path}: " + "; ".join(found)
