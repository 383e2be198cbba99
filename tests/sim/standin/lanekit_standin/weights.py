"""Checkpoint inspection and real weight reads.

Every rank parses the header of every `*.safetensors` shard (8-byte little-endian header
length, JSON header, offsets checked against the file size like safetensors does), then reads
data through the page cache in large chunks (16 MiB by default; `posix_fadvise(SEQUENTIAL)`,
no O_DIRECT).

Share (STANDIN_LOAD_SHARE): `slice` (default) - node rank r of N reads the r-th contiguous
1/N of each shard's data region, as a tensor-parallel rank reads its slices of every tensor
(TP8 over 568 GiB: ~71 GiB per node, like the bring-up report); `all` - every rank reads every
byte. STANDIN_LOAD_MIBPS caps the read rate per rank (default: unthrottled).
"""
from __future__ import annotations

import glob
import json
import os
import struct
import time

from .common import MiB, env_float, env_str

_DTYPE_SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1, "F4": 1,
                "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4,
                "I64": 8, "U64": 8, "F64": 8, "C64": 8}


class CheckpointError(Exception):
    """A checkpoint problem, with the line the engine would print."""


def fs_type(path: str) -> str:
    """Filesystem type of `path` from /proc/mounts (longest mount-point prefix)."""
    best, kind = "", "unknown"
    try:
        real = os.path.realpath(path)
        with open("/proc/mounts", encoding="utf-8") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) < 3:
                    continue
                mnt = parts[1].replace("\\040", " ")
                if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                    best, kind = mnt, parts[2]
    except OSError:
        pass
    return kind


def find_shards(model_dir: str, load_format: str = "auto") -> list[str]:
    files = sorted(glob.glob(os.path.join(model_dir, "*.safetensors")))
    if load_format == "mistral":
        consolidated = [f for f in files if os.path.basename(f).startswith("consolidated")]
        files = consolidated or files
    return files


def read_header(path: str) -> tuple[int, dict, int]:
    """Return (header_len, header, file_size); CheckpointError like safetensors on bad files."""
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        raw = fh.read(8)
        if len(raw) < 8:
            raise CheckpointError("safetensors_rust.SafetensorError: Error while deserializing header: "
                                  f"HeaderTooSmall ({path})")
        (n,) = struct.unpack("<Q", raw)
        if n > 100 * MiB or 8 + n > size:
            raise CheckpointError("safetensors_rust.SafetensorError: Error while deserializing header: "
                                  f"HeaderTooLarge ({path})")
        blob = fh.read(n)
    try:
        header = json.loads(blob.decode("utf-8"))
        if not isinstance(header, dict):
            raise ValueError("not an object")
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckpointError("safetensors_rust.SafetensorError: Error while deserializing header: "
                              f"InvalidHeaderDeserialization ({path}: {exc})") from None
    data_len = size - 8 - n
    end_max = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            begin, end = info["data_offsets"]
            dtype = info["dtype"]
            shape = info["shape"]
        except (KeyError, TypeError, ValueError):
            raise CheckpointError("safetensors_rust.SafetensorError: Error while deserializing header: "
                                  f"InvalidHeaderDeserialization ({path}: tensor {name})") from None
        count = 1
        for dim in shape:
            count *= int(dim)
        want = count * _DTYPE_SIZES.get(dtype, 1)
        if dtype in _DTYPE_SIZES and end - begin != want:
            raise CheckpointError("safetensors_rust.SafetensorError: Error while deserializing header: "
                                  f"TensorInvalidInfo ({path}: tensor {name})")
        end_max = max(end_max, int(end))
    if end_max > data_len:
        raise CheckpointError("safetensors_rust.SafetensorError: Error while deserializing header: "
                              f"MetadataIncompleteBuffer ({path})")
    return n, header, size


class ShardPlan:
    def __init__(self, path: str, header_len: int, size: int, ntensors: int, begin: int, end: int):
        self.path = path
        self.header_len = header_len
        self.size = size
        self.ntensors = ntensors
        self.begin = begin      # absolute file offsets this rank reads
        self.end = end

    @property
    def nbytes(self) -> int:
        return max(0, self.end - self.begin)


def plan(shards: list[str], share_index: int, share_count: int) -> list[ShardPlan]:
    mode = (env_str("STANDIN_LOAD_SHARE", "slice") or "slice").lower()
    out = []
    for path in shards:
        n, header, size = read_header(path)
        data0 = 8 + n
        data_len = size - data0
        if mode == "all" or share_count <= 1:
            begin, end = data0, size
        else:
            per = data_len // share_count
            begin = data0 + per * share_index
            end = size if share_index == share_count - 1 else begin + per
        out.append(ShardPlan(path, n, size, sum(1 for k in header if k != "__metadata__"), begin, end))
    return out


class Reader:
    """Reads planned byte ranges in big chunks, honouring STANDIN_LOAD_MIBPS."""

    def __init__(self, check):
        self.check = check          # called between chunks: raises to abort (signals, failures)
        self.mibps = env_float("STANDIN_LOAD_MIBPS", None)
        if self.mibps is not None and self.mibps <= 0:
            self.mibps = None
        chunk_mib = env_float("STANDIN_READ_CHUNK_MIB", 16.0) or 16.0
        self.chunk = max(64 * 1024, int(chunk_mib * MiB))
        if self.mibps:
            # keep at least ~4 chunks per second so a throttled load still moves smoothly
            self.chunk = max(64 * 1024, min(self.chunk, int(self.mibps * MiB / 4)))
        self.total = 0
        self._t0 = time.monotonic()

    def read(self, sp: ShardPlan, sleep) -> int:
        got = 0
        buf = bytearray(self.chunk)
        view = memoryview(buf)
        fd = os.open(sp.path, os.O_RDONLY)
        try:
            try:
                os.posix_fadvise(fd, sp.begin, sp.nbytes, os.POSIX_FADV_SEQUENTIAL)
            except (AttributeError, OSError):
                pass
            pos = sp.begin
            while pos < sp.end:
                self.check()
                want = min(self.chunk, sp.end - pos)
                n = os.preadv(fd, [view[:want]], pos) if hasattr(os, "preadv") else _pread_into(fd, view, want, pos)
                if n <= 0:
                    raise CheckpointError(f"safetensors_rust.SafetensorError: unexpected end of file ({sp.path})")
                pos += n
                got += n
                self.total += n
                if self.mibps:
                    due = self._t0 + self.total / (self.mibps * MiB)
                    wait = due - time.monotonic()
                    if wait > 0:
                        sleep(wait)
        finally:
            os.close(fd)
        return got


def _pread_into(fd, view, want, pos):
    data = os.pread(fd, want, pos)
    view[: len(data)] = data
    return len(data)


def model_params(model_dir: str) -> dict:
    """params.json (Mistral format) or config.json (HF), whichever exists; {} otherwise."""
    for name in ("config.json", "params.json"):
        path = os.path.join(model_dir, name)
        if os.path.isfile(path):
            try:
                with open(path, encoding="utf-8") as fh:
                    data = json.load(fh)
                return data if isinstance(data, dict) else {}
            except (OSError, ValueError):
                return {}
    return {}


def derived_max_len(params: dict, default: int = 131072) -> int:
    for key in ("max_position_embeddings", "max_seq_len", "max_sequence_length", "seq_length"):
        value = params.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return default


def tqdm_line(desc: str, n: int, total: int, elapsed: float) -> str:
    """One tqdm update in vLLM's `_BAR_FORMAT`:
    "{desc}: {percentage:3.0f}% Completed | {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]"."""
    pct = 100.0 * n / total if total else 100.0
    if n > 0 and elapsed > 0:
        rate = n / elapsed
        remaining = _fmt_interval((total - n) / rate)
        rate_fmt = f"{rate:5.2f}it/s" if rate >= 1 else f"{1 / rate:5.2f}s/it"
    else:
        remaining, rate_fmt = "?", "?it/s"
    return f"{desc}: {pct:3.0f}% Completed | {n}/{total} [{_fmt_interval(elapsed)}<{remaining}, {rate_fmt}]"


def _fmt_interval(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h:d}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"
