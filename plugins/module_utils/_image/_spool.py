# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The spools of the image stream. On the builder: one ``docker save`` into a file that the
stream's readers follow while it grows, its sha256 (the relay's origin signatures sign it), the
byte ranges of a shortened (delta) stream, and the clean-up of spools a killed server left. On a
node: the received stream, held in a private file until its digest (and on a relay the builder's
signature) is checked, so ``docker load`` never reads a byte that was not proven."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from typing import IO, Any, cast

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import DockerCLI, tail
from ansible_collections.lanekit.serving.plugins.module_utils._workdir import private_dir

CHUNK = 4 << 20
SPOOL_PREFIX = "stream-"


def stale_spools(spool_dir: str, alive: Callable[[int], bool] | None = None) -> list:
    """Spool files in ``spool_dir`` left by a server that no longer runs (its pid is in the name)."""
    alive = alive or (lambda pid: os.path.exists(f"/proc/{pid}"))
    found = []
    for name in sorted(os.listdir(spool_dir)):
        if not (name.startswith(SPOOL_PREFIX) and name.endswith(".tar")):
            continue
        pid = name[:-4].rpartition("-")[2]
        if pid.isdigit() and int(pid) != os.getpid() and not alive(int(pid)):
            found.append(os.path.join(spool_dir, name))
    return found


class SaveSpool:
    """``docker save`` into a file that readers follow while it grows."""

    def __init__(self, docker: DockerCLI, ref: str, path: str) -> None:
        self.docker = docker
        self.ref = ref
        self.path = path
        self.cond = threading.Condition()
        self.written = 0
        self.done = False
        self.error = ""
        self.seconds = 0.0
        self.index: dict[str, list[Any]] | None = None
        self.index_lock = threading.Lock()
        self.sha256 = ""
        self.thread = threading.Thread(target=self._run, name="docker-save", daemon=True)

    def start(self) -> None:
        # The file exists before any target connects; readers wait for it to grow. In the run's private
        # work directory; O_NOFOLLOW all the same, as every file the collection creates (_files.atomic_write).
        os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600))
        self.thread.start()

    def _run(self) -> None:
        start = time.monotonic()
        try:
            proc = self.docker.popen(["image", "save", self.ref], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            # Both are pipes (stdout=PIPE, stderr=PIPE), never None.
            stdout, stderr = cast(IO[bytes], proc.stdout), cast(IO[bytes], proc.stderr)
            fd = os.open(self.path, os.O_WRONLY)
            digest = hashlib.sha256()
            try:
                while True:
                    chunk = stdout.read1(CHUNK) if hasattr(stdout, "read1") else stdout.read(CHUNK)
                    if not chunk:
                        break
                    digest.update(chunk)
                    view = memoryview(chunk)
                    while view:
                        written = os.write(fd, view)
                        view = view[written:]
                    with self.cond:
                        self.written += len(chunk)
                        self.cond.notify_all()
            finally:
                os.close(fd)
            self.sha256 = digest.hexdigest()
            err = stderr.read()
            if proc.wait() != 0:
                self.error = f"docker save {self.ref} failed (exit {proc.returncode}): {tail(err, 5)}"
        except OSError as exc:
            self.error = f"docker save {self.ref} could not be spooled to {self.path}: {exc}"
        with self.cond:
            self.done = True
            self.seconds = round(time.monotonic() - start, 2)
            self.cond.notify_all()

    def wait_beyond(self, offset: int, timeout: float) -> tuple[int, bool, str]:
        with self.cond:
            if self.written <= offset and not self.done:
                self.cond.wait(timeout)
            return self.written, self.done, self.error

    def wait_done(self, timeout: float) -> bool:
        with self.cond:
            self.cond.wait_for(lambda: self.done, timeout)
            return self.done and not self.error

    def _index(self) -> dict | None:
        """Members of the finished save (name, byte range, link) and the manifest's layer paths."""
        with self.index_lock:
            if self.index is None:
                try:
                    with tarfile.open(self.path, "r:") as tar:
                        members = tar.getmembers()
                        handle = tar.extractfile("manifest.json")
                        manifest = json.load(handle) if handle else None
                    entries = []
                    for number, member in enumerate(members):
                        end = (members[number + 1].offset if number + 1 < len(members)
                               else member.offset_data + (member.size + 511) // 512 * 512)
                        link = ""
                        if member.issym():
                            link = os.path.normpath(os.path.join(os.path.dirname(member.name), member.linkname))
                        entries.append((os.path.normpath(member.name), member.offset, end, link))
                    layers = (manifest[0].get("Layers") if isinstance(manifest, list) and len(manifest) == 1 else None)
                    self.index = {"entries": entries, "layers": [os.path.normpath(p) for p in layers or []]}
                except (OSError, tarfile.TarError, ValueError, KeyError, IndexError, AttributeError):
                    self.index = {"entries": [], "layers": []}
            return self.index if self.index["entries"] else None

    def delta_ranges(self, skip: int, layer_count: int) -> list | None:
        """Byte ranges of the save without the layer files of the ``skip`` bottom layers, or None
        when the save's layout is not understood (the caller then sends everything)."""
        index = self._index()
        if not index or len(index["layers"]) != layer_count:
            return None
        skipped = set(index["layers"][:skip]) - set(index["layers"][skip:])
        kept_links = {link for name, _start, _end, link in index["entries"] if link and name not in skipped}
        skipped -= kept_links
        ranges: list = []
        for name, start, end, _link in index["entries"]:
            if name in skipped:
                continue
            if ranges and ranges[-1][1] == start:
                ranges[-1] = (ranges[-1][0], end)
            else:
                ranges.append((start, end))
        return ranges


class ReceiveSpool:
    """The stream a node received, in a file nobody else can open or swap.

    ``docker load`` applies an archive's tags as soon as it reaches the archive's end marker, and
    its tar reader is not ours: so nothing reaches it until the whole stream is proven. The file is
    made with mode 0600 in a private directory (``private_dir``) and unlinked at once; only this
    process's descriptor reaches it, and ``docker load`` gets that descriptor as its stdin.
    It needs room for one image archive next to docker's own storage."""

    def __init__(self, spool_dir: str) -> None:
        self.directory = directory = private_dir(spool_dir, "receive spool directory (spool_dir)")
        try:
            self.fd, path = tempfile.mkstemp(prefix="receive-", suffix=".tar", dir=directory)
        except OSError as exc:
            raise LanekitError(f"cannot make the receive spool in {directory} ({exc}); set spool_dir "
                               f"(image_work_dir) to a directory with room for the image.") from None
        os.unlink(path)
        self.size = 0

    def write(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        try:
            while view:
                written = os.write(self.fd, view)
                view = view[written:]
        except OSError as exc:
            raise LanekitError(f"cannot hold the received image in {self.directory} ({exc}); free room there or set "
                               f"spool_dir (image_work_dir) to a directory with room for the image.") from None
        self.size += len(data)

    def reset(self) -> None:
        """Forget what was received (a relay's bytes were refused: start over from offset 0)."""
        os.ftruncate(self.fd, 0)
        os.lseek(self.fd, 0, os.SEEK_SET)
        self.size = 0

    def reader(self) -> int:
        """The descriptor, at offset 0, for ``docker load``'s stdin."""
        os.lseek(self.fd, 0, os.SEEK_SET)
        return self.fd

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def docker_load(popen: Callable[..., subprocess.Popen], spool: ReceiveSpool) -> tuple[int, bytes, bytes]:
    """``docker load`` of a proven spool (its descriptor is the command's stdin): (rc, out, err)."""
    proc = popen(["image", "load"], stdin=spool.reader(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate()
    return proc.returncode, out or b"", err or b""
