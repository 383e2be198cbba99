# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Recipe lanes: turn a compiled recipe choice into a lane file in the hand-written lanes' schema.

One job: map the head node's composed command onto the lane schema (``_lane.SCHEMA``) with the
same flag mapping as hand-written lanes: the flags the plan renders itself (parallel sizes, node
rank, master address, port, ...) become ``topology``/``serve`` keys, every other flag becomes a
``serve.args`` entry in the composed order, and the environment goes to ``serve.env`` except the
fabric variables the plan sets per host. Every value carries the layer it came from as a trailing
YAML comment; the recipe's ``notes`` and ``troubleshooting`` entries that apply to the choice
become the lane's ``notes``.

Every strategy is written: one tensor-parallel group (``*_tp``, ``*_tep``, ``multi_node_tp_pp``),
data-parallel engines (``*_dep``, ``multi_node_tp_dp``: ``topology.layout: dp``) and P/D pools with
their router (``pd_cluster``: ``topology.layout: pd`` and a ``pd`` section). Co-located P/D pools
(``nodes: 0``, both pools on one node) compile to commands only and are refused here.

The lane gets a ``memory`` section (so the KV budget is checked before boot) when lanekit knows
the model's KV bytes per token (:data:`KNOWN_MODELS`); the weights per rank are estimated from the
variant's ``vram_minimum_gb`` and the graph reserve from the hardware profile.
"""
from __future__ import annotations

import json
import re
from typing import Any

try:
    import yaml
except ImportError:  # module_utils must import anywhere; lanes are written on the controller, which has PyYAML
    yaml = None

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines
from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import PROFILES
from ansible_collections.lanekit.serving.plugins.module_utils._yaml import whole_number
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe import _rules as R
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._load import RecipeSource

LANE_STRATEGIES = ("single_node_tp", "single_node_tep", "single_node_dep", "multi_node_tp", "multi_node_tep",
                   "multi_node_tp_pp", "multi_node_tp_dp", "multi_node_dep", "pd_cluster")
DP_STRATEGIES = ("single_node_dep", "multi_node_tp_dp", "multi_node_dep")
# Per-model figures the recipes do not carry, measured by lanekit: KV bytes per token on each rank
# (vLLM, fp8_ds_mla; an MLA latent is replicated on every TP rank, so TP does not shrink it).
KNOWN_MODELS = {"mistralai/Mistral-Large-4-1T-A52B": {"kv_bytes_per_token": 51226, "kv_block_tokens": 64}}
# Share of a variant's vram_minimum_gb that is weights: the seed's NVFP4 checkpoint is 568 GiB of
# its 733 GB minimum (the rest is the minimum KV cache and activations the figure includes).
WEIGHTS_SHARE = 0.83
# CUDA-graph and activation reserve per rank as a share of device memory (5.0 GiB of a GB10's
# 120.5 GiB was measured in the bring-up; 4% rounds it for every profile).
GRAPH_SHARE = 0.04
POOL_PORTS = {"prefill": 8001, "decode": 8002}
POOL_RENDEZVOUS = {"prefill": 29501, "decode": 29502}
# Environment the plan sets per host from the inventory (fabric_ifname, ib_hca, ucx_net_devices).
PLAN_FABRIC_ENV = {"GLOO_SOCKET_IFNAME": "fabric_ifname", "NCCL_SOCKET_IFNAME": "fabric_ifname",
                   "NCCL_IB_HCA": "ib_hca", "UCX_NET_DEVICES": "ucx_net_devices"}
PLACEHOLDER_RE = re.compile(r"\$[A-Z_][A-Z0-9_]*")
# The image a recipe lane runs when the recipe names none for its hardware, per image family (the lanekit
# profile's ``image_family``), and the suffix its image spec's name gets (the families are different images).
# vLLM's own images: vllm-openai (CUDA), vllm-openai-rocm, vllm-tpu (the recipes' TPU commands; vLLM TPU's
# installation page), vllm-openai-xpu (vLLM's XPU docker page), vllm-openai-cpu (the recipes' Xeon 6 command,
# x86-64 tag); Ascend's is vLLM Ascend's quay.io/ascend/vllm-ascend (its quick start). No family has a nightly
# tag lanekit knows but CUDA's and ROCm's: a nightly-only recipe on the others takes the family's default.
DEFAULT_IMAGES = {"cuda": "vllm/vllm-openai:latest", "rocm": "vllm/vllm-openai-rocm:latest",
                  "tpu": "vllm/vllm-tpu:latest", "xpu": "vllm/vllm-openai-xpu:latest",
                  "cpu": "vllm/vllm-openai-cpu:latest-x86_64", "ascend": "quay.io/ascend/vllm-ascend:latest"}
NIGHTLY_IMAGES = {"cuda": "vllm/vllm-openai:nightly", "rocm": "vllm/vllm-openai-rocm:nightly"}
IMAGE_SUFFIX = {"cuda": "", "rocm": "-rocm", "tpu": "-tpu", "xpu": "-xpu", "cpu": "-cpu", "ascend": "-ascend"}


def image_family(src: RecipeSource, hardware: str) -> str:
    """The image family of the hardware: the lanekit profile's, else the taxonomy brand's (AMD: ROCm)."""
    profile = PROFILES.get(hardware)
    if profile and profile.get("image_family"):
        return str(profile["image_family"])
    return "rocm" if (src.profiles.get(hardware) or {}).get("brand") == "AMD" else "cuda"


def lane_name_for(src: RecipeSource, result: dict) -> str:
    choice = result["choice"]
    slug = (src.recipe.get("meta") or {}).get("slug") or src.name.rsplit("/", 1)[-1]
    parts = [slug, choice["variant"], choice["hardware"], choice["strategy"]]
    if choice.get("preset"):
        parts.append(choice["preset"])
    if choice.get("nodes") and choice["nodes"] > 1:
        parts.append(f"{choice['nodes']}n")
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9.-]", "-", "-".join(map(str, parts)).lower())).strip("-.")


def docker_image(src: RecipeSource, hardware: str, variant_key: str) -> str:
    """The recipe's image for this hardware: the variant's exact-GPU pin, the variant's, the model's, else vLLM's.

    As the recipe site's image choice: a plain string names the CUDA image only, a mapping is keyed by brand
    (``nvidia``, ``amd``; lanekit also reads the taxonomy generation, ``tpu``/``xpu``/``cpu``/``npu``, and the
    lower-case brand of the other kinds); the exact-GPU override applies to any hardware.
    """
    recipe = src.recipe
    variant = (recipe.get("variants") or {}).get(variant_key) or {}
    profile = src.profiles.get(hardware) or {}
    family = image_family(src, hardware)
    other = [str(profile.get("generation") or ""), str(profile.get("brand") or "").lower()]
    keys = {"cuda": ["nvidia"], "rocm": ["amd"]}.get(family) or other
    exact = ((variant.get("hardware_overrides") or {}).get(hardware) or {}).get("docker_image")
    if isinstance(exact, str):
        return exact
    for value in (variant.get("docker_image"), (recipe.get("model") or {}).get("docker_image")):
        if isinstance(value, str) and family == "cuda":
            return value
        if isinstance(value, dict):
            picked = next((value[k] for k in keys if k and value.get(k)), None)
            if isinstance(picked, dict):  # a CUDA map: the newer CUDA build
                picked = picked.get("cu130") or picked.get("cu129")
            if isinstance(picked, str):
                return picked
    nightly = (recipe.get("model") or {}).get("nightly_required") is True
    return (NIGHTLY_IMAGES if nightly and family in NIGHTLY_IMAGES else DEFAULT_IMAGES)[family]


def _applies(when: Any, src: RecipeSource, choice: dict) -> bool:
    if not isinstance(when, dict):
        return True
    profile = src.profiles.get(choice["hardware"]) or {}
    hw_keys = {choice["hardware"], R.generation(profile), str(profile.get("brand", "")).lower()}
    checks = (("hardware", hw_keys), ("strategies", {choice["strategy"]}), ("variants", {choice["variant"]}),
              ("features", set(choice["features"])))
    return all(not isinstance(when.get(key), list) or set(when[key]) & have for key, have in checks)


def recipe_notes(src: RecipeSource, choice: dict) -> list[str]:
    """The recipe's notes, then its troubleshooting entries, that apply to this choice, as one string each."""
    out = []
    for key, prefix in (("notes", ""), ("troubleshooting", "Troubleshooting: ")):
        for entry in src.recipe.get(key) or []:
            if isinstance(entry, dict) and _applies(entry.get("when"), src, choice):
                body = " ".join(str(entry.get("body", "")).split())
                out.append(f"{prefix}{entry.get('title', '').strip()}: {body}".strip())
    return out


def _value(token: str) -> int | float | dict[str, Any] | str:
    """A flag value as a lane writes it: numbers and compact JSON as data when they render back identically."""
    if re.fullmatch(r"-?[0-9]+", token) and str(int(token)) == token:
        return int(token)
    if re.fullmatch(r"-?[0-9]*\.[0-9]+", token) and str(float(token)) == token:
        return float(token)
    if token.startswith("{"):
        try:
            data = json.loads(token)
        except ValueError:
            return token
        if isinstance(data, dict) and json.dumps(data, separators=(",", ":")) == token:
            return data
    return token


def refuse_unless_deployable(src: RecipeSource, result: dict) -> None:
    choice = result["choice"]
    if choice["strategy"] not in LANE_STRATEGIES:
        raise LanekitError(
            f"recipe {src.name}: strategy {choice['strategy']} compiles (write its commands with -e commands_file=PATH) "
            f"but this version of lanekit cannot deploy it as a lane yet; lanes support {', '.join(LANE_STRATEGIES)}.")
    if choice["hardware"] not in PROFILES:
        raise LanekitError(
            f"recipe {src.name}: hardware {choice['hardware']} compiles (write its commands with -e commands_file=PATH) "
            f"but lanekit has no hardware profile for it yet (known: {', '.join(sorted(PROFILES))}), so no lane "
            "can be written.")


def _split(engine: _engines.Engine, cmd: dict, src: RecipeSource, comments: dict, where: tuple) -> tuple[dict, dict]:
    """(lane args, plan-owned flags) of one composed command; the args' origins go to ``comments``."""
    args, owned = {}, {}
    tail, origins = cmd["argv"][3:], cmd["origins"]["args"]
    i = 0
    while i < len(tail):
        flag, origin = tail[i], origins[i]
        if not isinstance(flag, str) or not re.fullmatch(r"--?[A-Za-z0-9][^\s]*", flag):
            # A lane maps flags to values: a stray value or a flag with a space cannot be one of its keys.
            raise LanekitError(
                f"recipe {src.name}: the composed command has {flag!r} where a flag (--name) is expected, from "
                f"{origin}; a lane cannot hold it. Give each value right after its flag there (and flags without "
                "spaces).")
        has_value = i + 1 < len(tail) and not str(tail[i + 1]).startswith("-")
        value = tail[i + 1] if has_value else True
        i += 2 if has_value else 1
        if flag in _engines.layout_owned(engine, "dp"):
            owned[flag] = (value, origin)
            continue
        if "=" in flag and value is True:
            # ``--flag=value`` is one token upstream; a lane key is the bare flag (same meaning to argparse).
            flag, value = flag.split("=", 1)
            origin += " (written --flag=value upstream)"
        if flag in args:
            raise LanekitError(f"recipe {src.name}: flag {flag} appears twice in the composed command (once as "
                               f"{flag}=VALUE), which a lane cannot hold; drop one in the recipe.")
        args[flag] = _value(value) if isinstance(value, str) else value
        comments[where + (flag,)] = origin
    return args, owned


def _env(cmd: dict, comments: dict, where: tuple, dropped: list) -> dict:
    env = {}
    for key, value in cmd["env"].items():
        origin = cmd["origins"]["env"][key]
        if key in PLAN_FABRIC_ENV and isinstance(value, str) and PLACEHOLDER_RE.fullmatch(value):
            dropped.append(f"{key} ({origin}): the plan sets it per host from {PLAN_FABRIC_ENV[key]}")
            continue
        if key == "VLLM_NIXL_SIDE_CHANNEL_HOST":
            dropped.append(f"{key}={value} ({origin}): the plan sets it to each rank's fabric_ip")
            continue
        if isinstance(value, str) and PLACEHOLDER_RE.search(value):
            dropped.append(f"{key}={value} ({origin}): a per-host placeholder; set it in host_vars lane_host_overrides")
            continue
        env[key] = value
        comments[where + (key,)] = origin
    return env


def _int(owned: dict, flag: str, default: int) -> int:
    value = owned.get(flag, (default, ""))[0]
    number = whole_number(value) if isinstance(value, (int, str)) else None
    return default if number is None else number


def memory_section(src: RecipeSource, choice: dict, lane: dict) -> tuple[dict | None, str]:
    """(the lane's memory section or None, where its figures come from)."""
    recipe = src.recipe
    model_key = str(recipe.get("hf_id") or (recipe.get("model") or {}).get("model_id") or src.name)
    known = KNOWN_MODELS.get(model_key)
    variant = (recipe.get("variants") or {}).get(choice["variant"]) or {}
    minimum = variant.get("vram_minimum_gb")
    profile = PROFILES[choice["hardware"]]
    if not known or not isinstance(minimum, (int, float)) or isinstance(minimum, bool) or \
            profile.get("device_memory_gib") is None:
        # No device memory (CPU nodes): the CPU KV space is host RAM, which the recipe does not size.
        return None, ""
    topo = lane["topology"]
    if lane.get("pd"):
        # The larger pool's ranks hold the least of the model each: size for the smaller pool.
        shards = min(p["tensor_parallel"] * (p.get("data_parallel") or 1 if p["parallelism"] == "dep" else 1)
                     for p in (lane["pd"]["prefill"], lane["pd"]["decode"]))
    elif topo.get("layout") == "dp" and lane["serve"]["args"].get("--enable-expert-parallel"):
        shards = topo["tensor_parallel"] * topo["data_parallel"]  # experts shard over every DP rank
    else:
        shards = topo["tensor_parallel"] * topo["pipeline_parallel"]
    weights = minimum * 1e9 / (1 << 30) * WEIGHTS_SHARE / max(1, shards)
    section = {"weights_per_rank_gib": round(weights, 1),
               "graph_reserve_gib": round(profile["device_memory_gib"] * GRAPH_SHARE, 1),
               "kv_bytes_per_token": known["kv_bytes_per_token"] // max(1, topo["pipeline_parallel"]),
               "kv_block_tokens": known["kv_block_tokens"]}
    why = (f"estimates: weights {WEIGHTS_SHARE:g} x variant {choice['variant']} vram_minimum_gb {minimum} over {shards} "
           f"rank(s), graph reserve {GRAPH_SHARE:.0%} of a {profile['display_name']}'s memory, KV bytes per token "
           f"measured by lanekit for {model_key}: measure your cluster and edit")
    return section, why


def _pd_pools(src: RecipeSource, result: dict, engine: _engines.Engine, common: dict, comments: dict,
              dropped: list) -> dict:
    pools = {}
    for role in ("prefill", "decode"):
        info = result["pools"][role]
        if info["nodes"] < 1:
            raise LanekitError(
                f"recipe {src.name}: pd_cluster with co-located pools (nodes 0: prefill and decode on halves of one "
                f"node) compiles (write its commands with -e commands_file=PATH) but lanekit deploys each pool on nodes "
                f"of its own; choose -e recipe_pd='{{\"prefill\": {{\"nodes\": 1}}, \"decode\": {{\"nodes\": 1}}}}'.")
        head = next(c for c in result["commands"] if c["role"] == role)
        args, owned = _split(engine, head, src, comments, ("pd", role, "args"))
        port = _int(owned, "--port", POOL_PORTS[role])
        own = {flag: value for flag, value in args.items() if common.get(flag, object()) != value}
        env = _env(head, comments, ("pd", role, "env"), dropped)
        pool = {"nodes": info["nodes"], "parallelism": info["parallelism"],
                "tensor_parallel": _int(owned, "--tensor-parallel-size", info["tp"] if info["parallelism"] == "dep"
                                        else info["poolGpus"])}
        if info["parallelism"] == "dep":
            pool["data_parallel"] = _int(owned, "--data-parallel-size", info["dpSize"])
            pool["data_parallel_local"] = _int(owned, "--data-parallel-size-local", info["dpLocal"])
        pool.update({"port": port, "rendezvous_port": POOL_RENDEZVOUS[role], "args": own, "env": env})
        comments[("pd", role)] = f"strategy pd_cluster {role} pool ({info['parallelism']})"
        pools[role] = pool
    router = result.get("router") or ""
    policy = re.search(r"--policy (\S+)", router)
    intra = re.search(r"--intra-node-data-parallel-size (\d+)", router)
    pools["router"] = {"policy": policy.group(1) if policy else "round_robin",
                       "intra_node_data_parallel_size": int(intra.group(1)) if intra else 1}
    comments[("pd", "router")] = "the recipe site's router command (vllm-router)"
    return pools


def build_lane(src: RecipeSource, result: dict, lane_name: str) -> tuple[dict, dict]:
    """(lane mapping, comments by key path) for a compiled choice the plan can deploy."""
    refuse_unless_deployable(src, result)
    choice = result["choice"]
    pd = choice["strategy"] == "pd_cluster"
    engine = _engines.get("vllm")
    recipe, meta = src.recipe, src.recipe.get("meta") or {}
    variant = (recipe.get("variants") or {}).get(choice["variant"]) or {}
    comments: dict = {}
    dropped: list = []
    profile = src.profiles[choice["hardware"]]
    gpus = profile.get("gpu_count") or 1
    if pd:
        heads = [next(c for c in result["commands"] if c["role"] == role) for role in ("prefill", "decode")]
        both = [_split(engine, c, src, {}, ()) for c in heads]
        common_args = {f: v for f, v in both[0][0].items() if both[1][0].get(f, object()) == v}
        for flag in common_args:
            comments[("serve", "args", flag)] = heads[0]["origins"]["args"][heads[0]["argv"][3:].index(flag)] \
                if flag in heads[0]["argv"][3:] else "recipe (both pools)"
        envs = [dict(c["env"]) for c in heads]
        shared_env = {k for k in envs[0] if envs[1].get(k) == envs[0][k]}
        head = dict(heads[0], env={k: v for k, v in heads[0]["env"].items() if k in shared_env})
        args = common_args
        owned: dict = {}
        env = _env(head, comments, ("serve", "env"), dropped)
        pools = _pd_pools(src, result, engine, common_args, comments, dropped)
        for role in ("prefill", "decode"):
            pools[role]["env"] = {k: v for k, v in pools[role]["env"].items() if k not in env}
        nodes = pools["prefill"]["nodes"] + pools["decode"]["nodes"]
        topology = {"nodes": nodes, "gpus_per_node": gpus, "tensor_parallel": gpus, "pipeline_parallel": 1,
                    "data_parallel": nodes, "layout": "pd"}
        comments[("topology",)] = ("strategy pd_cluster: every pool node (tensor_parallel x data_parallel counts its "
                                   "GPUs); pd says how each pool splits the model")
    else:
        head = result["commands"][0]
        args, owned = _split(engine, head, src, comments, ("serve", "args"))
        env = _env(head, comments, ("serve", "env"), dropped)
        nodes = choice["nodes"] or 1
        if choice["strategy"] in DP_STRATEGIES:
            tp = _int(owned, "--tensor-parallel-size", 1)
            dp = _int(owned, "--data-parallel-size", gpus * nodes)
            local = _int(owned, "--data-parallel-size-local", dp // nodes)
            topology = {"nodes": nodes, "gpus_per_node": min(gpus, tp * dp // nodes) or 1, "tensor_parallel": tp,
                        "pipeline_parallel": 1, "data_parallel": dp, "layout": "dp", "data_parallel_local": local}
            if nodes > 1:
                step = _int(_split(engine, result["commands"][1], src, {}, ())[1], "--data-parallel-start-rank", local)
                if step != local:  # the site's dpLocal from the strategy overrides, not --data-parallel-size-local
                    topology["data_parallel_rank_step"] = step
            comments[("topology",)] = owned.get("--data-parallel-size", (None, f"strategy {choice['strategy']}"))[1]
        else:
            tp = _int(owned, "--tensor-parallel-size", gpus * nodes)
            pp = _int(owned, "--pipeline-parallel-size", 1)
            topology = {"nodes": nodes, "gpus_per_node": min(gpus, tp * pp // nodes) or 1, "tensor_parallel": tp,
                        "pipeline_parallel": pp, "data_parallel": 1}
            comments[("topology",)] = owned.get("--tensor-parallel-size", (None, f"strategy {choice['strategy']}"))[1]
    engine_ready = engine.timeout("engine_ready")
    if engine_ready is None:  # vllm's engine declares it
        raise LanekitError("internal: the vllm engine has no engine_ready timeout.")
    ready = head["env"].get(engine_ready.key)
    ready_s = whole_number(ready)
    budget = max(ready_s or 0, 3600)
    boot = {"budget_s": budget + 900, "expected_load_s": budget * 2 // 3, "expected_warmup_s": budget // 6}
    comments[("boot",)] = "lanekit defaults sized from the engine-ready timeout: measure your cluster and edit"
    image_ref = docker_image(src, choice["hardware"], choice["variant"])
    slug = re.sub(r"[^a-z0-9.-]", "-", str(meta.get("slug") or src.name.rsplit("/", 1)[-1]).lower())
    description = (f"{meta.get('title') or src.name} from its vLLM recipe: variant {choice['variant']}, "
                   f"{choice['strategy']} on {nodes}x {choice['hardware']}"
                   + (f", preset {choice['preset']}" if choice.get("preset") else "") + ".")
    lane = {
        "lane": lane_name,
        "description": description,
        "engine": "vllm",
        # The CUDA, ROCm, TPU, XPU, CPU and Ascend builds of a recipe's image are different images: a spec each.
        "image": f"{slug}-vllm" + IMAGE_SUFFIX[image_family(src, choice["hardware"])],
        "hardware": choice["hardware"],
        "model": {"id": result["model"], "revision": None, "served_name": result["model"], "dir": result["model"],
                  "layout": "mistral_consolidated" if args.get("--config-format") == "mistral" else "hf",
                  "moe": (recipe.get("model") or {}).get("architecture") == "moe",
                  "source": {"kind": "hf"}},
        "topology": topology,
        "serve": {"entrypoint": ["vllm", "serve"], "port": 8000,
                  "rendezvous_port": engine.extra["default_rendezvous_port"], "args": args, "env": env},
        "boot": boot,
    }
    if pd:
        lane["pd"] = pools
        comments[("serve", "port")] = "the router's port (the lane's API); the pools listen on pd.<pool>.port"
    if variant.get("precision"):
        lane["model"]["quantization"] = str(variant["precision"])
    memory, why = memory_section(src, choice, lane)
    if memory:
        lane["memory"] = memory
        comments[("memory",)] = why
    comments[("image",)] = f"recipe docker image {image_ref}: write images/{lane['image']}/image.yml pinned by digest"
    comments[("model", "id")] = f"variant {choice['variant']}" if variant.get("model_id") else "recipe model.model_id"
    comments[("model", "revision")] = "the recipe gives no revision: pin the 40-hex commit before staging"
    notes = recipe_notes(src, choice) + [f"Not carried into the lane: {d}." for d in dropped]
    if notes:
        lane["notes"] = notes
    return lane, comments


# --- rendering ------------------------------------------------------------------------------

def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return json.dumps(value, separators=(", ", ": "))
    if isinstance(value, list):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    text = str(value)
    try:
        plain_ok = text == text.strip() and "#" not in text and ": " not in text and \
            yaml.safe_load(text) == text and not text.startswith(("{", "[", "&", "*", "!", "|", ">", "'", '"', "%", "@", "`"))
    except yaml.YAMLError:
        plain_ok = False
    return text if plain_ok else json.dumps(text)


def render(lane: dict, comments: dict, header: list[str]) -> str:
    """The lane as YAML text with one trailing comment per value that has an origin."""
    lines = ["---"] + [f"# {h}" for h in header]

    def emit(data: dict, path: tuple[str, ...], indent: int) -> None:
        pad = "  " * indent
        for key, value in data.items():
            note = comments.get(path + (key,))
            tail = f"  # {note}" if note else ""
            name = _scalar(key) if isinstance(key, str) and not re.fullmatch(r"[A-Za-z0-9_.-]+", key) else key
            if isinstance(value, dict) and value and not (path[:2] == ("serve", "args")):
                lines.append(f"{pad}{name}:{tail}")
                emit(value, path + (key,), indent + 1)
            elif isinstance(value, list) and value and all(isinstance(v, str) for v in value) and key == "notes":
                lines.append(f"{pad}{name}:{tail}")
                lines.extend(f"{pad}  - {_scalar(v)}" for v in value)
            else:
                lines.append(f"{pad}{name}: {_scalar(value)}{tail}")

    emit(lane, (), 0)
    text = "\n".join(lines) + "\n"
    if yaml.safe_load(text) != lane:  # the writer's own guarantee: the text reads back as the lane
        raise LanekitError(f"internal: the lane {lane['lane']} did not render to YAML that reads back identically.")
    return text
