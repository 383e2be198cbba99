"""A small Hugging Face Hub look-alike on 127.0.0.1 for tests (test instrument, not product code).

It answers what huggingface_hub 2.x asks, as read from its source:

- ``GET /api/models/{repo}/revision/{rev}``: model info (``id``, ``sha``, ``siblings``);
- ``GET /api/models/{repo}/tree/{rev}?recursive=True``: the file listing, with ``oid`` (git blob
  sha1), ``size`` and, for LFS files, ``lfs: {oid: sha256, size, pointerSize}``; paginated with a
  ``Link: <...>; rel="next"`` header when ``page_size`` is set;
- ``HEAD /{repo}/resolve/{rev}/{path}``: for a regular file 200 with ``ETag`` (blob sha1),
  ``X-Repo-Commit`` and ``Content-Length``; for an LFS file a 302 to a second "CDN" origin with
  ``X-Linked-Etag`` (sha256), ``X-Linked-Size`` and ``X-Repo-Commit``, as the Hub does;
- ``GET`` on the same URL (regular files) or on the CDN URL (LFS), with ``Range`` support.

Errors carry ``X-Error-Code`` (RepoNotFound, RevisionNotFound, EntryNotFound) like the Hub.
Faults for tests: ``fail_status[path] = [500, ...]`` (statuses for the next GETs), ``corrupt[path]
= n`` (serve n corrupted bodies), ``slow[path] = seconds per 64 KiB``. Every request is logged.
"""
from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

LFS_MIN = 1024


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


class FakeHub:
    def __init__(self, repo_id="lanekit-test/tiny-mistral", commit="a" * 40, files=None):
        self.repo_id = repo_id
        self.commit = commit
        self.files = files if files is not None else default_files()
        self.tokens_seen = []
        self.log = []
        self.fail_status = {}
        self.corrupt = {}
        self.slow = {}
        self.page_size = None
        self._lock = threading.Lock()
        self.hub = None
        self.cdn = None

    # ----- helpers
    def is_lfs(self, path):
        return path.endswith(".safetensors") or len(self.files[path]) >= LFS_MIN

    def sha256(self, path):
        return hashlib.sha256(self.files[path]).hexdigest()

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d" % self.hub.server_address[1]

    @property
    def cdn_base(self):
        return "http://127.0.0.1:%d" % self.cdn.server_address[1]

    def gets(self, path):
        """Number of content GETs served for ``path``."""
        return sum(1 for (m, kind, p) in self.log if m == "GET" and kind == "content" and p == path)

    def record(self, method, kind, path):
        with self._lock:
            self.log.append((method, kind, path))

    def start(self):
        self.hub = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self, "hub"))
        self.cdn = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self, "cdn"))
        for srv in (self.hub, self.cdn):
            srv.daemon_threads = True
            threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop(self):
        for srv in (self.hub, self.cdn):
            if srv is not None:
                srv.shutdown()
                srv.server_close()


def default_files():
    import random
    rnd = random.Random(5)
    files = {
        "params.json": json.dumps({"dim": 64, "n_layers": 2, "vocab_size": 128}).encode(),
        "tekken.json": json.dumps({"config": {"pattern": "x"}, "vocab": []}).encode(),
        "consolidated.safetensors.index.json": json.dumps({"weight_map": {
            "layers.0.w": "consolidated-00001-of-00002.safetensors",
            "layers.1.w": "consolidated-00002-of-00002.safetensors"}}).encode(),
        "consolidated-00001-of-00002.safetensors": bytes(rnd.getrandbits(8) for _byte in range(300_000)),
        "consolidated-00002-of-00002.safetensors": bytes(rnd.getrandbits(8) for _byte in range(200_001)),
        "README.md": b"# tiny\n",
        "original/extra.pth": b"x" * 2048,
    }
    return files


def _make_handler(hub: FakeHub, role: str):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):  # quiet
            pass

        def _send(self, status, body=b"", headers=None, head=False):
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            if "Content-Length" not in (headers or {}):
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head and body:
                self.wfile.write(body)

        def _error(self, status, code, msg, head=False):
            body = json.dumps({"error": msg}).encode()
            self._send(status, body, {"X-Error-Code": code, "X-Error-Message": msg,
                                      "Content-Type": "application/json"}, head=head)

        def do_HEAD(self):
            self._route(head=True)

        def do_GET(self):
            self._route(head=False)

        def _route(self, head):
            auth = self.headers.get("Authorization")
            if auth:
                with hub._lock:
                    hub.tokens_seen.append(auth)
            url = urlparse(self.path)
            if role == "cdn":
                m = re.match(r"^/cdn/([0-9a-f]{64})/(.+)$", url.path)
                if not m:
                    return self._error(404, "EntryNotFound", "no such blob", head)
                path = unquote(m.group(2))
                if path not in hub.files or hub.sha256(path) != m.group(1):
                    return self._error(404, "EntryNotFound", "no such blob", head)
                return self._content(path, head)
            m = re.match(r"^/api/models/(.+)/revision/([^/]+)$", url.path)
            if m:
                hub.record("GET", "info", None)
                if unquote(m.group(1)) != hub.repo_id:
                    return self._error(401, "RepoNotFound", "Repository not found", head)
                if unquote(m.group(2)) not in (hub.commit, "main"):
                    return self._error(404, "RevisionNotFound", "Invalid rev id: %s" % m.group(2), head)
                body = json.dumps({"id": hub.repo_id, "modelId": hub.repo_id, "sha": hub.commit,
                                   "private": False, "siblings": [{"rfilename": p} for p in sorted(hub.files)]})
                return self._send(200, body.encode(), {"Content-Type": "application/json"}, head)
            m = re.match(r"^/api/models/(.+)/tree/([^/]+)(/.*)?$", url.path)
            if m:
                hub.record("GET", "tree", None)
                if unquote(m.group(1)) != hub.repo_id:
                    return self._error(401, "RepoNotFound", "Repository not found", head)
                if unquote(m.group(2)) not in (hub.commit, "main"):
                    return self._error(404, "RevisionNotFound", "Invalid rev id: %s" % m.group(2), head)
                return self._tree(url, head)
            m = re.match(r"^/(.+)/resolve/([^/]+)/(.+)$", url.path)
            if m:
                repo, rev, path = unquote(m.group(1)), unquote(m.group(2)), unquote(m.group(3))
                if repo != hub.repo_id:
                    return self._error(401, "RepoNotFound", "Repository not found", head)
                if rev not in (hub.commit, "main"):
                    return self._error(404, "RevisionNotFound", "Invalid rev id: %s" % rev, head)
                if path not in hub.files:
                    return self._error(404, "EntryNotFound", "Entry not found", head)
                if hub.is_lfs(path):
                    hub.record("HEAD" if head else "GET", "resolve", path)
                    sha = hub.sha256(path)
                    loc = "%s/cdn/%s/%s" % (hub.cdn_base, sha, path)
                    return self._send(302, b"", {
                        "Location": loc, "X-Repo-Commit": hub.commit, "X-Linked-Etag": '"%s"' % sha,
                        "X-Linked-Size": str(len(hub.files[path])), "ETag": '"%s"' % git_blob_sha1(b"pointer")},
                        head)
                if head:
                    hub.record("HEAD", "resolve", path)
                    data = hub.files[path]
                    return self._send(200, b"", {"ETag": '"%s"' % git_blob_sha1(data), "X-Repo-Commit": hub.commit,
                                                 "Content-Length": str(len(data))}, head=True)
                return self._content(path, head, extra={"ETag": '"%s"' % git_blob_sha1(hub.files[path]),
                                                        "X-Repo-Commit": hub.commit})
            return self._error(404, "EntryNotFound", "unknown route %s" % url.path, head)

        def _tree(self, url, head):
            entries = []
            dirs = set()
            for p in sorted(hub.files):
                data = hub.files[p]
                parts = p.split("/")
                for i in range(1, len(parts)):
                    dirs.add("/".join(parts[:i]))
                e = {"type": "file", "oid": git_blob_sha1(data), "size": len(data), "path": p}
                if hub.is_lfs(p):
                    e["lfs"] = {"oid": hub.sha256(p), "size": len(data), "pointerSize": 134}
                entries.append(e)
            for d in sorted(dirs):
                entries.append({"type": "directory", "oid": "0" * 40, "size": 0, "path": d})
            qs = parse_qs(url.query)
            headers = {"Content-Type": "application/json"}
            if hub.page_size:
                start = int(qs.get("cursor", ["0"])[0])
                page = entries[start:start + hub.page_size]
                if start + hub.page_size < len(entries):
                    nxt = "%s%s?recursive=True&expand=False&cursor=%d" % (hub.endpoint, url.path,
                                                                          start + hub.page_size)
                    headers["Link"] = '<%s>; rel="next"' % nxt
                entries = page
            return self._send(200, json.dumps(entries).encode(), headers, head)

        def _content(self, path, head, extra=None):
            data = hub.files[path]
            if head:
                return self._send(200, b"", dict(extra or {}, **{"Content-Length": str(len(data))}), head=True)
            hub.record("GET", "content", path)
            with hub._lock:
                statuses = hub.fail_status.get(path) or []
                status = statuses.pop(0) if statuses else None
                corrupt = hub.corrupt.get(path, 0)
                if corrupt:
                    hub.corrupt[path] = corrupt - 1
            if status:
                return self._error(status, "ServerError", "injected failure", head)
            if corrupt:
                data = bytes([data[0] ^ 0xFF]) + data[1:]
            start = 0
            rng = self.headers.get("Range")
            headers = dict(extra or {})
            status = 200
            if rng:
                m = re.match(r"bytes=(\d+)-", rng)
                if m:
                    start = int(m.group(1))
                    status = 206
                    headers["Content-Range"] = "bytes %d-%d/%d" % (start, len(data) - 1, len(data))
            body = data[start:]
            headers["Content-Length"] = str(len(body))
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            delay = hub.slow.get(path)
            step = 65536
            try:
                for i in range(0, len(body), step):
                    self.wfile.write(body[i:i + step])
                    if delay:
                        self.wfile.flush()
                        time.sleep(delay)
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler
