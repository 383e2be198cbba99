# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""One operator per lane: the owner record, the lock file on the head and the verdict on a held lock.

One job: the lane lock.

The lock is one JSON file per lane, ``<lock_dir>/<lane>.lock``, on the lane's head node. It is
created atomically (the record is written to a private temporary file first and then hard-linked
under the lock name, which fails when the name exists), so a reader never sees a half-written
owner and two runs can never both create it. An owner is who runs the playbook: user, controller
host, the ``ansible-playbook`` process id and its start time, and the playbook. Its token (a
digest of those) is what a release or a deliberate break must name.

A lock whose owner is gone is stale: on the same controller that is proven (the pid is not alive,
or alive with another start time, a reused pid); from another controller only its age says so.
A stale lock is broken only on purpose (``break_lock``), never silently.

Stdlib only.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import time
from collections.abc import Callable
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError

__all__ = ["OWNER_KEYS", "break_and_take", "describe", "judge", "lock_path", "owner_token", "pid_state",
           "read_lock", "refusal", "release", "take"]

OWNER_KEYS = ("user", "controller", "pid", "started", "playbook")
_LANE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def owner_token(owner: dict[str, Any]) -> str:
    """The identity of one run: the same for its acquire and its release, different for any other run."""
    ident = {k: owner.get(k) for k in OWNER_KEYS}
    return hashlib.sha256(json.dumps(ident, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:32]


def _utc(epoch: Any) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(epoch)))
    except (TypeError, ValueError, OverflowError):
        return "an unknown time"


def describe(owner: dict[str, Any]) -> str:
    """``alice@ctl-01 pid 4242 (deploy_lane.yml, started 2026-11-30 19:40:00 UTC)``."""
    return (f"{owner.get('user') or '?'}@{owner.get('controller') or '?'} pid {owner.get('pid') or '?'} "
            f"({owner.get('playbook') or 'unknown playbook'}, started {_utc(owner.get('started'))})")


def lock_path(lock_dir: str, lane: str) -> str:
    if not _LANE_RE.match(lane or ""):
        raise LanekitError(f"The lane name {lane!r} cannot name a lock file; a lane name is letters, digits, '.', "
                           "'_' and '-'.")
    if not os.path.isabs(lock_dir):
        raise LanekitError(f"The lane lock directory {lock_dir!r} (lanekit_lock_dir) must be an absolute path.")
    return os.path.join(lock_dir, f"{lane}.lock")


def read_lock(path: str) -> dict[str, Any] | None:
    """The lock record, or None when there is no lock. A damaged record is a sentence."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("owner"), dict) or not doc.get("token"):
        raise LanekitError(f"The lane lock {path} is damaged (not a lanekit lock record); look at it, remove it by "
                           "hand if no run holds the lane, and run again.")
    return doc


def _record(lane: str, owner: dict[str, Any], now: float) -> dict[str, Any]:
    return {"lane": lane, "owner": {k: owner.get(k) for k in OWNER_KEYS}, "token": owner_token(owner),
            "taken": int(now)}


def _private_dir(lock_dir: str) -> None:
    os.makedirs(lock_dir, mode=0o755, exist_ok=True)
    st = os.lstat(lock_dir)
    if not os.path.isdir(lock_dir) or os.path.islink(lock_dir):
        raise LanekitError(f"The lane lock directory {lock_dir} is not a real directory.")
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise LanekitError(f"The lane lock directory {lock_dir} is writable by another user than the one taking "
                           "the lock; make it owned by that user and not group/world writable.")


def _link_new(path: str, record: dict[str, Any]) -> bool:
    """Create ``path`` holding ``record`` if it does not exist; True when this call created it."""
    # an unpredictable name, created O_EXCL|O_NOFOLLOW (the directory is checked private, and a temporary
    # file is made the same way everywhere in the collection: _files.atomic_write)
    tmp = f"{path}.{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(record, fh, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)  # atomic: fails when another run's lock exists
        except FileExistsError:
            return False
        return True
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def take(path: str, lane: str, owner: dict[str, Any], now: float | None = None,
         check_mode: bool = False) -> tuple[str, dict[str, Any] | None]:
    """('taken' | 'held' | 'refused', the lock record now in place)."""
    mine = owner_token(owner)
    for _attempt in range(3):
        current = read_lock(path)
        if current is not None:
            return ("held" if current["token"] == mine else "refused"), current
        record = _record(lane, owner, time.time() if now is None else now)
        if check_mode:
            return "taken", record
        _private_dir(os.path.dirname(path))
        if _link_new(path, record):
            return "taken", record
    current = read_lock(path)
    return ("held" if current and current["token"] == mine else "refused"), current


def break_and_take(path: str, lane: str, owner: dict[str, Any], stale_token: str, now: float | None = None,
                   check_mode: bool = False) -> tuple[str, dict[str, Any] | None]:
    """Replace the lock held by ``stale_token`` (and by nothing else) with ``owner``'s.

    The old record is renamed aside first: of two runs breaking the same lock only one rename
    succeeds, and the new lock is then created as usual (so the other one is refused).
    """
    current = read_lock(path)
    if current is None:
        return take(path, lane, owner, now, check_mode)
    if current["token"] != stale_token:
        return ("held" if current["token"] == owner_token(owner) else "refused"), current
    if check_mode:
        return "taken", _record(lane, owner, time.time() if now is None else now)
    aside = f"{path}.broken-{stale_token[:12]}"
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return take(path, lane, owner, now, check_mode)
    return take(path, lane, owner, now, check_mode)


def release(path: str, owner: dict[str, Any], check_mode: bool = False) -> tuple[str, dict[str, Any] | None]:
    """('released' | 'absent' | 'not-mine', the record found). Only the owner's own lock is removed."""
    current = read_lock(path)
    if current is None:
        return "absent", None
    if current["token"] != owner_token(owner):
        return "not-mine", current
    if not check_mode:
        os.unlink(path)
    return "released", current


def pid_state(pid: Any, started: Any, start_time_of: Callable[[int], float | None]) -> str:
    """'alive', 'dead' or 'unknown' for a pid on this controller; a live pid with another start time was reused."""
    try:
        pid = int(pid)
    except (TypeError, ValueError):
        return "unknown"
    if pid <= 0:
        return "unknown"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "dead"
    except PermissionError:
        pass  # alive, another user's
    except OSError:
        return "unknown"
    actual = start_time_of(pid)
    if started is not None and actual is not None and abs(float(actual) - float(started)) > 2:
        return "dead"
    return "alive"


def judge(holder: dict[str, Any], me: dict[str, Any], now: float, stale_after_s: int,
          holder_pid_state: str | None) -> tuple[bool, bool, str]:
    """(stale, breakable, why) for a lock ``holder`` (its record) met by ``me``.

    ``holder_pid_state`` is ``pid_state`` of the holder's pid, given when the holder ran on this
    controller. A holder proven alive is never breakable; any other lock is breakable on purpose.
    """
    owner = holder.get("owner") or {}
    age = max(0, int(now - float(holder.get("taken") or 0)))
    same_controller = owner.get("controller") == me.get("controller")
    if same_controller and holder_pid_state == "alive":
        return False, False, f"its run is alive on this controller (pid {owner.get('pid')})"
    if same_controller and holder_pid_state == "dead":
        return True, True, f"stale: pid {owner.get('pid')} is gone from this controller (a crashed or killed run)"
    if age > stale_after_s:
        return True, True, f"stale: taken {age} s ago, more than lanekit_lock_stale_after_s={stale_after_s}"
    where = "another controller" if not same_controller else "this controller"
    return False, True, f"taken {age} s ago from {where}, whose run cannot be checked from here"


def refusal(path: str, holder: dict[str, Any], me: dict[str, Any], stale: bool, breakable: bool, why: str) -> str:
    """The one sentence a refused run prints: both owners, the verdict and the way out."""
    lane = holder.get("lane") or "?"
    head = (f"Lane {lane} is locked by {describe(holder.get('owner') or {})} ({path} on the head; {why}); "
            f"this run, {describe(me)}, is refused.")
    if not breakable:
        return head + " Wait for that run to finish: one operator per lane."
    if stale:
        return head + " If that run is really gone, break the lock on purpose with -e lanekit_break_lock=true."
    return (head + " Wait for that run to finish; only if you are sure it is gone, break the lock on purpose with "
            "-e lanekit_break_lock=true.")
