# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Lint rules on how a lane launches: the container command, its docker arguments, the model's
files, the topology, the image pin, how ranks reach the GPUs, the page cache, the recipe's notes.

One job: these rules (registered with ``_lint_rule.rule``; ``_lint`` runs them). Pure.
"""
from __future__ import annotations

import re
from collections.abc import Iterator

from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import requires_gpu
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._lint_rule import (
    ERROR,
    TROUBLESHOOTING_PREFIX,
    WARNING,
    LintContext,
    _args,
    _engine,
    rule,
)


@rule("explicit-entrypoint", ERROR, "the container command leads with the program")
def explicit_entrypoint(ctx: LintContext) -> Iterator[str]:
    entry = ctx.lane["serve"].get("entrypoint") or []
    model = ctx.lane["model"]["id"]
    if not entry:
        yield (
            f"serve.entrypoint is not set: the rank container would run the image's entrypoint with the model as "
            f"its first word, and a launcher that takes --entrypoint from the command's first word composes "
            f"'--entrypoint {model}' (the latent launcher bug of the report). Set serve.entrypoint to the program, "
            f"e.g. [vllm, serve] or [/opt/nvidia/nvidia_entrypoint.sh, sglang, serve]."
        )
        return
    first = entry[0]
    if first == model or ("/" in first and not first.startswith("/")):
        yield (
            f"serve.entrypoint starts with {first!r}, which looks like a model id, not a program: docker would run "
            f"'--entrypoint {first}' and fail. Lead serve.entrypoint with the program (e.g. vllm)."
        )


@rule("no-rm", ERROR, "rank containers keep their logs")
def no_rm(ctx: LintContext) -> Iterator[str]:
    bad = [a for a in ctx.lane["serve"].get("docker_args") or [] if a == "--rm" or a.startswith("--rm=")]
    if bad:
        yield (
            "serve.docker_args contains --rm: a rank that dies would take its logs with it (a bring-up "
            "lost the head's logs this way). Remove --rm; lanekit.serving.teardown_lane archives logs and removes "
            "containers when asked."
        )


@rule("docker-args-unsupported", ERROR, "deploy can apply every docker argument the plan prints", skippable=False)
def docker_args_unsupported(ctx: LintContext) -> Iterator[str]:
    extra = [str(a) for a in ctx.lane["serve"].get("docker_args") or []]
    if extra:
        yield (
            f"serve.docker_args is {' '.join(extra)!r}: the plan would print them in docker_argv, but the ranks role "
            f"starts containers through community.docker.docker_container, which cannot pass raw docker arguments, "
            f"so deploy would refuse the lane. Remove serve.docker_args; devices, capabilities, ulimits, shm size "
            f"and mounts come from the inventory (lanekit_rank_devices, lanekit_rank_cap_add, lanekit_rank_ulimits, "
            f"lanekit_rank_shm_size)."
        )


@rule("mistral-tokenizer", ERROR, "a checkpoint without config.json needs the Mistral tokenizer and formats")
def mistral_tokenizer(ctx: LintContext) -> Iterator[str]:
    if ctx.lane["model"].get("layout") != "mistral_consolidated":
        return
    args = _args(ctx)
    needed = dict(_engine(ctx).consolidated_layout_args)
    wrong = {flag: args.get(flag) for flag, value in needed.items() if args.get(flag) != value}
    if wrong:
        listing = ", ".join(f"{flag} {value or 'unset'}" for flag, value in wrong.items())
        fix = ", ".join(f"{flag}: {value}" for flag, value in needed.items() if flag in wrong)
        yield (
            f"the checkpoint is in Mistral's consolidated layout (no config.json) but {listing}: AutoTokenizer falls "
            f"back to AutoConfig and dies (\"couldn't find them in the cached files\"). Set {fix}."
        )


_DROP_RE = re.compile(r"drop.caches|vm\.drop|echo\s+[123]\s*>\s*/proc/sys/vm", re.IGNORECASE)


@rule("no-cache-drop", ERROR, "nothing drops the page cache during a load")
def no_cache_drop(ctx: LintContext) -> Iterator[str]:
    serve = ctx.lane["serve"]
    texts = [str(v) for v in serve["args"].values()] + [f"{k}={v}" for k, v in serve["env"].items()]
    texts += list(serve.get("docker_args") or [])
    hits = [t for t in texts if _DROP_RE.search(t)]
    if hits:
        yield (
            f"the lane drops the page cache ({hits[0]!r}): on GB10 a mid-load drop forced a cold NFS re-read of 71 GB "
            f"and rank 0's load went from 40 minutes to 3.5 hours. Remove it; the cache role warms within "
            f"the memory budget instead."
        )


@rule("topology", ERROR, "world size, node count and node ranks agree")
def topology(ctx: LintContext) -> Iterator[str]:
    # Scope: every lane. The per-node cap is the profile's GPU count on GPU profiles only: a CPU node runs
    # as many workers as its thread binding gives them (cpu-threads-bind).
    topo = ctx.lane["topology"]
    world = topo["tensor_parallel"] * topo["pipeline_parallel"] * topo["data_parallel"]
    if world % topo["nodes"]:
        yield (
            f"the world size tensor_parallel x pipeline_parallel x data_parallel = {world} is not divisible by "
            f"topology.nodes = {topo['nodes']}; every node must run the same number of ranks. Fix topology."
        )
    elif world != topo["nodes"] * topo["gpus_per_node"]:
        yield (
            f"the world size {world} does not match topology.nodes x gpus_per_node = "
            f"{topo['nodes'] * topo['gpus_per_node']}; some {'GPUs' if requires_gpu(ctx.profile) else 'CPU workers'} "
            f"would idle or be oversubscribed. Fix topology."
        )
    if requires_gpu(ctx.profile) and ctx.profile.get("gpus_per_node") and \
            topo["gpus_per_node"] > ctx.profile["gpus_per_node"]:
        yield (
            f"topology.gpus_per_node is {topo['gpus_per_node']} but a {ctx.profile['display_name']} has "
            f"{ctx.profile['gpus_per_node']}. Fix topology.gpus_per_node or the hardware profile."
        )
    if ctx.hosts and len(ctx.hosts) != topo["nodes"]:
        yield (
            f"the inventory group lane_nodes has {len(ctx.hosts)} hosts ({', '.join(ctx.hosts)}) but the lane needs "
            f"topology.nodes = {topo['nodes']}. Add or remove hosts, or use a lane for this many nodes."
        )
    if ctx.node_ranks:
        ranks = sorted(ctx.node_ranks.values())
        if ranks != list(range(len(ctx.hosts))):
            pairs = ", ".join(f"{h}={r}" for h, r in sorted(ctx.node_ranks.items(), key=lambda i: str(i[1])))
            yield (
                f"the node_rank host variables ({pairs}) are not unique and complete 0..{len(ctx.hosts) - 1}; "
                f"two ranks with one number hang the rendezvous. Fix node_rank, or remove it to use inventory order."
            )


@rule("image-pin", ERROR, "the image base is pinned by a full digest")
def image_pin(ctx: LintContext) -> Iterator[str]:
    if ctx.image is not None and not ctx.image["pinned"]:
        yield ctx.image["pin_problem"]


@rule("rank-gpu-access", ERROR,
      "rank containers get the device nodes and groups their kind of accelerator needs, and an NVIDIA request only "
      "on NVIDIA")
def rank_gpu_access(ctx: LintContext) -> Iterator[str]:
    # Scope: every profile but NVIDIA's (which needs its --gpus request and nothing else): the kind's needs are the
    # profile's rank_access (_hardware_kinds): AMD /dev/kfd, /dev/dri and video; Intel XPU /dev/dri; TPU /dev/vfio
    # or /dev/accel*; Ascend its manager devices and a /dev/davinci<N>; CPU no GPU request.
    access, profile = ctx.rank_container, ctx.profile
    if not access:
        return
    needs = profile.get("rank_access") or {}
    what = needs.get("what") or str(profile.get("vendor") or "").upper()
    if not requires_gpu(profile) and access.get("gpus"):
        yield (
            f"lanekit_rank_gpus is {access['gpus']!r} on {profile['display_name']}: that asks docker for NVIDIA GPUs "
            f"(--gpus, an nvidia device request), which a node without GPUs cannot grant, so docker would refuse to "
            f"start the rank. Set lanekit_rank_gpus: '' (or leave it unset) for these nodes.")
        return
    if needs.get("nvidia", profile.get("vendor") in (None, "nvidia")):
        return
    if access.get("gpus"):
        yield (
            f"lanekit_rank_gpus is {access['gpus']!r} on {profile['display_name']}: that asks docker for NVIDIA "
            f"GPUs (--gpus, an nvidia device request), which {what} nodes cannot grant. Set lanekit_rank_gpus: ''.")
    devices = [str(d).split(":", 1)[0] for d in access.get("devices") or []]
    missing = [d for d in needs.get("devices") or [] if d not in devices]
    numbered = needs.get("numbered")
    if numbered and not any(d.startswith(numbered) and d[len(numbered):].isdigit() for d in devices):
        missing.append(f"a {numbered}<N> per accelerator")
    any_of = needs.get("any_of") or []
    if any_of and not any(d == p or d.startswith(p) for d in devices for p in any_of):
        missing.append(" or ".join(any_of))
    if missing:
        yield (
            f"lanekit_rank_devices lacks {', '.join(missing)}: {what} ranks on {profile['display_name']} see no "
            f"accelerator without {'it' if len(missing) == 1 else 'them'}. Add "
            f"{'it' if len(missing) == 1 else 'them'} to lanekit_rank_devices.")
    for group in needs.get("groups") or []:
        if group not in [str(g) for g in access.get("group_add") or []]:
            yield (
                f"lanekit_rank_group_add lacks {group}: on {profile['display_name']} the accelerator's device files "
                f"belong to the {group} group, so the rank could not open them. Add {group} to lanekit_rank_group_add.")


@rule("recipe-troubleshooting", WARNING, "the recipe's known failures and their fixes, shown with the plan")
def recipe_troubleshooting(ctx: LintContext) -> Iterator[str]:
    for note in ctx.lane.get("notes") or []:
        if note.startswith(TROUBLESHOOTING_PREFIX):
            yield f"if you meet {note[len(TROUBLESHOOTING_PREFIX):]}"
