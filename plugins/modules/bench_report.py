#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
"""Documentation of the bench_report action (the code is plugins/action/bench_report.py): gate and report."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: bench_report
short_description: Close a bench run's validity gate and write report.json, report.md and report.png
version_added: 0.2.0
description:
  - Controller-side action (this file only documents it); run it once after M(lanekit.serving.bench_run).
  - The run is valid when every rank still runs the same container (same start time and restart
    count) on the same plan hash, the API still answers, and the tool completed with no failed
    throughput sample. Otherwise the report is written with C(valid=false) and the reasons, and the
    task fails.
  - report.json and report.md hold the bring-up report's table (quality, deployability,
    responsiveness, safety warnings with scenario ids, prefill/decode tokens/s per depth and
    concurrency) and the provenance (plan hash, image pin, weights manifest hash and revision,
    engine, collection and tool versions, settings, start and end). report.png is drawn by the
    bench virtualenv's matplotlib, the O(compare_with) reports beside the run.
options:
  plan:
    description: The lane's plan (C(lanekit_plan)).
    type: dict
    required: true
  run_dir:
    description: The run directory M(lanekit.serving.bench_run) filled.
    type: path
    required: true
  venv:
    description: The bench virtualenv (its Python draws the chart).
    type: path
    required: true
  containers:
    description: The C(containers) of M(lanekit.serving.rank_status) from every lane node, after the run.
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
  api_check:
    description:
      - The API check of the gate's "after" half as made elsewhere (the result of
        M(lanekit.serving.bench_exec) V(mode=api) on the bench host); default check from the controller.
    type: dict
  manifest:
    description: The staged weights' MANIFEST.json fetched to the controller.
    type: path
  compare_with:
    description: Reports to draw and tabulate beside the run (report.json, run directory, lane name, C(baseline:<lane>)).
    type: list
    elements: str
    default: []
  reports_root:
    description: The controller's reports root (lane names resolve under it).
    type: path
  baselines_dir:
    description: Where C(baseline:<lane>) files are.
    type: path
seealso:
  - module: lanekit.serving.bench_run
  - module: lanekit.serving.bench_compare
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
    details: Rewrites the same report from the same run.
"""

EXAMPLES = r"""
---
- name: Write the report
  lanekit.serving.bench_report:
    plan: "{{ lanekit_plan }}"
    run_dir: /srv/reports/lane/bench/20261130T120000Z
    venv: /opt/lanekit/.venv-bench
  run_once: true
"""

RETURN = r"""
valid:
  description: Whether the run passed the gate.
  returned: always
  type: bool
problems:
  description: The gate's reasons, one sentence each.
  returned: always
  type: list
  elements: str
report:
  description: Path of report.json.
  returned: always
  type: str
series:
  description: The chart's series labels.
  returned: always
  type: list
  elements: str
"""
