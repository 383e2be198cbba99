#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: lane_status
short_description: Print the per-rank table of a lane (state, phase, uptime, restarts, plan match, image)
version_added: 0.1.0
description:
  - Controller-side action (this file only documents it). Run it on B(every) node of the lane
    in one task (not C(run_once)); each node's worker process reads its own rank containers
    once with M(lanekit.serving.rank_status), and the head's worker (the coordinator) prints
    one table for the whole lane.
  - 'For every rank: its container state (with the exit code of a stopped one), its phase read
    from its log (rendezvous, loading k/N shards, post-load barrier, KV profiling, graph
    capture, warm-up, up), its uptime and restarts, whether the container carries the plan''s
    spec hash, and its image.'
  - Sends no traffic to the model beyond the health probes (no chat completion).
options:
  plan:
    description:
      - The lane's plan, as published by the preflight role in C(lanekit_plan) (see
        docs/contracts.md). Its C(ranks) and C(hosts) name the containers and nodes.
      - Without a plan, O(lane) names the lane and its containers are found on every node of
        the play by their C(lanekit.lane) label.
    type: dict
  lane:
    description: Lane name, when there is no plan.
    type: str
  engine:
    description: Engine (V(vllm), V(sglang)) when there is no plan; guessed from the logs when unset.
    type: str
  probe_from:
    description:
      - Where the API health probe runs. V(head) runs it on the head node; V(controller) from
        the controller.
    type: str
    choices: [head, controller]
    default: head
  probe_address:
    description: Address to probe instead of C(plan.api.address).
    type: str
  tail_lines:
    description: Lines of each rank's log read to find its phase.
    type: int
    default: 2000
  sync_timeout_s:
    description: How long the coordinator waits for the other nodes' reports.
    type: float
    default: 60
notes:
  - Needs one fork per lane node (C(forks) >= nodes) and every lane node in the play batch.
seealso:
  - module: lanekit.serving.lane_wait
  - module: lanekit.serving.rank_status
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
- name: Per-rank table of the planned lane
  lanekit.serving.lane_status:
    plan: "{{ lanekit_plan }}"

- name: Per-rank table of a running lane, without a plan
  lanekit.serving.lane_status:
    lane: mistral-large4-nvfp4-8x-vllm
"""

RETURN = r"""
table:
  description: The per-rank table lines.
  returned: coordinator
  type: list
  elements: str
ranks:
  description: Every rank's status (this node's ranks on the other nodes).
  returned: always
  type: list
  elements: dict
"""
