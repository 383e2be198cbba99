#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
"""Take, release or break the lane lock file on the lane's head node (one operator per lane)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: lane_lock
short_description: One operator per lane, a lock file on the lane's head node
version_added: 0.2.0
description:
  - Takes (O(state=present)) or releases (O(state=absent)) the lane lock C(<lock_dir>/<lane>.lock) on the
    host it runs on, normally the lane's head node (C(lanekit_head_host), else the first host of
    C(lane_nodes)). The deploy, teardown, stage-weights and build-images playbooks take it in preflight and
    release it at the end, also when they fail; status, logs and plan never take it.
  - The lock records its owner, the user and controller host, the C(ansible-playbook) process id and its start
    time and the playbook, and is created atomically (a complete record is hard-linked under the lock name,
    which fails when the name exists), so two runs can never both hold it.
  - A controller-side action runs first and fills O(owner) from the running playbook. When another owner holds
    the lane the task fails with one sentence naming both owners. The action calls a lock stale when its owner's
    process is gone from this controller (or its pid was reused), or when it is older than O(stale_after_s);
    a lock is broken only with O(break_lock=true), never silently, and never while its owner's run is seen
    alive on this controller.
  - O(state=absent) removes the lock only when this run holds it.
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
options:
  lane:
    description: The lane name; the lock file is named after it.
    type: str
    required: true
  lock_dir:
    description: Directory of the lock files on the head node (C(lanekit_lock_dir)). Created mode C(0755) if missing.
    type: path
    default: /var/lib/lanekit/locks
  state:
    description: V(present) takes the lock (or keeps this run's), V(absent) releases this run's lock.
    type: str
    choices: [present, absent]
    default: present
  break_lock:
    description:
      - Break a lock held by another owner and take it. Done only for a lock whose owner is not seen alive on
        this controller; the broken record is kept beside the lock as C(<lane>.lock.broken-<token>) and a
        warning names it.
    type: bool
    default: false
  stale_after_s:
    description: A lock older than this from another controller is called stale in the refusal.
    type: int
    default: 86400
  owner:
    description:
      - The owner record (C(user), C(controller), C(pid), C(started), C(playbook)). Filled by the action from the
        running playbook; a key given here overrides it (a wrapper that holds the lane on behalf of a pipeline).
    type: dict
  break_token:
    description: Internal, set by the action when it breaks a lock; the token of the exact record to break.
    type: str
attributes:
  check_mode:
    support: full
    details:
      - Reads the lock and reports whether the run would take it, keep it or be refused (the task fails then,
        as the real run would); writes nothing.
  diff_mode:
    support: none
  idempotent:
    support: full
    details:
      - Taking and releasing the run's own lock report no change (the lock lives only as long as the run), so a
        re-run of a converged lane reports none; breaking another run's lock is a change.
notes:
  - The lock file is a local file on the head node; O_EXCL and hard links are atomic there. It protects the
    lane against a second lanekit run, not against someone starting containers by hand.
seealso:
  - module: lanekit.serving.lane_plan
"""

EXAMPLES = r"""
---
- name: Take the lane lock on the head node
  lanekit.serving.lane_lock:
    lane: "{{ lanekit_plan.lane }}"
  delegate_to: "{{ lanekit_head_host | default(groups['lane_nodes'] | first) }}"
  run_once: true

- name: Break a stale lock on purpose (its run crashed)
  lanekit.serving.lane_lock:
    lane: mistral-large4-nvfp4-8x-vllm
    break_lock: true

- name: Release this run's lock
  lanekit.serving.lane_lock:
    lane: "{{ lanekit_plan.lane }}"
    state: absent
"""

RETURN = r"""
lock_path:
  description: The lock file on the host the module ran on.
  returned: always
  type: str
  sample: /var/lib/lanekit/locks/mistral-large4-nvfp4-8x-vllm.lock
outcome:
  description:
    - C(taken) (this run took it), C(held) (this run already held it), C(refused) (another owner holds it),
      C(released), C(absent) (nothing to release) or C(not-mine) (another owner's lock was left alone).
  returned: always
  type: str
owner:
  description: This run's owner record and its token.
  returned: always
  type: dict
holder:
  description: The lock record found (lane, owner, token, taken), when there was one.
  returned: when a lock was found
  type: dict
broken:
  description: The record of the lock this run broke on purpose (O(break_lock=true)).
  returned: when a lock was broken
  type: dict
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._lane import _lock as lanelock


def argument_spec() -> dict[str, Any]:
    return dict(
        lane=dict(type="str", required=True),
        lock_dir=dict(type="path", default="/var/lib/lanekit/locks"),
        state=dict(type="str", default="present", choices=["present", "absent"]),
        break_lock=dict(type="bool", default=False),
        stale_after_s=dict(type="int", default=86400),
        owner=dict(type="dict"),
        break_token=dict(type="str", no_log=False),
    )


def run(p: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    owner = {k: (p["owner"] or {}).get(k) for k in lanelock.OWNER_KEYS}
    if not owner["controller"] or not owner["pid"]:
        raise LanekitError("The lane lock needs an owner with at least 'controller' and 'pid'; run it through the "
                           "lanekit.serving.lane_lock action, which fills them from the running playbook.")
    path = lanelock.lock_path(p["lock_dir"], p["lane"])
    result: dict[str, Any] = {"lock_path": path, "owner": dict(owner, token=lanelock.owner_token(owner))}
    if p["state"] == "absent":
        outcome, found = lanelock.release(path, owner, check_mode)
    elif p["break_token"]:
        before = lanelock.read_lock(path)
        outcome, found = lanelock.break_and_take(path, p["lane"], owner, p["break_token"], check_mode=check_mode)
        if outcome == "taken" and before and before["token"] == p["break_token"]:
            result["broken"] = before
    else:
        outcome, found = lanelock.take(path, p["lane"], owner, check_mode=check_mode)
    result["outcome"] = outcome
    # The lock is the run's own bookkeeping, taken and released within the run: only breaking
    # another run's lock changes something, so a converged lane's re-run still reports no change.
    result["changed"] = "broken" in result
    if found is not None:
        result["holder"] = found
    return result


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    try:
        result = run(module.params, module.check_mode)
    except LanekitError as exc:
        module.fail_json(msg=str(exc))
    except OSError as exc:
        module.fail_json(msg=f"The lane lock in {module.params['lock_dir']} could not be written: "
                             f"{exc.strerror or exc} ({exc.filename or module.params['lock_dir']}).")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
