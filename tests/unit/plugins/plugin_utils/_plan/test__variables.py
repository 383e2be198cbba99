"""The inventory variables the planner reads, each with its scope (issue 37, item 1)."""
from __future__ import annotations

import os
import re

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _variables
from tests.unit.helpers.plans import REPO, VLLM, plan

# The planner: the plan package, and the hardware helpers it hands the inventory to.
PLANNER = [os.path.join(REPO, "plugins", "plugin_utils", "_plan"),
           os.path.join(REPO, "plugins", "module_utils", "_lane", "_hardware.py"),
           os.path.join(REPO, "plugins", "module_utils", "_lane", "_hardware_kinds.py")]


def _planner_sources():
    for path in PLANNER:
        if os.path.isfile(path):
            yield path
            continue
        for name in sorted(os.listdir(path)):
            if name.endswith(".py") and name != "_variables.py":
                yield os.path.join(path, name)


def test_every_lanekit_variable_the_planner_reads_is_declared_with_a_scope():
    read = set()
    for path in _planner_sources():
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        read |= set(re.findall(r"""["'](lanekit_[a-z_]+)["']""", text))
        # lanekit_rank_<key> built from the profile's rank-container keys
        if 'f"lanekit_rank_{key}"' in text:
            read |= {f"lanekit_rank_{key}" for key in _variables.RANK_ACCESS_KEYS}
    undeclared = sorted(name for name in read if name not in _variables.BY_NAME)
    assert undeclared == [], f"the planner reads variables the table does not declare: {undeclared}"


@pytest.mark.parametrize("name, value", [
    ("lanekit_weights_root", "/mnt/other"), ("lanekit_rank_shm_size", "64g"),
    ("lanekit_image_digests", {"mistral-large4-vllm": {"arm64": "sha256:" + "e" * 64}}),
    ("lanekit_node_arch", "amd64"), ("lanekit_rank_visible_devices", "0"),
])
def test_a_lane_wide_variable_in_one_hosts_host_vars_is_refused_naming_both_hosts(name, value):
    """Before: set on spark-03 it was ignored (the plan read the head's); on spark-01 it applied to all."""
    for host in ("spark-03", "spark-01"):
        hosts_vars = {host: {name: value}}
        with pytest.raises(LanekitError) as err:
            plan(VLLM, per_host_vars=hosts_vars)
        text = str(err.value)
        assert text.startswith(f"{name} is lane-wide") and host in text
        assert "group_vars" in text


def test_a_lane_wide_variable_every_host_agrees_on_plans_as_one():
    same = {f"spark-0{i}": {"lanekit_rank_shm_size": "64g"} for i in range(1, 9)}
    result, _findings = plan(VLLM, per_host_vars=same)
    assert all("--shm-size=64g" in " ".join(rank["docker_argv"]) or "64g" in rank["docker_argv"]
               for rank in result["ranks"])


def test_a_secret_that_differs_between_hosts_is_refused_without_showing_it():
    with pytest.raises(LanekitError) as err:
        plan(VLLM, per_host_vars={"spark-02": {"lanekit_api_key": "sk-only-on-two-" + "x" * 24}})
    assert "sk-only-on-two" not in str(err.value) and "a value (hidden)" in str(err.value)


def test_a_lane_for_other_hardware_is_refused_on_the_lane_file_path_too():
    """Issue 37 item 3: a GB300 lane (4 GPUs per node) planned rc 0 against DGX Spark hosts; only the
    recipe path compared the two."""
    gb300 = {"hardware": "gb300", "topology": {"gpus_per_node": 4, "nodes": 2, "tensor_parallel": 8}}
    for extra in ({}, {"lanekit_gpus_per_node": 1}):
        with pytest.raises(LanekitError) as err:
            plan(VLLM, overrides=gb300, extra_vars=extra)
        text = str(err.value)
        assert "is for hardware gb300" in text and "dgx_spark_gb10" in text and "lanekit_hardware" in text


def test_a_lane_that_needs_more_gpus_per_node_than_the_nodes_have_is_refused():
    with pytest.raises(LanekitError) as err:
        plan(VLLM, overrides={"topology": {"gpus_per_node": 2, "tensor_parallel": 16}},
             extra_vars={"lanekit_gpus_per_node": "1"})
    assert "'topology.gpus_per_node' is 2" in str(err.value) and "1 GPU each" in str(err.value)
