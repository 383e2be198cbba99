# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The per-revision layout of a model directory: one directory per revision and an atomic switch.

Layout of a model directory ``D`` (``<lanekit_weights_root>/<model.dir>``)::

    D/.revisions/<key>/     one revision, staged and verified as a whole (its own MANIFEST.json,
                            SHA256SUMS and .lanekit/ state); <key> is the lane's model.revision,
                            or ``unpinned`` when the lane pins none
    D/current -> .revisions/<key>   the last revision staged completely (a relative symlink,
                            replaced by rename, so readers see the old or the new one, never a mix)

The plan publishes ``D/.revisions/<key>`` as the weights path the engines read, so a running lane
reads its own revision: staging another revision writes another directory and never a file under
it. A failed stage leaves ``current`` and every complete revision as they were. Old revisions are
removed only when no rank container on the lane's nodes reads them (the label io.lanekit.weights)
and they are neither the new nor the previous ``current``.

A directory staged before this layout (files and MANIFEST.json directly in ``D``) is migrated
without copying: its files are hard-linked into the revision directory with its journal, so the
staged bytes are reused, and the old names stay for a lane still reading them until nothing does.

Stdlib only.
"""
from __future__ import annotations

import os
import re
import stat as statmod
import uuid
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._files import (
    atomic_write,
    fsync_dir,
    open_dir_inside,
    read_regular,
    rmtree_inside,
    unlink_inside,
)
from ansible_collections.lanekit.serving.plugins.module_utils._weights._manifest import (
    JOURNAL_MAX_BYTES,
    JOURNAL_NAME,
    MANIFEST_NAME,
    STATE_DIR,
    SUMS_NAME,
    load_manifest,
)

__all__ = ["CURRENT_LINK", "REVISIONS_DIR", "UNPINNED", "check_layout", "collect_garbage", "current_key", "migrate_legacy",
           "revision_key", "revision_path", "split_revision_path", "switch_current"]

REVISIONS_DIR = ".revisions"
CURRENT_LINK = "current"
UNPINNED = "unpinned"
_KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def revision_key(revision: Any) -> str:
    """The directory name of a revision: the revision itself, or ``unpinned``."""
    if revision in (None, ""):
        return UNPINNED
    rev = str(revision)
    if not _KEY_RE.match(rev) or rev == UNPINNED:
        raise LanekitError(
            f"model.revision {rev!r} cannot name a revision directory: use a commit or a version of letters, "
            f"digits, '.', '_' and '-' (at most 128, not '{UNPINNED}').")
    return rev


def revision_path(model_dir: str, revision: Any) -> str:
    """``<model_dir>/.revisions/<key>``: the path the plan publishes and the engines read."""
    return f"{model_dir.rstrip('/')}/{REVISIONS_DIR}/{revision_key(revision)}"


def split_revision_path(path: str) -> tuple[str, str] | None:
    """(model dir, key) when ``path`` is a revision directory, else None (a plain directory)."""
    parent, key = os.path.split(path.rstrip("/"))
    model_dir, name = os.path.split(parent)
    if name != REVISIONS_DIR or not _KEY_RE.match(key) or not model_dir:
        return None
    return model_dir, key


def _real_dir_or_missing(path: str, what: str) -> bool:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if not statmod.S_ISDIR(st.st_mode):
        kind = "a symlink" if statmod.S_ISLNK(st.st_mode) else "not a directory"
        raise LanekitError(f"{path} ({what}) is {kind}; lanekit writes revisions only into real directories. "
                           "Remove it and stage again.")
    return True


def check_layout(model_dir: str, root: str | None) -> None:
    """Refuse a model directory outside the weights root, or a planted ``.revisions``/``current``,
    before anything is linked or written there."""
    if not os.path.isabs(model_dir):
        raise LanekitError(f"The weights path's model directory {model_dir!r} must be an absolute path.")
    if root:
        real_root = os.path.realpath(root.rstrip("/") or "/").rstrip("/")
        real = os.path.realpath(model_dir)
        if not real.startswith(real_root + "/"):
            raise LanekitError(f"The model directory {model_dir} (it resolves to {real}) is not a directory under the "
                               f"weights root {root}.")
    _real_dir_or_missing(os.path.join(model_dir, REVISIONS_DIR), "the revisions directory")
    current_key(model_dir)


def current_key(model_dir: str) -> str | None:
    """The revision ``current`` names, None when there is none. A ``current`` that is not
    lanekit's link is refused rather than replaced."""
    link = os.path.join(model_dir, CURRENT_LINK)
    try:
        st = os.lstat(link)
    except FileNotFoundError:
        return None
    if not statmod.S_ISLNK(st.st_mode):
        raise LanekitError(f"{link} exists and is not a symlink; lanekit keeps the name 'current' for the link to the "
                           "staged revision. Move it away and stage again.")
    target = os.readlink(link)
    parts = target.split("/")
    if len(parts) != 2 or parts[0] != REVISIONS_DIR or not _KEY_RE.match(parts[1]):
        raise LanekitError(f"{link} points to {target}, not to {REVISIONS_DIR}/<revision>; move it away and stage "
                           "again.")
    return parts[1]


def switch_current(model_dir: str, key: str, check_mode: bool = False) -> str | None:
    """Point ``current`` at ``key`` atomically (a new link renamed over the old one); return the
    previous key. Nothing changes when it already points there."""
    previous = current_key(model_dir)
    if previous == key or check_mode:
        return previous
    tmp = os.path.join(model_dir, f".{CURRENT_LINK}.{uuid.uuid4().hex[:8]}")
    os.symlink(f"{REVISIONS_DIR}/{key}", tmp)
    try:
        os.replace(tmp, os.path.join(model_dir, CURRENT_LINK))
    except OSError:
        os.unlink(tmp)
        raise
    fsync_dir(model_dir)
    return previous


def _legacy_manifest(model_dir: str) -> dict[str, Any] | None:
    """The flat (pre-revision) manifest, through the one loader that refuses paths outside ``D``;
    a MANIFEST.json that is a link is not lanekit's and is not read."""
    path = os.path.join(model_dir, MANIFEST_NAME)
    return load_manifest(path) if os.path.isfile(path) and not os.path.islink(path) else None


def _regular_inside(model_dir: str, rel: str) -> bool:
    """``model_dir/rel`` is a regular file reached without following any link."""
    return unlink_inside(model_dir, rel, dry_run=True)


def _link_from_inside(model_dir: str, rel: str, target: str) -> None:
    """Hard-link ``model_dir/rel`` to ``target``, reaching the source through directory fds
    (O_NOFOLLOW at every level), so a part swapped for a link cannot bring in a file from elsewhere."""
    parts = rel.split("/")
    fd = open_dir_inside(model_dir, parts[:-1])
    try:
        os.link(parts[-1], target, src_dir_fd=fd, follow_symlinks=False)
    finally:
        os.close(fd)


def migrate_legacy(model_dir: str, key: str, revision: Any, check_mode: bool = False) -> list[str]:
    """Hard-link a pre-revision staged directory's files into ``.revisions/<key>`` (no copy).

    Only when the flat directory's manifest is of the same revision and the revision directory
    has no manifest yet. The journal is copied (hard links keep inode and mtime, so it vouches for
    them there too); the manifest is linked (it is only ever replaced, never written in place).
    Returns the files linked (would be linked, in check mode).
    """
    manifest = _legacy_manifest(model_dir)
    if manifest is None or revision_key(manifest.get("revision")) != key:
        return []
    rev_dir = os.path.join(model_dir, REVISIONS_DIR, key)
    if os.path.exists(os.path.join(rev_dir, MANIFEST_NAME)):
        return []
    files = [f["path"] for f in manifest.get("files", []) if isinstance(f.get("path"), str)]
    present = [rel for rel in files if _regular_inside(model_dir, rel)]
    if check_mode or not present:
        return present
    linked = []
    for rel in present:
        target = os.path.join(rev_dir, *rel.split("/"))
        parent = os.path.dirname(target)
        os.makedirs(parent, mode=0o755, exist_ok=True)
        try:
            _link_from_inside(model_dir, rel, target)
        except FileExistsError:
            continue  # a killed migration linked it already (or the stage wrote it)
        except OSError:
            continue  # a part became a link or vanished since the check: not linked, staged afresh
        linked.append(rel)
    journal = read_regular(os.path.join(model_dir, STATE_DIR, JOURNAL_NAME), JOURNAL_MAX_BYTES, "The staging journal")
    state = os.path.join(rev_dir, STATE_DIR)
    if journal is not None and not os.path.exists(os.path.join(state, JOURNAL_NAME)):
        os.makedirs(state, mode=0o755, exist_ok=True)
        atomic_write(os.path.join(state, JOURNAL_NAME), journal, inside=model_dir)
    return linked


def collect_garbage(model_dir: str, keep: set[str], in_use: list[str] | None,
                    check_mode: bool = False) -> tuple[list[str], list[str]]:
    """Remove revisions nothing reads: (revision keys removed, legacy files removed).

    ``in_use`` is every weights path a rank container on the lane's nodes reads; None means it
    could not be told (a rank without the label), and then nothing is removed. ``keep`` are the
    new and the previous ``current``.
    """
    if in_use is None:
        return [], []
    # Every deletion below goes through directory fds opened O_NOFOLLOW from the model directory
    # down (_files.unlink_inside / rmtree_inside): whoever can write D (the export) cannot turn a
    # rename or a planted link into a deletion elsewhere.
    used = {os.path.normpath(p) for p in in_use}
    removed: list[str] = []
    revisions = os.path.join(model_dir, REVISIONS_DIR)
    if _real_dir_or_missing(revisions, "the revisions directory"):
        for key in sorted(os.listdir(revisions)):
            path = os.path.join(revisions, key)
            if key in keep or os.path.normpath(path) in used or not _KEY_RE.match(key):
                continue
            if os.path.islink(path) or not os.path.isdir(path):
                continue
            if os.path.lexists(os.path.join(path, STATE_DIR, "lock")):
                continue  # being staged right now (another lane of the same model directory)
            if not check_mode:
                rmtree_inside(model_dir, f"{REVISIONS_DIR}/{key}")
            removed.append(key)
    legacy: list[str] = []
    manifest = _legacy_manifest(model_dir)
    if manifest is not None and os.path.normpath(model_dir) not in used:
        for f in manifest.get("files", []):
            rel = f.get("path")
            if not isinstance(rel, str) or rel.split("/")[0] in (REVISIONS_DIR, CURRENT_LINK, STATE_DIR):
                continue
            # one name of a hard link: the revision directory keeps the data
            if unlink_inside(model_dir, rel, dry_run=check_mode):
                legacy.append(rel)
        if not check_mode:
            for name in (MANIFEST_NAME, SUMS_NAME):
                unlink_inside(model_dir, name)
            state = os.path.join(model_dir, STATE_DIR)
            if os.path.isdir(state) and not os.path.islink(state):
                rmtree_inside(model_dir, STATE_DIR)
    return removed, legacy
