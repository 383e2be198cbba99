#!/usr/bin/env python
"""Write a synthetic checkpoint in the Mistral "consolidated" layout (a TEST FIXTURE, not a model).

    python3 tests/sim/make_checkpoint.py --out DIR [--size-mib N] [--shards K] [--seed S]

Files:
  consolidated-00001-of-0000K.safetensors ...   real safetensors: 8-byte LE header length, JSON
                                                header (dtype/shape/data_offsets consistent with the
                                                data, 8-byte aligned), then the tensor bytes
  consolidated.safetensors.index.json           {"metadata": {"total_size"}, "weight_map"}
  params.json                                   Mistral-native model parameters
  tekken.json                                   a small tekken-format tokenizer file
  tokenizer.json                                a word-level Hugging Face tokenizer (the bench
                                                tools read it; one token per word, like the
                                                stand-ins' usage counts)
  (no config.json, like the NVFP4 repository in the bring-up report)

Deterministic: the same arguments give byte-identical files (content is SHAKE-128 of the seed
and tensor name). Idempotent: files whose content is already right are not rewritten. Prints
one JSON line: {"out", "files", "changed", "written", "total_bytes"}. Pure stdlib.
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import struct
import sys
import tempfile

MiB = 1 << 20
LABEL = "lanekit synthetic test checkpoint: random bytes, not a model"


def _dims(size_mib: float) -> tuple[int, int]:
    """(dim, vocab) so the layer count stays reasonable for small and benchmark sizes."""
    if size_mib <= 512:
        return 256, 1024
    if size_mib <= 32 * 1024:
        return 1024, 4096
    return 4096, 16384


def tensor_plan(size_mib: float):
    """Ordered [(name, shape)] in Mistral consolidated naming, about size_mib MiB in BF16."""
    dim, vocab = _dims(size_mib)
    hidden = 4 * dim
    n_heads = max(1, dim // 64)
    fixed = [("tok_embeddings.weight", [vocab, dim])]
    per_layer = [
        ("attention.wq.weight", [dim, dim]), ("attention.wk.weight", [dim, dim]),
        ("attention.wv.weight", [dim, dim]), ("attention.wo.weight", [dim, dim]),
        ("attention_norm.weight", [dim]),
        ("feed_forward.w1.weight", [hidden, dim]), ("feed_forward.w2.weight", [dim, hidden]),
        ("feed_forward.w3.weight", [hidden, dim]), ("ffn_norm.weight", [dim]),
    ]
    tail = [("norm.weight", [dim]), ("output.weight", [vocab, dim])]

    def nbytes(shape):
        n = 2
        for d in shape:
            n *= d
        return n

    budget = size_mib * MiB - sum(nbytes(s) for _name, s in fixed + tail)
    layer_bytes = sum(nbytes(s) for _name, s in per_layer)
    n_layers = max(1, int(round(budget / layer_bytes)))
    tensors = list(fixed)
    for i in range(n_layers):
        tensors += [(f"layers.{i}.{name}", shape) for name, shape in per_layer]
    tensors += tail
    params = {"dim": dim, "n_layers": n_layers, "head_dim": dim // n_heads, "hidden_dim": hidden,
              "n_heads": n_heads, "n_kv_heads": n_heads, "norm_eps": 1e-05, "vocab_size": vocab,
              "rope_theta": 1000000.0, "max_seq_len": 1048576, "lanekit": LABEL}
    return tensors, params, nbytes


def shard_split(tensors, nbytes, k: int):
    """Contiguous groups of tensors with about equal bytes; never an empty shard."""
    k = max(1, min(k, len(tensors)))
    total = sum(nbytes(s) for _name, s in tensors)
    groups, cur, acc = [], [], 0
    for idx, (name, shape) in enumerate(tensors):
        cur.append((name, shape))
        acc += nbytes(shape)
        left_tensors = len(tensors) - idx - 1
        left_groups = k - len(groups) - 1
        if left_groups > 0 and (acc >= total * (len(groups) + 1) / k or left_tensors == left_groups):
            groups.append(cur)
            cur = []
    if cur:
        groups.append(cur)
    return groups


def shard_chunks(group, nbytes, seed: int):
    """Yield the bytes of one safetensors file: header then data, tensor by tensor."""
    header = {"__metadata__": {"format": "pt", "lanekit": LABEL}}
    off = 0
    for name, shape in group:
        n = nbytes(shape)
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + n]}
        off += n
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * ((8 - (len(blob) % 8)) % 8)
    yield struct.pack("<Q", len(blob)) + blob
    for name, shape in group:
        n = nbytes(shape)
        xof = hashlib.shake_128(f"{seed}:{name}".encode())
        # produce at most 64 MiB at a time; each block keyed by its index stays deterministic
        block = 64 * MiB
        if n <= block:
            yield xof.digest(n)
        else:
            for i in range(0, n, block):
                yield hashlib.shake_128(f"{seed}:{name}:{i}".encode()).digest(min(block, n - i))


def tekken(vocab: int) -> dict:
    specials = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
                "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]",
                "[IMG_END]", "[PREFIX]", "[MIDDLE]", "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]",
                "[TOOL_CONTENT]", "[THINK]", "[/THINK]"]
    n_special = 32
    special = [{"rank": i, "token_str": specials[i] if i < len(specials) else f"<SPECIAL_{i}>",
                "is_control": True} for i in range(n_special)]
    n_bytes = max(0, min(256, vocab - n_special))
    vocab_entries = [{"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode(),
                      "token_str": chr(i) if 32 <= i < 127 else None} for i in range(n_bytes)]
    return {"config": {"pattern": r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
                                  r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
                                  r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
                       "num_vocab_tokens": n_bytes, "default_vocab_size": vocab,
                       "default_num_special_tokens": n_special, "version": "v13"},
            "vocab": vocab_entries, "special_tokens": special, "lanekit": LABEL}


# The words of lanekit's bench corpus (plugins/plugin_utils/_bench/_corpus.py WORDS).
CORPUS_WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which "
    "but have an they you were her she there one all we their been has when who will more no if out "
    "so said what up its about into than them can only other new some could time these two may then "
    "do first any my now such like our over man me even most made after also did many before must "
    "through back years where much your way well down should because each just those people how too "
    "little state good very make world still own see men work long get here between both life being "
    "under never day same another know while last might us great old year off come since against go "
    "came right used take three river city mountain garden letter window morning evening winter "
    "summer road house water light stone field friend story voice door table paper music market"
).split()


def hf_tokenizer() -> dict:
    """A WordLevel tokenizer.json (whitespace split, lower-cased): what llama-benchy and
    tool-eval-bench load with `tokenizers` to cut prompts of N tokens. One token per word."""
    words = ["<unk>", "<s>", "</s>"]
    for w in CORPUS_WORDS:
        for form in (w, w.capitalize(), w + "."):
            if form not in words:
                words.append(form)
    words += [".", ",", "Paris"]
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                              "normalized": False, "special": True} for i, t in enumerate(words[:3])],
            "normalizer": None, "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None,
            "decoder": None,
            "model": {"type": "WordLevel", "vocab": {t: i for i, t in enumerate(words)}, "unk_token": "<unk>"}}


def _same(path: str, chunks) -> bool:
    """True if the file at `path` holds exactly the concatenation of `chunks`."""
    try:
        fh = open(path, "rb")
    except OSError:
        return False
    with fh:
        for chunk in chunks:
            if fh.read(len(chunk)) != chunk:
                return False
        return fh.read(1) == b""


def _write(path: str, chunks) -> None:
    d = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
    try:
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def ensure(path: str, make_chunks, expected_size: int | None = None) -> bool:
    """Write the file unless it already has exactly this content. Returns True if written."""
    if expected_size is None or (os.path.isfile(path) and os.path.getsize(path) == expected_size):
        if _same(path, make_chunks()):
            return False
    _write(path, make_chunks())
    return True


def build(out: str, size_mib: float = 32, shards: int = 4, seed: int = 0) -> dict:
    os.makedirs(out, exist_ok=True)
    tensors, params, nbytes = tensor_plan(size_mib)
    groups = shard_split(tensors, nbytes, shards)
    k = len(groups)
    written, files, weight_map, total = [], [], {}, 0
    for i, group in enumerate(groups, 1):
        name = f"consolidated-{i:05d}-of-{k:05d}.safetensors"
        path = os.path.join(out, name)
        header_len = len(next(shard_chunks(group, nbytes, seed)))
        size = header_len + sum(nbytes(s) for _name, s in group)
        total += sum(nbytes(s) for _name, s in group)
        if ensure(path, lambda g=group: shard_chunks(g, nbytes, seed), size):
            written.append(name)
        files.append(name)
        for tname, _shape in group:
            weight_map[tname] = name
    docs = {
        "consolidated.safetensors.index.json": {"metadata": {"total_size": total, "lanekit": LABEL},
                                                "weight_map": weight_map},
        "params.json": params,
        "tekken.json": tekken(params["vocab_size"]),
        "tokenizer.json": hf_tokenizer(),
    }
    for name, doc in docs.items():
        data = (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()
        if ensure(os.path.join(out, name), lambda d=data: iter([d]), len(data)):
            written.append(name)
        files.append(name)
    # shards of an earlier run with a different --shards count would confuse loaders: remove them
    for stale in sorted(os.listdir(out)):
        if stale.startswith("consolidated-") and stale.endswith(".safetensors") and stale not in files:
            os.unlink(os.path.join(out, stale))
            written.append(f"-{stale}")
    return {"out": os.path.abspath(out), "files": files, "changed": bool(written), "written": written,
            "total_bytes": total}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Write a synthetic Mistral-consolidated checkpoint (test fixture).")
    p.add_argument("--out", required=True, help="output directory (created if missing)")
    p.add_argument("--size-mib", type=float, default=32, help="approximate total tensor size in MiB (default 32)")
    p.add_argument("--shards", type=int, default=4, help="number of safetensors shards (default 4)")
    p.add_argument("--seed", type=int, default=0, help="content seed (default 0)")
    a = p.parse_args(argv)
    if a.size_mib <= 0 or a.shards < 1:
        p.error("--size-mib must be > 0 and --shards >= 1")
    print(json.dumps(build(a.out, a.size_mib, a.shards, a.seed)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
