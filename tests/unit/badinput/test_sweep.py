"""A sweep: every setting of both report lanes, and every inventory variable the plan reads, set to
values of the wrong kind by an override layer or a host variable. Each must plan or be refused with
a LanekitError sentence, never another exception (that would reach the user as raw Python text)."""
from __future__ import annotations

import copy
import datetime
import os

import pytest
import yaml

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._render import plan_lane
from tests.unit.helpers.plans import IMAGES, LANES, SGLANG, VLLM, spark8_hosts

HOSTILE = [None, True, float("nan"), "a b\nc", ["--port", "1"], {"k": None}, datetime.date(2026, 10, 30)]
HOST_VARIABLES = ["fabric_ip", "fabric_ifname", "ib_hca", "node_rank", "lanekit_weights_root", "lanekit_rank_gpus",
                  "lanekit_rank_devices", "lanekit_rank_cap_add", "lanekit_rank_ulimits", "lanekit_rank_shm_size",
                  "lanekit_head_host", "lanekit_node_arch", "lanekit_image_digests"]


def key_paths(data: dict, prefix: tuple = ()):
    for key, value in data.items():
        yield prefix + (key,)
        if isinstance(value, dict):
            yield from key_paths(value, prefix + (key,))


def layer(path: tuple, value) -> dict:
    top: dict = {}
    node = top
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value
    return top


def plan_or_sentence(lane: str, hosts: list) -> None:
    try:
        plan_lane(LANES, IMAGES, lane, hosts, None, "deploy")
    except LanekitError as err:
        assert "\n" not in str(err) and "_Ansible" not in str(err), str(err)


@pytest.mark.parametrize("lane", [VLLM, SGLANG])
def test_every_lane_setting_of_the_wrong_kind_is_planned_or_refused_with_a_sentence(lane):
    with open(os.path.join(LANES, f"{lane}.yml"), encoding="utf-8") as handle:
        paths = list(key_paths(yaml.safe_load(handle)))
    for path in paths:
        for value in HOSTILE:
            plan_or_sentence(lane, spark8_hosts(overrides=layer(path, copy.deepcopy(value))))
            if path[0] == "serve":  # the settings that may differ per host
                plan_or_sentence(lane, spark8_hosts(host_overrides={"spark-03": layer(path, copy.deepcopy(value))}))


@pytest.mark.parametrize("variable", HOST_VARIABLES)
def test_every_inventory_variable_of_the_wrong_kind_is_planned_or_refused_with_a_sentence(variable):
    for value in HOSTILE:
        for hosts_with_it in ("all", "one"):
            hosts = spark8_hosts()
            for index, host in enumerate(hosts):
                if hosts_with_it == "all" or index == 2:
                    host["vars"][variable] = copy.deepcopy(value)
            plan_or_sentence(VLLM, hosts)
