#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: lane_watch
short_description: Probe a serving lane with streamed completions, decide whether to restart it, keep the ledger
version_added: 0.3.0
description:
  - Controller-side action (this file only documents it), the steps of C(lanekit.serving.watch_lane). Run it
    once (C(run_once)); V(probe) and V(verify) delegated to the lane's head (C(delegate_to) the plan's
    C(api.host)), V(decide) and V(record) to C(localhost).
  - The probes run on the head, through M(lanekit.serving.rank_status). The lane's key reaches the head inside
    the Ansible connection and goes from there only to the head's own API address, on a port the API's rank
    container is checked to hold, never in clear across the network from the controller. A task of V(probe)
    or V(verify) that is not delegated to the head fails with a sentence saying so.
  - V(probe) runs up to O(probes) real streamed chat completions, O(gap_s) apart, each within O(deadline_s); one
    that ends in time with a first token under the floor and a decode rate over it makes the lane healthy. The
    floors come from the lane's ledger (its last ready probe's first token times 10, at least 5 s; a tenth of its
    last valid bench's single-stream decode rate) unless O(ttft_max_s) and O(tps_min) are given.
  - V(decide) takes the probe (O(probe)) and the nodes' M(lanekit.serving.rank_status) results (O(nodes)). A lane
    whose ranks show a failure a restart cannot fix (the KV budget, a missing kernel, a bad flag) is reported;
    else a restart is allowed while the budget lasts (O(max_restarts) in O(window_s), each after O(backoff_s)
    doubled per restart in the window), and a spent budget is reported once. The decision is a record of the
    ledger (M(lanekit.serving.lane_ledger)).
  - V(verify) probes again after the playbook restarted the lane and records V(healed) or V(restart-failed);
    V(record) records a restart whose boot failed.
options:
  mode:
    description: The step.
    type: str
    required: true
    choices: [probe, decide, verify, record]
  plan:
    description: The lane's plan (C(lanekit_plan)) with its C(api) and C(reports_dir).
    type: dict
    required: true
  probes:
    description: Streamed completions to try before the lane counts as wedged.
    type: int
    default: 2
  gap_s:
    description: Seconds between two probes.
    type: float
    default: 10.0
  deadline_s:
    description: Seconds one streamed completion may take, from the request to its last token.
    type: float
    default: 60.0
  max_tokens:
    description: Tokens each probe asks for.
    type: int
    default: 16
  api_address:
    description: The address to probe instead of the plan's C(api.address), from the head (an address of the head itself).
    type: str
  api_key:
    description: The lane's API key (C(lanekit_api_key)); passed to the head's M(lanekit.serving.rank_status) as its no_log C(api_key).
    type: str
  ttft_max_s:
    description: The longest first token a healthy probe may take (default from the ledger).
    type: float
  tps_min:
    description: The lowest decode rate a healthy probe may have (default from the ledger's last valid bench).
    type: float
  probe:
    description: For V(decide), the V(probe) step's C(probe) with its C(healthy) and C(reason).
    type: dict
    default: {}
  nodes:
    description: For V(decide), every node's M(lanekit.serving.rank_status) result; for V(record), the ready phase's results.
    type: list
    elements: raw
    default: []
  node_results:
    description:
      - "For V(decide), each lane host's M(lanekit.serving.rank_status) result by host name (a host that did not answer
        gives a result with C(unreachable) true)."
      - The watch restarts only a lane a deploy put there, on nodes it reaches; a rank container missing, ranks on another
        plan, a host that did not answer or an API answering HTTP 404 is V(not-restartable).
    type: dict
    default: {}
  max_restarts:
    description: Restarts allowed in O(window_s).
    type: int
    default: 3
  window_s:
    description: The budget's window in seconds (6 hours).
    type: float
    default: 21600.0
  backoff_s:
    description: Seconds after a restart before the next; doubled for each restart already in the window.
    type: float
    default: 300.0
  restarted_at:
    description: For V(verify), when the restart began (the V(decide) step's C(restarted_at)).
    type: float
  failed:
    description: For V(record), the failed task's result.
    type: dict
    default: {}
seealso:
  - module: lanekit.serving.lane_ledger
  - module: lanekit.serving.rank_status
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
attributes:
  check_mode:
    support: full
    details: It neither probes nor records in check mode.
  diff_mode:
    support: none
  idempotent:
    support: none
    details: Every decision worth keeping is a new ledger record.
"""

EXAMPLES = r"""
---
- name: Probe the lane twice, 10 s apart
  lanekit.serving.lane_watch:
    mode: probe
    plan: "{{ lanekit_plan }}"
    api_key: "{{ lanekit_api_key | default(omit, true) }}"
  run_once: true
  delegate_to: "{{ lanekit_plan.api.host }}"
  register: watch_probe
"""

RETURN = r"""
healthy:
  description: Whether a probe passed (V(probe), V(verify)).
  returned: probe, verify
  type: bool
probes:
  description: Every probe made (ok, ttft_s, tokens, tps, total_s, error, healthy, reason).
  returned: probe, verify
  type: list
  elements: dict
outcome:
  description: V(healthy), V(restarted), V(not-restartable), V(backing-off), V(gave-up), V(healed) or V(restart-failed).
  returned: decide, verify, record
  type: str
restart:
  description: Whether the playbook restarts the lane now.
  returned: decide
  type: bool
record:
  description: The ledger record appended, if any.
  returned: decide, verify, record
  type: dict
"""
