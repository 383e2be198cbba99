#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: lane_plan
short_description: Render the per-rank plan of a lane on the controller, after validation and lint
version_added: 0.1.0
description:
  - Loads O(lane) from C(lanes/<lane>.yml), deep-merges the C(lane_overrides) layers (inventory
    group_vars/host_vars, then C(-e)), validates the result against the lane schema, runs the lint
    rules of the bring-up report and the KV-budget preflight, and renders one container spec per rank.
  - Runs on the controller only (action plugin); no host is contacted.
  - A bad lane file or a refused lane fails with sentences naming the file, the key, what was found and
    the fix. Lint errors stop the plan; warnings are printed.
options:
  lane:
    description: Name of the lane, a file C(lanes/<lane>.yml).
    type: str
    required: true
  lanes_dir:
    description: Directory holding the lane files. Defaults to the collection's C(lanes/).
    type: path
  images_dir:
    description: Directory holding the image specs. Defaults to the collection's C(images/).
    type: path
  purpose:
    description:
      - V(plan) renders what a deploy would run; an incomplete image pin is a warning.
      - V(deploy) refuses an incomplete image pin (a truncated digest or a tag).
    type: str
    choices: [plan, deploy]
    default: plan
  lint_skip:
    description: Lint rule ids to skip on purpose; the plan prints each skipped rule.
    type: list
    elements: str
    default: []
  nodes_group:
    description: Inventory group of the lane's GPU nodes, in rank order.
    type: str
    default: lane_nodes
  plan_file:
    description: Write the plan as JSON to this controller path (atomically; only when it changed).
    type: path
attributes:
  check_mode:
    support: full
    details: The plan is rendered in check mode too; O(plan_file) is not written.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: The same lane, layers and inventory render the same plan; O(plan_file) is rewritten only when its content differs.
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
"""

EXAMPLES = r"""
---
- name: Plan the vLLM lane
  lanekit.serving.lane_plan:
    lane: mistral-large4-nvfp4-8x-vllm
    plan_file: /tmp/plan.json
  run_once: true
  register: lane_plan_result

- name: Plan with a lint rule skipped on purpose
  lanekit.serving.lane_plan:
    lane: mistral-large4-nvfp4-8x-sglang
    lint_skip: [cuda-graph-sizes]
  run_once: true
"""

RETURN = r"""
plan:
  description: The per-rank plan (see docs/contracts.md for every key).
  returned: success
  type: dict
  sample: {"lane": "mistral-large4-nvfp4-8x-vllm", "engine": "vllm", "ranks": [{"host": "spark-01", "node_rank": 0}]}
table:
  description: A readable per-rank table.
  returned: success
  type: str
lint:
  description: Lint findings, C(errors), C(warnings) and C(skipped) rule ids.
  returned: always
  type: dict
plan_file:
  description: Where the plan JSON was written, if asked.
  returned: success
  type: str
"""
