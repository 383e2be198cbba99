# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Where the plan reads its specs from and writes its reports to, on the controller.

One job: the controller's paths: ``lanes/`` and ``images/`` (the task's argument, the inventory's
variable, the working directory, else the collection's own), that nobody else can change what they
hold, and the reports root.
"""
from __future__ import annotations

import grp
import os
import pwd
import stat

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError


def reports_root(configured: str | None, playbook_dir: str | None, cwd: str, root: str | None = None) -> str:
    """The controller's reports root: ``lanekit_reports_dir``, else ``reports/`` in the user's repository (``root``,
    see ``user_root``), else beside a checkout's playbooks.

    A playbook run from an installed collection (under an ``ansible_collections/`` tree) must not
    write into the installed collection, so without a repository its reports go to ``reports/`` in the
    working directory.
    """
    if configured:
        return os.path.abspath(os.path.join(cwd, str(configured)))
    if root:
        return os.path.join(os.path.abspath(root), "reports")  # the repository whose lanes/ or images/ the run reads
    if playbook_dir and "ansible_collections" not in os.path.normpath(playbook_dir).split(os.sep):
        base = os.path.dirname(playbook_dir) if os.path.basename(playbook_dir) == "playbooks" else playbook_dir
        return os.path.join(os.path.abspath(base), "reports")
    return os.path.join(os.path.abspath(root or cwd), "reports")


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _private_group(gid: int, uid: int) -> bool:
    """Whether ``gid`` is the owner's own group with nobody else in it (a user private group, as
    Debian and Ubuntu make for every user, whose umask 002 then makes checkouts group-writable)."""
    try:
        group, user = grp.getgrgid(gid), pwd.getpwuid(uid)
    except KeyError:
        return False
    return user.pw_gid == gid and group.gr_name == user.pw_name and set(group.gr_mem) <= {user.pw_name}


def check_not_shared(path: str, what: str) -> None:
    """Refuse ``path`` (a lanes or images folder, a lane file, an image spec) when a user other than the
    running one or root can change it: what it holds becomes root's containers and commands on every node.

    Refused: an owner other than the running user and root (a link's own owner too), and a mode that lets
    others write (``o+w``), or the group, unless the group is the owner's private one. A path that does
    not exist is left to the reader, which says so."""
    me = os.geteuid()
    try:
        link = os.lstat(path)
        info = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise LanekitError(f"{path} ({what}) cannot be checked ({exc.strerror}); fix its permissions, then run again.") \
            from None
    owners = [(link, "the link")] if stat.S_ISLNK(link.st_mode) else []
    for found, kind in [*owners, (info, "it")]:
        if found.st_uid not in (me, 0):
            raise LanekitError(
                f"{path} ({what}): {kind} belongs to user {_user(found.st_uid)}, neither you ({_user(me)}) nor root, "
                f"so that user could change what lanekit runs as root on the nodes; run chown {_user(me)} {path} "
                f"(or copy it into a directory of your own), then run again.")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o002 or (mode & 0o020 and not _private_group(info.st_gid, info.st_uid)):
        group = ""
        if mode & 0o020:
            try:
                group = f", group {grp.getgrgid(info.st_gid).gr_name}"
            except KeyError:
                group = f", group gid {info.st_gid}"
        raise LanekitError(
            f"{path} ({what}) is writable by other users (mode {mode:04o}{group}), so they could change what "
            f"lanekit runs as root on the nodes; run chmod go-w {path}, then run again.")


def user_root(cwd: str, inventory_dirs: list[str] | tuple[str, ...] = ()) -> str | None:
    """The user's own repository a run belongs to: the working directory when it holds ``lanes/`` or ``images/``,
    else the nearest directory at or above an inventory (three levels up at most: ``<repo>/inventories/<cluster>``)
    that does. None when neither does (the collection's own lanes serve). A run started from a subdirectory of the
    repository (``inventories/``) still reads the user's lanes and writes the user's ``reports/``."""
    for start in [cwd] + [d for d in inventory_dirs if d]:
        here = os.path.abspath(start)
        for _level in range(1 if start == cwd else 4):
            if any(os.path.isdir(os.path.join(here, name)) for name in ("lanes", "images")):
                return here
            parent = os.path.dirname(here)
            if parent == here:
                break
            here = parent
    return None


def pick_spec_dir(dirs: list[str], relative: str) -> str:
    """The first of ``dirs`` that holds ``relative`` (``<lane>.yml``, ``<image>/image.yml``), else the first:
    a name the user's folder lacks falls back to the collection's copy, as recipes do."""
    return next((d for d in dirs if os.path.isfile(os.path.join(d, relative))), dirs[0])


def find_spec_dir(name: str, explicit: str | None, configured: str | None, cwd: str, collection_root: str,
                  root: str | None = None) -> str:
    """Where ``lanes/`` (or ``images/``) is read from: the task's argument, the inventory's variable,
    a ``<name>/`` directory in the user's repository (``root``, else the working directory), else the
    collection's own.

    The folder found must not be writable by another user (``check_not_shared``): a ``lanes/`` in a
    shared working directory would otherwise let anyone who can write there choose what deploys run."""
    for candidate in (explicit, configured):
        if candidate:
            found = os.path.abspath(os.path.join(cwd, str(candidate)))
            break
    else:
        local = os.path.join(os.path.abspath(root or cwd), name)
        found = local if os.path.isdir(local) else os.path.join(collection_root, name)
    check_not_shared(found, f"the {name} folder")
    return found
