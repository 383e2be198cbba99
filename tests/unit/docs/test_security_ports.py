"""Issue 38 (item 9): docs/security.md's list of the ports to keep on the fabric names every port lanekit opens.

Where a port comes from is read from the code's own tables, not from its text: the lane keys whose kind is
a port (the lane schema, ``_lane/_table.py``), the roles' port variables (``roles/*/defaults/main.yml``:
the image stream, relay and registry, the fabric probe's store) and the engine flags whose port the plan
fills in (the engine records' ``plan_owned``). A new port in any of them fails here until the page names it.
"""
from __future__ import annotations

import glob
import os

import yaml

from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._table import SCHEMA
from tests.unit.helpers.plans import REPO

SECTION = "### Bind address and the ports that must stay on the fabric"


def _section() -> str:
    """The section's text, up to the next heading of any level."""
    with open(os.path.join(REPO, "docs", "security.md"), encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    start = lines.index(SECTION)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("#")), len(lines))
    return "\n".join(lines[start:end])


def _port_keys(schema: dict, prefix: str = "") -> set[str]:
    out = set()
    for key, field in schema.items():
        if field["kind"] == "port":
            out.add(prefix + key)
        elif field["kind"] == "map":
            out |= _port_keys(field["extra"], f"{prefix}{key}.")
    return out


def _role_port_variables() -> set[str]:
    out = set()
    for path in glob.glob(os.path.join(REPO, "roles", "*", "defaults", "main.yml")):
        with open(path, encoding="utf-8") as handle:
            out |= {name for name in (yaml.safe_load(handle) or {}) if name.endswith("_port")}
    return out


def _engine_port_sources() -> set[str]:
    """The lane keys the engines' port flags come from (``--master-port``: ``serve.rendezvous_port`` ...)."""
    owned: dict[str, str] = {}
    for engine in _engines.ENGINES.values():
        owned.update(_engines.layout_owned(engine, "dp"))  # the engine's flags and the data-parallel ones
    for role in _engines.ROLES.values():
        owned.update(role.plan_owned)
    return {word.strip(",.()") for flag, source in owned.items() if "port" in flag or "addr" in flag
            for word in source.split() if "port" in word and "." in word}


def test_the_code_s_port_sources_are_found():
    assert {"serve.port", "serve.rendezvous_port", "pd.prefill.port", "pd.decode.rendezvous_port"} <= _port_keys(SCHEMA)
    assert {"fabric_port", "image_stream_port", "image_relay_port", "image_registry_port"} <= _role_port_variables()
    assert {"serve.port", "serve.rendezvous_port"} <= _engine_port_sources()


def test_every_port_lanekit_opens_is_in_the_security_page_s_list():
    text = _section()
    wanted = _port_keys(SCHEMA) | _role_port_variables() | _engine_port_sources()
    missing = sorted(name for name in wanted if f"`{name}`" not in text)
    assert not missing, (f"docs/security.md ({SECTION[4:]}) does not name {', '.join(missing)}: say where each "
                         "listens and who must reach it")


def test_the_fabric_probe_s_default_store_port_is_said():
    # fabric_port 0 means the lane's rendezvous port + 1 (_fabric/_launch.py); the page must say which port that is.
    assert "rendezvous_port` + 1" in _section()
