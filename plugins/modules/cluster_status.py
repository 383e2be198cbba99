#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: cluster_status
short_description: Print which lanes run on which nodes and what else holds the GPUs
version_added: 0.2.0
description:
  - Controller-side action (this file only documents it); no host is contacted. Run it once
    (C(run_once)) after M(lanekit.serving.node_workloads) registered each node's containers and
    GPU processes.
  - Every lanekit lane found on the nodes by its containers' labels (C(io.lanekit.lane),
    C(io.lanekit.rank), C(io.lanekit.plan-hash)), its state and the nodes it occupies; then one
    table, node by node, of the lanes' ranks, the other containers (those asking for GPUs, and
    any other running one) and the GPU processes outside containers; a node that did not answer
    is named unreachable.
options:
  found:
    description: Per inventory host, its registered M(lanekit.serving.node_workloads) result.
    type: dict
    default: {}
seealso:
  - module: lanekit.serving.node_workloads
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
attributes:
  check_mode:
    support: full
    details: It only reads.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: It only reads.
"""

EXAMPLES = r"""
---
- name: What runs on each node
  lanekit.serving.node_workloads:
  register: workloads

- name: One table for the cluster
  lanekit.serving.cluster_status:
    found: >-
      {{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars)
         | map(attribute='workloads', default={}))) }}
  run_once: true
"""

RETURN = r"""
table:
  description: The printed lines.
  returned: always
  type: list
  elements: str
lanes:
  description: Per lane name, its ranks (host, state, container), hosts, plan hashes, state and summary.
  returned: always
  type: dict
workloads:
  description: Every workload (host, kind, name, state, lane, rank, plan_hash, image, detail).
  returned: always
  type: list
  elements: dict
unreachable:
  description: Hosts that gave no answer, with why.
  returned: always
  type: dict
"""
