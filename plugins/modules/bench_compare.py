#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
"""Documentation of the bench_compare action (the code is plugins/action/bench_compare.py): the comparison."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: bench_compare
short_description: Compare bench runs, lanes and baselines side by side, with differences in percent and a chart
version_added: 0.2.0
description:
  - Controller-side action (this file only documents it).
  - Each entry of O(compare) is a report.json, a run directory, a lane name (its latest valid run)
    or C(baseline:<lane>). Writes compare.md, compare.json and compare.png to O(out_dir).
options:
  compare:
    description: Two or more references.
    type: list
    elements: str
    required: true
  reports_root:
    description:
      - The controller's reports root, where lane names and run directories are found and the comparison is written.
      - Default C(reports/) beside a checkout's playbooks, else C(reports/) in the working directory (never inside an
        installed collection), as C(lanekit_reports_dir) is read elsewhere.
    type: path
  baselines_dir:
    description: Where C(baseline:<lane>) files are.
    type: path
    required: true
  out_dir:
    description: Output directory; default C(<reports_root>/compare/<UTC time>).
    type: path
  venv:
    description: The bench virtualenv (its Python draws the chart); without it no chart.
    type: path
seealso:
  - module: lanekit.serving.bench_report
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
    support: none
    details: Writes a new directory each time unless O(out_dir) is given.
"""

EXAMPLES = r"""
---
- name: Compare the two seed lanes
  lanekit.serving.bench_compare:
    compare: [mistral-large4-nvfp4-8x-vllm, baseline:mistral-large4-nvfp4-8x-vllm]
    reports_root: reports
    baselines_dir: roles/bench/files/baselines
"""

RETURN = r"""
out_dir:
  description: Where the comparison was written.
  returned: success
  type: str
table:
  description: Columns, validity and rows (metric, values, deltas in percent).
  returned: success
  type: dict
"""
