#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: lane_ledger
short_description: Append a record to a lane's ledger, or print the ledger as a table
version_added: 0.3.0
description:
  - Controller-side action (this file only documents it). Run it once (C(run_once), C(delegate_to) C(localhost)).
  - The ledger is C(<plan reports_dir>/ledger.jsonl), one JSON record per line. Each deploy (ready, already
    serving, or failed), teardown, bench run and step of the watch (M(lanekit.serving.lane_watch)) appends one.
  - A record holds the time, the plan hash and the keys that changed since the plan of the previous record (the
    plan diff's words), the image per node, the weights, each deploy phase's duration, each rank's boot
    milestones, the outcome, the cause (signature, evidence line, fix) and the bench summary.
  - An append is one write of the whole line to a file opened for appending, then C(fsync); a run killed in the
    middle leaves at most a torn last line, which a reader ignores and the next append does not continue.
  - An append reports C(changed=false), since the record is the run's log, not a change of the lane. The phases
    that changed the lane report that themselves, and a re-run of a serving lane stays C(changed=0).
  - With O(mode=show) it prints the table Boot / When / Event / Result / Cause / What changed and draws the
    timeline PNGs the ledger lacks (C(timeline/boot-NNNN.png) per deploy, C(timeline/history.png)) with a
    Python that has matplotlib (the bench virtualenv's, or O(python)); without one the charts are skipped
    with a note.
options:
  mode:
    description: V(append) adds a record; V(show) prints the ledger.
    type: str
    choices: [append, show]
    default: show
  plan:
    description:
      - The lane's plan (C(lanekit_plan)); its C(reports_dir) holds the ledger. Required for O(mode=append)
        (a teardown by lane name passes only the C(lane) key with O(reports_dir)).
    type: dict
  reports_dir:
    description: The lane's reports directory, instead of the plan's C(reports_dir).
    type: path
  event:
    description: What happened, for O(mode=append).
    type: str
    choices: [deploy, teardown, bench, watch]
  outcome:
    description: The outcome, when the event does not decide it (a teardown's V(stopped) or V(removed)).
    type: str
  results:
    description: Every node's registered result of the ready phase (M(lanekit.serving.lane_wait)); the coordinator's is used.
    type: list
    elements: raw
    default: []
  failed:
    description: The failed task's result(s) of a failed deploy (C(ansible_failed_result) of the hosts).
    type: list
    elements: raw
    default: []
  failed_task:
    description: The phase and the name of the task that failed.
    type: str
    default: ""
  serving:
    description: The deploy found the lane serving its plan and ran no phase.
    type: bool
    default: false
  marks:
    description: When each deploy phase began (phase name to an ISO UTC time), from C(lanekit_phase_marks).
    type: dict
    default: {}
  bench_report:
    description: The bench run's C(report.json), for O(event=bench).
    type: path
  note:
    description: A sentence kept with the record.
    type: str
    default: ""
  charts:
    description: Draw the timeline PNGs (a deploy's on append; the missing ones and the history on show).
    type: bool
    default: true
  python:
    description: A Python with matplotlib for the charts; empty looks for the bench virtualenv.
    type: str
    default: ""
  ledger_format:
    description: V(text) a table, V(md) a Markdown table with the fixes, V(json) the records.
    type: str
    choices: [text, md, json]
    default: text
  ledger_file:
    description: Write the printed ledger to this controller file instead (mode 0600); a directory is refused.
    type: path
  last:
    description: Show only the last N records (0 all).
    type: int
    default: 0
seealso:
  - module: lanekit.serving.lane_watch
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
attributes:
  check_mode:
    support: full
    details: Nothing is appended in check mode.
  diff_mode:
    support: none
  idempotent:
    support: none
    details: Every append adds a record.
"""

EXAMPLES = r"""
---
- name: Print the ledger as Markdown
  lanekit.serving.lane_ledger:
    plan: "{{ lanekit_plan }}"
    ledger_format: md
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
record:
  description: The record appended (O(mode=append)).
  returned: on append
  type: dict
records:
  description: The records shown (O(mode=show)).
  returned: on show
  type: list
  elements: dict
ledger:
  description: The ledger file.
  returned: always
  type: str
pngs:
  description: The timeline PNGs written.
  returned: always
  type: list
  elements: str
"""
