"""The checkout's ansible.cfg and inventories: SSH host keys are checked wherever SSH is used."""
from __future__ import annotations

import configparser
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = ["ansible.cfg", "docs/examples/user-repo/ansible.cfg"]
# Settings that switch host key checking off for the ssh connection.
OFF_VARIABLES = ("ansible_host_key_checking", "ansible_ssh_host_key_checking")


def inventory_texts(name: str) -> dict[str, str]:
    out = {}
    for root, _dirs, files in os.walk(os.path.join(ROOT, "inventories", name)):
        for f in files:
            if f.endswith((".yml", ".yaml")):
                with open(os.path.join(root, f), encoding="utf-8") as handle:
                    out[os.path.relpath(os.path.join(root, f), ROOT)] = handle.read()
    return out


@pytest.mark.parametrize("rel", CONFIGS)
def test_ansible_cfg_keeps_host_key_checking_on(rel):
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, rel))
    for section in ("defaults", "ssh_connection"):
        if cfg.has_option(section, "host_key_checking"):
            assert cfg.getboolean(section, "host_key_checking"), f"{rel} [{section}] turns host key checking off"
        args = cfg.get(section, "ssh_args", fallback="") + cfg.get(section, "ssh_common_args", fallback="")
        assert "StrictHostKeyChecking=no" not in args


def test_the_ssh_inventory_does_not_turn_host_key_checking_off():
    for rel, text in inventory_texts("spark8").items():
        assert "StrictHostKeyChecking=no" not in text, rel
        assert "UserKnownHostsFile=/dev/null" not in text, rel
        for variable in OFF_VARIABLES:
            assert variable not in text, rel


def test_every_sim_host_uses_the_docker_connection_so_has_no_host_key():
    with open(os.path.join(ROOT, "inventories", "sim", "hosts.yml"), encoding="utf-8") as handle:
        doc = yaml.safe_load(handle)

    def hosts(group: dict, inherited: str | None):
        conn = (group.get("vars") or {}).get("ansible_connection", inherited)
        for name, hostvars in (group.get("hosts") or {}).items():
            yield name, (hostvars or {}).get("ansible_connection", conn)
        for child in (group.get("children") or {}).values():
            yield from hosts(child or {}, conn)

    found = dict(hosts(doc["all"], None))
    assert found and all(conn == "community.docker.docker" for conn in found.values()), found
