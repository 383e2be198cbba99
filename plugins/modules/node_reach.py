#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_reach
short_description: Refuse hosts that cannot be reached or cannot become root, with the fix
version_added: 0.2.0
description:
  - Controller-side action (this file only documents it); no host is contacted. Run it once
    (C(run_once)) after a first task (for example M(ansible.builtin.ping) with
    C(ignore_unreachable) and C(ignore_errors)) registered each host's result.
  - Fails with one sentence per host that did not answer or could not become root, naming the
    host, its address, what happened and the fix - a connection that timed out (the node is off
    or cut off), an SSH host key that differs from known_hosts (C(ssh-keygen -R)), a host key
    that is not known, a refused key, sudo that asks for a password (C(-K) or a sudoers line), sudo
    that refused the C(-K) password or hung at a prompt.
options:
  results:
    description: Per inventory host, its registered result of the first task that reached it.
    type: dict
    required: true
seealso:
  - module: ansible.builtin.ping
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
attributes:
  check_mode:
    support: full
    details: It only reads registered results.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: It only reads.
"""

EXAMPLES = r"""
---
- name: Reach each host and become root
  ansible.builtin.ping:
  ignore_unreachable: true
  ignore_errors: true
  register: reached

- name: Refuse the hosts that cannot be used
  lanekit.serving.node_reach:
    results: "{{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars, 'reached'))) }}"
  run_once: true
"""

RETURN = r"""
hosts:
  description: The hosts that cannot be used, each with C(host), C(kind) (timeout, host_key_changed,
    host_key_unknown, sudo_password, sudo_password_wrong, sudo_hung, auth_denied, refused, no_route,
    unresolved, unreachable, failed) and C(sentence).
  returned: always
  type: list
  elements: dict
"""
