# Copyright: lanekit developers
# Apache-2.0
"""The image_registry action: the decision for the builder's registry container, or one sentence."""
from __future__ import annotations

import yaml

from ansible_collections.lanekit.serving.plugins.action import image_registry as ir
from ansible_collections.lanekit.serving.plugins.modules import image_registry as doc
from tests.unit.helpers.lane_fakes import action_module

BASE = {"name": "lanekit-registry", "host": "spark-01", "bind": "10.0.0.11", "port": 5000}
RUNNING = {"Config": {"Env": ["PATH=/bin"]}, "Mounts": [
    {"Type": "volume", "Name": "lanekit-registry", "Destination": "/var/lib/registry", "RW": True}],
    "HostConfig": {"PortBindings": {"5000/tcp": [{"HostIp": "10.0.0.11", "HostPort": "5000"}]}}}


def test_argument_spec_matches_the_documentation():
    documented = yaml.safe_load(doc.DOCUMENTATION)["options"]
    assert set(documented) == set(ir.ARGUMENT_SPEC)
    assert set(yaml.safe_load(doc.RETURN)) == {"action", "recreate", "reasons", "env", "volumes", "published_ports"}


def run(**args):
    return action_module(ir.ActionModule, {**BASE, **args}).run(task_vars={})


def test_no_container_yet_is_created_and_nothing_is_recreated():
    out = run(container=None)
    assert not out.get("failed") and out["action"] == "create" and out["recreate"] is False
    assert out["changed"] is False


def test_added_htpasswd_asks_for_a_recreation_and_says_why():
    out = run(container=RUNNING, htpasswd="/etc/lanekit/registry.htpasswd")
    assert out["recreate"] is True
    assert out["env"]["REGISTRY_AUTH"] == "htpasswd"
    assert out["msg"] == ("the registry container lanekit-registry on spark-01 is recreated with the inventory's "
                          "settings because htpasswd logins are added (its images stay)")


def test_a_dropped_htpasswd_fails_with_the_sentence():
    running = {**RUNNING, "Config": {"Env": ["REGISTRY_AUTH=htpasswd"]}}
    out = run(container=running)
    assert out["failed"] is True
    assert out["msg"].startswith("The registry container lanekit-registry on spark-01 asks for logins but")
