# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Durable file writes: the one atomic writer every part of the collection uses.

A reader (a node, a person, a later run) sees either the old file or the new one under its
final name, never a half-written one: write a temporary name in the same directory, fsync,
rename, fsync the directory. A write that fails leaves the old file (if any) and no temporary.

And the deletions inside a directory other users may write (a model directory on an export):
through directory fds opened ``O_NOFOLLOW`` one component at a time, never through a path.
"""
from __future__ import annotations

import errno
import os
import secrets
import stat as statmod

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError


def fsync_dir(path: str) -> None:
    """fsync a directory so a rename inside it survives a crash; best effort (some filesystems refuse)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# Directory fds opened one component at a time, never through a link: a write or deletion inside a tree
# another user can write lands inside it however they rename or re-link its parts meanwhile.
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)

# The temporary file's name is unpredictable and it is created O_EXCL|O_NOFOLLOW relative to a directory
# fd: whoever can write the directory (a model directory on an export another node mounts) cannot plant
# the name beforehand as a link that sends root's write elsewhere (O_EXCL fails on any existing name,
# a dangling link included). Nothing about the writer (its pid) is in the name.
_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_PLAIN_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)


def _parent_fd(path: str, inside: str | None) -> tuple[int, str]:
    """An fd of ``path``'s directory and the name in it. With ``inside`` (a tree other users may write),
    every directory from ``inside`` down is opened ``O_NOFOLLOW`` one component at a time (created when
    missing), so a component swapped for a link cannot move the write out of the tree; without it, the
    directory is the operator's own and is opened as the path says (links the operator made are kept)."""
    if inside is None:
        d = os.path.dirname(path) or "."
        os.makedirs(d, exist_ok=True)
        return os.open(d, _PLAIN_DIR_FLAGS), os.path.basename(path)
    rel = os.path.relpath(path, inside)
    parts = rel.split(os.sep)
    if os.path.isabs(rel) or any(part in ("", ".", "..") for part in parts):
        raise LanekitError(f"{path} is not a file inside {inside}; lanekit writes there only.")
    fd = os.open(inside, DIR_FLAGS)
    try:
        for part in parts[:-1]:
            try:
                child = os.open(part, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                os.mkdir(part, 0o755, dir_fd=fd)
                child = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]


def atomic_write(path: str, data: bytes | str, mode: int = 0o644, inside: str | None = None) -> None:
    """Write ``data`` (text is UTF-8 encoded) to ``path`` through a temp name in the same directory, fsync, rename.

    On any failure the temporary file is removed and the exception propagates; ``path`` keeps
    its previous content (or stays absent). ``inside``: the tree ``path`` must stay in when other users
    may write it (no directory below ``inside`` is followed as a link; see ``_parent_fd``). A link
    planted under the final name is replaced, never written through (rename replaces the name).
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    dir_fd, name = _parent_fd(path, inside)
    try:
        for _attempt in range(16):
            tmp = f".{name}.tmp-{secrets.token_hex(8)}"
            try:
                fd = os.open(tmp, _TMP_FLAGS, 0o600, dir_fd=dir_fd)
                break
            except FileExistsError:
                continue  # a name someone planted (or a 1 in 2**64 clash): draw another
        else:
            raise LanekitError(f"No temporary name for {path} could be created in its directory: 16 random "
                               "names all existed; something is planting names there.")
        try:
            try:
                view = memoryview(data)
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                os.fchmod(fd, mode)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except OSError:
                pass
            raise
        try:
            os.fsync(dir_fd)  # the rename survives a crash; best effort (some filesystems refuse)
        except OSError:
            pass
    finally:
        os.close(dir_fd)


def read_bytes(path: str) -> bytes | None:
    """The content of ``path``, or None when it does not exist (to compare before rewriting)."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def holds_exactly(path: str, data: bytes) -> bool:
    """Whether ``path`` is a regular file (not a link) holding exactly ``data``: the check before rewriting
    a file in a tree other users may write, read without following a link and no further than ``data``'s
    length plus one byte. Anything unreadable counts as different (the write then replaces the name)."""
    try:
        return read_regular(path, len(data), "") == data
    except (LanekitError, OSError):
        return False


def read_regular(path: str, limit: int, what: str, follow: bool = False) -> bytes | None:
    """The content of the regular file ``path`` (None when it does not exist), read without following a
    link at its name and at most ``limit`` bytes: a file on an export another node can write may be
    replaced by a link to /dev/zero, a FIFO or a huge file, and root on every node must not read it
    until out of memory (or block on it). Anything else is a LanekitError naming ``what`` and the fix.
    ``follow``: the caller has checked where a link at the name leads (a local source's files); the
    file it reaches must still be regular and within ``limit``."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LanekitError(f"{what} {path} is a symbolic link; lanekit reads it only as a regular file. "
                               "Remove the link and stage the weights again.") from None
        raise
    try:
        st = os.fstat(fd)
        if not statmod.S_ISREG(st.st_mode):
            raise LanekitError(f"{what} {path} is not a regular file; remove it and stage the weights again.")
        chunks = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise LanekitError(f"{what} {path} is larger than {limit} bytes, far more than lanekit writes; "
                                   "remove it and stage the weights again.")
        return b"".join(chunks)
    finally:
        os.close(fd)


def open_dir_inside(root: str, parts: list[str]) -> int:
    """A directory fd of ``root/<parts...>``, each part opened ``O_NOFOLLOW`` relative to the one
    before (``root`` itself too). Raises OSError (ELOOP/ENOTDIR) when a part is a link or no
    directory. The caller closes the fd."""
    fd = os.open(root, DIR_FLAGS)
    try:
        for part in parts:
            if part in ("", ".", "..") or "\x00" in part:
                raise OSError(f"{part!r} is not a name inside {root}")
            child = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def unlink_inside(root: str, rel: str, dry_run: bool = False, links_too: bool = False) -> bool:
    """Remove the regular file ``root/rel`` through directory fds (no link followed on the way,
    the file itself judged with lstat); True when it was a regular file (and is now removed).
    ``links_too``: a symlink there is removed as well (the link, never what it points to)."""
    parts = rel.split("/")
    try:
        fd = open_dir_inside(root, parts[:-1])
    except OSError:
        return False
    try:
        st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        if not (statmod.S_ISREG(st.st_mode) or (links_too and statmod.S_ISLNK(st.st_mode))):
            return False
        if not dry_run:
            os.unlink(parts[-1], dir_fd=fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _rmtree_fd(parent_fd: int, name: str) -> None:
    fd = os.open(name, DIR_FLAGS, dir_fd=parent_fd)
    try:
        with os.scandir(fd) as entries:
            children = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
        for child, is_dir in children:
            if is_dir:
                _rmtree_fd(fd, child)
            else:
                os.unlink(child, dir_fd=fd)  # a link is removed, never followed
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent_fd)


def rmtree_inside(root: str, rel: str) -> None:
    """Remove the directory ``root/rel`` and everything in it through directory fds: a link met
    anywhere is unlinked, not followed, and a part swapped for a link raises OSError."""
    parts = rel.split("/")
    fd = open_dir_inside(root, parts[:-1])
    try:
        _rmtree_fd(fd, parts[-1])
    finally:
        os.close(fd)


def check_output_path(path: str, where: str, example: str = "") -> str:
    """Refuse, with a sentence, an output path that cannot be a file: a directory, or one under a file.
    Returns its parent directory. ``where`` names the option (``plan_file /x``); ``example`` the file
    name a directory path probably meant."""
    if os.path.isdir(path):
        hint = f", e.g. {os.path.join(path, example)}" if example else ""
        raise LanekitError(f"{where} is a directory; give the path of a file{hint}.")
    parent = os.path.dirname(os.path.abspath(path))
    probe = parent
    while probe and not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if probe and not os.path.isdir(probe):
        raise LanekitError(f"{where} cannot be written: {probe} is a file, not a directory.")
    return parent


def write_output(path: str, data: bytes | str, where: str, mode: int = 0o644, dir_mode: int = 0o755,
                 example: str = "") -> bool:
    """Write an output file the user named (a plan, a lane, a commands file) atomically when its content
    changed; True when written. Every path problem is one sentence naming ``where``, never OS text alone."""
    parent = check_output_path(path, where, example)
    content = data.encode("utf-8") if isinstance(data, str) else data
    try:
        if read_bytes(path) == content:
            return False
    except OSError:
        pass  # unreadable: the write below says why, or replaces it
    try:
        os.makedirs(parent, mode=dir_mode, exist_ok=True)
    except OSError as exc:
        raise LanekitError(f"{where} cannot be written: its directory {parent} cannot be created "
                           f"({exc.strerror or exc}).") from None
    try:
        atomic_write(path, content, mode=mode)
    except OSError as exc:
        raise LanekitError(f"{where} cannot be written in {parent}: {exc.strerror or exc}.") from None
    return True
