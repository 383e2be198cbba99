#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: lane_status
short_description: Print a lane's verdict (serving, degraded, down, not deployed, booting) and per-rank table
version_added: 0.2.0
description:
  - Controller-side action (this file only documents it). Run it on B(every) node of the lane
    in one task (not C(run_once)); each node's worker process reads its own rank containers
    once with M(lanekit.serving.rank_status), and the head's worker (the coordinator) prints
    one table for the whole lane.
  - 'For every rank: its container state (with the exit code of a stopped one), its phase read
    from its log (rendezvous, loading k/N shards, post-load barrier, KV profiling, graph
    capture, warm-up, up), its uptime and restarts, whether the container carries the plan''s
    spec hash, and its image.'
  - Before the table, a verdict line (V(serving), V(degraded), V(down), V(not deployed),
    V(booting) with the boot's progress) with the API probe's result and, when the lane is not
    serving, the first cause in time order (the rank that exited first, its exit code and known
    failure signature, or the node that did not answer) and the command that fixes it. The
    coordinator's result carries it as RV(verdict); the status playbook fails with it when the
    lane is not serving.
  - A rank that is not running shows no phase (its log's last phase is history); a node that
    cannot be reached makes its ranks V(unreachable) instead of ending the task.
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
      - Where the API health probe runs. V(head) runs it on the head node, which sends the key only
        to a port the API's rank container holds; V(controller) from the controller, where that
        check cannot run and the key crosses the network in clear (for a trusted network only).
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
  status_format:
    description:
      - V(text) prints the verdict and the table; V(json) prints (or writes to O(status_file)) one
        JSON document with the verdict, one record per rank and the table.
    type: str
    choices: [text, json]
    default: text
  status_file:
    description: With O(status_format=json), the controller file to write the document to (else it is printed).
    type: str
  inventory:
    description: Inventory to name in the fix command; defaults to the play's first inventory source.
    type: str
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
verdict:
  description: The lane's verdict.
  returned: coordinator
  type: dict
  contains:
    verdict: {description: "V(serving), V(degraded), V(down), V(not deployed) or V(booting).", type: str}
    serving: {description: Whether the verdict is V(serving)., type: bool}
    line: {description: The verdict line as printed., type: str}
    api: {description: The API probe's result in words., type: str}
    progress: {description: The boot's progress (booting only)., type: str}
    cause: {description: "The first cause in time order, when not serving.", type: str}
    fix: {description: The command or step that fixes it., type: str}
    culprits: {description: Node ranks to blame., type: list, elements: int}
    unreachable: {description: Nodes that did not answer., type: list, elements: str}
    signatures: {description: Known failure signatures of the first cause., type: list, elements: dict}
"""
