# Copyright: lanekit developers
# Apache-2.0
"""Files to and from a node that work when the login user is not the user lanekit runs as.

On a real cluster Ansible logs in as an operator account and becomes root with sudo. The
connection's own file transfer (``_transfer_file``, ``fetch_file``) runs as the LOGIN user, so it
can neither write into root's directories nor read the root-owned 0600 files lanekit's modules
write. These helpers go through modules instead, which run as the become user, the way
``ansible.builtin.copy`` and ``ansible.builtin.fetch`` do: a put lands in the login user's
temporary directory and a module moves it into place; a fetch reads through ``file_chunk``, one
bounded chunk per call (``slurp`` would return a whole log in one result). With a root login (or
no become) they behave the same.
"""
from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text

# Where a node keeps a failure bundle while the controller reads it: root's, private (0700; the
# same root as the image work directories), never the login user's home.
REMOTE_BUNDLE_ROOT = "/var/tmp/lanekit/bundles"
# Bytes of a node's file per module call: a rank's log (up to serve.logs' max_size x max_files) or an
# archive reaches the controller a chunk at a time, so neither end ever holds it whole in memory.
FETCH_CHUNK_BYTES = 4 * 2**20


def _module(action: Any, name: str, args: Mapping[str, Any], task_vars: Mapping[str, Any], what: str) -> dict:
    out = action._execute_module(module_name=name, module_args=dict(args), task_vars=task_vars)
    if out.get("failed") or out.get("unreachable"):
        raise AnsibleError(f"{what}: {to_text(out.get('msg') or 'failed').strip()}")
    return out


def fetch(action: Any, task_vars: Mapping[str, Any], remote: str, local: str) -> None:
    """Copy the node's ``remote`` to the controller's ``local``, read as the become user, chunk by chunk.

    The copy stops at the size the file had at the first read: a file still being written (or appended
    to forever) cannot keep it going. ``remote`` must be a regular file (a link or a device is refused)."""
    tmp = f"{local}.partial"
    try:
        os.unlink(tmp)  # a leftover of a killed copy (or a planted link): never written through
    except FileNotFoundError:
        pass
    # 0600 from the first byte: a node's logs and inspect may carry secrets the redaction missed.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            offset, size = 0, None
            while size is None or offset < size:
                want = FETCH_CHUNK_BYTES if size is None else min(FETCH_CHUNK_BYTES, size - offset)
                out = _module(action, "lanekit.serving.file_chunk", {"path": remote, "offset": offset, "size": want},
                              task_vars, f"reading {remote}")
                data = base64.b64decode(out.get("content") or "")
                if len(data) > want:
                    raise AnsibleError(f"reading {remote}: the node returned {len(data)} bytes for a chunk of {want}.")
                if size is None:
                    size = int(out.get("file_size") or 0)
                handle.write(data)
                offset += len(data)
                if not data:
                    break  # the file shrank meanwhile: what was there is copied
        os.replace(tmp, local)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _own_tmp(action: Any) -> tuple[str, Any]:
    """A temporary directory of this put's own, and the action's current one to give back after it.

    An action that transfers files (TRANSFERS_FILES) gets a temporary directory made for it before
    it runs, which its cleanup removes. ``_make_tmp_path`` replaces the connection's record of it and
    ``_remove_tmp_path`` clears that record, so without giving it back the action's own directory
    stays on the node, empty, in the login user's home."""
    previous = action._connection._shell.tmpdir
    return action._make_tmp_path(), previous


def _drop_own_tmp(action: Any, tmpdir: str, previous: Any) -> None:
    try:
        action._remove_tmp_path(tmpdir, force=True)
    except AnsibleError:
        pass
    action._connection._shell.tmpdir = previous


def put(action: Any, task_vars: Mapping[str, Any], local: str, remote: str, mode: str = "0600") -> None:
    """Copy the controller's ``local`` to the node's ``remote``, written as the become user.

    The bytes travel to the login user's temporary directory first (the connection can write
    there), then ``ansible.builtin.copy`` with ``remote_src`` puts them in place as the become user
    and the temporary directory is removed."""
    tmpdir, previous = _own_tmp(action)
    try:
        staged = action._connection._shell.join_path(tmpdir, os.path.basename(remote) or "file")
        action._transfer_file(local, staged)
        # Root reads anything; another become user needs the staged file made readable to it.
        action._fixup_perms2([tmpdir, staged])
        _module(action, "ansible.builtin.copy", {"src": staged, "dest": remote, "remote_src": True, "mode": mode},
                task_vars, f"writing {remote}")
    finally:
        _drop_own_tmp(action, tmpdir, previous)


def put_many(action: Any, task_vars: Mapping[str, Any], local_files: list[str], remote_dir: str) -> None:
    """Copy several controller files into the node's ``remote_dir`` (created 0700), as ``put`` does,
    with one module call for all of them (the files keep the modes they were staged with)."""
    tmpdir, previous = _own_tmp(action)
    try:
        stage = action._connection._shell.join_path(tmpdir, "stage")
        # A directory of its own, made as the login user: without pipelining Ansible also puts
        # module files into tmpdir, and those must not be copied along. The path is Ansible's own
        # temporary name, quoted.
        action._low_level_execute_command(f"mkdir -m 0700 {action._connection._shell.quote(stage)}", sudoable=False)
        staged = [action._connection._shell.join_path(stage, os.path.basename(path)) for path in local_files]
        for path, target in zip(local_files, staged, strict=True):
            action._transfer_file(path, target)
        action._fixup_perms2([tmpdir, stage, *staged])
        _module(action, "ansible.builtin.copy", {"src": stage + "/", "dest": remote_dir.rstrip("/") + "/",
                                                 "remote_src": True, "directory_mode": "0700"},
                task_vars, f"writing {remote_dir}")
    finally:
        _drop_own_tmp(action, tmpdir, previous)


def remove(action: Any, task_vars: Mapping[str, Any], remote: str) -> None:
    """Remove ``remote`` (a file or a directory tree) as the become user."""
    _module(action, "ansible.builtin.file", {"path": remote, "state": "absent"}, task_vars, f"removing {remote}")
