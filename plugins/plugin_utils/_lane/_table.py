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
ENGINES = tuple(_engines.ENGINES)


# A tiny declarative schema: ("type", required, extra). Types: str, int, num, bool, list,
# map, enum, args, env, revision, strlist. Nested mappings are dicts of the same.
def _f(kind: str, required: bool = False, extra: Any = None, default: Any = None, minimum: int | None = None,
       ) -> dict[str, Any]:
    return {"kind": kind, "required": required, "extra": extra, "default": default, "min": minimum}


# One pool of a P/D lane: its nodes, how they split the model, its port and its own flags/env.
_POOL: dict[str, dict[str, Any]] = {
    "nodes": _f("int", True, minimum=1),
    "parallelism": _f("enum", False, ("tp", "tep", "dep"), "tp"),
    "tensor_parallel": _f("int", True, minimum=1),
    "data_parallel": _f("int", False, None, 1, minimum=1),
    "data_parallel_local": _f("int", False, minimum=1),
    "port": _f("port", True),
    "rendezvous_port": _f("port", True),
    "args": _f("args"),
    "env": _f("env"),
}

SCHEMA: dict[str, dict[str, Any]] = {
    "lane": _f("str", True),
    "description": _f("str"),
    "engine": _f("enum", True, ENGINES),
    "image": _f("image", True),
    "hardware": _f("enum", True, tuple(PROFILES)),
    "model": _f("map", True, {
        "id": _f("str", True),
        "revision": _f("revision"),
        "served_name": _f("name", True),
        "dir": _f("str"),
        "layout": _f("enum", False, ("mistral_consolidated", "hf"), "hf"),
        "size_gib": _f("num"),
        "arch": _f("str"),
        "attention": _f("enum", False, ("dsa_mla", "mla", "mha", "gqa")),
        # The attention head size (config.json head_dim): checked where the engine's kernels support only
        # some sizes (vLLM's CPU attention, the cpu-head-dim lint rule).
        "head_dim": _f("int", False, minimum=1),
        "moe": _f("bool", False, None, False),
        "quantization": _f("str"),
        "source": _f("map", False, {
            "kind": _f("enum", True, ("hf", "local")),
            "path": _f("str"),
            "endpoint": _f("str"),
            "allow_patterns": _f("strlist"),
            "ignore_patterns": _f("strlist"),
        }),
    }),
    "topology": _f("map", True, {
        "nodes": _f("int", True, minimum=1),
        "gpus_per_node": _f("int", True, minimum=1),
        "tensor_parallel": _f("int", True, minimum=1),
        "pipeline_parallel": _f("int", False, None, 1, minimum=1),
        "data_parallel": _f("int", False, None, 1, minimum=1),
        # How the ranks form (unset: "tp", one group over the nodes): "dp", one engine per node
        # joined by data parallelism (multi_node_dep, multi_node_tp_dp); "pd", the pools of ``pd``.
        "layout": _f("enum", False, ("tp", "dp", "pd")),
        "data_parallel_local": _f("int", False, minimum=1),  # --data-parallel-size-local (default gpus_per_node)
        "data_parallel_rank_step": _f("int", False, minimum=1),  # start rank = node rank x step (default local)
    }),
    "serve": _f("map", True, {
        "entrypoint": _f("strlist"),
        "port": _f("port", True),
        "rendezvous_port": _f("port", True),
        "args": _f("args"),
        "env": _f("env"),
        "docker_args": _f("strlist"),
    }),
    "memory": _f("map", False, {
        "weights_per_rank_gib": _f("num", True),
        "graph_reserve_gib": _f("num", True),
        "kv_bytes_per_token": _f("int", True, minimum=1),
        "kv_block_tokens": _f("int", False, None, 64, minimum=1),
        "headroom_gib": _f("num", False, None, 2.0),
    }),
    "boot": _f("map", True, {
        "budget_s": _f("int", True, minimum=1),
        "expected_load_s": _f("int", True),
        "expected_warmup_s": _f("int", True),
        "stall_s": _f("int", False, None, 900, minimum=1),
        "poll_s": _f("int", False, None, 15, minimum=1),
        "stability_s": _f("int", False, None, 30),
    }),
    "cache": _f("map", False, {
        "warm": _f("bool", False, None, True),
        "headroom_gib": _f("num", False, None, 4.0),
    }),
    # Prefill/decode disaggregation (topology.layout pd): two pools of nodes and the router in front.
    "pd": _f("map", False, {
        "prefill": _f("map", True, _POOL),
        "decode": _f("map", True, _POOL),
        "router": _f("map", False, {
            "policy": _f("str", False, None, "round_robin"),
            "intra_node_data_parallel_size": _f("int", False, None, 1, minimum=1),
            "entrypoint": _f("strlist"),
            "args": _f("args"),
        }),
    }),
    # Operator notes the plan can print (a compiled recipe lane carries the recipe's notes here).
    "notes": _f("strlist"),
    # The served API: the address it binds (default 0.0.0.0, reachable by clients) and whether the
    # lane refuses to deploy without lanekit_api_key. Absent from lanes that leave it unset.
    "api": _f("map", False, {
        "bind": _f("str"),
        "key_required": _f("bool"),
    }),
    # Bench settings of this lane (roles/bench); checked by _bench_settings, where the keys live.
    "bench": _f("bench"),
}

TYPE_WORDS: dict[str, str] = {
    "str": "a string", "int": "a whole number", "num": "a number", "bool": "true or false",
    "list": "a list", "strlist": "a list of strings", "map": "a mapping", "args": "a mapping of flag to value",
    "env": "a mapping of variable name to value", "revision": "a 40-character hex commit id",
    "port": "a port number from 1 to 65535",
    "image": "the name of a directory under images/ (lower-case letters, digits, '.', '_', '-')",
    "name": ("a one-line name without spaces or control characters, starting with a letter or digit (letters, "
             "digits and . _ : / @ + -); it travels in argv, HTTP requests and logs"),
}
