#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
"""Documentation of the lane_plan action (the code is plugins/action/lane_plan.py): the per-rank plan."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: lane_plan
short_description: Render the per-rank plan of a lane on the controller, after validation and lint
version_added: 0.1.0
description:
  - Loads O(lane) from C(lanes/<lane>.yml), deep-merges the override layers (C(lane_group_overrides) from the
    inventory's group_vars, then one host's C(lane_host_overrides) from its host_vars, then
    C(lane_cli_overrides) from the command line, C(-e lane_cli_overrides='{...}')), validates the result
    against the lane schema, runs the lint rules of the bring-up report and the KV-budget preflight, and
    renders one container spec per rank.
  - Each layer has its own variable name because Ansible replaces a same-named variable instead of merging
    it. The old shared name C(lane_overrides) is refused wherever it is set, with a sentence naming the new
    names. C(lane_group_overrides) must be one value for all of the lane's hosts (a child group's or a
    host's own value would replace it). The inventory's layers given with C(-e) are refused (they would
    replace the inventory's instead of layering over it); use C(lane_cli_overrides) on the command line.
  - The plan publishes what later phases need (docs/contracts.md), among them C(reports_dir),
    C(<reports root>/<lane>), the root being C(lanekit_reports_dir), else C(reports/) beside the
    C(playbooks/) directory of a checkout, else (a playbook of an installed collection) C(reports/) in
    the current working directory.
  - Runs on the controller only (action plugin); no host is contacted.
  - A bad lane file or a refused lane fails with sentences naming the file (or the override layer, or the
    inventory host), the key, what was found and the fix. Lint errors stop the plan; warnings are printed.
  - Lane files, image specs and override text are read by one safe YAML loader, which refuses files that
    are not UTF-8, duplicate keys in one mapping, alias bombs and self-referencing aliases, nesting deeper
    than 64 levels and files over 1 MiB.
  - Beyond the schema, a lane is refused when it sets a flag the plan renders (in any spelling, with
    underscores, abbreviated, or as an item of another flag's value), a variable the plan sets on every
    rank (the engine's host address variable, C(NCCL_SOCKET_IFNAME), C(GLOO_SOCKET_IFNAME), C(NCCL_IB_HCA),
    C(UCX_NET_DEVICES), C(HF_HUB_OFFLINE)), a non-numeric value for a number the collection computes with
    (memory fraction, maximum model length, batch limits, engine timeouts), colliding or out-of-range ports,
    or a C(model.dir) that leaves the weights root, or a flag the engine record knows as another engine's
    only (C(--max-model-len) on an SGLang lane; the sentence names the lane engine's own spelling).
  - Every rank's effective lane (with its host's C(lane_host_overrides)) is validated and linted. A host
    layer may set only C(serve.args) and C(serve.env), and a flag or variable that differs between the ranks
    of one tensor-, pipeline- or data-parallel group is refused unless the engine record lets one rank have
    it on its own (logging such as C(NCCL_DEBUG), the engine's timeouts carried in the environment); the
    refusal names the host layer that set it. A prefill/decode lane takes no host layer.
  - The C(docker-args-unsupported) rule (C(serve.docker_args) is not applied by the ranks role) cannot be
    skipped, so plan and deploy agree.
options:
  lane:
    description: Name of the lane, a file C(lanes/<lane>.yml).
    type: str
    required: true
  lanes_dir:
    description:
      - Directory holding the lane files.
      - Defaults to the variable C(lanekit_lanes_dir), else a C(lanes/) directory in the current working
        directory (a team's own repository), else the collection's C(lanes/).
    type: path
  images_dir:
    description:
      - Directory holding the image specs.
      - Defaults to the variable C(lanekit_images_dir), else an C(images/) directory in the current working
        directory, else the collection's C(images/).
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
    description:
      - Write the plan as JSON to this controller path (atomically; only when it changed).
      - A path that is a directory, or whose directory is a file or cannot be created, fails with a sentence
        naming the path and the reason.
    type: path
  write_plan:
    description: Without O(plan_file), write the plan JSON to C(<reports_dir>/plan.json) (the plan's C(reports_dir)).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    details: >-
      The plan is rendered in check mode too; O(plan_file) is not written, also when the task runs with
      C(check_mode=false) in a C(--check) run (as the preflight role does), so C(plan_lane --check) writes nothing.
  diff_mode:
    support: full
    details: >-
      With C(--diff), what changed since the plan last written at O(plan_file) (or the plan's C(reports_dir)):
      per rank the engine flags, positional arguments and environment entries whose value changed, came or went,
      the host and the image; then the lane's image, API, weights and revision (RV(plan_changes)).
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
sources:
  description:
    - Where the plan came from, printed in the plan's header by the preflight role.
    - C(lane_file) and C(image_spec) are the user's (a C(lanes/) or C(images/) folder in the working directory, or at or
      above the inventory's directory) or, for a name the user's folder lacks, the collection's copy.
  returned: success
  type: dict
  contains:
    lane_file: {description: The lane file read., type: str}
    image_spec: {description: The image spec folder read., type: str}
    inventory: {description: The inventory sources of the run., type: str}
lint:
  description:
    - Lint findings, C(errors), C(warnings) and C(skipped) rule ids; C(unknown_skips) lists O(lint_skip)
      entries that name no rule and C(unskippable) those naming a rule that cannot be skipped.
  returned: always
  type: dict
plan_file:
  description: Where the plan JSON was written, if asked.
  returned: success
  type: str
plan_changes:
  description: With C(--diff), what changed since the previous plan file, one line each (the task's diff shows them).
  returned: in diff mode, when a plan file path is known
  type: list
  elements: str
"""
