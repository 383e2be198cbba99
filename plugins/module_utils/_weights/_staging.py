# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The weights stager: plan, resume, verify and publish one checkpoint directory.

One job: the whole directory. Validate the destination, plan from the manifest, the journal and
the source, take the lock, take the completeness marker away before the first byte changes, run
the per-file steps (``_stage_files``: verify, fetch), prune, and publish. Pipeline for every file
that is not already in place:

1. fetch (Hub download into a scratch directory, or nothing for a local source; ``_stage_sources``);
2. copy into ``<dest>/.lanekit/tmp/`` on the destination filesystem, hashing the bytes as they
   are written (when the fetched file already sits on the destination filesystem it is hashed
   and moved, no second copy; ``_stage_io``);
3. compare with the digest the source vouches for, fsync, journal, rename under the final name.

``MANIFEST.json`` (and ``SHA256SUMS``) are removed before the first file changes and written
last, so a directory with a manifest is always complete for the manifest's revision.

Stdlib only.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import stat as statmod
import threading
import time
from collections.abc import Callable
from typing import Any, cast

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._files import (
    atomic_write,
    fsync_dir,
    holds_exactly,
    unlink_inside,
)
from ansible_collections.lanekit.serving.plugins.module_utils._weights._manifest import (
    JOURNAL_NAME,
    MANIFEST_NAME,
    STATE_DIR,
    SUMS_NAME,
    FilePlan,
    FileSpec,
    Journal,
    build_manifest,
    dumps_manifest,
    extra_files,
    is_commit,
    load_manifest,
    plan_files,
    render_sums,
)
from ansible_collections.lanekit.serving.plugins.module_utils._weights._pagecache_sys import GIB, MIB
from ansible_collections.lanekit.serving.plugins.module_utils._weights._stage_files import Phase, StageFiles
from ansible_collections.lanekit.serving.plugins.module_utils._weights._stage_io import (
    StageLock,
    unlink_quiet,
)
from ansible_collections.lanekit.serving.plugins.module_utils._weights._stage_sources import LocalSource, Source
from ansible_collections.lanekit.serving.plugins.module_utils._workdir import private_dir

__all__ = ["Phase", "Stager"]


class Stager(StageFiles):
    """Stage ``source`` into ``dest``. ``run()`` returns the module result dict."""

    def __init__(self, source: Source, dest: str, model_id: str | None = None, revision: str | None = None,
                 verify: str = "quick", workers: int = 4, block_size: int = 16 * MIB, retries: int = 3,
                 retry_delay: float = 5.0, scratch_dir: str | None = None, check_mode: bool = False,
                 prune: bool = False, release_written_pages: bool = True, fsync: bool = True,
                 warn: Callable[[str], None] | None = None, root: str | None = None, direct_io: bool = True) -> None:
        self.source = source
        self.dest = dest
        self.root = root
        self.model_id = model_id
        self.revision = revision
        self.verify = verify
        self.workers = max(1, int(workers))
        self.block_size = int(block_size)
        self.retries = max(0, int(retries))
        self.retry_delay = float(retry_delay)
        self.scratch_dir = scratch_dir
        self.check_mode = check_mode
        self.prune = prune
        self.release = release_written_pages
        self.fsync = fsync
        self.direct_io = direct_io
        self.warn = warn or (lambda msg: None)
        self._set_dest(dest)
        self.phases = {n: Phase(n) for n in ("plan", "verify", "fetch", "publish")}
        self.abort = threading.Event()
        self.repaired: list[str] = []
        self.mismatches: list[str] = []
        self.listed_from = "source"

    def _set_dest(self, dest: str) -> None:
        self.dest = dest
        self.state_dir = os.path.join(dest, STATE_DIR)
        self.tmp_dir = os.path.join(self.state_dir, "tmp")
        self.journal = Journal(os.path.join(self.state_dir, JOURNAL_NAME), inside=dest)

    def _validate(self) -> None:
        if not os.path.isabs(self.dest):
            raise LanekitError(f"The weights destination {self.dest!r} must be an absolute path.")
        # Resolved once ('..' and symlinks): every check and every write below uses the real path.
        given = self.dest
        self._set_dest(os.path.realpath(given))
        if os.path.lexists(self.dest) and not os.path.isdir(self.dest):
            raise LanekitError(f"The weights destination {given} exists and is not a directory.")
        if self.verify not in ("quick", "full"):
            raise LanekitError(f"verify must be 'quick' or 'full', not {self.verify!r}.")
        if self.source.kind == "hf" and not is_commit(self.revision):
            raise LanekitError(
                f"Revision {self.revision!r} is not a full 40-hex commit; staging from the Hub needs the lane "
                "to pin model.revision to the exact commit (a branch, tag or short hash is refused).")
        if self.revision is not None and self.source.kind == "local" and not isinstance(self.revision, str):
            raise LanekitError("revision must be a string.")
        if self.scratch_dir:
            # the Hub client writes there as root: nobody else may plant a link or swap a download
            self.scratch_dir = private_dir(self.scratch_dir, "scratch directory (scratch_dir)",
                                           create=not self.check_mode)
        if self.root:
            root = self.root.rstrip("/") or "/"
            if not os.path.isdir(root):
                raise LanekitError(
                    f"The weights root {root} does not exist on the staging host; is the NFS export mounted "
                    "there?")
            real_root = os.path.realpath(root)
            if self.dest == real_root or not self.dest.startswith(real_root.rstrip("/") + "/"):
                resolved = f" (it resolves to {self.dest})" if self.dest != given else ""
                raise LanekitError(
                    f"The weights destination {given}{resolved} is not a directory under the weights root {root}.")
            return
        parent = os.path.dirname(self.dest.rstrip("/")) or "/"
        if not os.path.isdir(self.dest) and not os.path.isdir(parent):
            raise LanekitError(
                f"Neither the weights destination {self.dest} nor its parent {parent} exists; is the NFS "
                "export mounted on the staging host?")

    def run(self) -> dict[str, Any]:
        self._validate()
        t0 = time.monotonic()
        self._real_dirs(f"{STATE_DIR}/tmp", create=False)  # refuse a planted .lanekit link before reading it
        if self.prune:
            self._refuse_nested_models()
        manifest_path = os.path.join(self.dest, MANIFEST_NAME)
        old_manifest = load_manifest(manifest_path) if os.path.isdir(self.dest) else None
        specs = self._specs_from_manifest(old_manifest)
        self.listed_from = "manifest" if specs is not None else "source"
        if specs is None:
            specs = self.source.list_files()
        local = cast(LocalSource, self.source) if self.source.kind == "local" else None
        if local is not None and local.declared_revision and self.revision and \
                local.declared_revision != self.revision:
            raise LanekitError(
                f"The local source {local.path} is a manifest for revision "
                f"{local.declared_revision} but the lane pins {self.revision}.")
        revision = self.revision or (local.declared_revision if local is not None else None)
        same = old_manifest is not None and old_manifest.get("revision") == revision
        self.journal.load()
        plans = plan_files(specs, self.dest, self.journal, old_manifest if same else None,
                           verify=self.verify)
        wanted = [s.path for s in specs]
        extras = extra_files(self.dest, wanted) if os.path.isdir(self.dest) else []
        prunable = self._prunable(extras, old_manifest) if self.prune else []
        self.phases["plan"].seconds = time.monotonic() - t0

        to_fetch = [p for p in plans if p.action == "fetch"]
        to_hash = [p for p in plans if p.action == "hash"]
        result = {
            "path": self.dest, "revision": revision, "model_id": self.model_id,
            "source": self.source.describe(), "listed_from": self.listed_from, "files_total": len(specs),
            "bytes_total": sum(s.size for s in specs), "extra_files": extras,
            "kept_extra_files": [e for e in extras if e not in prunable] if self.prune else [],
            "huggingface_hub_version": getattr(self.source, "library_version", None),
        }
        if self.check_mode:
            # hashing is read-only: do it, so check mode names the files a real run would repair
            t = time.monotonic()
            bad = self._run_pool(to_hash, self._hash_existing, {})
            self.phases["verify"].seconds = time.monotonic() - t
            for p in bad:
                p.action = "fetch"
                p.reason = "digest mismatch"
                to_fetch.append(p)
            return self._check_result(result, plans, to_fetch, bad, old_manifest, same, prunable)

        lock = StageLock(os.path.join(self.state_dir, "lock"))
        os.makedirs(self.dest, exist_ok=True)
        self._real_dirs(STATE_DIR, create=True)
        lock.acquire()
        try:
            return self._stage(result, specs, plans, to_fetch, to_hash, old_manifest, revision, prunable)
        finally:
            self.journal.close()
            lock.release()

    def _refuse_nested_models(self) -> None:
        """Pruning a directory that holds another model's manifest below it could delete that model."""
        if not os.path.isdir(self.dest):
            return
        for root, dirs, files in os.walk(self.dest):
            if root == self.dest:
                # the revisions of this directory's own per-revision layout are not another model
                dirs[:] = [d for d in dirs if d not in (STATE_DIR, ".revisions")]
                continue
            if MANIFEST_NAME in files:
                raise LanekitError(
                    f"prune is refused for {self.dest}: {os.path.join(root, MANIFEST_NAME)} below it is another "
                    "staged model's manifest, whose files pruning could delete; give each model its own "
                    "directory (model.dir) or stage without prune.")

    def _prunable(self, extras: list[str], old_manifest: dict[str, Any] | None) -> list[str]:
        """The extra files a previous stage of this directory put there: listed by its manifest
        (or by the manifest a killed run set aside). Anything else is not lanekit's to delete."""
        listed: set[str] = set()
        previous = os.path.join(self.state_dir, "MANIFEST.previous.json")
        for manifest in (old_manifest, load_manifest(previous) if os.path.isfile(previous) else None):
            listed.update(f["path"] for f in (manifest or {}).get("files", []) if isinstance(f.get("path"), str))
        return [rel for rel in extras if rel in listed]

    def _specs_from_manifest(self, old_manifest: dict[str, Any] | None) -> list[FileSpec] | None:
        """A Hub commit is immutable: when the destination already holds a manifest of the same
        repository, commit and patterns, plan from it without contacting the Hub (a re-run then
        needs no network). Local sources are always listed (a directory can change)."""
        if self.source.kind != "hf" or old_manifest is None:
            return None
        src = old_manifest.get("source") or {}
        if old_manifest.get("revision") != self.revision or src.get("kind") != "hf":
            return None
        mine = self.source.describe()
        for key in ("repo_id", "allow_patterns", "ignore_patterns"):
            if src.get(key) != mine.get(key):
                return None
        return [FileSpec(f["path"], f["size"], sha256=f["sha256"], origin="hf") for f in old_manifest["files"]]

    def _check_result(self, result: dict[str, Any], plans: list[FilePlan], to_fetch: list[FilePlan],
                      bad: list[FilePlan], old_manifest: dict[str, Any] | None, same: bool,
                      prunable: list[str]) -> dict[str, Any]:
        would_fetch = sum(p.spec.size for p in to_fetch)
        manifest_changes = not same or old_manifest is None
        changed = bool(to_fetch) or manifest_changes or bool(prunable)
        result.update({
            "would_prune_files": prunable,
            "changed": changed, "would_fetch_bytes": would_fetch, "would_fetch_files": [p.spec.path for p in to_fetch],
            "would_repair_files": sorted(p.spec.path for p in bad),
            "files_hashed": self.phases["verify"].files, "bytes_hashed": self.phases["verify"].bytes,
            "mismatches": sorted(self.mismatches),
            "files": [p.as_dict() for p in plans if p.action != "ok"],
            "phases": {k: v.as_dict() for k, v in self.phases.items()},
            "files_fetched": 0, "bytes_fetched": 0,
            "diff": {"before": {"revision": (old_manifest or {}).get("revision"),
                                "files_digest": (old_manifest or {}).get("files_digest")},
                     "after": {"revision": result["revision"], "fetch": [p.spec.path for p in to_fetch]}},
        })
        return result

    def _unpublish(self) -> None:
        """Before the first byte changes, take away the completeness marker."""
        man = os.path.join(self.dest, MANIFEST_NAME)
        if os.path.exists(man):
            os.replace(man, os.path.join(self.state_dir, "MANIFEST.previous.json"))
        unlink_quiet(os.path.join(self.dest, SUMS_NAME))
        fsync_dir(self.dest)

    def _stage(self, result: dict[str, Any], specs: list[FileSpec], plans: list[FilePlan],
               to_fetch: list[FilePlan], to_hash: list[FilePlan], old_manifest: dict[str, Any] | None,
               revision: str | None, prunable: list[str]) -> dict[str, Any]:
        self._real_dirs(f"{STATE_DIR}/tmp", create=True)
        self._clean_tmp()
        digests: dict[str, str] = {}
        for p in plans:
            if p.action == "ok":
                # an "ok" plan is a file the journal vouches for: it has an entry
                digests[p.spec.path] = cast(dict, self.journal.get(p.spec.path))["sha256"]

        # verify phase: hash files that are present but not vouched for (or all, verify=full)
        t = time.monotonic()
        bad = self._run_pool(to_hash, self._hash_existing, digests)
        self.phases["verify"].seconds = time.monotonic() - t
        for p in bad:
            p.action = "fetch"
            to_fetch.append(p)
            self.repaired.append(p.spec.path)

        changed = False
        if to_fetch:
            self._check_space(to_fetch)
            self._unpublish()
            changed = True
            t = time.monotonic()
            self._run_pool(to_fetch, self._fetch_one, digests)
            self.phases["fetch"].seconds = time.monotonic() - t

        # final stat pass: every file in place with its size
        missing = []
        for s in specs:
            try:
                st = os.lstat(self._dest_path(s.path))
                if not statmod.S_ISREG(st.st_mode) or st.st_size != s.size:
                    missing.append(s.path)
            except FileNotFoundError:
                missing.append(s.path)
        if missing:
            raise LanekitError(f"After staging, these files are still missing or of the wrong size in "
                               f"{self.dest}: {', '.join(missing[:20])}.")

        pruned = []
        for rel in prunable:
            # through directory fds from the destination down: a parent swapped for a link since the
            # walk cannot send the deletion elsewhere
            if unlink_inside(self.dest, rel, links_too=True):
                pruned.append(rel)
        changed = changed or bool(pruned)

        t = time.monotonic()
        entries = [{"path": s.path, "size": s.size, "sha256": digests[s.path]} for s in specs]
        manifest = build_manifest(self.model_id, revision, self.source.describe(), entries)
        data = dumps_manifest(manifest)
        sums = render_sums(manifest)
        man_path = os.path.join(self.dest, MANIFEST_NAME)
        sums_path = os.path.join(self.dest, SUMS_NAME)
        # inside=self.dest: the model directory may be writable by a node that mounts the export; no
        # name or directory there is followed as a link (_files.atomic_write)
        if not holds_exactly(sums_path, sums):
            atomic_write(sums_path, sums, inside=self.dest)
            changed = True
        if not holds_exactly(man_path, data):
            atomic_write(man_path, data, inside=self.dest)  # last: the completeness marker
            changed = True
        self.journal.compact([s.path for s in specs])
        self.phases["publish"].seconds = time.monotonic() - t

        result.update({
            "changed": changed,
            "files_fetched": self.phases["fetch"].files, "bytes_fetched": self.phases["fetch"].bytes,
            "files_hashed": self.phases["verify"].files, "bytes_hashed": self.phases["verify"].bytes,
            "repaired": sorted(self.repaired), "mismatches": sorted(self.mismatches),
            "pruned": pruned, "manifest_sha256": hashlib.sha256(data).hexdigest(),
            "files_digest": manifest["files_digest"],
            "files": [p.as_dict() for p in plans if p.action != "ok"],
            "phases": {k: v.as_dict() for k, v in self.phases.items()},
            "huggingface_hub_version": getattr(self.source, "library_version", None),
            "diff": {"before": {"revision": (old_manifest or {}).get("revision"),
                                "files_digest": (old_manifest or {}).get("files_digest")},
                     "after": {"revision": revision, "files_digest": manifest["files_digest"],
                               "fetched": sorted(p.spec.path for p in to_fetch)}},
        })
        return result

    def _check_space(self, to_fetch: list[FilePlan]) -> None:
        need = sum(p.spec.size for p in to_fetch)
        try:
            sv = os.statvfs(self.dest)
        except OSError:
            return
        free = sv.f_bavail * sv.f_frsize
        if need > free:
            raise LanekitError(
                f"Staging needs {need / GIB:.1f} GiB more in {self.dest} but only {free / GIB:.1f} GiB are "
                "free; free space or stage elsewhere.")

    def _clean_tmp(self) -> None:
        # partial Hub downloads of a killed run (the client names them *.incomplete); only in our
        # own default scratch, which no other stage can be using while we hold the lock
        if not self.scratch_dir:
            hf_dl = os.path.join(self.state_dir, "hf", ".cache", "huggingface", "download")
            for root, _dirs, files in os.walk(hf_dl):
                for name in files:
                    if name.endswith(".incomplete"):
                        unlink_quiet(os.path.join(root, name))
        for name in os.listdir(self.tmp_dir):
            p = os.path.join(self.tmp_dir, name)
            try:
                if os.path.isdir(p) and not os.path.islink(p):
                    shutil.rmtree(p)
                else:
                    os.unlink(p)
            except OSError:
                pass
