# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The stager's work on single files: verify one that is present, fetch one (with retries), the
worker pool that runs either over many files, and the guard that writes only into real directories.

One job: the per-file steps of ``_staging.Stager`` (which plans, takes the lock and publishes):

- verify: hash a present file, compare with what the journal, the manifest or the source vouches
  for, and journal it;
- fetch: a Hub download into scratch (or a local source's checked fd), copied into
  ``<dest>/.lanekit/tmp/`` while hashing (moved when it already sits on the destination
  filesystem), compared with the source's digest, fsynced, journalled, renamed under its name.

Stdlib only.
"""
from __future__ import annotations

import os
import stat as statmod
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, cast

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._files import fsync_dir
from ansible_collections.lanekit.serving.plugins.module_utils._weights._manifest import FilePlan, Journal
from ansible_collections.lanekit.serving.plugins.module_utils._weights._pagecache_sys import GIB, release_pages
from ansible_collections.lanekit.serving.plugins.module_utils._weights._stage_io import (
    copy_and_hash,
    hash_file,
    os_error_sentence,
    same_device,
    unlink_quiet,
)
from ansible_collections.lanekit.serving.plugins.module_utils._weights._stage_sources import (
    LocalSource,
    RetryableError,
    Source,
)


class Phase:
    """Files, bytes and seconds of one stage phase (plan, verify, fetch, publish); thread-safe adds."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.files = 0
        self.bytes = 0
        self.seconds = 0.0
        self._lock = threading.Lock()

    def add(self, nbytes: int) -> None:
        with self._lock:
            self.files += 1
            self.bytes += nbytes

    def as_dict(self) -> dict[str, Any]:
        s = round(self.seconds, 3)
        return {"files": self.files, "bytes": self.bytes, "seconds": s,
                "gib_per_s": round(self.bytes / GIB / self.seconds, 3) if self.seconds > 0 and self.bytes else 0.0}


class StageFiles:
    """The per-file steps; :class:`~._staging.Stager` sets the attributes below and runs them."""

    source: Source
    dest: str
    state_dir: str
    tmp_dir: str
    journal: Journal
    revision: str | None
    workers: int
    block_size: int
    retries: int
    retry_delay: float
    scratch_dir: str | None
    check_mode: bool
    release: bool
    fsync: bool
    direct_io: bool
    abort: threading.Event
    phases: dict[str, Phase]
    mismatches: list[str]

    def _dest_path(self, rel: str) -> str:
        return os.path.join(self.dest, *rel.split("/"))

    def _real_dirs(self, rel_dir: str, create: bool) -> str:
        """``dest/rel_dir`` made of real directories only (made when ``create``): a symlink on the
        way would let a rename or a delete land outside the destination, so it is refused."""
        current = self.dest
        for part in [p for p in rel_dir.split("/") if p]:
            current = os.path.join(current, part)
            try:
                st = os.lstat(current)
            except FileNotFoundError:
                if not create:
                    return current
                try:
                    os.mkdir(current, 0o755)
                except FileExistsError:
                    pass
                st = os.lstat(current)
            if not statmod.S_ISDIR(st.st_mode):
                kind = "a symlink" if statmod.S_ISLNK(st.st_mode) else "not a directory"
                raise LanekitError(
                    f"{current} in the weights destination is {kind}; lanekit writes only into real directories "
                    f"inside {self.dest} (a link could send a write or a delete elsewhere). Remove it and stage "
                    "again.")
        return current

    def _run_pool(self, plans: list[FilePlan], fn: Callable[[FilePlan, dict[str, str]], FilePlan | None],
                  digests: dict[str, str]) -> list[FilePlan]:
        out: list[FilePlan] = []
        if not plans:
            return out
        # largest first: keeps all workers busy until the end
        ordered = sorted(plans, key=lambda p: -p.spec.size)
        errors: list[LanekitError] = []
        with ThreadPoolExecutor(max_workers=min(self.workers, len(ordered))) as pool:
            futs = {pool.submit(fn, p, digests): p for p in ordered}
            for fut in as_completed(futs):
                try:
                    r = fut.result()
                except LanekitError as exc:
                    errors.append(exc)
                    self.abort.set()
                    continue
                except OSError as exc:
                    errors.append(LanekitError(os_error_sentence(exc, futs[fut].spec.path, self.dest)))
                    self.abort.set()
                    continue
                if r is not None:
                    out.append(r)
        if errors:
            first = [e for e in errors if "was aborted" not in str(e)] or errors
            raise first[0]
        return out

    def _hash_existing(self, plan: FilePlan, digests: dict[str, str]) -> FilePlan | None:
        """Hash a present file; return the plan if it must be fetched again."""
        path = self._dest_path(plan.spec.path)
        want1 = plan.spec.git_sha1 is not None and plan.spec.sha256 is None
        d = hash_file(path, self.block_size, want_git_sha1=want1, abort=self.abort)
        self.phases["verify"].add(d.size)
        exp = plan.expected_sha256
        if exp is None and self.source.kind == "local":
            # nothing vouches for either side: the source is the truth
            exp = hash_file(cast(LocalSource, self.source).open_fd(plan.spec.path), self.block_size,
                            abort=self.abort).sha256
        ok = d.size == plan.spec.size
        if want1:
            ok = ok and d.git_sha1 == plan.spec.git_sha1
        elif exp is not None:
            ok = ok and d.sha256 == exp
        else:
            ok = False
        if not ok:
            self.mismatches.append(plan.spec.path)
            return plan
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return plan
        if plan.dest_stat is not None and (st.st_ino, st.st_mtime_ns) != (plan.dest_stat.st_ino,
                                                                          plan.dest_stat.st_mtime_ns):
            return plan  # changed under us while hashing
        if self.check_mode:
            return None
        self.journal.record(plan.spec.path, plan.spec.size, d.sha256, st, self.revision)
        digests[plan.spec.path] = d.sha256
        return None

    def _fetch_one(self, plan: FilePlan, digests: dict[str, str]) -> None:
        spec = plan.spec
        scratch = self.scratch_dir or os.path.join(self.state_dir, "hf")
        last_exc = None
        for attempt in range(self.retries + 1):
            if self.abort.is_set():
                raise LanekitError(f"Staging of {spec.path} was aborted because another file failed.")
            try:
                self._fetch_attempt(plan, scratch, attempt, digests)
                return None
            except RetryableError as exc:
                last_exc = exc
                if attempt < self.retries:
                    time.sleep(min(self.retry_delay * (2 ** attempt), 120.0))
        raise LanekitError(f"{last_exc} (after {self.retries + 1} attempts)")

    def _fetch_attempt(self, plan: FilePlan, scratch: str, attempt: int, digests: dict[str, str]) -> None:
        spec = plan.spec
        want1 = spec.git_sha1 is not None and spec.sha256 is None
        final = self._dest_path(spec.path)
        self._real_dirs(os.path.dirname(spec.path), create=True)
        tmp = os.path.join(self.tmp_dir, f"{spec.path.replace('/', '%')}.{uuid.uuid4().hex[:8]}.part")
        # a local source hands over an fd it opened and checked; copy_and_hash closes it
        src, owned = self.source.open_path(spec, scratch, attempt)
        # what the stager owns is a download: a path (the fd of a local source is never owned)
        download = src if owned and isinstance(src, str) else None
        try:
            if download is not None and same_device(download, self.tmp_dir):
                # downloaded onto the destination filesystem already: hash, sync and move it
                d = hash_file(download, self.block_size, want_git_sha1=want1, abort=self.abort)
                fd = os.open(download, os.O_RDONLY)
                try:
                    os.fchmod(fd, 0o644)
                    if self.fsync:
                        os.fsync(fd)
                    if self.release:
                        release_pages(fd)
                finally:
                    os.close(fd)
                os.rename(download, tmp)
            else:
                d = copy_and_hash(src, tmp, self.block_size, want_git_sha1=want1, sync=self.fsync,
                                  release=self.release, abort=self.abort, direct=self.direct_io)
                if download is not None:
                    unlink_quiet(download)
            bad = None
            if d.size != spec.size:
                bad = f"is {d.size} bytes, expected {spec.size}"
            elif spec.sha256 and d.sha256 != spec.sha256:
                bad = f"has sha256 {d.sha256}, the source says {spec.sha256}"
            elif want1 and d.git_sha1 != spec.git_sha1:
                bad = f"has git blob id {d.git_sha1}, the source says {spec.git_sha1}"
            if bad:
                msg = f"The fetched copy of {spec.path} {bad}."
                if self.source.kind == "hf":
                    raise RetryableError(msg)
                raise LanekitError(f"{msg} The source {cast(LocalSource, self.source).path} is corrupt or changed "
                                   "while it was read.")
            st = os.stat(tmp)
            # journal first, then rename: rename keeps inode and mtime, so the entry stays valid
            self.journal.record(spec.path, spec.size, d.sha256, st, self.revision)
            os.replace(tmp, final)
            fsync_dir(os.path.dirname(final))
        finally:
            unlink_quiet(tmp)
        if owned:
            unlink_quiet(os.path.join(scratch, ".cache", "huggingface", "download", spec.path + ".metadata"))
        digests[spec.path] = d.sha256
        self.phases["fetch"].add(d.size)
