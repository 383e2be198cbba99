# Copyright: lanekit developers
# Apache-2.0
"""_reach: Ansible's words for a host it cannot use become one sentence with the cause and fix.
The messages are the real ones of the simulated cluster over SSH (tests/fixtures/ssh)."""
from __future__ import annotations

import os

import pytest

from ansible_collections.lanekit.serving.plugins.plugin_utils import _reach as reach

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "ssh")


def message(name: str) -> str:
    with open(os.path.join(FIXTURES, name + ".txt"), encoding="utf-8") as fh:
        return fh.read()


def test_a_changed_host_key_names_the_node_the_file_the_line_and_the_removal_command():
    got = reach.explain("spark-08", message("host_key_changed"), address="172.31.213.18")
    assert got.kind == "host_key_changed"
    assert got.sentence.startswith("spark-08 (172.31.213.18) offered an SSH host key that differs")
    assert "/srv/lanekit/.sim/ssh/known_hosts (line 8)" in got.sentence
    assert "`ssh-keygen -f /srv/lanekit/.sim/ssh/known_hosts -R 172.31.213.18`" in got.sentence
    assert "changed nothing on any node" in got.sentence


def test_a_connection_that_timed_out_says_unreachable_with_the_bound():
    got = reach.explain("spark-08", message("timeout"), address="172.31.213.18", timeout_s=10)
    assert got.kind == "timeout"
    assert got.sentence.startswith("spark-08 (172.31.213.18) is unreachable: it did not answer on SSH within 10 s")


def test_sudo_that_wants_a_password_gives_both_fixes():
    got = reach.explain("spark-08", message("sudo_password"), address="172.31.213.18", user="lanekit-pw",
                        unreachable=False)
    assert got.kind == "sudo_password"
    assert "sudo on spark-08 (172.31.213.18) asks lanekit-pw for a password" in got.sentence
    assert "-K (--ask-become-pass)" in got.sentence and "passwordless sudo" in got.sentence


def test_a_refused_key_names_the_login_user_from_the_message():
    got = reach.explain("spark-02", message("auth_denied"), address="172.31.213.12")
    assert got.kind == "auth_denied"
    assert "refused the SSH login of lanekit" in got.sentence
    assert "ssh-copy-id lanekit@172.31.213.12" in got.sentence


@pytest.mark.parametrize(("text", "kind"), [
    ("ssh: connect to host 10.0.0.8 port 22: Connection refused", "refused"),
    ("ssh: connect to host 10.0.0.8 port 22: No route to host", "no_route"),
    ("ssh: Could not resolve hostname spark-09: Name or service not known", "unresolved"),
    ("No ED25519 host key is known for 10.0.0.8 and you have requested strict checking.\r\n"
     "Host key verification failed.", "host_key_unknown"),
    ("Connection timed out during banner exchange", "timeout"),
    ("something new", "unreachable"),
    ("Timeout (12s) waiting for privilege escalation prompt: ", "sudo_hung"),
    ("Incorrect sudo password", "sudo_password_wrong"),
])
def test_other_connection_failures_are_told_apart(text, kind):
    assert reach.explain("spark-08", text, address="10.0.0.8").kind == kind


def test_a_failure_that_is_not_the_connection_keeps_its_words():
    got = reach.explain("spark-08", "Task failed: boom", unreachable=False)
    assert got.kind == "failed" and got.sentence.endswith("Task failed: boom.")
