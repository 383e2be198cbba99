"""Shared helpers: plan a lane against the spark8 example inventory, as the action plugin does."""
from __future__ import annotations

import copy
import os

import yaml

from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._schema import CLI_SOURCE, inventory_layers
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._render import plan_lane

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
LANES = os.path.join(REPO, "lanes")
IMAGES = os.path.join(REPO, "images")
VLLM = "mistral-large4-nvfp4-8x-vllm"
SGLANG = "mistral-large4-nvfp4-8x-sglang"
FULL_DIGESTS = {
    "mistral-large4-vllm": {"arm64": "sha256:b046d936" + "0" * 56},
    "mistral-large4-sglang": {"arm64": "sha256:2f0cd825" + "1" * 56},
}


def spark8_hosts(extra_vars=None, overrides=None, host_overrides=None, group_overrides=None, per_host_vars=None):
    """The spark8 hosts with their layers as the action builds them: ``group_overrides`` for every host
    (lane_group_overrides), ``host_overrides`` {host: layer} (lane_host_overrides), ``overrides`` (-e);
    ``per_host_vars`` {host: {variable: value}} as one host's host_vars file would set them."""
    inv = os.path.join(REPO, "inventories", "spark8")
    with open(os.path.join(inv, "hosts.yml"), encoding="utf-8") as handle:
        hosts = yaml.safe_load(handle)["all"]["children"]["lane_nodes"]["hosts"]
    group_vars = {}
    for name in ("all/cluster.yml", "lane_nodes.yml"):
        with open(os.path.join(inv, "group_vars", name), encoding="utf-8") as handle:
            group_vars.update(yaml.safe_load(handle) or {})
    group_vars["lanekit_image_digests"] = copy.deepcopy(FULL_DIGESTS)
    group_vars.update(extra_vars or {})
    result = []
    for name, host_vars in hosts.items():
        merged = dict(group_vars, **host_vars, **(per_host_vars or {}).get(name, {}))
        layers = [(source, layer) for source, layer in
                  inventory_layers(name, group_overrides, (host_overrides or {}).get(name)) if layer]
        if overrides is not None:
            layers.append((CLI_SOURCE, overrides))
        result.append({"name": name, "vars": merged, "layers": layers})
    return result


def plan(lane=VLLM, overrides=None, purpose="deploy", lint_skip=None, lanes_dir=LANES, images_dir=IMAGES,
         reports_root=None, **kwargs):
    return plan_lane(lanes_dir, images_dir, lane, spark8_hosts(overrides=overrides, **kwargs), lint_skip, purpose,
                     reports_root)


# The real-engine lane: a tiny Llama on two CPU nodes. Its image spec is written with the simulated
# cluster's real-engine image; the tests plan against a placeholder spec (fixtures/images) instead.
CPU_LANE = "tiny-llama-cpu-2x-vllm"
CPU_IMAGES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "images")
CPU_IPS = ("172.31.213.21", "172.31.213.22")
CPU_API_KEY = "sk-lanekit-test-" + "0" * 32


def cpu2_hosts(binds=("0", "1"), extra_vars=None, overrides=None):
    """Two CPU nodes (cpu-01 head, cpu-02), as the simulated cluster's CPU pair: one 2-core machine whose
    nodes bind rank 0 to CPU 0 and rank 1 to CPU 1 (``binds``; None leaves a host's variable unset)."""
    group = {
        "lanekit_weights_root": "/mnt/nfs/models",
        "lanekit_node_arch": "amd64",
        "lanekit_api_key": CPU_API_KEY,
        "lanekit_rank_shm_size": "1g",
        "lanekit_image_digests": {"tiny-llama-cpu-vllm": {"amd64": "sha256:" + "c" * 64}},
    }
    group.update(extra_vars or {})
    hosts = []
    for index, ip in enumerate(CPU_IPS):
        host_vars = dict(group, fabric_ip=ip, fabric_ifname="eth0")
        if binds[index] is not None:
            host_vars["lanekit_cpu_threads_bind"] = binds[index]
        layers = [(CLI_SOURCE, overrides)] if overrides is not None else []
        hosts.append({"name": f"cpu-0{index + 1}", "vars": host_vars, "layers": layers})
    return hosts


def plan_cpu(overrides=None, purpose="deploy", lint_skip=None, hosts=None, **kwargs):
    return plan_lane(LANES, CPU_IMAGES, CPU_LANE, hosts or cpu2_hosts(overrides=overrides, **kwargs), lint_skip,
                     purpose)
