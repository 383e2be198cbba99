# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The node-to-node image stream protocol: mutual proof of the run's secret, typed frames under a
keyed digest of the whole stream, and the tar gate that keeps a ``docker save`` archive's tags
away from ``docker load`` until the stream and the image it names are proven.

Pure (sockets are any object with ``sendall``/``recv``): ``image_serve`` (source) and
``image_distribute`` (target) share it, and a node that forwards what it receives can run both
ends with the same secret (every hop authenticates and checks its own digest).

One TCP connection, frames of ``type (1 byte) + length (8 bytes, big endian) + payload``:

- ``A`` (auth, JSON) target -> source ``{"magic", "client", "nonce"}``; source -> target
  ``{"magic", "nonce", "proof"}`` with ``proof = HMAC(secret, "server" | nonces)``. The target
  checks it before it says anything else, so a process that took the port without the secret is
  refused and never learns a proof. Target -> source ``{"request": {...}, "proof"}`` with
  ``proof = HMAC(secret, "client" | nonces | request)``; the source refuses a wrong one.
- From then on every frame from the source (``K`` keep-alive, ``H`` header JSON, ``D`` data) goes
  into ``HMAC(session key, ...)``, the session key being ``HMAC(secret, "session" | nonces)``. The
  ``E`` frame carries the byte count and that digest; the target compares before it releases the
  archive's tag-bearing members to ``docker load``. ``X`` (JSON ``{"error"}``) ends a failed stream.
- The target ends with an ``A`` frame ``{"loaded", "error", "retry", "mac"}``.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import posixpath
import secrets
import threading
import time

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError

MAGIC = "lanekit-image-stream/2"
NONCE_BYTES = 32
FRAME_HEAD = 9
MAX_CONTROL = 16 * 1024 * 1024  # a header or end frame (the end carries one signature per relay node)
MAX_DATA = 64 * 1024 * 1024
# Before the other end proved the secret it gets little: a hello is a magic, a name and a nonce, a
# request lists the chain IDs the target holds (about 70 bytes each), and the whole handshake has
# one deadline, however the bytes trickle in (a per-recv timeout let one byte every 14 s hold a slot).
MAX_HELLO = 4096
MAX_REQUEST = 4 * 1024 * 1024
HANDSHAKE_SECONDS = 15.0

AUTH, HEADER, DATA, KEEPALIVE, END, ERROR = b"A", b"H", b"D", b"K", b"E", b"X"
_TYPES = {AUTH, HEADER, DATA, KEEPALIVE, END, ERROR}


class StreamError(LanekitError):
    """The image stream between two nodes failed (the message says how)."""


class StreamRefused(StreamError):
    """The other end did not prove the run's secret, or the stream is not the pinned image."""


# --- framing ----------------------------------------------------------------------------------
def frame(kind: bytes, payload: bytes = b"") -> bytes:
    return kind + len(payload).to_bytes(8, "big") + payload


def frame_head(kind: bytes, length: int) -> bytes:
    return kind + int(length).to_bytes(8, "big")


def json_frame(kind: bytes, payload: dict) -> bytes:
    return frame(kind, json.dumps(payload, sort_keys=True).encode("utf-8"))


def recv_exact(sock, count: int, deadline: float | None = None) -> bytes:
    """``count`` bytes; with ``deadline`` (``time.monotonic``) the last of them must come before it."""
    data = bytearray()
    while len(data) < count:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise StreamRefused("the peer did not finish the handshake in time")
            sock.settimeout(left)
        try:
            chunk = sock.recv(count - len(data))
        except TimeoutError:
            if deadline is not None:
                raise StreamRefused("the peer did not finish the handshake in time") from None
            raise
        if not chunk:
            raise StreamError(f"the peer closed the connection {count - len(data)} bytes early")
        data += chunk
    return bytes(data)


def read_head(sock, limit: int | None = None, deadline: float | None = None) -> tuple[bytes, int]:
    head = recv_exact(sock, FRAME_HEAD, deadline)
    kind, length = head[:1], int.from_bytes(head[1:], "big")
    if kind not in _TYPES:
        raise StreamRefused("the peer does not speak the lanekit image stream protocol (version 2)")
    limit = limit if limit is not None else (MAX_DATA if kind == DATA else MAX_CONTROL)
    if length > limit:
        raise StreamRefused(f"the peer sent an over-long frame ({length} bytes, at most {limit} here)")
    return kind, length


def read_json(sock, expect: bytes = AUTH, limit: int | None = None, deadline: float | None = None) -> dict:
    kind, length = read_head(sock, limit, deadline)
    payload = recv_exact(sock, length, deadline)
    if kind == ERROR:
        raise StreamRefused(_json(payload).get("error") or "the peer refused without a reason")
    if kind != expect:
        raise StreamRefused(f"the peer sent a {kind.decode('ascii', 'replace')} frame where {expect.decode()} was due")
    return _json(payload)


def _json(payload: bytes) -> dict:
    try:
        value = json.loads(payload.decode("utf-8"))
    except ValueError:
        raise StreamRefused("the peer sent something that is not a lanekit stream message") from None
    if not isinstance(value, dict):
        raise StreamRefused("the peer sent something that is not a lanekit stream message")
    return value


# --- authentication ---------------------------------------------------------------------------
def new_nonce() -> str:
    return secrets.token_hex(NONCE_BYTES)


def _key(secret: str) -> bytes:
    if not secret:
        raise StreamError("the stream secret is empty")
    return secret.encode("utf-8")


def proof(secret: str, role: str, client_nonce: str, server_nonce: str, request: dict | None = None) -> str:
    """HMAC-SHA256 of the role, both nonces and (for the client) its request, as hex."""
    body = "\0".join([MAGIC, role, client_nonce, server_nonce, json.dumps(request or {}, sort_keys=True)])
    return hmac.new(_key(secret), body.encode("utf-8"), hashlib.sha256).hexdigest()


def session_key(secret: str, client_nonce: str, server_nonce: str) -> bytes:
    body = "\0".join([MAGIC, "session", client_nonce, server_nonce])
    return hmac.new(_key(secret), body.encode("utf-8"), hashlib.sha256).digest()


def check_proof(given, expected: str) -> bool:
    return isinstance(given, str) and hmac.compare_digest(given.encode("ascii", "replace"), expected.encode("ascii"))


def _valid_nonce(value) -> bool:
    return isinstance(value, str) and len(value) == 2 * NONCE_BYTES and all(c in "0123456789abcdef" for c in value)


def client_handshake(sock, secret: str, client: str, request: dict) -> bytes:
    """The target's side: send a nonce, require the source's proof, then prove itself.
    Returns the session key. Raises StreamRefused when the source does not hold the secret."""
    cnonce = new_nonce()
    sock.sendall(json_frame(AUTH, {"magic": MAGIC, "client": client, "nonce": cnonce}))
    hello = read_json(sock, limit=MAX_HELLO)
    snonce = hello.get("nonce")
    if hello.get("magic") != MAGIC or not _valid_nonce(snonce) or snonce == cnonce:
        raise StreamRefused("the source does not speak the lanekit image stream protocol (version 2)")
    if not check_proof(hello.get("proof"), proof(secret, "server", cnonce, snonce)):
        raise StreamRefused("the source could not prove it holds this run's secret (another process may hold the port)")
    sock.sendall(json_frame(AUTH, {"request": request, "proof": proof(secret, "client", cnonce, snonce, request)}))
    return session_key(secret, cnonce, snonce)


def server_handshake(sock, secret: str, seconds: float | None = None) -> tuple[dict, str, bytes]:
    """The source's side: answer the target's nonce with a proof, then require the target's.
    Returns (request, client name, session key); raises StreamRefused for a wrong proof, an
    over-long hello or request, or a handshake not finished within ``seconds`` in all
    (default ``HANDSHAKE_SECONDS``)."""
    deadline = time.monotonic() + (HANDSHAKE_SECONDS if seconds is None else seconds)
    hello = read_json(sock, limit=MAX_HELLO, deadline=deadline)
    cnonce = hello.get("nonce")
    client = str(hello.get("client", ""))[:200]
    if hello.get("magic") != MAGIC or not _valid_nonce(cnonce):
        raise StreamRefused("the client does not speak the lanekit image stream protocol (version 2)")
    snonce = new_nonce()
    sock.sendall(json_frame(AUTH, {"magic": MAGIC, "nonce": snonce, "proof": proof(secret, "server", cnonce, snonce)}))
    answer = read_json(sock, limit=MAX_REQUEST, deadline=deadline)
    request = answer.get("request")
    if not isinstance(request, dict) or not check_proof(answer.get("proof"), proof(secret, "client", cnonce, snonce, request)):
        raise StreamRefused(f"the client {client or '(unnamed)'} could not prove it holds this run's secret")
    return request, client, session_key(secret, cnonce, snonce)


def ack_mac(key: bytes, ack: dict) -> str:
    body = json.dumps({k: v for k, v in ack.items() if k != "mac"}, sort_keys=True)
    return hmac.new(key, b"ack\0" + body.encode("utf-8"), hashlib.sha256).hexdigest()


def check_ack(key: bytes, ack: dict) -> None:
    """Refuse an acknowledgement not signed with this connection's session key (in constant time)."""
    if not check_proof(ack.get("mac"), ack_mac(key, ack)):
        raise StreamRefused("the client's acknowledgement is not signed with this connection's key")


# --- connections that have not proven the secret yet ------------------------------------------------
class PreAuth:
    """Admission of connections before they proved the secret: at most ``per_peer`` from one
    address and ``total`` in all. A host that opens many silent connections then holds a few slots
    for one handshake deadline, not every slot the nodes need."""

    def __init__(self, per_peer: int, total: int) -> None:
        self.per_peer = per_peer
        self.total = total
        self.lock = threading.Lock()
        self.peers: dict = {}

    def admit(self, peer: str) -> bool:
        with self.lock:
            if self.peers.get(peer, 0) >= self.per_peer or sum(self.peers.values()) >= self.total:
                return False
            self.peers[peer] = self.peers.get(peer, 0) + 1
            return True

    def release(self, peer: str) -> None:
        """The connection proved itself, or ended: its slot is free."""
        with self.lock:
            count = self.peers.get(peer, 0) - 1
            if count > 0:
                self.peers[peer] = count
            else:
                self.peers.pop(peer, None)

    def count(self) -> int:
        with self.lock:
            return sum(self.peers.values())


class StreamMac:
    """The keyed digest of every frame the source sends after the handshake."""

    def __init__(self, key: bytes) -> None:
        self._mac = hmac.new(key, b"stream\0", hashlib.sha256)
        self.data_bytes = 0

    def head(self, kind: bytes, length: int) -> bytes:
        head = frame_head(kind, length)
        self._mac.update(head)
        if kind == DATA:
            self.data_bytes += length
        return head

    def update(self, payload) -> None:
        self._mac.update(payload)

    def frame(self, kind: bytes, payload: bytes = b"") -> bytes:
        head = self.head(kind, len(payload))
        self._mac.update(payload)
        return head + payload

    def end_frame(self, extra: dict | None = None) -> bytes:
        # ``extra`` (the relay's origin signatures) rides along; it is not under this hop's digest
        # because each entry is a signature of its own.
        return json_frame(END, dict(extra or {}, bytes=self.data_bytes, mac=self._mac.hexdigest()))

    def check_end(self, end: dict) -> None:
        if end.get("bytes") != self.data_bytes:
            raise StreamRefused(f"the stream carried {self.data_bytes} bytes but the source announced {end.get('bytes')}")
        if not check_proof(end.get("mac"), self._mac.hexdigest()):
            raise StreamRefused("the digest of the stream does not match the source's (the data was altered on the way)")


# --- the pin of an image's configuration --------------------------------------------------------
# The fields of the image configuration that decide what a container runs; the digest over them is
# the same whether it is read from ``docker image inspect`` or from the config blob in a save, and
# whatever the image store.
CONFIG_KEYS = ("Cmd", "Entrypoint", "Env", "ExposedPorts", "Healthcheck", "Labels", "OnBuild", "Shell",
               "StopSignal", "User", "Volumes", "WorkingDir")
_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "arm64/v8": "arm64"}


def config_digest(arch: str, os_name: str, config: dict | None, layers: list | None) -> str:
    """sha256 over the run-relevant configuration, the platform and the layer list; '' without layers."""
    if not layers:
        return ""
    config = config or {}
    kept = {key: config[key] for key in CONFIG_KEYS if config.get(key) not in (None, "", [], {})}
    text = (arch or "").strip().lower()
    doc = {"arch": _ARCH.get(text, text), "os": (os_name or "linux").lower(), "config": kept, "layers": list(layers)}
    return "sha256:" + hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def config_digest_of_inspect(inspect: dict | None) -> str:
    inspect = inspect or {}
    return config_digest(inspect.get("Architecture", ""), inspect.get("Os", ""), inspect.get("Config"),
                         (inspect.get("RootFS") or {}).get("Layers"))


def config_digest_of_blob(blob: dict) -> str:
    return config_digest(blob.get("architecture", ""), blob.get("os", ""), blob.get("config"),
                         (blob.get("rootfs") or {}).get("diff_ids"))


def rootfs_of_layers(layers: list) -> str:
    return "sha256:" + hashlib.sha256("\n".join(layers).encode("ascii")).hexdigest() if layers else ""


# --- the tar gate ---------------------------------------------------------------------------------
# ``docker load`` applies the tags an archive names in manifest.json, index.json and repositories,
# and no tar reader but docker's own is docker's: a PAX size, a repeated path, a GNU header's prefix
# field or a symlinked directory is read differently by different parsers, so an archive can show a
# gate one manifest and docker another. The receivers therefore spool the stream to a private file
# and hand docker nothing before the stream's digest (and on a relay, the builder's signature over
# every byte) matched: then the bytes are the builder's ``docker save`` of the pinned image. This
# gate follows the tar as it arrives, as a second check of what that save names: it reads headers as
# Go's archive/tar does (PAX size and path, GNU long names, the ustar prefix only in ustar headers,
# header checksums), refuses what docker save does not write (a repeated member, a repeated PAX
# record, a PAX path and a GNU long name on one member) and keeps at most ``_META_LIMIT`` of any
# metadata in memory.
HELD = frozenset({"manifest.json", "index.json", "repositories"})
_CAPTURE_LIMIT = 4 * 1024 * 1024
_CAPTURE_TOTAL = 64 * 1024 * 1024
_META_LIMIT = 1024 * 1024   # a PAX or GNU long-name body, and each of manifest.json, index.json, repositories
BLOCK = 512
# Regular files, hard and symbolic links, directories: all a docker save archive holds.
_MEMBER_KINDS = frozenset({b"0", b"\0", b"1", b"2", b"5"})
_USTAR = b"ustar\0"        # POSIX ustar / PAX magic; GNU headers say b"ustar  \0" and have no prefix field


def _octal(field: bytes) -> int:
    if field[:1] and field[0] & 0x80:  # GNU base-256
        value = field[0] & 0x7F
        for byte in field[1:]:
            value = (value << 8) | byte
        return value
    text = field.split(b"\0", 1)[0].strip() or b"0"
    try:
        return int(text, 8)
    except ValueError:
        raise StreamRefused("the stream is not a tar archive (bad size field)") from None


def _cstr(field: bytes) -> str:
    return field.split(b"\0", 1)[0].decode("utf-8", "replace")


def _checksum_ok(block: bytes) -> bool:
    stored = block[148:156].split(b"\0", 1)[0].strip()
    try:
        value = int(stored or b"x", 8)
    except ValueError:
        return False
    unsigned = sum(block[:148]) + 8 * 32 + sum(block[156:])
    signed = sum(b - 256 if b > 127 else b for b in block[:148]) + 8 * 32 + sum(
        b - 256 if b > 127 else b for b in block[156:])
    return value in (unsigned, signed)


def pax_records(data: bytes) -> dict:
    """The records of a PAX header body; refuses a malformed or repeated record."""
    records: dict = {}
    rest = data
    while rest:
        size_text, space, _tail = rest.partition(b" ")
        try:
            size = int(size_text) if space and size_text.isdigit() else 0
        except ValueError:
            size = 0
        if size <= len(size_text) + 1 or size > len(rest) or rest[size - 1:size] != b"\n":
            raise StreamRefused("the archive carries a malformed PAX header")
        record, rest = rest[len(size_text) + 1:size - 1], rest[size:]
        key, eq, value = record.partition(b"=")
        if not eq:
            raise StreamRefused("the archive carries a malformed PAX header")
        name = key.decode("utf-8", "replace")
        if name in records:
            raise StreamRefused(f"the archive repeats the PAX record {name!r} in one header")
        records[name] = value.decode("utf-8", "replace")
    return records


def normalize_ref(ref: str) -> str:
    """``docker.io/library/x:t`` -> ``x:t``; ``docker.io/a/b:t`` -> ``a/b:t``."""
    for prefix in ("docker.io/library/", "index.docker.io/library/", "docker.io/", "index.docker.io/"):
        if ref.startswith(prefix):
            return ref[len(prefix):]
    return ref.removeprefix("library/")


class TarGate:
    """Follow a tar stream, capture its manifests and small JSON members, refuse what docker save
    does not write; :meth:`verify` then checks that they name only the pinned tag and image."""

    def __init__(self, ref: str, content_hash: str, rootfs: str = "", config: str = "") -> None:
        self.ref = normalize_ref(ref)
        self.content_hash = content_hash
        self.rootfs = rootfs or ""
        self.config = config or ""
        self.buffer = bytearray()
        self.remaining = 0          # bytes (with padding) left in the current member
        self.member = None          # (name, size, route) of the current member
        self.meta = bytearray()     # the body of a PAX / GNU long-name header being read
        self.pax: dict | None = None
        self.long_name: str | None = None
        self.long_link: str | None = None
        self.names: set = set()
        self.captured: dict[str, bytearray] = {}
        self.captured_total = 0
        self.ended = False

    def feed(self, data) -> None:
        view = memoryview(data)
        while view:
            if self.ended:
                return  # docker stops at the end marker too; what follows is never read
            if self.remaining:
                take = min(self.remaining, len(view))
                self._body(view[:take])
                view = view[take:]
                self.remaining -= take
                if not self.remaining:
                    self._member_done()
                continue
            need = BLOCK - len(self.buffer)
            self.buffer += view[:need]
            view = view[need:]
            if len(self.buffer) == BLOCK:
                block = bytes(self.buffer)
                self.buffer.clear()
                self._header(block)

    def _header(self, block: bytes) -> None:
        if block == bytes(BLOCK):
            if self.pax is not None or self.long_name is not None or self.long_link is not None:
                raise StreamRefused("the archive ends right after a PAX or GNU long-name header")
            self.ended = True
            return
        if not _checksum_ok(block):
            raise StreamRefused("the stream is not a tar archive (a header's checksum is wrong)")
        kind = block[156:157]
        size = _octal(block[124:136])
        if kind in (b"x", b"L", b"K"):
            if size > _META_LIMIT:
                raise StreamRefused(f"the archive carries a {size}-byte PAX or GNU long-name header "
                                    f"(at most {_META_LIMIT} here)")
            if (kind == b"x" and self.pax is not None) or (kind == b"L" and self.long_name is not None) \
                    or (kind == b"K" and self.long_link is not None):
                raise StreamRefused("the archive repeats a PAX or GNU long-name header before one member")
            self.meta.clear()
            self._start(("", size, "meta-" + kind.decode()), size)
            return
        if kind == b"g":
            if size > _META_LIMIT:
                raise StreamRefused(f"the archive carries a {size}-byte global PAX header (at most {_META_LIMIT} here)")
            self._start(("", size, "skip"), size)
            return
        name = _cstr(block[0:100])
        if block[257:263] == _USTAR:  # only POSIX headers have the prefix field; GNU ones use it otherwise
            prefix = _cstr(block[345:500])
            if prefix:
                name = f"{prefix}/{name}"
        pax, self.pax = self.pax or {}, None
        long_name, self.long_name = self.long_name, None
        self.long_link = None
        if long_name is not None and "path" in pax:
            raise StreamRefused("the archive names one member both by a PAX path and a GNU long name")
        if "size" in pax:
            if not pax["size"].isdigit():
                raise StreamRefused("the archive carries a PAX size that is not a number")
            size = int(pax["size"])
        name = long_name if long_name is not None else pax.get("path", name)
        clean = posixpath.normpath(name.lstrip("/")).removeprefix("./")
        if clean in self.names:
            raise StreamRefused(f"the archive carries {clean} twice")
        self.names.add(clean)
        held = clean in HELD
        if held and size > _META_LIMIT:
            raise StreamRefused(f"the archive's {clean} is {size} bytes, far more than a manifest (at most {_META_LIMIT})")
        if kind not in _MEMBER_KINDS or any(key.startswith("GNU.sparse") for key in pax):
            raise StreamRefused(f"the archive's {clean} is a kind of tar member docker save does not write "
                                f"({kind.decode('ascii', 'replace')!r})")
        # Links and directories have no body (Go's reader ignores their size field as well).
        regular = kind in (b"0", b"\0")
        if not regular:
            size = 0
        capture = held or (regular and size <= _CAPTURE_LIMIT and self.captured_total + size <= _CAPTURE_TOTAL
                           and (clean.endswith(".json") or clean.startswith("blobs/")))
        if capture:
            self.captured[clean] = bytearray()
            self.captured_total += size
        self._start((clean, size, "capture" if capture else "skip"), size)

    def _start(self, member: tuple, size: int) -> None:
        self.member = member
        self.remaining = (size + BLOCK - 1) // BLOCK * BLOCK
        if not self.remaining:
            self._member_done()

    def _body(self, chunk) -> None:
        name, size, route = self.member
        if route.startswith("meta"):
            want = size - len(self.meta)
            if want > 0:
                self.meta += chunk[:want]
        elif route == "capture":
            want = size - len(self.captured[name])
            if want > 0:
                self.captured[name] += chunk[:want]

    def _member_done(self) -> None:
        _name, _size, route = self.member
        if route == "meta-x":
            self.pax = pax_records(bytes(self.meta))
        elif route == "meta-L":
            self.long_name = bytes(self.meta).split(b"\0", 1)[0].decode("utf-8", "replace")
        elif route == "meta-K":
            self.long_link = bytes(self.meta).split(b"\0", 1)[0].decode("utf-8", "replace")
        self.meta.clear()
        self.member = None

    def _blob(self, path: str) -> bytes:
        clean = posixpath.normpath(str(path or "")).removeprefix("./")
        data = self.captured.get(clean)
        if data is None:
            raise StreamRefused(f"the archive does not carry the image configuration {path!r} its manifest names")
        base = posixpath.basename(clean).removesuffix(".json")
        if len(base) == 64 and hashlib.sha256(data).hexdigest() != base:
            raise StreamRefused(f"the archive's {clean} does not match its own digest")
        return bytes(data)

    def verify(self) -> None:
        """Refuse an archive that names anything but the pinned tag and image."""
        if not self.ended:
            raise StreamRefused("the archive ended without its end marker")
        manifest = self._parsed("manifest.json", required=True)
        if not isinstance(manifest, list) or len(manifest) != 1 or not isinstance(manifest[0], dict):
            raise StreamRefused("the archive's manifest.json must describe exactly one image")
        tags = [normalize_ref(str(tag)) for tag in manifest[0].get("RepoTags") or []]
        if tags != [self.ref]:
            raise StreamRefused(f"the archive names the tags {tags}, not only the pinned {self.ref}")
        repositories = self._parsed("repositories")
        if repositories is not None:
            repo, _colon, tag = self.ref.rpartition(":")
            names = sorted(f"{normalize_ref(r)}:{t}" for r, tags_ in (repositories or {}).items()
                           for t in (tags_ or {}) if isinstance(tags_, dict))
            if names != [f"{repo}:{tag}"]:
                raise StreamRefused(f"the archive's repositories name {names}, not only the pinned {self.ref}")
        index = self._parsed("index.json")
        if index is not None:
            entries = (index or {}).get("manifests") if isinstance(index, dict) else None
            if not isinstance(entries, list) or len(entries) != 1:
                raise StreamRefused("the archive's index.json must describe exactly one image")
            notes = (entries[0] or {}).get("annotations") or {}
            named = notes.get("io.containerd.image.name")
            short = notes.get("org.opencontainers.image.ref.name")
            if named and normalize_ref(named) != self.ref:
                raise StreamRefused(f"the archive's index.json names {named}, not the pinned {self.ref}")
            if short and short not in (self.ref.rpartition(":")[2], self.ref) and normalize_ref(short) != self.ref:
                raise StreamRefused(f"the archive's index.json names {short}, not the pinned {self.ref}")
        try:
            blob = json.loads(self._blob(manifest[0].get("Config")).decode("utf-8"))
        except ValueError:
            raise StreamRefused("the archive's image configuration is not JSON") from None
        labels = ((blob.get("config") or {}).get("Labels") or {}) if isinstance(blob, dict) else {}
        if labels.get("io.lanekit.content-hash") != self.content_hash:
            raise StreamRefused(f"the archive's image carries content hash {str(labels.get('io.lanekit.content-hash'))[:12]}, "
                                f"not the pinned {self.content_hash[:12]}")
        diff_ids = (blob.get("rootfs") or {}).get("diff_ids") or []
        if len(diff_ids) != len(manifest[0].get("Layers") or []):
            raise StreamRefused("the archive's manifest and image configuration disagree on the layers")
        if self.rootfs and rootfs_of_layers(diff_ids) != self.rootfs:
            raise StreamRefused("the archive's image has other layers than the pinned rootfs")
        if self.config and config_digest_of_blob(blob) != self.config:
            raise StreamRefused("the archive's image configuration (entrypoint, env, labels, ...) is not the pinned one")

    def _parsed(self, name: str, required: bool = False):
        data = self.captured.get(name)
        if data is None:
            if required:
                raise StreamRefused(f"the archive has no {name}")
            return None
        try:
            return json.loads(bytes(data).decode("utf-8"))
        except ValueError:
            raise StreamRefused(f"the archive's {name} is not JSON") from None


def write_all(fd: int, chunks) -> None:
    for chunk in chunks:
        view = memoryview(chunk)
        while view:
            written = os.write(fd, view)
            view = view[written:]
