# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Private work directories: make (or accept) a directory only the running user can change.

The modules run as root and keep work files in shared places (``/var/tmp/lanekit``, a scratch
directory, a bundle directory). A directory another local user created first, or one they can
write to, lets them swap a file between the moment lanekit hashes it and the moment it is used
(a patch between hashing and ``docker build``, a spool between save and send), or plant a
symlink that turns a root write into a write anywhere. ``private_dir`` refuses such a
directory with a sentence instead of using it.

Stdlib only; the controller (plugin_utils) uses it as well.
"""
from __future__ import annotations

import os
import stat as statmod

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError

__all__ = ["private_dir"]


def _owner_ok(st: os.stat_result, euid: int) -> bool:
    return st.st_uid in (0, euid)


def private_dir(path: str, what: str = "work directory", mode: int = 0o700, create: bool = True) -> str:
    """Return the resolved ``path``, a directory owned by this user with ``mode``, made if missing.

    Every existing directory above it must belong to root or to this user and be writable by
    nobody else unless it is sticky (``/tmp``, ``/var/tmp``): otherwise someone else could rename
    it away and put their own in its place. The directory itself must belong to this user and be
    writable by nobody else; a looser read mode of our own directory is tightened to ``mode``.
    With ``create=False`` (check mode) nothing is made or changed; an absent directory is fine.
    Raises LanekitError naming the directory, its owner and mode, and the fix.
    """
    if not os.path.isabs(path):
        raise LanekitError(f"The {what} {path!r} must be an absolute path.")
    euid = os.geteuid()
    # Resolve symlinks once (a system link such as /var/run -> /run is fine), then walk the
    # resolved path with lstat only: a link that appears on it afterwards is refused.
    resolved = os.path.realpath(path)
    parts = [p for p in resolved.split(os.sep) if p]
    current = os.sep
    for index, part in enumerate(parts):
        current = os.path.join(current, part)
        last = index == len(parts) - 1
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            if not create:
                return resolved
            try:
                os.mkdir(current, mode)
            except FileExistsError:
                pass  # made by someone else between the two calls: checked below like any other
            st = os.lstat(current)
        if statmod.S_ISLNK(st.st_mode) or not statmod.S_ISDIR(st.st_mode):
            kind = "a symlink" if statmod.S_ISLNK(st.st_mode) else "not a directory"
            raise LanekitError(
                f"The {what} {path} cannot be used: {current} is {kind} (it changed while it was checked); "
                f"remove it and run again.")
        perm = statmod.S_IMODE(st.st_mode)
        if last:
            if st.st_uid != euid or perm & 0o022:
                raise LanekitError(
                    f"The {what} {resolved} belongs to uid {st.st_uid} with mode {perm:04o}; lanekit needs it "
                    f"owned by uid {euid} and writable by nobody else (another user could swap its files "
                    f"between check and use). Remove it (or chown it and chmod {mode:04o}) and run again.")
            if perm != mode and create:
                os.chmod(current, mode)
        elif not _owner_ok(st, euid) or (perm & 0o022 and not perm & statmod.S_ISVTX):
            raise LanekitError(
                f"The {what} {resolved} cannot be kept private: the directory above it, {current}, belongs to "
                f"uid {st.st_uid} with mode {perm:04o} (another user could replace what lies below it). "
                f"Choose a {what} whose every parent directory belongs to root or to uid {euid}.")
    return resolved
