# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""What a ``docker save`` archive may name before ``docker load`` sees it: the pin of an image's
configuration and the tar gate.

One job: check the archive that arrives over the image stream (``_stream``) against the pinned
image, as the tar arrives: its config blob, its layers and the members that carry tags. Pure
(no sockets, no docker).
"""
from __future__ import annotations

import hashlib
import json
import posixpath
from typing import Any, cast

from ansible_collections.lanekit.serving.plugins.module_utils._image._stream import StreamRefused

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
# record, a PAX path and a GNU long name on one member, more members or longer names than any save
# has) and holds a bounded amount whatever the archive: every holder of the run's secret can send one.
HELD = frozenset({"manifest.json", "index.json", "repositories"})
_CAPTURE_LIMIT = 4 * 1024 * 1024
_CAPTURE_TOTAL = 64 * 1024 * 1024
# Only a short name can be one verify() looks up (docker's config blob is ``<sha256>.json`` or
# ``blobs/sha256/<sha256>``, under 80 bytes): a longer one is never captured, so the names held as
# keys stay within this many bytes per member.
_CAPTURE_NAME_LIMIT = 1024
_HELD_LIMIT = 1024 * 1024   # each of manifest.json, index.json, repositories
# A PAX or GNU long-name body. docker save's paths are under 200 bytes and a Linux path is at most
# 4 KiB; 64 KiB leaves room for the other PAX records and is read into memory one header at a time
# (Go's reader allows 1 MiB, which a token holder could repeat on every member).
_EXTENDED_HEADER_LIMIT = 64 * 1024
# docker save writes a handful of members per layer (a directory, VERSION, json and layer.tar; or
# a blob and its links) and docker stacks at most 127 layers: under 1000 members, whatever the image.
# The seen-set holds a 32-byte digest per member, so this many cost 128 KiB.
_MEMBER_LIMIT = 4096
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


def name_digest(name: str) -> bytes:
    """What the seen-set keeps of a member's name: its sha256, 32 bytes however long the name."""
    return hashlib.sha256(name.encode("utf-8", "surrogateescape")).digest()


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
        self.member: tuple[str, int, str] | None = None  # (name, size, route) of the current member
        self.meta = bytearray()     # the body of a PAX / GNU long-name header being read
        self.pax: dict | None = None
        self.long_name: str | None = None
        self.long_link: str | None = None
        self.names: set[bytes] = set()  # name_digest() of every member seen (a repeat is refused)
        self.captured: dict[str, bytearray] = {}
        self.captured_total = 0
        self.ended = False

    def feed(self, data: bytes | bytearray | memoryview) -> None:
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
            if size > _EXTENDED_HEADER_LIMIT:
                raise StreamRefused(f"the archive carries a {size}-byte PAX or GNU long-name header "
                                    f"(docker save writes a few hundred bytes; at most {_EXTENDED_HEADER_LIMIT} here)")
            if (kind == b"x" and self.pax is not None) or (kind == b"L" and self.long_name is not None) \
                    or (kind == b"K" and self.long_link is not None):
                raise StreamRefused("the archive repeats a PAX or GNU long-name header before one member")
            self.meta.clear()
            self._start(("", size, "meta-" + kind.decode()), size)
            return
        if kind == b"g":
            if size > _EXTENDED_HEADER_LIMIT:
                raise StreamRefused(f"the archive carries a {size}-byte global PAX header "
                                    f"(docker save writes none; at most {_EXTENDED_HEADER_LIMIT} here)")
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
        seen = name_digest(clean)
        if seen in self.names:
            raise StreamRefused(f"the archive carries {clean[:200]} twice")
        if len(self.names) >= _MEMBER_LIMIT:
            raise StreamRefused(f"the archive carries more than {_MEMBER_LIMIT} members, far more than docker save "
                                f"writes for an image (a few per layer)")
        self.names.add(seen)
        held = clean in HELD
        if held and size > _HELD_LIMIT:
            raise StreamRefused(f"the archive's {clean} is {size} bytes, far more than a manifest (at most {_HELD_LIMIT})")
        if kind not in _MEMBER_KINDS or any(key.startswith("GNU.sparse") for key in pax):
            raise StreamRefused(f"the archive's {clean[:200]} is a kind of tar member docker save does not write "
                                f"({kind.decode('ascii', 'replace')!r})")
        # Links and directories have no body (Go's reader ignores their size field as well).
        regular = kind in (b"0", b"\0")
        if not regular:
            size = 0
        capture = held or (regular and size <= _CAPTURE_LIMIT and self.captured_total + size <= _CAPTURE_TOTAL
                           and len(clean) <= _CAPTURE_NAME_LIMIT
                           and (clean.endswith(".json") or clean.startswith("blobs/")))
        if capture:
            self.captured[clean] = bytearray()
            self.captured_total += size
        self._start((clean, size, "capture" if capture else "skip"), size)

    def carries(self, name: str) -> bool:
        """Whether a member of that name went through the gate (the names are kept as digests)."""
        return name_digest(posixpath.normpath(name.lstrip("/")).removeprefix("./")) in self.names

    def _start(self, member: tuple[str, int, str], size: int) -> None:
        self.member = member
        self.remaining = (size + BLOCK - 1) // BLOCK * BLOCK
        if not self.remaining:
            self._member_done()

    def _body(self, chunk: bytes | bytearray | memoryview) -> None:
        name, size, route = cast(tuple[str, int, str], self.member)  # a body follows its header: _start set it
        if route.startswith("meta"):
            want = size - len(self.meta)
            if want > 0:
                self.meta += chunk[:want]
        elif route == "capture":
            want = size - len(self.captured[name])
            if want > 0:
                self.captured[name] += chunk[:want]

    def _member_done(self) -> None:
        _name, _size, route = cast(tuple[str, int, str], self.member)  # called once the member was set
        if route == "meta-x":
            self.pax = pax_records(bytes(self.meta))
        elif route == "meta-L":
            self.long_name = bytes(self.meta).split(b"\0", 1)[0].decode("utf-8", "replace")
        elif route == "meta-K":
            self.long_link = bytes(self.meta).split(b"\0", 1)[0].decode("utf-8", "replace")
        self.meta.clear()
        self.member = None

    def _blob(self, path: object) -> bytes:
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

    def _parsed(self, name: str, required: bool = False) -> Any:
        data = self.captured.get(name)
        if data is None:
            if required:
                raise StreamRefused(f"the archive has no {name}")
            return None
        try:
            return json.loads(bytes(data).decode("utf-8"))
        except ValueError:
            raise StreamRefused(f"the archive's {name} is not JSON") from None
