#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: archive_fetch
short_description: Copy a node's teardown evidence to the controller, private and redacted
version_added: 0.2.0
description:
  - Controller-side action (this file only documents it). It reads the files that
    M(lanekit.serving.rank_status) wrote with O(lanekit.serving.rank_status#module:bundle_dir) on
    the node, as the become user, and writes them under O(dest) as
    C(ranks/r<rank>-<host>/full.log), C(ranks/r<rank>-<host>/inspect.json) and
    C(hosts/<host>/meminfo.txt).
  - Files are written 0600 and the directories it makes 0700, as in a failure bundle.
  - Every known secret value of the lane (the variables C(lanekit_api_key) and
    C(lanekit_secret_env)) is replaced again on the controller, after the node replaced it
    before the copy.
options:
  dest:
    description: The archive folder on the controller (C(reports/<lane>/<time>-<reason>)).
    type: path
    required: true
  files:
    description: The node's file paths, the C(bundle_files) result of M(lanekit.serving.rank_status).
    type: list
    elements: str
    required: true
  containers:
    description:
      - The rank containers of this node, each with C(name) and C(rank) (the
        M(lanekit.serving.rank_status) C(containers) result); they name each rank's folder.
    type: list
    elements: dict
    default: []
  plan:
    description: The lane's plan, when known; its C(secrets) names the secret variables to redact.
    type: dict
    default: {}
seealso:
  - module: lanekit.serving.rank_status
  - module: lanekit.serving.lane_logs
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
attributes:
  check_mode:
    support: none
    details: It writes the archive; the teardown role skips it in check mode.
  diff_mode:
    support: none
  idempotent:
    support: partial
    details: The same files are written again with the same content.
"""

EXAMPLES = r"""
---
- name: Copy the node's evidence into the archive folder
  lanekit.serving.archive_fetch:
    dest: "reports/lane-a/20260101T000000Z-teardown"
    files: "{{ bundle.bundle_files }}"
    containers: "{{ found.containers | selectattr('exists') | list }}"
    plan: "{{ lanekit_plan | default({}) }}"
"""

RETURN = r"""
files:
  description: The controller paths written.
  returned: always
  type: list
  elements: str
redacted_values:
  description: How many known secret values were searched for and replaced.
  returned: always
  type: int
"""
