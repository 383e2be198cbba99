# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The lane schema as data: every key a lane file may set, its type, whether it is required, its default.

One job: declare what a lane may say. ``_validate`` checks a lane against this table and
``tests/tools/references.py`` renders it as docs/lane-schema.md; the table holds no logic.
"""
from __future__ import annotations

import re
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines
from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import PROFILES

LANE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
FLAG_RE = re.compile(r"^--?[A-Za-z0-9][A-Za-z0-9_.-]*$")
ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
REVISION_RE = re.compile(r"^[0-9a-f]{40}$")
# A served model name travels in HTTP requests and argv: no whitespace or control characters.
SERVED_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$")
IMAGE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")  # a directory under images/
# docker's --log-opt max-size: a whole number of bytes, or of k, m or g (json-file and local drivers).
SIZE_RE = re.compile(r"^[1-9][0-9]{0,8}[kmg]?$")
# Each rank's docker log is rotated at this size, keeping this many files: a chatty engine cannot fill the
# node's disk, and what lanekit copies from it (status, archives, bundles) has a ceiling of their product.
LOG_MAX_SIZE = "100m"
LOG_MAX_FILES = 3
ENGINES = tuple(_engines.ENGINES)


# A tiny declarative schema: (kind, required, extra, default, minimum, doc). Kinds: str, int, num,
# bool, list, map, enum, args, env, revision, strlist, port, image, name, bench, size. ``extra`` is an
# enum's choices or a mapping's own fields; ``doc`` is the key's one line in docs/lane-schema.md.
def _f(kind: str, required: bool = False, extra: Any = None, default: Any = None, minimum: int | None = None,
       doc: str = "") -> dict[str, Any]:
    return {"kind": kind, "required": required, "extra": extra, "default": default, "min": minimum, "doc": doc}


# One pool of a P/D lane: its nodes, how they split the model, its port and its own flags/env.
_POOL: dict[str, dict[str, Any]] = {
    "nodes": _f("int", True, minimum=1, doc="the pool's nodes (the prefill pool takes the first ones)"),
    "parallelism": _f("enum", False, ("tp", "tep", "dep"), "tp", doc="how the pool splits the model"),
    "tensor_parallel": _f("int", True, minimum=1, doc="the pool's tensor-parallel size"),
    "data_parallel": _f("int", False, None, 1, minimum=1, doc="the pool's data-parallel size (dep)"),
    "data_parallel_local": _f("int", False, minimum=1, doc="data-parallel ranks per node (dep)"),
    "port": _f("port", True, doc="the port the pool's engines serve (the router's endpoints)"),
    "rendezvous_port": _f("port", True, doc="the port the pool's ranks meet at"),
    "args": _f("args", doc="engine flags of this pool, over serve.args"),
    "env": _f("env", doc="environment of this pool, over serve.env"),
}

SCHEMA: dict[str, dict[str, Any]] = {
    "lane": _f("str", True, doc="the lane's name: the file name without .yml"),
    "description": _f("str", doc="one line for people"),
    "engine": _f("enum", True, ENGINES, doc="the serving engine (its record in the engine table)"),
    "image": _f("image", True, doc="the image spec, images/<image>/image.yml"),
    "hardware": _f("enum", True, tuple(PROFILES), doc="the hardware profile of the nodes"),
    "model": _f("map", True, {
        "id": _f("str", True, doc="the model's id (the Hugging Face repository)"),
        "revision": _f("revision", doc="the commit to stage and serve (required to stage from hf)"),
        "served_name": _f("name", True, doc="the model name clients send"),
        "dir": _f("str", doc="the directory under lanekit_weights_root (default: model.id)"),
        "layout": _f("enum", False, ("mistral_consolidated", "hf"), "hf",
                     doc="the checkpoint's layout (mistral_consolidated: params.json, no config.json)"),
        "size_gib": _f("num", doc="the checkpoint's size, for the page-cache budget"),
        "arch": _f("str", doc="the model architecture, for lint rules"),
        "attention": _f("enum", False, ("dsa_mla", "mla", "mha", "gqa"), doc="the attention kind, for lint rules"),
        # Checked where the engine's kernels support only some sizes (vLLM's CPU attention, cpu-head-dim).
        "head_dim": _f("int", False, minimum=1, doc="the attention head size (config.json head_dim)"),
        "moe": _f("bool", False, None, False, doc="whether the model is a mixture of experts"),
        "quantization": _f("str", doc="the checkpoint's quantization, for lint rules"),
        "source": _f("map", False, {
            "kind": _f("enum", True, ("hf", "local"), doc="stage from the Hub (hf) or a directory (local)"),
            "path": _f("str", doc="the directory holding the checkpoint (kind local)"),
            "endpoint": _f("str", doc="a Hub mirror's URL (kind hf)"),
            "allow_patterns": _f("strlist", doc="files to stage (glob patterns)"),
            "ignore_patterns": _f("strlist", doc="files not to stage (glob patterns)"),
        }, doc="where staging reads the model from (default: {kind: hf})"),
    }, doc="the model and where its weights are"),
    "topology": _f("map", True, {
        "nodes": _f("int", True, minimum=1, doc="the lane's nodes (the inventory group lane_nodes)"),
        "gpus_per_node": _f("int", True, minimum=1, doc="GPUs per node"),
        "tensor_parallel": _f("int", True, minimum=1, doc="the tensor-parallel size"),
        "pipeline_parallel": _f("int", False, None, 1, minimum=1, doc="the pipeline-parallel size"),
        "data_parallel": _f("int", False, None, 1, minimum=1, doc="the data-parallel size"),
        "layout": _f("enum", False, ("tp", "dp", "pd"),
                     doc="how the ranks form: tp (unset) one group over the nodes, dp one engine per node, "
                         "pd the pools of pd"),
        "data_parallel_local": _f("int", False, minimum=1,
                                  doc="data-parallel ranks per node, dp (default: gpus_per_node)"),
        "data_parallel_rank_step": _f("int", False, minimum=1,
                                      doc="a node's start rank = node rank x this, dp (default: data_parallel_local)"),
    }, doc="how the model is split over the nodes"),
    "serve": _f("map", True, {
        "entrypoint": _f("strlist", doc="the program and its subcommand (default: the image's entrypoint)"),
        "port": _f("port", True, doc="the API port"),
        "rendezvous_port": _f("port", True, doc="the port the ranks meet at on the head"),
        "args": _f("args", doc="engine flags: true renders a bare flag, null or false removes it, a mapping is JSON"),
        "env": _f("env", doc="the ranks' environment (null removes a variable)"),
        "docker_args": _f("strlist", doc="extra docker run arguments"),
        "logs": _f("map", False, {
            "max_size": _f("size", False, None, LOG_MAX_SIZE,
                           doc="a rank's docker log is rotated at this size (docker's max-size: 100m, 1g)"),
            "max_files": _f("int", False, None, LOG_MAX_FILES, minimum=1,
                            doc="how many rotated log files docker keeps per rank (docker's max-file)"),
        }, doc="each rank's docker log rotation (json-file driver; default 3 files of 100m)"),
    }, doc="how the engine is started"),
    "memory": _f("map", False, {
        "weights_per_rank_gib": _f("num", True, doc="weights each rank holds"),
        "graph_reserve_gib": _f("num", True, doc="memory kept for CUDA graphs and activations"),
        "kv_bytes_per_token": _f("int", True, minimum=1, doc="KV-cache bytes one token takes"),
        "kv_block_tokens": _f("int", False, None, 64, minimum=1, doc="tokens per KV-cache block"),
        "headroom_gib": _f("num", False, None, 2.0, doc="device memory the KV budget leaves free"),
    }, doc="the figures of the KV-cache budget (lint's kv-budget rules)"),
    "boot": _f("map", True, {
        "budget_s": _f("int", True, minimum=1, doc="the whole boot's budget; fills the engine timeouts left unset"),
        "expected_load_s": _f("int", True, doc="how long loading the weights takes, for the progress estimate"),
        "expected_warmup_s": _f("int", True, doc="how long warm-up takes, for the progress estimate"),
        "stall_s": _f("int", False, None, 900, minimum=1,
                      doc="the lane is stalled when no rank progressed for this long (lane-wide: headless ranks "
                          "print nothing while loading)"),
        "poll_s": _f("int", False, None, 15, minimum=1, doc="seconds between the wait's polls"),
        "stability_s": _f("int", False, None, 30, doc="how long every readiness probe must keep passing"),
    }, doc="the boot budget and what the wait expects"),
    "cache": _f("map", False, {
        "warm": _f("bool", False, None, True, doc="read the weights into the page cache before the ranks start"),
        "headroom_gib": _f("num", False, None, 4.0, doc="memory the warming leaves free"),
    }, doc="page-cache warming (default: warm, 4 GiB headroom)"),
    "pd": _f("map", False, {
        "prefill": _f("map", True, _POOL, doc="the prefill pool"),
        "decode": _f("map", True, _POOL, doc="the decode pool"),
        "router": _f("map", False, {
            "policy": _f("str", False, None, "round_robin", doc="the router's load-balancing policy"),
            "intra_node_data_parallel_size": _f("int", False, None, 1, minimum=1,
                                                doc="data-parallel ranks per node behind one endpoint"),
            "entrypoint": _f("strlist", doc="the router's program (default: vllm-router)"),
            "args": _f("args", doc="the router's own flags"),
        }, doc="the router in front of the pools, the lane's API"),
    }, doc="prefill/decode disaggregation (topology.layout pd)"),
    "notes": _f("strlist", doc="operator notes the plan prints (a compiled recipe's notes)"),
    "api": _f("map", False, {
        "bind": _f("str", doc="the address the API binds (default 0.0.0.0); a specific one is also the clients'"),
        "key_required": _f("bool", doc="refuse to deploy without lanekit_api_key"),
    }, doc="the served API"),
    "bench": _f("bench", doc="the lane's bench settings (docs/bench.md); checked by the bench's own table"),
}

TYPE_WORDS: dict[str, str] = {
    "str": "a string", "int": "a whole number", "num": "a number", "bool": "true or false",
    "list": "a list", "strlist": "a list of strings", "map": "a mapping", "args": "a mapping of flag to value",
    "env": "a mapping of variable name to value", "revision": "a 40-character hex commit id",
    "port": "a port number from 1 to 65535",
    "size": "a size such as 100m: a whole number of bytes, or of k, m or g",
    "image": "the name of a directory under images/ (lower-case letters, digits, '.', '_', '-')",
    "name": ("a one-line name without spaces or control characters, starting with a letter or digit (letters, "
             "digits and . _ : / @ + -); it travels in argv, HTTP requests and logs"),
}
