#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
"""Documentation of the fabric_gate action (the code is plugins/action/fabric_gate.py): the fabric gate's controller steps."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: fabric_gate
short_description: Prepare the fabric probe of a lane's nodes, and judge what it measured
version_added: 0.1.0
description:
  - Controller-side action (this file only documents it); the role C(lanekit.serving.fabric) runs it.
  - O(step=prepare) chooses the floor (the hardware profile's, or O(floor_gbps)) and the transport the lane means,
    builds one probe container per node from the plan (the node's first rank's image, env, devices and limits; the
    program is C(python3 -c <probe> <JSON>)), and returns C(run=false) when the gate is off or the stored
    C(fabric.json) has the same key (nodes, image pin, fabric env) and its figures still pass.
  - O(step=judge) reads each node's container result (O(outputs)), computes nccl-tests' busbw, checks the transport
    NCCL used, runs the pair search when the total is low, writes C(fabric.json) and fails with the verdict (the
    figures, the slowest pair and the fix) when O(gate=strict) and the fabric does not pass.
options:
  step:
    description: Which step.
    type: str
    required: true
    choices: [prepare, judge]
  plan:
    description: The lane's plan (the fact C(lanekit_plan)).
    type: dict
    required: true
  gate:
    description: V(strict) stops on anything but a pass, V(warn) reports only, V(off) does not measure.
    type: str
    default: strict
    choices: [strict, warn, "off"]
  floor_gbps:
    description: The floor (nccl-tests busbw, GB/s) instead of the hardware profile's (C(lanekit_fabric_floor_gbps)).
    type: raw
  transport:
    description:
      - Whether NCCL over TCP sockets is refused. V(auto) reads the lane (NCCL_IB_HCA, /dev/infiniband,
        NCCL_IB_DISABLE=0 mean RDMA); V(rdma) refuses sockets; V(socket) and V(any) accept them.
    type: str
    default: auto
    choices: [auto, rdma, socket, any]
  sizes:
    description: Sizes in bytes (nccl-tests' size column); empty for the backend's defaults.
    type: list
    elements: int
    default: []
  iters:
    description: Timed operations per collective and size (after two warm-up ones).
    type: int
    default: 5
  timeout_s:
    description: Seconds the probe waits for its peers and its collectives before it reports a failure.
    type: int
    default: 300
  port:
    description: The port the probe's ranks meet at on the head's fabric address; 0 for the lane's rendezvous port + 1.
    type: int
    default: 0
  remeasure:
    description: Measure even when the stored result still holds.
    type: bool
    default: false
  report_file:
    description: Where the result is written; default C(<plan reports_dir>/fabric.json).
    type: path
  prepared:
    description: The result of O(step=prepare) (O(step=judge) only).
    type: dict
  outputs:
    description: Each node's probe container task result, by inventory host (O(step=judge) only).
    type: dict
    default: {}
  play_hosts:
    description:
      - The hosts of this run (C(ansible_play_hosts_all)); a run limited to some of the lane's nodes measures
        nothing and says so. Empty for every node of the lane.
    type: list
    elements: str
    default: []
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
attributes:
  check_mode:
    support: none
  diff_mode:
    support: none
  idempotent:
    support: full
    details: O(step=judge) rewrites C(fabric.json) with the latest measurement.
"""

EXAMPLES = r"""
---
- name: Prepare the fabric probe
  lanekit.serving.fabric_gate:
    step: prepare
    plan: "{{ lanekit_plan }}"
    gate: strict
  run_once: true
  register: fabric_prepared
"""

RETURN = r"""
run:
  description: Whether the nodes must run the probe (O(step=prepare)).
  returned: step prepare
  type: bool
spec:
  description: The probe's world and each node's container options, by host.
  returned: step prepare, when measuring
  type: dict
verdict:
  description: Status (pass, below_floor, wrong_transport, failed, cannot_run), message, fix, figures, pairs, transport.
  returned: step judge, or step prepare when the stored result holds
  type: dict
report_file:
  description: The fabric.json written or read.
  returned: when measuring
  type: str
lines:
  description: The verdict as the play prints it.
  returned: step judge
  type: list
  elements: str
"""
