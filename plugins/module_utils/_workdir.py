# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Private work directories: make (or accept) a directory only the running user can change.

The modules run as root and keep work files in shared places (``/var/tmp/lanekit``, a scratch
directory, a bundle directory). A directory another local user created first, or one they can
write to, lets them swap a file between the moment lanekit hashes it and the moment it is used
(a patch between hashing and ``docker build``, a spool between save and send), or plant a
symlink that turns a root write (or a chmod, or a prune) into one anywhere. ``private_dir``
refuses such a directory with a sentence instead of using it.

The path is walked from ``/`` one component at a time with ``lstat``, never resolved first: a
resolved path hides the link that led there and the directory that held it. Stdlib only; the
controller (plugin_utils) uses it as well.
"""
from __future__ import annotations

import os
import stat as statmod

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError

__all__ = ["private_dir"]

# As the kernel's ELOOP: a chain of links this long is a loop or an attack, not a layout.
MAX_LINKS = 40


def _trusted_owner(st: os.stat_result, euid: int) -> bool:
    return st.st_uid in (0, euid)


def _open_to_others(perm: int) -> bool:
    """Group or others may rename entries away (write without the sticky bit of /tmp)."""
    return bool(perm & 0o022) and not perm & statmod.S_ISVTX


def private_dir(path: str, what: str = "work directory", mode: int = 0o700, create: bool = True) -> str:
    """Return ``path`` as checked: a directory owned by this user that nobody else can write.

    Every component is looked at with ``lstat`` on the way down from ``/``. A directory above the
    work directory must belong to root or to this user and be writable by nobody else unless it
    is sticky (``/tmp``, ``/var/tmp``): otherwise someone else could rename it away and put their
    own in its place. A symlink above it is followed only when root or this user owns it (a
    system link such as ``/var -> /private/var``), and its target is walked with the same checks.
    The work directory itself must be a real directory (never a link), belong to this user and be
    writable by nobody else. Missing directories are made with ``mode``; the mode of a directory
    lanekit did not make in this call is never changed (a chmod through a planted path would land
    on someone else's directory). With ``create=False`` (check mode) nothing is made.

    The returned path holds no link, and every directory on it was checked: later steps use it.
    Raises LanekitError naming the path, the owner and mode found, and the fix.
    """
    if not os.path.isabs(path):
        raise LanekitError(f"The {what} {path!r} must be an absolute path.")
    euid = os.geteuid()
    pending = [p for p in path.split(os.sep) if p not in ("", ".")]
    if ".." in pending:
        raise LanekitError(f"The {what} {path} contains '..'; give it as a plain absolute path.")
    current, links = os.sep, 0
    while pending:
        part = pending.pop(0)
        if part == "..":  # only from a link's target, which names its own path from a checked place
            current = os.path.dirname(current)
            continue
        candidate = os.path.join(current, part)
        last = not pending
        made = False
        try:
            st = os.lstat(candidate)
        except FileNotFoundError:
            if not create:
                return os.path.join(candidate, *pending)
            try:
                os.mkdir(candidate, mode)
                made = True
            except FileExistsError:
                pass  # made by someone else between the two calls: checked below like any other
            st = os.lstat(candidate)
        perm = statmod.S_IMODE(st.st_mode)
        if statmod.S_ISLNK(st.st_mode):
            if last:
                raise LanekitError(
                    f"The {what} {path} is a symlink (to {os.readlink(candidate)}, owned by uid {st.st_uid}); lanekit "
                    f"uses only a real directory there, so that nothing is written, chmod-ed or pruned elsewhere. "
                    f"Remove the link (or give the directory it points to) and run again.")
            if not _trusted_owner(st, euid):
                raise LanekitError(
                    f"The {what} {path} cannot be used: {candidate} is a symlink owned by uid {st.st_uid}, who could "
                    f"point it anywhere. Remove the link, or choose a {what} whose path holds only links of root "
                    f"or uid {euid}.")
            links += 1
            if links > MAX_LINKS:
                raise LanekitError(f"The {what} {path} passes through more than {MAX_LINKS} symlinks; give its real path.")
            target = os.readlink(candidate)
            if os.path.isabs(target):
                current = os.sep
            pending[:0] = [p for p in target.split(os.sep) if p not in ("", ".")]
            continue
        if not statmod.S_ISDIR(st.st_mode):
            raise LanekitError(
                f"The {what} {path} cannot be used: {candidate} is not a directory; remove it or choose another path.")
        if last:
            if st.st_uid != euid or perm & 0o022:
                raise LanekitError(
                    f"The {what} {candidate} belongs to uid {st.st_uid} with mode {perm:04o}; lanekit needs it "
                    f"owned by uid {euid} and writable by nobody else (another user could swap its files "
                    f"between check and use). Remove it (or chown it and chmod {mode:04o}) and run again.")
            if made and perm != mode:
                os.chmod(candidate, mode)  # our own new directory: the umask may have left it looser or tighter
        elif not _trusted_owner(st, euid) or _open_to_others(perm):
            raise LanekitError(
                f"The {what} {path} cannot be kept private: the directory above it, {candidate}, belongs to "
                f"uid {st.st_uid} with mode {perm:04o} (another user could replace what lies below it). "
                f"Choose a {what} whose every parent directory belongs to root or to uid {euid}.")
        elif made and perm != mode:
            os.chmod(candidate, mode)
        current = candidate
    return current
