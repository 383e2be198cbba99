# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""What a staged checkpoint directory holds and must hold: manifest, SHA256SUMS, journal, file plan.

The manifest (``MANIFEST.json``) is the completeness marker of a staged checkpoint: it is
written last, atomically, and only once every file it names is in place under its final name
with the recorded size and sha256. Its content is deterministic (no timestamps) so a re-run that
changes nothing rewrites nothing.

The journal (``.lanekit/journal.jsonl``) records every file the stager put in place, with the
inode and mtime it had at that moment. It is appended (and fsynced) *before* the rename, so a run
killed at any point can tell on restart which final files it can trust without re-hashing them:
an entry is valid only while the file still has the same size, inode and mtime.

``plan_files`` diffs the files a source declares against the directory (stats only, no reads).

Everything here is stdlib only: it runs on the staging host and on every node.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat as statmod
from collections.abc import Callable, Iterable
from typing import Any, TypeGuard

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._files import atomic_write, read_regular

MANIFEST_NAME = "MANIFEST.json"
SUMS_NAME = "SHA256SUMS"
STATE_DIR = ".lanekit"
JOURNAL_NAME = "journal.jsonl"
SCHEMA = "lanekit.weights.manifest/1"
# Bounds on what a node reads back from the export (anyone who can write it can make these files
# anything): far above what staging writes (a manifest line is ~200 bytes per checkpoint file).
MANIFEST_MAX_BYTES = 64 << 20
JOURNAL_MAX_BYTES = 256 << 20
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

    def __init__(self, path: str, size: int, sha256: str | None = None, git_sha1: str | None = None,
                 origin: str | None = None) -> None:
        self.path = path
        self.size = int(size)
        self.sha256 = sha256
        self.git_sha1 = git_sha1
        self.origin = origin

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"FileSpec({self.path!r}, {self.size}, sha256={self.sha256!r})"


def check_relpath(path: str) -> str:
    """Return ``path`` if it is a safe relative POSIX path inside the checkpoint, else raise."""
    if not isinstance(path, str) or not path:
        raise LanekitError("A checkpoint file has an empty name; the source listing is broken.")
    if path.startswith("/") or "\\" in path or "\x00" in path:
        raise LanekitError(f"Checkpoint file {path!r} is not a relative path inside the checkpoint.")
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise LanekitError(f"Checkpoint file {path!r} escapes or is not normalised (empty, '.' or '..' part).")
    if parts[0] in OWN_NAMES:
        raise LanekitError(
            f"Checkpoint file {path!r} collides with a name lanekit keeps for itself ({', '.join(OWN_NAMES)}); "
            "exclude it with ignore_patterns.")
    return path


def is_commit(revision: object) -> bool:
    """True for a full 40-hex commit id (the only revision a lane may pin)."""
    return isinstance(revision, str) and COMMIT_RE.match(revision) is not None


def files_digest(entries: Iterable[dict[str, Any]]) -> str:
    """sha256 over the sorted ``path size sha256`` lines: identifies the staged content."""
    h = hashlib.sha256()
    for e in sorted(entries, key=lambda x: x["path"]):
        h.update(f"{e['path']}\t{int(e['size'])}\t{e['sha256']}\n".encode())
    return h.hexdigest()


def build_manifest(model_id: str | None, revision: str | None, source: dict[str, Any],
                   entries: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Return the manifest document for ``entries`` (dicts with path, size, sha256)."""
    files = []
    for e in sorted(entries, key=lambda x: x["path"]):
        if not SHA256_RE.match(e.get("sha256") or ""):
            raise LanekitError(f"Cannot write a manifest entry for {e['path']} without its sha256.")
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


def dumps_manifest(manifest: dict[str, Any]) -> bytes:
    """The manifest's bytes: sorted keys, no timestamps, so equal content gives equal bytes."""
    return (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode("utf-8")


def render_sums(manifest: dict[str, Any]) -> bytes:
    """SHA256SUMS in the format ``sha256sum -c`` reads (two spaces, binary-safe names)."""
    lines = []
    for f in manifest["files"]:
        if "\n" in f["path"]:
            raise LanekitError(f"File name {f['path']!r} contains a newline; it cannot be listed in SHA256SUMS.")
        lines.append(f"{f['sha256']}  {f['path']}\n")
    return "".join(lines).encode("utf-8")


def parse_sums(text: str) -> dict[str, str]:
    """Parse SHA256SUMS text into {path: sha256}; tolerates the ``*`` binary marker."""
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([0-9a-fA-F]{64}) [ *](.+)$", line)
        if not m:
            raise LanekitError(f"SHA256SUMS line {n} is not '<sha256>  <path>': {line[:120]!r}.")
        out[m.group(2)] = m.group(1).lower()
    return out


def load_manifest(path: str, follow: bool = False) -> dict[str, Any] | None:
    """Return the manifest at ``path``, None if absent; raise LanekitError if unreadable.

    The one loader of every manifest version (``lanekit.weights.manifest/1``, the flat
    pre-revision one, a local source's): each listed path is checked with ``check_relpath``. Read as a
    regular file of bounded size, never through a link (``follow`` only for a local source, whose links
    the caller has checked).
    """
    try:
        raw = read_regular(path, MANIFEST_MAX_BYTES, "The weights manifest", follow=follow)
        if raw is None:
            return None
        doc = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise LanekitError(f"{path} cannot be read as JSON ({exc}); remove it and stage again.") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), list):
        raise LanekitError(f"{path} is not a lanekit manifest (no 'files' list); remove it and stage again.")
    for index, f in enumerate(doc["files"]):
        if not isinstance(f, dict) or "path" not in f or "size" not in f:
            raise LanekitError(f"{path} has a file entry without path and size: {f!r}.")
        _check_listed_path(path, index, f["path"])
    return doc


def _check_listed_path(manifest: str, index: int, rel: Any) -> None:
    """A manifest's file names are used to link, prune and delete as root: every version of the
    manifest (the flat pre-revision one too) must name files inside its own directory."""
    try:
        check_relpath(rel)
    except LanekitError:
        raise LanekitError(
            f"The manifest {manifest} lists files[{index}].path {rel!r}, which is not a plain relative path inside "
            f"its directory ('..', an absolute path, an empty or NUL part, or a name lanekit keeps); nothing "
            f"is linked or deleted by it: remove that manifest (or the entry) and stage again.") from None


def manifest_index(manifest: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {f["path"]: f for f in (manifest or {}).get("files", [])}


# ---------------------------------------------------------------------------------------------
# journal


class Journal:
    """Append-only JSON-lines journal of files placed under their final name.

    Each line: ``{"path", "size", "sha256", "ino", "mtime_ns", "revision"}``. A torn last line
    (a run killed while appending) is ignored. The last entry for a path wins.
    """

    def __init__(self, path: str, inside: str | None = None) -> None:
        self.path = path
        # the tree the journal lives in when other users may write it (see _files.atomic_write)
        self.inside = inside
        self.entries: dict[str, dict[str, Any]] = {}
        self.torn_lines = 0
        self._fh: Any = None

    def load(self) -> Journal:
        self.entries = {}
        self.torn_lines = 0
        data = read_regular(self.path, JOURNAL_MAX_BYTES, "The staging journal")
        if data is None:
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

    def get(self, path: str) -> dict[str, Any] | None:
        return self.entries.get(path)

    def _open(self) -> Any:
        if self._fh is None:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            # O_NOFOLLOW: a journal replaced by a symlink must not turn appends into writes elsewhere
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            self._fh = os.fdopen(fd, "ab")
        return self._fh

    def record(self, path: str, size: int, sha256: str, st: os.stat_result,
               revision: str | None) -> dict[str, Any]:
        """Append one entry for a file whose stat is ``st`` and fsync the journal."""
        rec = {"path": path, "size": int(size), "sha256": sha256, "ino": st.st_ino,
               "mtime_ns": st.st_mtime_ns, "revision": revision}
        self._append(rec)
        self.entries[path] = rec
        return rec

    def forget(self, path: str) -> None:
        if path in self.entries:
            self._append({"path": path, "drop": True})
            self.entries.pop(path, None)

    def _append(self, rec: dict[str, Any]) -> None:
        fh = self._open()
        fh.write((json.dumps(rec, sort_keys=True) + "\n").encode("utf-8"))
        fh.flush()
        os.fsync(fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def compact(self, keep_paths: Iterable[str]) -> None:
        """Rewrite the journal with only the current entries for ``keep_paths`` (atomic)."""
        self.close()
        keep = [self.entries[p] for p in sorted(keep_paths) if p in self.entries]
        data = "".join(json.dumps(r, sort_keys=True) + "\n" for r in keep).encode("utf-8")
        atomic_write(self.path, data, inside=self.inside)
        self.entries = {r["path"]: r for r in keep}


def journal_matches(rec: dict[str, Any] | None, st: os.stat_result | None, size: int) -> TypeGuard[dict[str, Any]]:
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

    def __init__(self, spec: FileSpec, action: str, reason: str, expected_sha256: str | None = None,
                 dest_stat: os.stat_result | None = None) -> None:
        self.spec = spec
        self.action = action
        self.reason = reason
        self.expected_sha256 = expected_sha256
        self.dest_stat = dest_stat

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.spec.path, "size": self.spec.size, "action": self.action, "reason": self.reason}


def expected_sha256(spec: FileSpec, old_entry: dict[str, Any] | None) -> str | None:
    """The sha256 a staged copy of ``spec`` must have, if anything tells: the source, else the
    previous manifest of the same content (same size)."""
    if spec.sha256:
        return spec.sha256
    if old_entry is not None and int(old_entry.get("size", -1)) == spec.size:
        sha = old_entry.get("sha256")
        if sha and SHA256_RE.match(sha):
            return sha
    return None


def plan_files(specs: Iterable[FileSpec], dest_dir: str, journal: Journal | None,
               old_manifest: dict[str, Any] | None = None, verify: str = "quick",
               stat: Callable[[str], os.stat_result] = os.stat,
               lstat: Callable[[str], os.stat_result] = os.lstat) -> list[FilePlan]:
    """Diff the planned files against what ``dest_dir`` holds. Stats only; never reads data.

    ``verify``: ``quick`` trusts journal entries whose stat still matches; ``full`` marks every
    present file for a re-hash. ``old_manifest`` is the manifest currently in ``dest_dir`` when it
    is for the same revision (it supplies expected digests for local sources).
    """
    old = manifest_index(old_manifest)
    plans: list[FilePlan] = []
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
        if not statmod.S_ISREG(lst.st_mode):
            kind = "a symlink" if statmod.S_ISLNK(lst.st_mode) else "not a regular file"
            plans.append(FilePlan(spec, "fetch", f"{kind}; replacing with a real file", exp))
            continue
        st = lst
        if st.st_size != spec.size:
            plans.append(FilePlan(spec, "fetch", f"size {st.st_size}, expected {spec.size}", exp, st))
            continue
        rec = journal.get(spec.path) if journal is not None else None
        trusted = journal_matches(rec, st, spec.size) and (exp is None or rec["sha256"] == exp)
        if exp is None and trusted and rec is not None:  # trusted implies rec; the check is for mypy
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


def extra_files(dest_dir: str, wanted_paths: Iterable[str]) -> list[str]:
    """Regular files and links under ``dest_dir`` that the plan does not name (own names excluded)."""
    wanted = set(wanted_paths)
    extras = []
    for root, dirs, files in os.walk(dest_dir):
        rel_root = os.path.relpath(root, dest_dir)
        if rel_root == ".":
            # the per-revision layout's own names (_stage_revisions) are not files of a checkpoint
            dirs[:] = [d for d in dirs if d not in (STATE_DIR, ".revisions", "current")]
            files = [f for f in files if f not in (MANIFEST_NAME, SUMS_NAME, "current")]
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            rel = name if rel_root == "." else f"{rel_root.replace(os.sep, '/')}/{name}"
            if rel not in wanted:
                extras.append(rel)
    return sorted(extras)
