# Copyright: lanekit developers
# Apache-2.0
"""Fill the lane lock's owner from the running playbook, judge a held lock on the controller, and refuse or break it.

One job: the controller half of ``lanekit.serving.lane_lock``. The module runs on the head node and
only reads and writes the lock file; whether the holder's run is still alive can only be seen
here, where its ``ansible-playbook`` process runs. The documentation lives in
plugins/modules/lane_lock.py.
"""
from __future__ import annotations

import getpass
import os
import socket
import time
from typing import Any

from ansible import context
from ansible.utils.display import Display

from ansible_collections.lanekit.serving.plugins.module_utils._lane import _lock as lanelock
from ansible_collections.lanekit.serving.plugins.plugin_utils._action import LanekitAction

display = Display()

ARGUMENT_SPEC = dict(
    lane=dict(type="str", required=True),
    lock_dir=dict(type="str", default="/var/lib/lanekit/locks"),
    state=dict(type="str", default="present", choices=["present", "absent"]),
    break_lock=dict(type="bool", default=False),
    stale_after_s=dict(type="int", default=86400),
    owner=dict(type="dict", default={}),
)


def process_start(pid: int) -> float | None:
    """Epoch seconds a process started (Linux /proc), None where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22 of stat(5); the split starts at field 3
        with open("/proc/stat", encoding="utf-8") as fh:
            btime = next(int(line.split()[1]) for line in fh if line.startswith("btime "))
        return round(btime + ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def controller_owner(override: dict[str, Any]) -> dict[str, Any]:
    """This run: the worker process is forked from ansible-playbook, so its parent is the run."""
    pid = os.getppid()
    playbooks = [os.path.basename(str(p)) for p in (context.CLIARGS.get("args") or ())]
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    owner = {"user": user, "controller": socket.gethostname(), "pid": pid, "started": process_start(pid),
             "playbook": ",".join(playbooks) or "ad-hoc"}
    owner.update({k: v for k, v in (override or {}).items() if k in lanelock.OWNER_KEYS})
    return owner


class ActionModule(LanekitAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    _requires_connection = True

    def _module(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        return self._execute_module(module_name="lanekit.serving.lane_lock", module_args=args, task_vars=task_vars)

    def lanekit_run(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        me = controller_owner(args["owner"])
        base = {"lane": args["lane"], "lock_dir": args["lock_dir"], "state": args["state"], "owner": me}
        res = self._module(base, task_vars)
        if res.get("failed") or args["state"] == "absent":
            if res.get("outcome") == "not-mine":
                holder = (res.get("holder") or {}).get("owner") or {}
                display.warning(f"The lock of lane {args['lane']} is held by {lanelock.describe(holder)}, not by this "
                                "run; it was left in place.")
            result.update(res)
            return result
        if res.get("outcome") != "refused":
            result.update(res)
            return result

        holder = res["holder"]
        howner = holder.get("owner") or {}
        state = None
        if howner.get("controller") == me["controller"]:
            state = lanelock.pid_state(howner.get("pid"), howner.get("started"), process_start)
        stale, breakable, why = lanelock.judge(holder, me, time.time(), args["stale_after_s"], state)
        if args["break_lock"] and breakable:
            res = self._module(dict(base, break_token=holder["token"]), task_vars)
            if res.get("outcome") in ("taken", "held"):
                if self._play_context.check_mode:
                    display.warning(f"Check mode: the lock of lane {args['lane']} held by {lanelock.describe(howner)} "
                                    f"({why}) would be broken on purpose (lanekit_break_lock); nothing was changed.")
                else:
                    display.warning(f"The lock of lane {args['lane']} held by {lanelock.describe(howner)} ({why}) was "
                                    f"broken on purpose (lanekit_break_lock) by {lanelock.describe(me)}; its record "
                                    f"is kept as {res.get('lock_path')}.broken-{holder['token'][:12]}.")
                result.update(res)
                return result
            holder = res.get("holder") or holder  # someone else got in between: refuse naming them
            howner = holder.get("owner") or {}
            stale, breakable, why = False, False, "it was taken again while this run was breaking the stale lock"
        result.update(res)
        result.update(failed=True, changed=False, stale=stale, breakable=breakable,
                      msg=lanelock.refusal(res.get("lock_path") or "", holder, me, stale, breakable, why))
        return result
