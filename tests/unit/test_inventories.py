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


def _sim_hosts(inventory: str):
    with open(os.path.join(ROOT, "inventories", inventory, "hosts.yml"), encoding="utf-8") as handle:
        doc = yaml.safe_load(handle)

    def hosts(group: dict, inherited: dict):
        merged = dict(inherited, **(group.get("vars") or {}))
        for name, hostvars in (group.get("hosts") or {}).items():
            yield name, dict(merged, **(hostvars or {}))
        for child in (group.get("children") or {}).values():
            yield from hosts(child or {}, merged)

    return dict(hosts(doc["all"], {}))


@pytest.mark.parametrize("inventory", ["sim", "sim-cpu"])
def test_every_sim_host_is_reached_over_ssh_as_a_non_root_user_with_sudo_and_checked_host_keys(inventory):
    found = _sim_hosts(inventory)
    assert found
    for name, hv in found.items():
        assert hv["ansible_connection"] == "ansible.builtin.ssh", name
        assert hv["ansible_user"] not in ("root", ""), name
        assert hv["ansible_become"] is True, name
        assert int(hv["ansible_ssh_timeout"]) <= 30, name
        args = hv["ansible_ssh_common_args"]
        assert "StrictHostKeyChecking=yes" in args and "UserKnownHostsFile={{ lksim_known_hosts |" in args, name
        assert not any(v in hv for v in OFF_VARIABLES), name


def test_ansible_cfg_bounds_the_connect_time_and_keeps_one_connection_per_node():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "ansible.cfg"))
    assert cfg.getint("defaults", "timeout") <= 30
    args = cfg.get("ssh_connection", "ssh_args")
    assert "ControlPersist=" in args and "ServerAliveInterval=" in args
