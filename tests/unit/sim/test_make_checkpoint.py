"""The synthetic checkpoint: Mistral consolidated layout, valid safetensors, deterministic,
idempotent."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

from standin_helpers import MAKE_CHECKPOINT, PY

sys.path.insert(0, os.path.dirname(MAKE_CHECKPOINT))
import make_checkpoint  # noqa: E402

DTYPE_BYTES = {"BF16": 2}


def make(out, *args):
    """The CLI once per test (JSON line on stdout), in-process otherwise (2 cores, keep it quick)."""
    if args and args[-1] == "--cli":
        r = subprocess.run([PY, MAKE_CHECKPOINT, "--out", str(out), *args[:-1]], capture_output=True, text=True,
                           timeout=60, check=True)
        return json.loads(r.stdout)
    a = dict(zip(args[::2], args[1::2], strict=True))
    return make_checkpoint.build(str(out), float(a.get("--size-mib", 32)), int(a.get("--shards", 4)))


def parse(path):
    with open(path, "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(n))
    return n, header, os.path.getsize(path)


def test_layout_and_headers(tmp_path):
    out = tmp_path / "ck"
    res = make(out, "--size-mib", "3", "--shards", "3", "--cli")
    names = sorted(os.listdir(out))
    assert names == ["consolidated-00001-of-00003.safetensors", "consolidated-00002-of-00003.safetensors",
                     "consolidated-00003-of-00003.safetensors", "consolidated.safetensors.index.json",
                     "params.json", "tekken.json", "tokenizer.json"]
    assert "config.json" not in names and res["changed"] is True
    index = json.loads((out / "consolidated.safetensors.index.json").read_text())
    total = 0
    for shard in names[:3]:
        n, header, size = parse(out / shard)
        assert n % 8 == 0
        assert header["__metadata__"]["format"] == "pt"
        end = 0
        for name, info in header.items():
            if name == "__metadata__":
                continue
            count = 1
            for d in info["shape"]:
                count *= d
            b, e = info["data_offsets"]
            assert info["dtype"] == "BF16" and e - b == count * DTYPE_BYTES["BF16"] and b == end
            end = e
            assert index["weight_map"][name] == shard
        assert 8 + n + end == size           # offsets cover the data exactly
        total += end
    assert index["metadata"]["total_size"] == total == res["total_bytes"]
    assert abs(total - 3 * 2**20) < 2**20   # about the requested size
    params = json.loads((out / "params.json").read_text())
    assert params["dim"] > 0 and params["n_layers"] > 0 and params["max_seq_len"] > 0
    assert "lanekit" in params
    tekken = json.loads((out / "tekken.json").read_text())
    assert tekken["config"]["version"] and tekken["vocab"] and tekken["special_tokens"]


def test_deterministic_and_idempotent(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    make(a, "--size-mib", "2", "--shards", "2")
    make(b, "--size-mib", "2", "--shards", "2", "--cli")
    for name in os.listdir(a):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    mtimes = {n: os.stat(a / n).st_mtime_ns for n in os.listdir(a)}
    res = make(a, "--size-mib", "2", "--shards", "2")
    assert res["changed"] is False and res["written"] == []
    assert mtimes == {n: os.stat(a / n).st_mtime_ns for n in os.listdir(a)}
    # a damaged shard is rewritten, the rest is left alone
    shard = a / "consolidated-00002-of-00002.safetensors"
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF
    shard.write_bytes(bytes(data))
    res = make(a, "--size-mib", "2", "--shards", "2")
    assert res["written"] == ["consolidated-00002-of-00002.safetensors"]
    # another shard count replaces the shard set
    res = make(a, "--size-mib", "2", "--shards", "1")
    assert sorted(n for n in os.listdir(a) if n.endswith(".safetensors")) == ["consolidated-00001-of-00001.safetensors"]
