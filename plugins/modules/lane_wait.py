#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
"""Documentation of the lane_wait action (the code is plugins/action/lane_wait.py): the boot wait."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: lane_wait
short_description: Wait for a lane to boot with live progress, fail fast with the cause, keep the evidence
version_added: 0.1.0
description:
  - Controller-side action (this file only documents it). Run it on B(every) node of the lane
    in one task (not C(run_once)); each node's worker process polls its own rank containers
    with M(lanekit.serving.rank_status), and the head's worker (the coordinator) combines
    them, prints one status line per poll and decides.
  - 'The status line shows, for every rank, its phase read from its log: container started,
    rendezvous, loading k/N shards, post-load barrier, KV profiling, graph capture, warm-up, up;
    then the time left estimated from the weight-load rate and the plan''s expected warm-up,
    warnings (post-load barrier about to close, ETA beyond the budget) and the time without
    progress.'
  - 'Ready means: the API port accepts, C(/health) answers 200, C(/v1/models) lists the served
    model, one streamed chat completion returns a first token, SGLang worker health servers
    answer 200, and all of it holds for O(stability_s).'
  - 'Fails at the first poll that sees: a rank container that exited (or is missing), a
    known fatal line in any rank''s log, no progress for O(stall_s), or the boot budget spent.
    The failure names the rank(s), the matched failure signatures with their cause and fix,
    and writes a bundle under C(<plan.reports_dir>/<UTC timestamp>/) on the controller: every
    rank''s log tail, full log and C(docker inspect), each node''s C(/proc/meminfo), the plan,
    the verdict and the status history. Containers are left in place.'
  - With O(mode=explain) it matches O(text) (for example a docker start error) against the
    failure signatures and fails with the explanation. The per-rank table of a lane is
    M(lanekit.serving.lane_status).
options:
  plan:
    description:
      - The lane's plan, as published by the preflight role in C(lanekit_plan) (see
        docs/contracts.md). Its C(boot) mapping gives the budget, stall and poll times; its
        C(ranks) and C(hosts) name the containers and nodes, C(rendezvous_port) the head's
        rendezvous port, C(barrier_timeout_s) the post-load barrier and C(reports_dir) where
        failure bundles go.
      - Required for O(mode=wait).
    type: dict
  mode:
    description: V(wait) for the lane's boot, V(explain) to explain O(text).
    type: str
    choices: [wait, explain]
    default: wait
  budget_s:
    description: Boot budget in seconds, counted from the first rank's start. Default C(plan.boot.budget_s).
    type: float
  stall_s:
    description: Fail when no rank made progress for this long. Default C(plan.boot.stall_s).
    type: float
  poll_s:
    description: Seconds between polls. Default C(plan.boot.poll_s).
    type: float
  stability_s:
    description: How long every readiness probe must keep passing. Default C(plan.boot.stability_s) or 30.
    type: float
  chat_probe:
    description: Require one streamed chat completion to return a first token.
    type: bool
    default: true
  exit_watch:
    description:
      - Between polls, every node watches its ranks' C(docker events) (inside the per-poll
        M(lanekit.serving.rank_status) call, which then returns at the next poll or right after an
        exit), and the coordinator judges the lane as soon as a node reports an exit, so a rank that
        exits is named within about a second of its exit at any O(poll_s). V(false) polls only.
    type: bool
    default: true
  chat_timeout_s:
    description: Seconds allowed for the first token of the chat probe.
    type: float
    default: 120
  probe_from:
    description:
      - Where the API probes run. V(head) runs them on the head node (it always reaches its own
        fabric address), which sends the key only to a port the API's rank container holds;
        V(controller) runs them from the controller, where that check cannot run and the key crosses
        the network in clear (for a trusted network only, docs/security.md). C(/health) never gets the key.
    type: str
    choices: [head, controller]
    default: head
  probe_address:
    description: Address to probe instead of C(plan.api.address).
    type: str
  boot_since:
    description:
      - When this run began starting the lane's ranks (a UTC time, C(2026-12-02T11:58:40.123456Z), or epoch
        seconds); the deploy passes when its ranks phase began. A lane healthy at the first poll is
        reported as already serving only when no rank started after it; a rank this run started makes it
        a boot, whose RV(boot_s) is returned, however fast the ranks came up. Unset, a lane healthy at the
        first poll whose every rank has run longer than O(stability_s) is already serving.
    type: str
  tail_lines:
    description: Lines of each rank's log kept as its tail (status, bundle).
    type: int
    default: 400
  reports_dir:
    description:
      - The lane's reports directory on the controller; a failure bundle goes to a new
        C(<UTC timestamp>) folder in it. Default C(plan.reports_dir).
    type: path
  sync_timeout_s:
    description: How long the coordinator waits each poll for the other nodes' reports. Default 0.8 x poll, 3 to 30 s.
    type: float
  bundle_timeout_s:
    description: How long the coordinator waits for the nodes to copy their full logs into the bundle.
    type: float
    default: 300
  text:
    description: Text to explain (O(mode=explain)).
    type: str
  engine:
    description: Engine (V(vllm), V(sglang)) whose signatures O(mode=explain) also considers.
    type: str
  context:
    description: Sentence put before the explanation (O(mode=explain)).
    type: str
    default: ""
  fail:
    description: With O(mode=explain), fail the task (the explanation is the message).
    type: bool
    default: true
notes:
  - Needs one fork per lane node (C(forks) >= nodes) and every lane node in the play batch.
  - In check mode nothing was started, so the wait is skipped.
seealso:
  - module: lanekit.serving.rank_status
  - module: lanekit.serving.lane_status
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
attributes:
  check_mode:
    support: none
    details: Skipped in check mode.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: It only reads; a failure writes a new bundle.
"""

EXAMPLES = r"""
---
- name: Wait for the lane
  lanekit.serving.lane_wait:
    plan: "{{ lanekit_plan }}"
  any_errors_fatal: true

- name: Explain why a rank container did not start
  lanekit.serving.lane_wait:
    mode: explain
    engine: vllm
    context: Starting rank 3 on spark-04 failed
    text: "{{ start_error }}"
"""

RETURN = r"""
status:
  description: V(ready) or V(failed) (coordinator only).
  returned: wait mode
  type: str
boot_s:
  description: Seconds from the first rank's start to ready; null when the lane was already serving.
  returned: when ready
  type: float
api:
  description: The last API probe (url, health_status, models, ttft_s).
  returned: when ready
  type: dict
bundle:
  description: Path of the failure bundle on the controller.
  returned: when failed
  type: str
culprits:
  description: Node ranks blamed for the failure.
  returned: when failed
  type: list
  elements: int
signatures:
  description: Matched failure signatures (id, title, ranks, evidence, cause, fix), root causes first.
  returned: when failed or in explain mode
  type: list
  elements: dict
exit_seen:
  description:
    - The rank exit the nodes saw at the event that came first (rank, host, container, C(at) on the
      node's clock, exit_code, oom), C(named_at) (when the status line named it) and C(named_after_s).
    - Null when no node saw an exit (O(exit_watch) off, or the lane failed otherwise).
  returned: when failed
  type: dict
status_line:
  description: The last status line.
  returned: when failed
  type: str
ended_at:
  description: When the coordinator read the last poll (controller clock, epoch seconds); the ledger places each rank's boot by it.
  returned: coordinator
  type: float
history:
  description: The last status lines.
  returned: wait mode
  type: list
  elements: str
ranks:
  description: Every rank's last status.
  returned: coordinator
  type: list
  elements: dict
"""
