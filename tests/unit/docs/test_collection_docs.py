"""Issue 23: what antsibull-docs lint-collection-docs (make lint) refused, checked without it: a role
argument spec's default must be a value of its type, not a template (the docs site cannot render
'{{ lanekit_plan }}' as a dict), and M(lanekit.serving.X) must name a module the collection has."""
from __future__ import annotations

import glob
import os
import re

import yaml

from tests.unit.helpers.plans import REPO

TEXT_TYPES = {"str", "path", "raw", None}


def test_no_role_spec_default_of_a_non_text_type_is_a_template():
    found = []
    for path in sorted(glob.glob(os.path.join(REPO, "roles", "*", "meta", "argument_specs.yml"))):
        with open(path, encoding="utf-8") as handle:
            specs = yaml.safe_load(handle)["argument_specs"]
        for entry in specs.values():
            for name, option in (entry.get("options") or {}).items():
                default = option.get("default")
                if isinstance(default, str) and "{{" in default and option.get("type") not in TEXT_TYPES:
                    found.append(f"{os.path.relpath(path, REPO)}: {name} ({option.get('type')}) defaults to {default!r}")
    assert found == [], "say the templated default in the description instead:\n" + "\n".join(found)


def test_every_module_reference_names_a_module_of_the_collection():
    modules = {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(REPO, "plugins", "modules", "*.py"))}
    missing = []
    for path in sorted(glob.glob(os.path.join(REPO, "plugins", "modules", "*.py"))):
        with open(path, encoding="utf-8") as handle:
            for name in re.findall(r"M\(lanekit\.serving\.([a-z0-9_]+)\)", handle.read()):
                if name not in modules:
                    missing.append(f"{os.path.relpath(path, REPO)}: M(lanekit.serving.{name})")
    assert missing == [], "a role is C(lanekit.serving.<role>) role, not M(...):\n" + "\n".join(missing)


def test_make_lint_runs_the_collection_docs_lint():
    with open(os.path.join(REPO, "Makefile"), encoding="utf-8") as handle:
        lint = handle.read().split("\nlint: venv\n", 1)[1].split("\n\n", 1)[0]
    assert "antsibull-docs lint-collection-docs --plugin-docs ." in lint
