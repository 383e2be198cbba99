"""Every register of a playbook starts with '__' (issue 37): a registered result is replaced by an -e variable
of the same name (extra vars win), and '-e watch_probe=5' broke the watch with a Python error. The
playbooks' own -e options never start with '__'."""
from __future__ import annotations

import glob
import os

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _registers(node):
    if isinstance(node, dict):
        if isinstance(node.get("register"), str):
            yield node["register"]
        for value in node.values():
            yield from _registers(value)
    elif isinstance(node, list):
        for item in node:
            yield from _registers(item)


def test_every_playbook_register_has_the_prefix_no_option_uses():
    bad = []
    for path in sorted(glob.glob(os.path.join(REPO, "playbooks", "**", "*.yml"), recursive=True)):
        with open(path, encoding="utf-8") as handle:
            for name in _registers(yaml.safe_load(handle)):
                if not name.startswith("__"):
                    bad.append(f"{os.path.relpath(path, REPO)}: register {name}")
    assert bad == []
