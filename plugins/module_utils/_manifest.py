# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Weights manifest, SHA256SUMS and the staging journal.

The manifest (``MANIFEST.json``) is the completeness marker of a staged checkpoint: it is
written last, atomically, and only once every file it names is in place under its final name
with the recorded size and sha256. Its content is deterministic (no timestamps) so a re-run that
changes nothing rewrites nothing.

The journal (``.lanekit/journal.jsonl``) records every file the stager put in place, with the
inode and mtime it had at that moment. It is appended (and fsynced) *before* the rename, so a run
killed at any point can tell on restart which final files it can trust without re-hashing them:
an entry is valid only while the file still has the same size, inode and mtime.

Everything here is stdlib only: it runs on the staging host and on every node.
"""
from __future__ import annotations

import hashlib
import json
import os
import re

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._files import (  # pylint: disable=unused-import
    atomic_write,
    fsync_dir,  # noqa: F401  (re-exported for _staging)
)

MANIFEST_NAME = "MANIFEST.json"
SUMS_NAME = "SHA256SUMS"
STATE_DIR = ".lanekit"
JOURNAL_NAME = "journal.jsonl"
SCHEMA = "lanekit.weights.manifest/1"
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
SHA1_RE = re.compile(r"^[0-9a-f]{40}$")
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
# Names the stager owns inside a staged directory; never weights, never reported as extra.
OWN_NAMES = (MANIFEST_NAME, SUMS_NAME, STATE_DIR)


class FileSpec:
    """One file of a checkpoint as the source declares it.

    ``sha256`` / ``git_sha1`` are the digests the source vouches for (Hub LFS oid, Hub blob id,
    a mirror's SHA256SUMS); either may be None when the source does not say.
    """

    __slots__ = ("path", "size", "sha256", "git_sha1", "origin")

    def __init__(self, path, size, sha256=None, git_sha1=None, origin=None):
        self.path = path
        self.size = int(size)
        self.sha256 = sha256
        self.git_sha1 = git_sha1
        self.origin = origin

    def __repr__(self):  # pragma: no cover - debugging aid
        return "FileSpec(%r, %d, sha256=%r)" % (self.path, self.size, self.sha256)


def check_relpath(path: str) -> str:
    """Return ``path`` if it is a safe relative POSIX path inside the checkpoint, else raise."""
    if not isinstance(path, str) or not path:
        raise LanekitError("A checkpoint file has an empty name; the source listing is broken.")
    if path.startswith("/") or "\\" in path or "\x00" in path:
        raise LanekitError("Checkpoint file %r is not a relative path inside the checkpoint." % path)
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise LanekitError("Checkpoint file %r escapes or is not normalised (empty, '.' or '..' part)." % path)
    if parts[0] in OWN_NAMES:
        raise LanekitError(
            "Checkpoint file %r collides with a name lanekit keeps for itself (%s); exclude it with "
            "ignore_patterns." % (path, ", ".join(OWN_NAMES)))
    return path


def is_commit(revision) -> bool:
    return isinstance(revision, str) and COMMIT_RE.match(revision) is not None


def files_digest(entries) -> str:
    """sha256 over the sorted ``path size sha256`` lines: identifies the staged content."""
    h = hashlib.sha256()
    for e in sorted(entries, key=lambda x: x["path"]):
        h.update(("%s\t%d\t%s\n" % (e["path"], e["size"], e["sha256"])).encode("utf-8"))
    return h.hexdigest()


def build_manifest(model_id, revision, source, entries) -> dict:
    """Return the manifest document for ``entries`` (dicts with path, size, sha256)."""
    files = []
    for e in sorted(entries, key=lambda x: x["path"]):
        if not SHA256_RE.match(e.get("sha256") or ""):
            raise LanekitError("Cannot write a manifest entry for %s without its sha256." % e["path"])
        files.append({"path": e["path"], "size": int(e["size"]), "sha256": e["sha256"]})
    return {
        "schema": SCHEMA,
        "model_id": model_id,
        "revision": revision,
        "source": source,
        "files_total": len(files),
        "bytes_total": sum(f["size"] for f in files),
        "files_digest": files_digest(files),
        "files": files,
    }


def dumps_manifest(manifest: dict) -> bytes:
    return (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode("utf-8")


def render_sums(manifest: dict) -> bytes:
    """SHA256SUMS in the format ``sha256sum -c`` reads (two spaces, binary-safe names)."""
    lines = []
    for f in manifest["files"]:
        if "\n" in f["path"]:
            raise LanekitError("File name %r contains a newline; it cannot be listed in SHA256SUMS." % f["path"])
        lines.append("%s  %s\n" % (f["sha256"], f["path"]))
    return "".join(lines).encode("utf-8")


def parse_sums(text: str) -> dict:
    """Parse SHA256SUMS text into {path: sha256}; tolerates the ``*`` binary marker."""
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([0-9a-fA-F]{64}) [ *](.+)$", line)
        if not m:
            raise LanekitError("SHA256SUMS line %d is not '<sha256>  <path>': %r." % (n, line[:120]))
        out[m.group(2)] = m.group(1).lower()
    return out


def load_manifest(path: str):
    """Return the manifest at ``path``, None if absent; raise LanekitError if unreadable."""
    try:
        with open(path, "rb") as fh:
            doc = json.loads(fh.read().decode("utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise LanekitError("%s cannot be read as JSON (%s); remove it and stage again." % (path, exc)) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), list):
        raise LanekitError("%s is not a lanekit manifest (no 'files' list); remove it and stage again." % path)
    for f in doc["files"]:
        if not isinstance(f, dict) or "path" not in f or "size" not in f:
            raise LanekitError("%s has a file entry without path and size: %r." % (path, f))
    return doc


def manifest_index(manifest) -> dict:
    return {f["path"]: f for f in (manifest or {}).get("files", [])}


# ---------------------------------------------------------------------------------------------
# journal


class Journal:
    """Append-only JSON-lines journal of files placed under their final name.

    Each line: ``{"path", "size", "sha256", "ino", "mtime_ns", "revision"}``. A torn last line
    (a run killed while appending) is ignored. The last entry for a path wins.
    """

    def __init__(self, path: str):
        self.path = path
        self.entries = {}
        self.torn_lines = 0
        self._fh = None

    def load(self) -> Journal:
        self.entries = {}
        self.torn_lines = 0
        try:
            with open(self.path, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            return self
        for raw in data.split(b"\n"):
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw.decode("utf-8"))
                if not isinstance(rec, dict) or "path" not in rec:
                    raise ValueError("no path")
                if not rec.get("drop"):
                    rec["size"] = int(rec["size"])
            except (ValueError, KeyError, TypeError, UnicodeDecodeError):
                self.torn_lines += 1
                continue
            if rec.get("drop"):
                self.entries.pop(rec["path"], None)
            else:
                self.entries[rec["path"]] = rec
        return self

    def get(self, path):
        return self.entries.get(path)

    def _open(self):
        if self._fh is None:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self._fh = open(self.path, "ab")
        return self._fh

    def record(self, path, size, sha256, st, revision) -> dict:
        """Append one entry for a file whose stat is ``st`` and fsync the journal."""
        rec = {"path": path, "size": int(size), "sha256": sha256, "ino": st.st_ino,
               "mtime_ns": st.st_mtime_ns, "revision": revision}
        self._append(rec)
        self.entries[path] = rec
        return rec

    def forget(self, path) -> None:
        if path in self.entries:
            self._append({"path": path, "drop": True})
            self.entries.pop(path, None)

    def _append(self, rec) -> None:
        fh = self._open()
        fh.write((json.dumps(rec, sort_keys=True) + "\n").encode("utf-8"))
        fh.flush()
        os.fsync(fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def compact(self, keep_paths) -> None:
        """Rewrite the journal with only the current entries for ``keep_paths`` (atomic)."""
        self.close()
        keep = [self.entries[p] for p in sorted(keep_paths) if p in self.entries]
        data = "".join(json.dumps(r, sort_keys=True) + "\n" for r in keep).encode("utf-8")
        atomic_write(self.path, data)
        self.entries = {r["path"]: r for r in keep}


def journal_matches(rec, st, size) -> bool:
    """True when a journal entry still describes the file whose (followed) stat is ``st``."""
    return (rec is not None and st is not None and rec.get("size") == size == st.st_size
            and rec.get("ino") == st.st_ino and rec.get("mtime_ns") == st.st_mtime_ns
            and SHA256_RE.match(rec.get("sha256") or "") is not None)


# ---------------------------------------------------------------------------------------------
# plan (the manifest diff)


class FilePlan:
    """What the stager must do with one file. ``action`` is one of:

    - ``ok``: in place, trusted (journal entry matches the file's stat, or re-hash matched);
    - ``hash``: a file of the right size is there but nothing vouches for it: hash it, keep it if
      the digest matches the expected one, fetch it otherwise;
    - ``fetch``: missing, wrong size, a symlink, or known bad: fetch it.
    """

    __slots__ = ("spec", "action", "reason", "expected_sha256", "dest_stat")

    def __init__(self, spec, action, reason, expected_sha256=None, dest_stat=None):
        self.spec = spec
        self.action = action
        self.reason = reason
        self.expected_sha256 = expected_sha256
        self.dest_stat = dest_stat

    def as_dict(self):
        return {"path": self.spec.path, "size": self.spec.size, "action": self.action, "reason": self.reason}


def expected_sha256(spec: FileSpec, old_entry) -> str | None:
    """The sha256 a staged copy of ``spec`` must have, if anything tells: the source, else the
    previous manifest of the same content (same size)."""
    if spec.sha256:
        return spec.sha256
    if old_entry is not None and int(old_entry.get("size", -1)) == spec.size:
        sha = old_entry.get("sha256")
        if sha and SHA256_RE.match(sha):
            return sha
    return None


def plan_files(specs, dest_dir, journal, old_manifest=None, verify="quick", stat=os.stat, lstat=os.lstat):
    """Diff the planned files against what ``dest_dir`` holds. Stats only; never reads data.

    ``verify``: ``quick`` trusts journal entries whose stat still matches; ``full`` marks every
    present file for a re-hash. ``old_manifest`` is the manifest currently in ``dest_dir`` when it
    is for the same revision (it supplies expected digests for local sources).
    """
    old = manifest_index(old_manifest)
    plans = []
    for spec in specs:
        dest = os.path.join(dest_dir, spec.path)
        exp = expected_sha256(spec, old.get(spec.path))
        try:
            lst = lstat(dest)
        except FileNotFoundError:
            plans.append(FilePlan(spec, "fetch", "missing", exp))
            continue
        except NotADirectoryError:
            plans.append(FilePlan(spec, "fetch", "missing (a parent is not a directory)", exp))
            continue
        if not _is_regular(lst):
            kind = "a symlink" if _is_link(lst) else "not a regular file"
            plans.append(FilePlan(spec, "fetch", "%s; replacing with a real file" % kind, exp))
            continue
        st = lst
        if st.st_size != spec.size:
            plans.append(FilePlan(spec, "fetch", "size %d, expected %d" % (st.st_size, spec.size), exp, st))
            continue
        rec = journal.get(spec.path) if journal is not None else None
        trusted = journal_matches(rec, st, spec.size) and (exp is None or rec["sha256"] == exp)
        if exp is None and trusted:
            exp = rec["sha256"]
        if verify == "full":
            if exp is None and rec is not None and SHA256_RE.match(rec.get("sha256") or ""):
                exp = rec["sha256"]
            plans.append(FilePlan(spec, "hash", "verify full", exp, st))
        elif trusted:
            plans.append(FilePlan(spec, "ok", "journal", exp, st))
        elif journal_matches(rec, st, spec.size) and exp is not None and rec["sha256"] != exp:
            plans.append(FilePlan(spec, "fetch", "staged sha256 differs from the source's", exp, st))
        else:
            plans.append(FilePlan(spec, "hash", "no journal entry matches the file", exp, st))
    return plans


def extra_files(dest_dir, wanted_paths):
    """Regular files and links under ``dest_dir`` that the plan does not name (own names excluded)."""
    wanted = set(wanted_paths)
    extras = []
    for root, dirs, files in os.walk(dest_dir):
        rel_root = os.path.relpath(root, dest_dir)
        if rel_root == ".":
            dirs[:] = [d for d in dirs if d != STATE_DIR]
            files = [f for f in files if f not in (MANIFEST_NAME, SUMS_NAME)]
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            rel = name if rel_root == "." else rel_root.replace(os.sep, "/") + "/" + name
            if rel not in wanted:
                extras.append(rel)
    return sorted(extras)


def _is_regular(st) -> bool:
    import stat as _stat
    return _stat.S_ISREG(st.st_mode)


def _is_link(st) -> bool:
    import stat as _stat
    return _stat.S_ISLNK(st.st_mode)


# ---------------------------------------------------------------------------------------------
# small durable-file helpers


def read_bytes(path: str):
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None
