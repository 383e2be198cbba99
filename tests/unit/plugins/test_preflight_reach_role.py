"""roles/preflight/tasks/reach.yml: a host whose sudo did not answer within the timeout is asked once
more before it is refused, and only such a host; node_reach reads each host's last answer."""
from __future__ import annotations

import os

import jinja2
import pytest
import yaml

from ansible_collections.lanekit.serving.plugins.plugin_utils import _reach as reach

REACH = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, os.pardir, "roles", "preflight", "tasks",
                     "reach.yml")


def _tasks() -> dict[str, dict]:
    with open(REACH, encoding="utf-8") as handle:
        return {task.get("register") or task["name"]: task for task in yaml.safe_load(handle)}


def _true(expression: str, **context) -> bool:
    return jinja2.Environment().from_string("{{ (" + expression.strip() + ") }}").render(**context) == "True"


@pytest.mark.parametrize("msg, again", [
    # ansible's ssh connection, when sudo prints no prompt within the timeout
    ("Timeout (12s) waiting for privilege escalation prompt: ", True),
    ("privilege escalation timed out", True),
    ("Failed to connect to the host via ssh: ssh: connect to host 10.0.0.8 port 22: Connection timed out", False),
    ("Missing sudo password", False),
    ("Host key verification failed.", False),
    ("", False),
])
def test_only_a_sudo_that_timed_out_is_asked_again(msg, again):
    task = _tasks()["preflight_reach_again"]
    assert "ansible.builtin.ping" in task and task["ignore_unreachable"] and task["ignore_errors"]
    assert _true(task["when"], preflight_reach_first={"msg": msg, "unreachable": True}) is again


@pytest.mark.parametrize("msg", [
    "Timeout (12s) waiting for privilege escalation prompt: ", "privilege escalation timed out",
    "Missing sudo password", "Incorrect sudo password", "Host key verification failed.",
    "Failed to connect to the host via ssh: ssh: connect to host 10.0.0.8 port 22: Connection timed out",
    "Failed to connect to the host via ssh: ssh: connect to host 10.0.0.8 port 22: Connection refused",
])
def test_the_role_asks_again_exactly_the_hosts_the_classifier_calls_sudo_hung(msg):
    # The role's condition (Jinja, in the play) and the classifier (_reach.py, which words the refusal)
    # read the same words: asked again if and only if the refusal would say sudo did not answer in time.
    asked = _true(_tasks()["preflight_reach_again"]["when"], preflight_reach_first={"msg": msg})
    assert asked is (reach.explain_for("spark-01", msg, {}).kind == "sudo_hung")


def test_a_host_that_answered_is_not_asked_again():
    assert not _true(_tasks()["preflight_reach_again"]["when"], preflight_reach_first={"ping": "pong"})


def test_node_reach_reads_each_hosts_last_answer():
    tasks = _tasks()
    keep = next(t for t in tasks.values() if "ansible.builtin.set_fact" in t)["ansible.builtin.set_fact"]["preflight_reach"]
    first, again = {"msg": "Timeout (12s) waiting for privilege escalation prompt", "unreachable": True}, {"ping": "pong"}
    env = jinja2.Environment()
    render = env.from_string(keep.strip().replace("{{", "{{ (").replace("}}", ") | tojson }}"))
    assert render.render(preflight_reach_first=first, preflight_reach_again=again) == '{"ping": "pong"}'
    assert '"unreachable": true' in render.render(preflight_reach_first=first, preflight_reach_again={"skipped": True})
    refuse = next(t for t in tasks.values() if "lanekit.serving.node_reach" in t)
    assert "'preflight_reach')" in refuse["lanekit.serving.node_reach"]["results"]
