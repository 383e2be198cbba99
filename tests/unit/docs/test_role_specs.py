"""Each role's defaults/main.yml and meta/argument_specs.yml describe the same variables.

ansible-core checks a role's arguments against meta/argument_specs.yml before it runs, and
ansible-doc shows that file to users; defaults/main.yml is what the role really does when a variable
is not given. A variable defaulted but not in the spec is undocumented, one in the spec but never
defaulted is undefined when not given, and a spec default that differs from the real one misleads.
Issue 24 part 5."""
from __future__ import annotations

import os
import sys
from typing import Any

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLES_DIR = os.path.join(REPO, "roles")
ROLES = sorted(r for r in os.listdir(ROLES_DIR) if os.path.isdir(os.path.join(ROLES_DIR, r)))


def _load(path: str) -> Any:
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _templated(value: Any) -> bool:
    """A value Jinja computes at run time (anywhere inside it): the spec can only describe it."""
    if isinstance(value, dict):
        return any(_templated(v) for v in value.values())
    if isinstance(value, list):
        return any(_templated(v) for v in value)
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def _same(spec: dict, value: Any) -> bool:
    """The spec's default is the role's default, read as the spec's type (`0` and `0.0` agree for a float)."""
    default = spec.get("default")
    if spec.get("type") == "float" and isinstance(value, (int, float)) and isinstance(default, (int, float)):
        return float(value) == float(default)
    return default == value


def differences(role: str) -> list[str]:
    """One line per disagreement between a role's defaults and its entry points' specs."""
    defaults = _load(os.path.join(ROLES_DIR, role, "defaults", "main.yml")) or {}
    specs = (_load(os.path.join(ROLES_DIR, role, "meta", "argument_specs.yml")) or {})["argument_specs"]
    options: dict[str, dict] = {}
    for entry in specs.values():
        options.update(entry.get("options") or {})
    out = [f"{name}: in defaults/main.yml, missing from meta/argument_specs.yml" for name in sorted(set(defaults) - set(options))]
    for name in sorted(set(options) - set(defaults)):
        if not options[name].get("required"):
            out.append(f"{name}: optional in meta/argument_specs.yml, but defaults/main.yml does not set it")
    for name in sorted(set(options) & set(defaults)):
        value = defaults[name]
        if _templated(value) or _same(options[name], value):
            continue
        out.append(f"{name}: default {options[name].get('default')!r} in meta/argument_specs.yml, "
                   f"{value!r} in defaults/main.yml")
    return out


def test_every_role_has_both_files():
    for role in ROLES:
        for part in ("defaults/main.yml", "meta/argument_specs.yml"):
            assert os.path.exists(os.path.join(ROLES_DIR, role, part)), f"roles/{role}/{part} is missing"


@pytest.mark.parametrize("role", ROLES)
def test_defaults_match_the_argument_specs(role):
    found = differences(role)
    assert not found, f"roles/{role}: defaults and argument specs disagree:\n" + "\n".join(found)


def test_a_disagreement_is_named(tmp_path, monkeypatch):
    role = tmp_path / "r"
    (role / "defaults").mkdir(parents=True)
    (role / "meta").mkdir()
    (role / "defaults" / "main.yml").write_text("r_a: 1\nr_b: x\nr_c: '{{ y }}'\nr_f: 0\n")
    (role / "meta" / "argument_specs.yml").write_text(yaml.safe_dump({"argument_specs": {"main": {"options": {
        "r_a": {"type": "int", "default": 2}, "r_c": {"type": "str", "default": "z"}, "r_d": {"type": "str"},
        "r_e": {"type": "str", "required": True}, "r_f": {"type": "float", "default": 0.0}}}}}))
    monkeypatch.setattr(sys.modules[__name__], "ROLES_DIR", str(tmp_path))
    assert differences("r") == [
        "r_b: in defaults/main.yml, missing from meta/argument_specs.yml",
        "r_d: optional in meta/argument_specs.yml, but defaults/main.yml does not set it",
        "r_a: default 2 in meta/argument_specs.yml, 1 in defaults/main.yml",
    ]
