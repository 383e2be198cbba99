"""Each action plugin's documentation stub (plugins/modules/<name>.py) says what its argument spec accepts.

An action plugin's code and its DOCUMENTATION live in two files, and ansible-test's validate-modules
only reads the stub: an option added to the code and not to the doc (or a default changed in one)
goes unseen by ansible-doc's readers. Issue 24 part 5."""
from __future__ import annotations

import importlib
import os
from typing import Any

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ACTIONS = sorted(f[:-3] for f in os.listdir(os.path.join(REPO, "plugins", "action"))
                 if f.endswith(".py") and not f.startswith("_"))
PKG = "ansible_collections.lanekit.serving.plugins"

# What validate_argument_spec assumes when a key is absent, so that `type: str` and no type agree.
SPEC_DEFAULTS: dict[str, Any] = {"type": "str", "required": False, "default": None, "choices": None,
                                 "elements": None, "aliases": None}


def argument_spec(name: str) -> dict:
    """The spec the action validates its arguments with: the module's ARGUMENT_SPEC, or its class's."""
    module = importlib.import_module(f"{PKG}.action.{name}")
    spec = getattr(module, "ARGUMENT_SPEC", None)
    if spec is None:
        spec = getattr(module.ActionModule, "ARGUMENT_SPEC", None) or module.ActionModule.argument_spec
    return spec


def documented_options(name: str) -> dict:
    stub = importlib.import_module(f"{PKG}.modules.{name}")
    return yaml.safe_load(stub.DOCUMENTATION).get("options") or {}


def differences(spec: dict, doc: dict, where: str) -> list[str]:
    """One line per disagreement between an argument spec and its documented options (recursing into
    suboptions), each naming the option and what differs."""
    out = []
    for option in sorted(set(spec) - set(doc)):
        out.append(f"{where}{option}: accepted by the action, missing from DOCUMENTATION")
    for option in sorted(set(doc) - set(spec)):
        out.append(f"{where}{option}: documented, but the action refuses it")
    for option in sorted(set(spec) & set(doc)):
        for key, absent in SPEC_DEFAULTS.items():
            in_spec, in_doc = spec[option].get(key, absent), doc[option].get(key, absent)
            if key in ("choices", "aliases") and in_spec is not None and in_doc is not None:
                in_spec, in_doc = list(in_spec), list(in_doc)
            if in_spec != in_doc:
                out.append(f"{where}{option}: {key} is {in_spec!r} in the spec, {in_doc!r} in DOCUMENTATION")
        sub_spec, sub_doc = spec[option].get("options"), doc[option].get("suboptions")
        if sub_spec or sub_doc:
            out.extend(differences(sub_spec or {}, sub_doc or {}, f"{where}{option}."))
    return out


def test_every_action_plugin_has_a_documentation_stub():
    missing = [n for n in ACTIONS if not os.path.exists(os.path.join(REPO, "plugins", "modules", n + ".py"))]
    assert not missing, f"add a DOCUMENTATION stub under plugins/modules/ for: {missing}"


# Where an action in front of a real module (the stub has its own argument_spec(), which
# validate-modules holds to DOCUMENTATION) takes an option differently on purpose, and why.
ON_PURPOSE = {
    "lane_lock": {
        "break_token: documented, but the action refuses it": "the module's internal option; the action sets it",
        "lock_dir: type is 'str' in the spec, 'path' in DOCUMENTATION": "passed on as given; the module expands it",
        "owner: default is {} in the spec, None in DOCUMENTATION": "the action fills the owner of this run itself",
    },
}


@pytest.mark.parametrize("name", ACTIONS)
def test_documentation_matches_the_argument_spec(name):
    on_purpose = ON_PURPOSE.get(name, {})
    found = [line for line in differences(argument_spec(name), documented_options(name), "") if line not in on_purpose]
    assert not found, f"plugins/modules/{name}.py and plugins/action/{name}.py disagree:\n" + "\n".join(found)


def test_every_difference_on_purpose_still_exists():
    """An entry of ON_PURPOSE that no longer describes a difference is removed, not kept as a blanket pass."""
    for name, lines in ON_PURPOSE.items():
        found = differences(argument_spec(name), documented_options(name), "")
        assert set(lines) <= set(found), f"{name}: {sorted(set(lines) - set(found))} no longer differ"


def test_a_disagreement_is_named():
    spec = {"a": {"type": "int", "default": 1}, "b": {}, "c": {"type": "dict", "options": {"x": {"type": "bool"}}}}
    doc = {"a": {"type": "int", "default": 2}, "b": {"type": "str"}, "c": {"type": "dict", "suboptions": {}},
           "d": {"type": "str"}}
    assert differences(spec, doc, "") == [
        "d: documented, but the action refuses it",
        "a: default is 1 in the spec, 2 in DOCUMENTATION",
        "c.x: accepted by the action, missing from DOCUMENTATION",
    ]
