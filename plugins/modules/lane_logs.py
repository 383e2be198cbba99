#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: lane_logs
short_description: Print every rank's log lines of a lane merged in time order, filtered and folded
version_added: 0.2.0
description:
  - Controller-side action (this file only documents it); no host is contacted. Run it once
    (C(run_once)) after M(lanekit.serving.rank_status) registered each node's containers, or with
    O(from_archive) to read a failure bundle or teardown archive instead.
  - Every line is prefixed with its docker time, its rank and its host, and the ranks' lines are
    merged in time order.
  - Folding (on by default) replaces a run of progress-bar updates of one rank with its last
    update and a count, and a line a rank repeats (numbers and the engine's clock ignored) with its
    first occurrence and a count.
options:
  lane:
    description: Lane name (for the header and, with O(from_archive=latest), the reports folder).
    type: str
    required: true
  found:
    description:
      - Per inventory host, its registered M(lanekit.serving.rank_status) result (containers with
        C(rank) and time-stamped C(lines)); an unreachable or failed host is named in a note.
    type: dict
    default: {}
  ranks:
    description: Node ranks to show (V(0,3), V(0-3) or a list); all when unset.
    type: raw
  lines:
    description:
      - Last lines shown per rank (after filtering and folding), a whole number of at least 1; V(100) when unset.
      - A negative number or text such as V(all) fails with a sentence (use O(since) for a time window).
    type: raw
  since:
    description:
      - Only lines from this long ago on (V(90s), V(10m), V(2h)). For an archive, counted back
        from its last line.
    type: str
  grep:
    description: Only lines matching this Python regular expression (applied before folding).
    type: str
  fold:
    description: Fold progress bars and repeated lines.
    type: bool
    default: true
  check_only:
    description:
      - Only check O(lines), O(ranks), O(since) and O(grep) and fail with a sentence naming the bad one;
        the logs playbook runs this first, before any node is contacted.
    type: bool
    default: false
  from_archive:
    description:
      - Read archived logs instead of the live containers. V(latest) is the newest folder under
        O(reports_dir)/<lane>/ holding rank logs (failure bundle or teardown archive); any other
        value is such a folder's path.
    type: str
    default: ""
  reports_dir:
    description: The reports folder for O(from_archive=latest); the current directory's C(reports) when unset.
    type: str
seealso:
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
- name: Read each node's rank logs
  lanekit.serving.rank_status:
    lane: mistral-large4-nvfp4-8x-vllm
    tail: 200
  register: found

- name: Print them merged
  lanekit.serving.lane_logs:
    lane: mistral-large4-nvfp4-8x-vllm
    found: "{{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars, 'found'))) }}"
    grep: "ERROR|Traceback"
  run_once: true

- name: The newest archived logs of a torn-down lane
  lanekit.serving.lane_logs:
    lane: mistral-large4-nvfp4-8x-vllm
    from_archive: latest
    reports_dir: /srv/lanekit/reports
  run_once: true
"""

RETURN = r"""
lines:
  description: The printed lines (time, rank, host, text and a fold note).
  returned: always
  type: list
  elements: str
source:
  description: V(live containers) or the archive folder read.
  returned: always
  type: str
ranks:
  description: The node ranks shown.
  returned: always
  type: list
  elements: int
notes:
  description: Hosts that gave no log (unreachable, failed) and logs that could not be read.
  returned: always
  type: list
  elements: str
"""
