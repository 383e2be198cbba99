# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Where staged weights come from: a local directory or a Hugging Face Hub repository.

A source lists the checkpoint's files (``list_files`` -> ``FileSpec`` with the digests it vouches
for) and hands the stager one file to read (``open_path``: a path, or for a local source an fd opened
component by component and checked against the walk). The stager in ``_weights/_staging.py`` does the rest.

Stdlib only, except ``HubSource``, which imports huggingface_hub lazily (the module guards it
with ``missing_required_lib``).
"""
from __future__ import annotations

import fnmatch
import os
import stat as statmod
from collections.abc import Iterable, Iterator
from typing import Any, Protocol
from urllib.parse import urlsplit

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._files import read_regular
from ansible_collections.lanekit.serving.plugins.module_utils._weights._manifest import (
    MANIFEST_MAX_BYTES,
    MANIFEST_NAME,
    STATE_DIR,
    SUMS_NAME,
    FileSpec,
    check_relpath,
    is_commit,
    load_manifest,
    parse_sums,
)

__all__ = ["SOURCE_SKIP_DIRS", "HubSource", "LocalSource", "RetryableError", "Source", "filter_paths",
           "hub_error_sentence"]

# Names a source tree may carry that are never checkpoint files.
SOURCE_SKIP_DIRS = (".git", ".cache", STATE_DIR)


class RetryableError(LanekitError):
    """A failure worth another attempt (a Hub download, a digest mismatch of a download)."""


class Source(Protocol):
    """What the stager needs from a source."""

    kind: str

    def describe(self) -> dict[str, Any]: ...

    def list_files(self) -> list[FileSpec]: ...

    def open_path(self, spec: FileSpec, scratch: str, attempt: int) -> tuple[str | int, bool]:
        """A readable path (or an fd already open and checked, which the reader closes) for
        ``spec``, and whether the stager owns the file (may move or delete it)."""


def filter_paths(paths: Iterable[str], allow_patterns: str | list[str] | None = None,
                 ignore_patterns: str | list[str] | None = None) -> Iterator[str]:
    """Same semantics as huggingface_hub's filter_repo_objects: fnmatch globs, a pattern ending
    in '/' matches everything below that folder, allow = keep if any matches, ignore = drop if
    any matches."""
    def norm(pats: str | list[str] | None) -> list[str] | None:
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


def _join_rel(rel_root: str, name: str) -> str:
    return name if rel_root == "." else f"{rel_root.replace(os.sep, '/')}/{name}"


def _inside(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


class LocalSource:
    """A directory (a mirror, an NFS export, a Hugging Face cache snapshot) on the staging host.

    Symlinks are followed to real files only when they stay inside the source (or, for a Hub
    cache snapshot ``<repo>/snapshots/<rev>``, point into the cache's ``<repo>/blobs``), as
    rsync ``--safe-links`` would: a link to ``/etc/shadow`` or to ``/`` is refused with a
    sentence, never copied or walked. A dangling link is an error. A lanekit ``MANIFEST.json``
    or a ``SHA256SUMS`` in the source supplies the digests every copy must match.
    """

    kind = "local"

    def __init__(self, path: str, allow_patterns: list[str] | None = None,
                 ignore_patterns: list[str] | None = None) -> None:
        self.path = path
        self.allow_patterns = allow_patterns
        self.ignore_patterns = ignore_patterns
        self.real: dict[str, str] = {}
        # What the walk saw: (st_dev, st_ino) of every file listed and of every allowed root.
        self.seen: dict[str, tuple[int, int]] = {}
        self.roots: dict[str, tuple[int, int]] = {}
        self.declared_revision: str | None = None

    def describe(self) -> dict[str, Any]:
        return {"kind": "local", "path": self.path, "allow_patterns": self.allow_patterns,
                "ignore_patterns": self.ignore_patterns}

    def allowed_roots(self) -> list[str]:
        """Where a link of this source may lead: the source itself, and a Hub cache's blobs/."""
        real = os.path.realpath(self.path)
        roots = [real]
        snapshots = os.path.dirname(real)
        if os.path.basename(snapshots) == "snapshots":
            blobs = os.path.join(os.path.dirname(snapshots), "blobs")
            if os.path.isdir(blobs):
                roots.append(blobs)
        return roots

    def _unsafe_link_error(self, unsafe: list[tuple[str, str]]) -> LanekitError:
        shown = ", ".join(f"{os.path.join(self.path, rel)} -> {target}" for rel, target in sorted(unsafe)[:5])
        more = f" and {len(unsafe) - 5} more" if len(unsafe) > 5 else ""
        return LanekitError(
            f"The weights source {self.path} has symlinks that lead outside it ({shown}{more}), which lanekit "
            "refuses to stage (only links inside the source, or from a Hub cache snapshot into its blobs/, are "
            "followed); copy those files into the source or point local_path at the directory that holds them.")

    def _walk(self) -> dict[str, tuple[str, int]]:
        """{relative path: (real path, size)} of every regular file; raises on dangling links and on
        links that lead outside the allowed roots (those are never descended into or read)."""
        found: dict[str, tuple[str, int]] = {}
        dangling: list[str] = []
        unsafe: list[tuple[str, str]] = []
        allowed = self.allowed_roots()
        for root_path in allowed:
            rst = os.stat(root_path)
            self.roots[root_path] = (rst.st_dev, rst.st_ino)
        seen_dirs: set[tuple[int, int]] = set()
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
            # a link to a directory outside the roots is never walked (a link to / would walk it all)
            for d in list(dirs):
                full = os.path.join(root, d)
                real = os.path.realpath(full)
                if os.path.exists(full) and not _inside(real, allowed):
                    unsafe.append((_join_rel(rel_root, d), real))
                    dirs.remove(d)
            dirs.sort()
            for name in sorted(files):
                full = os.path.join(root, name)
                rel = _join_rel(rel_root, name)
                try:
                    st = os.stat(full)
                except FileNotFoundError:
                    dangling.append(rel)
                    continue
                real = os.path.realpath(full)
                if not _inside(real, allowed):
                    unsafe.append((rel, real))
                    continue
                if not statmod.S_ISREG(st.st_mode):
                    continue
                found[rel] = (real, st.st_size)
                self.seen[rel] = (st.st_dev, st.st_ino)
            # a directory symlink that dangles shows up in dirs; report it as well
            for d in list(dirs):
                if not os.path.exists(os.path.join(root, d)):
                    dangling.append(_join_rel(rel_root, d) + "/")
        if unsafe:
            raise self._unsafe_link_error(unsafe)
        if dangling:
            raise LanekitError(
                f"The weights source {self.path} has dangling symlinks (they point to nothing, as in a Hub "
                f"cache whose blobs were not copied): {', '.join(sorted(dangling)[:20])}. Copy the real "
                "files or point the source at a complete snapshot.")
        return found

    def list_files(self) -> list[FileSpec]:
        if not os.path.isabs(self.path):
            raise LanekitError(f"The local weights source {self.path!r} must be an absolute path.")
        if not os.path.isdir(self.path):
            raise LanekitError(f"The local weights source {self.path} does not exist or is not a directory.")
        found = self._walk()
        declared = self._declared_digests()
        specs = []
        for rel in filter_paths(sorted(found), self.allow_patterns, self.ignore_patterns):
            check_relpath(rel)
            real, size = found[rel]
            self.real[rel] = real
            d = declared.get(rel) or {}
            if d.get("size") is not None and int(d["size"]) != size:
                raise LanekitError(
                    f"Source file {os.path.join(self.path, rel)} is {size} bytes but the source's own "
                    f"manifest says {int(d['size'])}; the mirror is incomplete or corrupt.")
            specs.append(FileSpec(rel, size, sha256=d.get("sha256"), origin=real))
        if not specs:
            raise LanekitError(
                f"No file of the weights source {self.path} matches allow_patterns={self.allow_patterns!r} "
                f"/ ignore_patterns={self.ignore_patterns!r}.")
        return specs

    def _declared_digests(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        allowed = self.allowed_roots()
        for name in (SUMS_NAME, MANIFEST_NAME):
            # their lines end up in error messages: a link to a root-only file must not be read
            real = os.path.realpath(os.path.join(self.path, name))
            if os.path.lexists(os.path.join(self.path, name)) and not _inside(real, allowed):
                raise self._unsafe_link_error([(name, real)])
        sums = read_regular(os.path.join(self.path, SUMS_NAME), MANIFEST_MAX_BYTES, "The source's checksum file",
                            follow=True)
        if sums is not None:
            for p, sha in parse_sums(sums.decode("utf-8", "replace")).items():
                out[p] = {"sha256": sha}
        man = load_manifest(os.path.join(self.path, MANIFEST_NAME), follow=True)
        if man is not None:
            self.declared_revision = man.get("revision")
            for f in man["files"]:
                out[f["path"]] = {"sha256": f.get("sha256"), "size": f.get("size")}
        return out

    def open_path(self, spec: FileSpec, scratch: str, attempt: int) -> tuple[str | int, bool]:
        return self.open_fd(spec.path), False

    def open_fd(self, rel: str) -> int:
        """An fd of the file the walk listed as ``rel``, opened as the walk saw it, or a sentence.

        The source's owner may change it between the walk and the copy (which runs as root): a
        directory swapped for a link to ``/etc`` would hand over ``/etc/shadow``. So the file is
        opened from a directory fd of its allowed root, one component at a time with
        ``O_NOFOLLOW``, and the root and the file must still be the device and inode the walk saw.
        """
        real = self.real[rel]
        root = next(r for r in self.roots if _inside(real, [r]))
        parts = [p for p in os.path.relpath(real, root).split(os.sep) if p not in ("", ".")]
        where = os.path.join(self.path, rel)
        fd = None
        current = root
        try:
            fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
            rst = os.fstat(fd)
            if (rst.st_dev, rst.st_ino) != self.roots[root]:
                raise _Swapped(f"{root} is another directory than the one walked")
            for index, part in enumerate(parts):
                current = os.path.join(current, part)
                last = index == len(parts) - 1
                flags = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0) | (
                    os.O_NONBLOCK if last else os.O_DIRECTORY)
                try:
                    child = os.open(part, flags, dir_fd=fd)
                except OSError as exc:
                    raise _Swapped(f"{current} is now a symlink or gone ({exc.strerror})") from None
                os.close(fd)
                fd = child
            st = os.fstat(fd)
            if not statmod.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != self.seen[rel]:
                raise _Swapped(f"{current} is another file than the one walked")
        except _Swapped as why:
            if fd is not None:
                os.close(fd)
            raise LanekitError(
                f"The weights source file {where} changed after the source was listed ({why}), so nothing of it "
                f"was copied; stop changing {self.path} while it is staged and stage again.") from None
        except BaseException:
            if fd is not None:
                os.close(fd)
            raise
        return fd


class _Swapped(Exception):
    """A component of a local source file is not what the walk saw (LocalSource.open_fd)."""


class HubSource:
    """A Hugging Face Hub repository (or a Hub-compatible mirror) at a pinned commit."""

    kind = "hf"

    def __init__(self, repo_id: str, revision: str, endpoint: str | None = None, token: str | None = None,
                 allow_patterns: list[str] | None = None, ignore_patterns: list[str] | None = None,
                 disable_xet: bool = False, etag_timeout: float | None = None, use_host_token: bool = False) -> None:
        self.repo_id = repo_id
        self.revision = revision
        # What the Hub client is told to send: the given token, the staging host's own saved one
        # (True, only when asked), or none at all (False). None would let the client pick up
        # HF_TOKEN or HF_HOME/token by itself and send it to whatever endpoint is in use.
        self.token: str | bool = token or bool(use_host_token)
        self.endpoint = check_endpoint(endpoint, self.token is not False)
        self.allow_patterns = allow_patterns
        self.ignore_patterns = ignore_patterns
        self.disable_xet = disable_xet
        self.etag_timeout = etag_timeout
        self._hf: Any = None
        self.library_version: str | None = None

    def describe(self) -> dict[str, Any]:
        return {"kind": "hf", "repo_id": self.repo_id, "endpoint": self.endpoint,
                "allow_patterns": self.allow_patterns, "ignore_patterns": self.ignore_patterns}

    def _import(self) -> Any:
        if self._hf is None:
            # before the first request, so a bad revision is still reported first
            check_endpoint(self.endpoint, self.token is not False, env_too=True)
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
            if self.token is True and not huggingface_hub.get_token():
                raise LanekitError(
                    "use_host_token is set but the staging host has no Hub token (no HF_TOKEN, no token saved in "
                    "HF_HOME); log in there (hf auth login) or give the token (weights_hf_token).")
            self._hf = huggingface_hub
            self.library_version = getattr(huggingface_hub, "__version__", None)
        return self._hf

    def list_files(self) -> list[FileSpec]:
        if not is_commit(self.revision):
            raise LanekitError(
                f"Revision {self.revision!r} of {self.repo_id} is not a full 40-hex commit; a lane must pin "
                "the exact commit (branches, tags and short hashes move or are ambiguous). Resolve it once "
                "and put the 40-character sha in model.revision.")
        hf = self._import()
        from huggingface_hub.hf_api import RepoFile
        api = hf.HfApi(endpoint=self.endpoint, token=self.token)
        try:
            info = api.model_info(self.repo_id, revision=self.revision)
            if getattr(info, "sha", None) and info.sha != self.revision:
                raise LanekitError(
                    f"The Hub answered commit {info.sha} for revision {self.revision} of {self.repo_id}; "
                    "refusing a revision that does not resolve to itself.")
            entries = [f for f in api.list_repo_tree(self.repo_id, recursive=True, revision=self.revision)
                       if isinstance(f, RepoFile)]
        except LanekitError:
            raise
        except Exception as exc:  # the Hub client raises many types; all are a sentence here
            raise LanekitError(hub_error_sentence(exc, self.repo_id, self.revision, self.endpoint)) from None
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
                f"No file of {self.repo_id} at {self.revision} matches allow_patterns={self.allow_patterns!r} "
                f"/ ignore_patterns={self.ignore_patterns!r}.")
        return specs

    def open_path(self, spec: FileSpec, scratch: str, attempt: int) -> tuple[str, bool]:
        """Download one file into ``scratch`` with the Hub client; return (path, owned)."""
        hf = self._import()
        kwargs: dict[str, Any] = dict(
            repo_id=self.repo_id, filename=spec.path, revision=self.revision, local_dir=scratch,
            cache_dir=os.path.join(scratch, ".hub-cache"), endpoint=self.endpoint, token=self.token,
            force_download=attempt > 0)
        if self.etag_timeout:
            kwargs["etag_timeout"] = self.etag_timeout
        try:
            path = hf.hf_hub_download(**kwargs)
        except Exception as exc:
            raise RetryableError(hub_error_sentence(exc, self.repo_id, self.revision, self.endpoint, spec.path)) from exc
        # the stager moves or deletes this file: it must be the download, inside the scratch directory
        real = os.path.realpath(path)
        if not _inside(real, [os.path.realpath(scratch)]):
            raise LanekitError(
                f"The Hub client returned {path} for {spec.path}, which resolves to {real}, outside the scratch "
                f"directory {scratch}; refusing to move or delete it.")
        return real, True


def check_env_endpoint(has_token: bool) -> None:
    """Without a named endpoint the Hub client follows E(HF_ENDPOINT): refuse it with a token."""
    env = (os.environ.get("HF_ENDPOINT") or "").strip().rstrip("/")
    if has_token and env and env != "https://huggingface.co":
        raise LanekitError(
            f"HF_ENDPOINT={env} is set on the staging host but the lane names no model.source.endpoint: the Hub "
            "token would go to that host. Name the endpoint in the lane (model.source.endpoint) or unset "
            "HF_ENDPOINT.")


def check_endpoint(endpoint: str | None, has_token: bool, env_too: bool = False) -> str | None:
    """The Hub endpoint the token may go to: the one the lane names, over https, and no other.

    Without an endpoint the Hub client would follow E(HF_ENDPOINT) of the staging host: with a token
    that would send it to a host the lane does not name, so that is refused.
    """
    endpoint = (endpoint or "").strip().rstrip("/") or None
    if endpoint is None:
        if env_too:
            check_env_endpoint(has_token)
        return None
    if not endpoint.startswith(("https://", "http://")) or len(endpoint.split("://", 1)[1]) == 0:
        raise LanekitError(f"model.source.endpoint {endpoint!r} is not an http(s) URL of a Hub-compatible mirror.")
    host = urlsplit(endpoint).hostname or ""
    # plain http only to this machine, where the token never crosses a network
    if has_token and endpoint.startswith("http://") and host not in ("localhost", "127.0.0.1", "::1"):
        raise LanekitError(
            f"model.source.endpoint {endpoint} is plain http: the Hub token would cross the network in clear. Use "
            "https for the mirror, or stage from it without a token.")
    return endpoint


def hub_error_sentence(exc: BaseException, repo_id: str, revision: str, endpoint: str | None,
                       filename: str | None = None) -> str:
    """One sentence for a Hub client exception: what failed, where, and the likely fix."""
    name = type(exc).__name__
    where = f"{repo_id} at {revision}" + (f" (file {filename})" if filename else "")
    via = f" via {endpoint}" if endpoint else ""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else name
    if name in ("RepositoryNotFoundError", "GatedRepoError"):
        hint = "check the repository id and that the token has access to it"
    elif name == "RevisionNotFoundError":
        hint = "the commit does not exist in that repository; check model.revision"
    elif name in ("EntryNotFoundError", "RemoteEntryNotFoundError"):
        hint = "the file is listed but cannot be fetched"
    else:
        hint = "check the endpoint, the network and the token"
    return f"Fetching {where} from the Hub{via} failed ({name}: {text[:300]}); {hint}."
