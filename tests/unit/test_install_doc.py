"""Issue 23: an installed collection's user can upgrade it from the docs, and galaxy.yml names no fake address."""
from __future__ import annotations

import os
import re

import yaml

from tests.unit.helpers.plans import REPO


def _read(*parts):
    with open(os.path.join(REPO, *parts), encoding="utf-8") as handle:
        return handle.read()


def test_install_md_says_how_to_upgrade_with_what_an_installed_collection_has():
    text = _read("docs", "install.md")
    section = text.split("## Upgrade the collection", 1)[1].split("\n## ", 1)[0]
    assert "ansible-galaxy collection install -r requirements.yml --force" in section
    assert "CHANGELOG.md" in section and "Breaking Changes" in section
    assert "ansible-galaxy collection list lanekit.serving" in section
    assert "lanekit.serving.plan_lane" in section and "lanekit.serving.deploy_lane --check --diff" in section
    assert not re.search(r"playbooks/|\bmake\b", section)


def test_the_example_requirements_name_the_tarball_galaxy_yml_builds():
    galaxy = yaml.safe_load(_read("galaxy.yml"))
    requirements = yaml.safe_load(_read("docs", "examples", "user-repo", "requirements.yml"))
    tarball = f"./{galaxy['namespace']}-{galaxy['name']}-{galaxy['version']}.tar.gz"
    assert tarball in [entry["name"] for entry in requirements["collections"]]


def test_galaxy_yml_links_are_real_https_urls_or_absent():
    galaxy = yaml.safe_load(_read("galaxy.yml"))
    for key in ("repository", "documentation", "issues", "homepage"):
        value = galaxy.get(key)
        if value is not None:
            assert re.fullmatch(r"https://[^\s]+", value), key
            assert not re.search(r"example\.|\.invalid|placeholder|todo|changeme", value, re.I), key
