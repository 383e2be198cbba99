#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
"""Documentation of the bench_run action (the code is plugins/action/bench_run.py): the measurement."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: bench_run
short_description: Run tool-eval-bench and llama-benchy against a serving lane, offline, with live progress
version_added: 0.2.0
description:
  - Controller-side action (this file only documents it); run it once (C(run_once)).
  - Checks the first half of the validity gate (every planned rank exists, runs and carries the
    plan's hash; the API lists the served model) and fails with the reasons when it does not hold.
  - Writes the collection's prompt corpus into a private HOME where llama-benchy finds it cached,
    copies the tokenizer into the run directory and runs C(tool-eval-bench bench --perf) from the
    bench virtualenv with a scrubbed environment (no proxy or token variables, every Hugging Face
    switch offline). The API key, when given, reaches the tool only through C(TOOL_EVAL_API_KEY).
  - Prints one progress line whenever it changes (throughput scenario n of N with depth and
    concurrency, then quality scenario n of N).
  - Leaves C(raw/) (the tools' outputs and event streams), C(inputs/) and C(run.json) in O(run_dir)
    for M(lanekit.serving.bench_report).
options:
  plan:
    description: The lane's plan (C(lanekit_plan)).
    type: dict
    required: true
  lane_settings:
    description: The lane's C(bench:) settings (C(plan.bench)).
    type: raw
  cli_settings:
    description: Settings from the command line, over O(lane_settings) and the defaults.
    type: raw
  settings_only:
    description:
      - Only merge and check O(lane_settings) and O(cli_settings), returning C(settings); a bad one fails with
        its sentence. The bench role runs this first, before any host is contacted.
      - Without it, O(run_dir), O(venv) and O(tokenizer) are required.
    type: bool
    default: false
  run_dir:
    description: The run's directory on the controller.
    type: path
  venv:
    description: The bench virtualenv (tool-eval-bench, llama-benchy, matplotlib).
    type: path
  tokenizer:
    description: A tokenizer.json on the controller.
    type: path
  containers:
    description: The C(containers) of M(lanekit.serving.rank_status) from every lane node.
    type: list
    elements: dict
    default: []
  unreachable:
    description: Lane nodes that did not answer.
    type: list
    elements: str
    default: []
  api_address:
    description: The API address the controller reaches; default the plan's head address.
    type: str
  api_key:
    description: The lane's API key, if it has one.
    type: str
  poll_s:
    description: Seconds between progress reads.
    type: float
    default: 2.0
  bench_host:
    description:
      - Run the tools on this host instead of the controller; delegate the task to it. The inputs are
        copied into a private run directory there, the tool runs detached from O(host_venv) with the same
        scrubbed environment, the API check of the gate is made from there, and C(raw/) is fetched back.
    type: str
    default: ""
  host_venv:
    description: The bench venv on O(bench_host) (M(lanekit.serving.bench_host_venv) returns it).
    type: str
    default: ""
  host_root:
    description: The directory on O(bench_host) that holds run directories.
    type: str
    default: ""
seealso:
  - module: lanekit.serving.bench_report
  - module: lanekit.serving.bench_host_venv
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
attributes:
  check_mode:
    support: partial
    details: Checks the gate, runs nothing.
  diff_mode:
    support: none
  idempotent:
    support: none
    details: Every run is a new measurement.
"""

EXAMPLES = r"""
---
- name: Bench the lane
  lanekit.serving.bench_run:
    plan: "{{ lanekit_plan }}"
    run_dir: /srv/reports/lane/bench/20261130T120000Z
    venv: /opt/lanekit/.venv-bench
    tokenizer: /srv/reports/lane/bench/20261130T120000Z/inputs/staged-tokenizer.json
  run_once: true
"""

RETURN = r"""
run_dir:
  description: The run directory.
  returned: success
  type: str
tool:
  description: The tool's summary (rc, status, samples, failed, error).
  returned: success
  type: dict
started:
  description: UTC start time.
  returned: success
  type: str
ended:
  description: UTC end time.
  returned: success
  type: str
api_url:
  description: The API base URL the tools used.
  returned: success
  type: str
"""
