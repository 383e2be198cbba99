"""Scenario 12: the simulated cluster reached as a real cluster is - over SSH as the operator
account lanekit, which becomes root with sudo, host keys checked against sim-up's known_hosts.
What an operator meets: a node that does not answer, a node whose host key changed and a node
whose sudo asks for a password are each refused up front with a sentence naming the node and the
fix, nothing changed; and what lanekit writes through sudo has the owner and mode that
docs/security.md promises, with nothing left in the login user's home or a shared temp dir.
Test code only (not part of the collection)."""
from __future__ import annotations

import os
import subprocess
import tempfile

import pytest
from simlib import ANSI, LANE, NODES, ROOT, STAGING_NODE, flat, lane_containers, run_playbook

HOST, ADDRESS = "spark-08", "172.31.213.18"
SKELETON = {"/home/lanekit/.bashrc", "/home/lanekit/.bash_logout", "/home/lanekit/.profile"}


def fresh_connections() -> dict:
    """A control path directory of its own: a persisted master connection from an earlier run
    would skip the very checks these tests make."""
    return {"ANSIBLE_SSH_CONTROL_PATH_DIR": tempfile.mkdtemp(prefix="lksim-cp-")}


def node_sh(node: str, script: str) -> str:
    return subprocess.run(["docker", "exec", node, "sh", "-c", script], capture_output=True, text=True,
                          check=True).stdout


def refused_up_front(output: str) -> bool:
    """The run stopped at the reach check: no later preflight task ran on any host."""
    text = flat(output)
    return ("Refuse the hosts that cannot be reached or cannot become root" in text
            and "Read the node's GPU, architecture and docker version" not in text
            and "Take the lane lock" not in text)


def lock_exists() -> bool:
    return node_sh(NODES[0], f"test -e /var/lib/lanekit/locks/{LANE}.lock && echo yes || true").strip() == "yes"


def test_the_run_logs_in_as_lanekit_and_becomes_root(vllm_serving):
    ansible = os.path.join(ROOT, ".venv", "bin", "ansible")
    # Molecule exports ANSIBLE_FORCE_COLOR for its own runs; this output is parsed.
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    for become, expected in (("true", "root"), ("false", "lanekit")):
        proc = subprocess.run([ansible, "lane_nodes:weights_staging", "-i", os.path.join(ROOT, "inventories", "sim"),
                               "-m", "ansible.builtin.command", "-a", "id -un", "-e", f"ansible_become={become}",
                               "-o"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        answers = [line.strip() for line in ANSI.sub("", proc.stdout).splitlines() if "| CHANGED |" in line]
        assert len(answers) == 9 and all(line.endswith(f"(stdout) {expected}") for line in answers), proc.stdout


def test_what_lanekit_writes_through_sudo_is_root_owned_and_private_and_nothing_is_left_behind(vllm_serving,
                                                                                               staging_host_alone):
    for node in NODES + [STAGING_NODE]:
        # Nothing belongs to the login user outside its home, and in its home only the skeleton and
        # Ansible's (empty) remote temp directory remain.
        owned = set(node_sh(node, "find / -xdev -user lanekit -not -path '/proc/*' 2>/dev/null || true").split())
        extra = owned - SKELETON - {"/home/lanekit", "/home/lanekit/.ansible", "/home/lanekit/.ansible/tmp"}
        # What is left says which task left it (an AnsiballZ_<module>.py names the module).
        listing = node_sh(node, "ls -la --time-style=+%T /home/lanekit/.ansible/tmp/* 2>&1 | head -20")
        assert not extra, (node, sorted(extra), listing)
        # No file left in a shared temp dir, and nothing there that others could write.
        left = node_sh(node, "find /tmp /var/tmp -mindepth 1 -maxdepth 1 -not -name lanekit 2>/dev/null || true").split()
        assert left == [], (node, left)
        loose = node_sh(node, "find /var/tmp/lanekit /var/lib/lanekit /etc/lanekit -perm /022 -not -type l "
                              "2>/dev/null || true").split()
        assert loose == [], (node, loose)
        others = node_sh(node, "find /var/tmp/lanekit /var/lib/lanekit /etc/lanekit -not -user root "
                               "2>/dev/null || true").split()
        assert others == [], (node, others)
    modes = node_sh(NODES[0], "stat -c '%n %U %a' /var/tmp/lanekit /var/tmp/lanekit/images /var/lib/lanekit/locks")
    assert modes.split("\n")[:3] == ["/var/tmp/lanekit root 700", "/var/tmp/lanekit/images root 700",
                                     "/var/lib/lanekit/locks root 755"], modes


def test_a_node_that_does_not_answer_is_unreachable_within_the_connect_timeout(vllm_serving):
    before = lane_containers()
    rule = ["OUTPUT", "-d", ADDRESS, "-p", "tcp", "--dport", "22", "-j", "DROP"]
    subprocess.run(["iptables", "-I", *rule], check=True)
    try:
        deploy = run_playbook("deploy_lane.yml", env=fresh_connections(), timeout=180)
        status = run_playbook("status_lane.yml", env=fresh_connections(), timeout=180)
    finally:
        subprocess.run(["iptables", "-D", *rule], check=True)
    text = flat(deploy.stdout)
    assert deploy.returncode != 0
    assert "1 of 9 host(s) cannot be used, so nothing was changed on any node" in text
    assert f"{HOST} ({ADDRESS}) is unreachable: it did not answer on SSH within 10 s" in text
    assert status.returncode == 2
    assert (f"cause: node {HOST} unreachable (r7 unknown): {HOST} ({ADDRESS}) is unreachable: it did not answer "
            "on SSH within 10 s") in flat(status.stdout)
    assert refused_up_front(deploy.stdout)
    assert lane_containers() == before and not lock_exists()


def test_a_changed_host_key_is_refused_naming_the_node_and_the_fix(vllm_serving, tmp_path):
    known = tmp_path / "known_hosts"
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    other_key = " ".join(other.with_suffix(".pub").read_text().split()[:2])
    with open(os.path.join(ROOT, ".sim", "ssh", "known_hosts"), encoding="utf-8") as fh:
        lines = [f"{ADDRESS} {other_key}" if line.split()[0] == ADDRESS else line for line in fh.read().splitlines()]
    known.write_text("\n".join(lines) + "\n")
    before = lane_containers()
    proc = run_playbook("deploy_lane.yml", env=fresh_connections(), extra=["-e", f"lksim_known_hosts={known}"],
                        timeout=180)
    text = flat(proc.stdout)
    assert proc.returncode != 0
    assert f"{HOST} ({ADDRESS}) offered an SSH host key that differs from the one in {known}" in text
    assert f"`ssh-keygen -f {known} -R {ADDRESS}`" in text
    assert refused_up_front(proc.stdout)
    assert lane_containers() == before and not lock_exists()


def test_sudo_that_asks_for_a_password_is_refused_up_front_with_the_fix(vllm_serving, tmp_path):
    extra_inventory = tmp_path / "sudo-password.yml"
    extra_inventory.write_text(f"all:\n  children:\n    lane_nodes:\n      hosts:\n        {HOST}:\n"
                               "          ansible_user: lanekit-pw\n")
    before = lane_containers()
    proc = run_playbook("deploy_lane.yml", env=fresh_connections(), extra=["-i", str(extra_inventory)], timeout=180)
    text = flat(proc.stdout)
    assert proc.returncode != 0
    assert f"sudo on {HOST} ({ADDRESS}) asks lanekit-pw for a password" in text
    assert "-K (--ask-become-pass)" in text
    assert refused_up_front(proc.stdout)
    assert lane_containers() == before and not lock_exists()


@pytest.mark.parametrize("node", [NODES[0], STAGING_NODE])
def test_sshd_accepts_keys_only(node):
    config = node_sh(node, "sshd -T 2>/dev/null")
    assert "passwordauthentication no" in config and "permitrootlogin no" in config
