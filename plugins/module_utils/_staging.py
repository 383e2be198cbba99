# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Stage a checkpoint into one directory: verified, resumable, atomic per file.

Pipeline for every file that is not already in place:

1. fetch (Hub download into a scratch directory, or nothing for a local source);
2. copy into ``<dest>/.lanekit/tmp/`` on the destination filesystem, hashing the bytes as they
   are written (when the fetched file already sits on the destination filesystem it is hashed
   and moved, no second copy);
3. compare with the digest the source vouches for, fsync, journal, rename under the final name.

``MANIFEST.json`` (and ``SHA256SUMS``) are removed before the first file changes and written
last, so a directory with a manifest is always complete for the manifest's revision.

Stdlib only, except the Hub source, which imports huggingface_hub lazily.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fnmatch
import hashlib
import json
import os
import shutil
import socket
import stat as statmod
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor, as_completed

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._manifest import (
    JOURNAL_NAME,
    MANIFEST_NAME,
    OWN_NAMES,
    STATE_DIR,
    SUMS_NAME,
    FileSpec,
    Journal,
    atomic_write,
    build_manifest,
    check_relpath,
    dumps_manifest,
    extra_files,
    fsync_dir,
    is_commit,
    load_manifest,
    parse_sums,
    plan_files,
    read_bytes,
    render_sums,
)

GIB = 1 << 30
MIB = 1 << 20
# Names a source tree may carry that are never checkpoint files.
SOURCE_SKIP_DIRS = (".git", ".cache", STATE_DIR)
_SYNC_FILE_RANGE_WRITE = 2

_libc = None
_libc_lock = threading.Lock()


def _get_libc():
    global _libc
    with _libc_lock:
        if _libc is None:
            try:
                _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
                _libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
                _libc.sync_file_range.restype = ctypes.c_int
            except (OSError, AttributeError):
                _libc = False
    return _libc


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to start writing back a range now (sync_file_range WRITE); best effort.

    Starting writeback while the copy goes on keeps the final fsync short and keeps the dirty
    page count of the staging host low.
    """
    libc = _get_libc()
    if libc:
        libc.sync_file_range(fd, offset, length, _SYNC_FILE_RANGE_WRITE)


def release_pages(fd: int, offset: int = 0, length: int = 0) -> None:
    """posix_fadvise DONTNEED on one of *our* files (clean pages only; never other files)."""
    try:
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
    except (OSError, AttributeError):
        pass


def git_blob_sha1_prefix(size: int) -> bytes:
    return b"blob %d\x00" % size


class Digest:
    __slots__ = ("sha256", "git_sha1", "size")

    def __init__(self, sha256, git_sha1, size):
        self.sha256 = sha256
        self.git_sha1 = git_sha1
        self.size = size


def _write_all(fd, view) -> None:
    while view:
        n = os.write(fd, view)
        view = view[n:]


def copy_and_hash(src: str, dst: str, block_size: int = 16 * MIB, want_git_sha1: bool = False,
                  sync: bool = True, release: bool = True, abort=None) -> Digest:
    """Copy ``src`` to the new file ``dst`` (O_EXCL), hashing the bytes as they are written.

    ``dst`` is fsynced before returning. With ``release`` the written (and read) pages of these
    two files are released from the page cache as the copy goes, so staging does not flood the
    staging host's memory.
    """
    st = os.stat(src)
    fin = os.open(src, os.O_RDONLY)
    try:
        fout = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except BaseException:
        os.close(fin)
        raise
    h = hashlib.sha256()
    h1 = hashlib.sha1(git_blob_sha1_prefix(st.st_size)) if want_git_sha1 else None
    total = 0
    flushed = 0
    window = max(block_size * 4, 64 * MIB)
    try:
        try:
            os.posix_fadvise(fin, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        except OSError:
            pass
        buf = bytearray(block_size)
        mv = memoryview(buf)
        while True:
            if abort is not None and abort.is_set():
                raise LanekitError("Staging of %s was aborted because another file failed." % src)
            n = os.readv(fin, [buf])
            if n == 0:
                break
            chunk = mv[:n]
            h.update(chunk)
            if h1 is not None:
                h1.update(chunk)
            _write_all(fout, chunk)
            total += n
            if sync and total - flushed >= window:
                start_writeback(fout, flushed, total - flushed)
                if release and flushed >= window:
                    # pages of the window before last are written back by now
                    release_pages(fout, 0, flushed - window)
                    release_pages(fin, 0, flushed - window)
                flushed = total
        os.fchmod(fout, 0o644)
        if sync:
            os.fsync(fout)
        if release:
            release_pages(fout)
            release_pages(fin)
    finally:
        os.close(fin)
        os.close(fout)
    return Digest(h.hexdigest(), h1.hexdigest() if h1 is not None else None, total)


def hash_file(path: str, block_size: int = 16 * MIB, want_git_sha1: bool = False,
              release: bool = False, abort=None) -> Digest:
    """sha256 (and git blob sha1) of a file, read in large sequential blocks."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        except OSError:
            pass
        h = hashlib.sha256()
        h1 = hashlib.sha1(git_blob_sha1_prefix(size)) if want_git_sha1 else None
        buf = bytearray(block_size)
        mv = memoryview(buf)
        total = 0
        while True:
            if abort is not None and abort.is_set():
                raise LanekitError("Hashing of %s was aborted because another file failed." % path)
            n = os.readv(fd, [buf])
            if n == 0:
                break
            h.update(mv[:n])
            if h1 is not None:
                h1.update(mv[:n])
            total += n
        if release:
            release_pages(fd)
    finally:
        os.close(fd)
    return Digest(h.hexdigest(), h1.hexdigest() if h1 is not None else None, total)


def filter_paths(paths, allow_patterns=None, ignore_patterns=None):
    """Same semantics as huggingface_hub's filter_repo_objects: fnmatch globs, a pattern ending
    in '/' matches everything below that folder, allow = keep if any matches, ignore = drop if
    any matches."""
    def norm(pats):
        if pats is None:
            return None
        if isinstance(pats, str):
            pats = [pats]
        return [p + "*" if p.endswith("/") else p for p in pats]

    allow = norm(allow_patterns)
    ignore = norm(ignore_patterns)
    for p in paths:
        if allow is not None and not any(fnmatch.fnmatch(p, a) for a in allow):
            continue
        if ignore is not None and any(fnmatch.fnmatch(p, i) for i in ignore):
            continue
        yield p


# ---------------------------------------------------------------------------------------------
# sources


class LocalSource:
    """A directory (a mirror, an NFS export, a Hugging Face cache snapshot) on the staging host.

    Symlinks are followed to real files (a Hub cache snapshot is a symlink farm into blobs/);
    a dangling one is an error. A lanekit ``MANIFEST.json`` or a ``SHA256SUMS`` in the source
    supplies the digests every copy must match.
    """

    kind = "local"

    def __init__(self, path, allow_patterns=None, ignore_patterns=None):
        self.path = path
        self.allow_patterns = allow_patterns
        self.ignore_patterns = ignore_patterns
        self.real = {}
        self.declared_revision = None

    def describe(self):
        return {"kind": "local", "path": self.path, "allow_patterns": self.allow_patterns,
                "ignore_patterns": self.ignore_patterns}

    def list_files(self):
        if not os.path.isabs(self.path):
            raise LanekitError("The local weights source %r must be an absolute path." % self.path)
        if not os.path.isdir(self.path):
            raise LanekitError("The local weights source %s does not exist or is not a directory." % self.path)
        found = {}
        dangling = []
        seen_dirs = set()
        for root, dirs, files in os.walk(self.path, followlinks=True):
            try:
                rst = os.stat(root)
            except OSError:
                dirs[:] = []
                continue
            key = (rst.st_dev, rst.st_ino)
            if key in seen_dirs:
                dirs[:] = []
                continue
            seen_dirs.add(key)
            rel_root = os.path.relpath(root, self.path)
            if rel_root == ".":
                dirs[:] = [d for d in dirs if d not in SOURCE_SKIP_DIRS]
                files = [f for f in files if f not in (MANIFEST_NAME, SUMS_NAME)]
            dirs.sort()
            for name in sorted(files):
                full = os.path.join(root, name)
                rel = name if rel_root == "." else rel_root.replace(os.sep, "/") + "/" + name
                try:
                    st = os.stat(full)
                except FileNotFoundError:
                    dangling.append(rel)
                    continue
                if not statmod.S_ISREG(st.st_mode):
                    continue
                found[rel] = (os.path.realpath(full), st.st_size)
            # a directory symlink that dangles shows up in dirs; report it as well
            for d in list(dirs):
                if not os.path.exists(os.path.join(root, d)):
                    rel = d if rel_root == "." else rel_root.replace(os.sep, "/") + "/" + d
                    dangling.append(rel + "/")
        if dangling:
            raise LanekitError(
                "The weights source %s has dangling symlinks (they point to nothing, as in a Hub cache "
                "whose blobs were not copied): %s. Copy the real files or point the source at a "
                "complete snapshot." % (self.path, ", ".join(sorted(dangling)[:20])))
        declared = self._declared_digests()
        specs = []
        for rel in filter_paths(sorted(found), self.allow_patterns, self.ignore_patterns):
            check_relpath(rel)
            real, size = found[rel]
            self.real[rel] = real
            d = declared.get(rel) or {}
            if d.get("size") is not None and int(d["size"]) != size:
                raise LanekitError(
                    "Source file %s is %d bytes but the source's own manifest says %d; the mirror is "
                    "incomplete or corrupt." % (os.path.join(self.path, rel), size, int(d["size"])))
            specs.append(FileSpec(rel, size, sha256=d.get("sha256"), origin=real))
        if not specs:
            raise LanekitError(
                "No file of the weights source %s matches allow_patterns=%r / ignore_patterns=%r."
                % (self.path, self.allow_patterns, self.ignore_patterns))
        return specs

    def _declared_digests(self):
        out = {}
        sums = read_bytes(os.path.join(self.path, SUMS_NAME))
        if sums is not None:
            for p, sha in parse_sums(sums.decode("utf-8", "replace")).items():
                out[p] = {"sha256": sha}
        man = load_manifest(os.path.join(self.path, MANIFEST_NAME))
        if man is not None:
            self.declared_revision = man.get("revision")
            for f in man["files"]:
                out[f["path"]] = {"sha256": f.get("sha256"), "size": f.get("size")}
        return out

    def open_path(self, spec, scratch, attempt):
        return self.real[spec.path], False


class HubSource:
    """A Hugging Face Hub repository (or a Hub-compatible mirror) at a pinned commit."""

    kind = "hf"

    def __init__(self, repo_id, revision, endpoint=None, token=None, allow_patterns=None,
                 ignore_patterns=None, disable_xet=False, etag_timeout=None):
        self.repo_id = repo_id
        self.revision = revision
        self.endpoint = endpoint or None
        self.token = token or None
        self.allow_patterns = allow_patterns
        self.ignore_patterns = ignore_patterns
        self.disable_xet = disable_xet
        self.etag_timeout = etag_timeout
        self._hf = None
        self.library_version = None

    def describe(self):
        return {"kind": "hf", "repo_id": self.repo_id, "endpoint": self.endpoint,
                "allow_patterns": self.allow_patterns, "ignore_patterns": self.ignore_patterns}

    def _import(self):
        if self._hf is None:
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
            if self.endpoint:
                os.environ["HF_ENDPOINT"] = self.endpoint
            if self.disable_xet:
                os.environ["HF_HUB_DISABLE_XET"] = "1"
            import huggingface_hub  # guarded by the module (missing_required_lib)
            from huggingface_hub import constants as hf_constants
            if self.disable_xet:
                hf_constants.HF_HUB_DISABLE_XET = True
            self._hf = huggingface_hub
            self.library_version = getattr(huggingface_hub, "__version__", None)
        return self._hf

    def list_files(self):
        if not is_commit(self.revision):
            raise LanekitError(
                "Revision %r of %s is not a full 40-hex commit; a lane must pin the exact commit "
                "(branches, tags and short hashes move or are ambiguous). Resolve it once and put the "
                "40-character sha in model.revision." % (self.revision, self.repo_id))
        hf = self._import()
        from huggingface_hub.hf_api import RepoFile
        api = hf.HfApi(endpoint=self.endpoint, token=self.token)
        try:
            info = api.model_info(self.repo_id, revision=self.revision)
            if getattr(info, "sha", None) and info.sha != self.revision:
                raise LanekitError(
                    "The Hub answered commit %s for revision %s of %s; refusing a revision that does "
                    "not resolve to itself." % (info.sha, self.revision, self.repo_id))
            entries = [f for f in api.list_repo_tree(self.repo_id, recursive=True, revision=self.revision)
                       if isinstance(f, RepoFile)]
        except LanekitError:
            raise
        except Exception as exc:  # the Hub client raises many types; all are a sentence here
            raise LanekitError(hub_error_sentence(exc, self.repo_id, self.revision, self.endpoint))
        by_path = {f.path: f for f in entries}
        specs = []
        for p in filter_paths(sorted(by_path), self.allow_patterns, self.ignore_patterns):
            check_relpath(p)
            f = by_path[p]
            if f.lfs is not None:
                specs.append(FileSpec(p, f.lfs.size if f.lfs.size is not None else f.size,
                                      sha256=f.lfs.sha256, origin="hf"))
            else:
                specs.append(FileSpec(p, f.size, git_sha1=f.blob_id, origin="hf"))
        if not specs:
            raise LanekitError(
                "No file of %s at %s matches allow_patterns=%r / ignore_patterns=%r."
                % (self.repo_id, self.revision, self.allow_patterns, self.ignore_patterns))
        return specs

    def open_path(self, spec, scratch, attempt):
        """Download one file into ``scratch`` with the Hub client; return (path, owned)."""
        hf = self._import()
        kwargs = dict(repo_id=self.repo_id, filename=spec.path, revision=self.revision,
                      local_dir=scratch, cache_dir=os.path.join(scratch, ".hub-cache"),
                      endpoint=self.endpoint, token=self.token, force_download=attempt > 0)
        if self.etag_timeout:
            kwargs["etag_timeout"] = self.etag_timeout
        try:
            path = hf.hf_hub_download(**kwargs)
        except Exception as exc:
            raise RetryableError(hub_error_sentence(exc, self.repo_id, self.revision, self.endpoint, spec.path))
        return path, True


def hub_error_sentence(exc, repo_id, revision, endpoint, filename=None):
    name = type(exc).__name__
    where = "%s at %s" % (repo_id, revision) + (" (file %s)" % filename if filename else "")
    via = " via %s" % endpoint if endpoint else ""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else name
    if name in ("RepositoryNotFoundError", "GatedRepoError"):
        hint = "check the repository id and that the token has access to it"
    elif name == "RevisionNotFoundError":
        hint = "the commit does not exist in that repository; check model.revision"
    elif name in ("EntryNotFoundError", "RemoteEntryNotFoundError"):
        hint = "the file is listed but cannot be fetched"
    else:
        hint = "check the endpoint, the network and the token"
    return "Fetching %s from the Hub%s failed (%s: %s); %s." % (where, via, name, text[:300], hint)


class RetryableError(LanekitError):
    pass


# ---------------------------------------------------------------------------------------------
# lock


class StageLock:
    """An O_EXCL lock file in the destination (flock is not trustworthy on NFS)."""

    def __init__(self, path):
        self.path = path
        self.held = False

    def acquire(self):
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        me = {"host": socket.gethostname(), "pid": os.getpid(), "started": int(time.time())}
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                holder = self._read()
                if holder and holder.get("host") == me["host"] and not _pid_alive(holder.get("pid")):
                    try:
                        os.unlink(self.path)  # stale: its process is gone
                    except FileNotFoundError:
                        pass
                    continue
                raise LanekitError(
                    "Another staging run holds %s (host %s, pid %s, since %s). Wait for it to finish; "
                    "if it is dead on another host, remove the lock file." % (
                        self.path, (holder or {}).get("host", "?"), (holder or {}).get("pid", "?"),
                        time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime((holder or {}).get("started", 0)))))
            with os.fdopen(fd, "w") as fh:
                json.dump(me, fh)
            self.held = True
            return
        raise LanekitError("Could not take the staging lock %s." % self.path)

    def _read(self):
        try:
            with open(self.path) as fh:
                return json.load(fh)
        except (OSError, ValueError):
            return None

    def release(self):
        if self.held:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            self.held = False


def _pid_alive(pid):
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ---------------------------------------------------------------------------------------------
# the stager


class Phase:
    def __init__(self, name):
        self.name = name
        self.files = 0
        self.bytes = 0
        self.seconds = 0.0
        self._lock = threading.Lock()

    def add(self, nbytes):
        with self._lock:
            self.files += 1
            self.bytes += nbytes

    def as_dict(self):
        s = round(self.seconds, 3)
        return {"files": self.files, "bytes": self.bytes, "seconds": s,
                "gib_per_s": round(self.bytes / GIB / self.seconds, 3) if self.seconds > 0 and self.bytes else 0.0}


class Stager:
    """Stage ``source`` into ``dest``. ``run()`` returns the module result dict."""

    def __init__(self, source, dest, model_id=None, revision=None, verify="quick", workers=4,
                 block_size=16 * MIB, retries=3, retry_delay=5.0, scratch_dir=None, check_mode=False,
                 prune=False, release_written_pages=True, fsync=True, warn=None, root=None):
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
        self.warn = warn or (lambda msg: None)
        self.state_dir = os.path.join(dest, STATE_DIR)
        self.tmp_dir = os.path.join(self.state_dir, "tmp")
        self.phases = {n: Phase(n) for n in ("plan", "verify", "fetch", "publish")}
        self.abort = threading.Event()
        self.journal = Journal(os.path.join(self.state_dir, JOURNAL_NAME))
        self.repaired = []
        self.mismatches = []

    # -- helpers
    def _dest_path(self, rel):
        return os.path.join(self.dest, *rel.split("/"))

    def _validate(self):
        if not os.path.isabs(self.dest):
            raise LanekitError("The weights destination %r must be an absolute path." % self.dest)
        if self.verify not in ("quick", "full"):
            raise LanekitError("verify must be 'quick' or 'full', not %r." % self.verify)
        if self.source.kind == "hf" and not is_commit(self.revision):
            raise LanekitError(
                "Revision %r is not a full 40-hex commit; staging from the Hub needs the lane to pin "
                "model.revision to the exact commit (a branch, tag or short hash is refused)."
                % (self.revision,))
        if self.revision is not None and self.source.kind == "local" and not isinstance(self.revision, str):
            raise LanekitError("revision must be a string.")
        if self.root:
            root = self.root.rstrip("/") or "/"
            if not os.path.isdir(root):
                raise LanekitError(
                    "The weights root %s does not exist on the staging host; is the NFS export mounted "
                    "there?" % root)
            if not (self.dest + "/").startswith(root + "/") or self.dest == root:
                raise LanekitError("The weights destination %s is not a directory under the weights root %s."
                                   % (self.dest, root))
            return
        parent = os.path.dirname(self.dest.rstrip("/")) or "/"
        if not os.path.isdir(self.dest) and not os.path.isdir(parent):
            raise LanekitError(
                "Neither the weights destination %s nor its parent %s exists; is the NFS export "
                "mounted on the staging host?" % (self.dest, parent))

    def run(self):
        self._validate()
        t0 = time.monotonic()
        manifest_path = os.path.join(self.dest, MANIFEST_NAME)
        old_manifest = load_manifest(manifest_path) if os.path.isdir(self.dest) else None
        specs = self._specs_from_manifest(old_manifest)
        self.listed_from = "manifest" if specs is not None else "source"
        if specs is None:
            specs = self.source.list_files()
        if self.source.kind == "local" and self.source.declared_revision and self.revision and \
                self.source.declared_revision != self.revision:
            raise LanekitError(
                "The local source %s is a manifest for revision %s but the lane pins %s."
                % (self.source.path, self.source.declared_revision, self.revision))
        revision = self.revision or (self.source.declared_revision if self.source.kind == "local" else None)
        same = old_manifest is not None and old_manifest.get("revision") == revision
        self.journal.load()
        plans = plan_files(specs, self.dest, self.journal, old_manifest if same else None,
                           verify=self.verify)
        wanted = [s.path for s in specs]
        extras = extra_files(self.dest, wanted) if os.path.isdir(self.dest) else []
        self.phases["plan"].seconds = time.monotonic() - t0

        to_fetch = [p for p in plans if p.action == "fetch"]
        to_hash = [p for p in plans if p.action == "hash"]
        result = {
            "path": self.dest, "revision": revision, "model_id": self.model_id,
            "source": self.source.describe(), "listed_from": self.listed_from, "files_total": len(specs),
            "bytes_total": sum(s.size for s in specs), "extra_files": extras,
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
            return self._check_result(result, plans, to_fetch, bad, old_manifest, same)

        lock = StageLock(os.path.join(self.state_dir, "lock"))
        os.makedirs(self.dest, exist_ok=True)
        lock.acquire()
        try:
            return self._stage(result, specs, plans, to_fetch, to_hash, old_manifest, revision, extras)
        finally:
            self.journal.close()
            lock.release()

    def _specs_from_manifest(self, old_manifest):
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

    def _check_result(self, result, plans, to_fetch, bad, old_manifest, same):
        would_fetch = sum(p.spec.size for p in to_fetch)
        manifest_changes = not same or old_manifest is None
        changed = bool(to_fetch) or manifest_changes or (self.prune and bool(result["extra_files"]))
        result.update({
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

    def _unpublish(self):
        """Before the first byte changes, take away the completeness marker."""
        man = os.path.join(self.dest, MANIFEST_NAME)
        if os.path.exists(man):
            os.replace(man, os.path.join(self.state_dir, "MANIFEST.previous.json"))
        try:
            os.unlink(os.path.join(self.dest, SUMS_NAME))
        except FileNotFoundError:
            pass
        fsync_dir(self.dest)

    def _stage(self, result, specs, plans, to_fetch, to_hash, old_manifest, revision, extras):
        os.makedirs(self.tmp_dir, exist_ok=True)
        self._clean_tmp()
        digests = {}
        for p in plans:
            if p.action == "ok":
                digests[p.spec.path] = self.journal.get(p.spec.path)["sha256"]

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
            raise LanekitError("After staging, these files are still missing or of the wrong size in %s: %s."
                               % (self.dest, ", ".join(missing[:20])))

        pruned = []
        if self.prune and extras:
            for rel in extras:
                p = self._dest_path(rel)
                if os.path.islink(p) or os.path.isfile(p):
                    os.unlink(p)
                    pruned.append(rel)
            changed = changed or bool(pruned)

        t = time.monotonic()
        entries = [{"path": s.path, "size": s.size, "sha256": digests[s.path]} for s in specs]
        manifest = build_manifest(self.model_id, revision, self.source.describe(), entries)
        data = dumps_manifest(manifest)
        sums = render_sums(manifest)
        man_path = os.path.join(self.dest, MANIFEST_NAME)
        sums_path = os.path.join(self.dest, SUMS_NAME)
        if read_bytes(sums_path) != sums:
            atomic_write(sums_path, sums)
            changed = True
        if read_bytes(man_path) != data:
            atomic_write(man_path, data)  # last: the completeness marker
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

    def _check_space(self, to_fetch):
        need = sum(p.spec.size for p in to_fetch)
        try:
            sv = os.statvfs(self.dest)
        except OSError:
            return
        free = sv.f_bavail * sv.f_frsize
        if need > free:
            raise LanekitError(
                "Staging needs %.1f GiB more in %s but only %.1f GiB are free; free space or stage "
                "elsewhere." % (need / GIB, self.dest, free / GIB))

    def _clean_tmp(self):
        # partial Hub downloads of a killed run (the client names them *.incomplete); only in our
        # own default scratch, which no other stage can be using while we hold the lock
        if not self.scratch_dir:
            hf_dl = os.path.join(self.state_dir, "hf", ".cache", "huggingface", "download")
            for root, _dirs, files in os.walk(hf_dl):
                for name in files:
                    if name.endswith(".incomplete"):
                        _unlink_quiet(os.path.join(root, name))
        for name in os.listdir(self.tmp_dir):
            p = os.path.join(self.tmp_dir, name)
            try:
                if os.path.isdir(p) and not os.path.islink(p):
                    shutil.rmtree(p)
                else:
                    os.unlink(p)
            except OSError:
                pass

    def _run_pool(self, plans, fn, digests):
        out = []
        if not plans:
            return out
        # largest first: keeps all workers busy until the end
        ordered = sorted(plans, key=lambda p: -p.spec.size)
        errors = []
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
                    errors.append(LanekitError(_os_sentence(exc, futs[fut].spec.path, self.dest)))
                    self.abort.set()
                    continue
                if r is not None:
                    out.append(r)
        if errors:
            first = [e for e in errors if "was aborted" not in str(e)] or errors
            raise first[0]
        return out

    def _hash_existing(self, plan, digests):
        """Hash a present file; return the plan if it must be fetched again."""
        path = self._dest_path(plan.spec.path)
        want1 = plan.spec.git_sha1 is not None and plan.spec.sha256 is None
        d = hash_file(path, self.block_size, want_git_sha1=want1, abort=self.abort)
        self.phases["verify"].add(d.size)
        exp = plan.expected_sha256
        if exp is None and self.source.kind == "local":
            # nothing vouches for either side: the source is the truth
            exp = hash_file(self.source.real[plan.spec.path], self.block_size, abort=self.abort).sha256
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

    def _fetch_one(self, plan, digests):
        spec = plan.spec
        scratch = self.scratch_dir or os.path.join(self.state_dir, "hf")
        last_exc = None
        for attempt in range(self.retries + 1):
            if self.abort.is_set():
                raise LanekitError("Staging of %s was aborted because another file failed." % spec.path)
            try:
                self._fetch_attempt(plan, scratch, attempt, digests)
                return None
            except RetryableError as exc:
                last_exc = exc
                if attempt < self.retries:
                    time.sleep(min(self.retry_delay * (2 ** attempt), 120.0))
        raise LanekitError("%s (after %d attempts)" % (last_exc, self.retries + 1))

    def _fetch_attempt(self, plan, scratch, attempt, digests):
        spec = plan.spec
        src, owned = self.source.open_path(spec, scratch, attempt)
        want1 = spec.git_sha1 is not None and spec.sha256 is None
        final = self._dest_path(spec.path)
        os.makedirs(os.path.dirname(final), exist_ok=True)
        tmp = os.path.join(self.tmp_dir, "%s.%s.part" % (spec.path.replace("/", "%"), uuid.uuid4().hex[:8]))
        same_fs = owned and _same_device(src, self.tmp_dir)
        try:
            if same_fs:
                # downloaded onto the destination filesystem already: hash, sync and move it
                d = hash_file(src, self.block_size, want_git_sha1=want1, abort=self.abort)
                fd = os.open(src, os.O_RDONLY)
                try:
                    os.fchmod(fd, 0o644)
                    if self.fsync:
                        os.fsync(fd)
                    if self.release:
                        release_pages(fd)
                finally:
                    os.close(fd)
                os.rename(src, tmp)
            else:
                d = copy_and_hash(src, tmp, self.block_size, want_git_sha1=want1, sync=self.fsync,
                                  release=self.release, abort=self.abort)
                if owned:
                    _unlink_quiet(src)
            bad = None
            if d.size != spec.size:
                bad = "is %d bytes, expected %d" % (d.size, spec.size)
            elif spec.sha256 and d.sha256 != spec.sha256:
                bad = "has sha256 %s, the source says %s" % (d.sha256, spec.sha256)
            elif want1 and d.git_sha1 != spec.git_sha1:
                bad = "has git blob id %s, the source says %s" % (d.git_sha1, spec.git_sha1)
            if bad:
                msg = "The fetched copy of %s %s." % (spec.path, bad)
                if self.source.kind == "hf":
                    raise RetryableError(msg)
                raise LanekitError(msg + " The source %s is corrupt or changed while it was read."
                                   % self.source.path)
            st = os.stat(tmp)
            # journal first, then rename: rename keeps inode and mtime, so the entry stays valid
            self.journal.record(spec.path, spec.size, d.sha256, st, self.revision)
            os.replace(tmp, final)
            fsync_dir(os.path.dirname(final))
        finally:
            _unlink_quiet(tmp)
        if owned:
            _unlink_quiet(os.path.join(scratch, ".cache", "huggingface", "download", spec.path + ".metadata"))
        digests[spec.path] = d.sha256
        self.phases["fetch"].add(d.size)


def _same_device(a, b):
    try:
        return os.stat(a).st_dev == os.stat(b).st_dev
    except OSError:
        return False


def _unlink_quiet(p):
    try:
        os.unlink(p)
    except (FileNotFoundError, IsADirectoryError):
        pass


def _os_sentence(exc, rel, dest):
    if exc.errno == errno.ENOSPC:
        return "The destination %s ran out of space while writing %s." % (dest, rel)
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "Cannot write %s under %s (%s); the staging host needs write access to the export." % (
            rel, dest, exc.strerror)
    return "Staging %s into %s failed: %s (%s)." % (rel, dest, exc.strerror or exc, exc.filename or rel)


__all__ = ["Stager", "LocalSource", "HubSource", "copy_and_hash", "hash_file", "filter_paths",
           "StageLock", "OWN_NAMES"]
