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

Only layouts the plan can deploy today are written: one tensor-parallel group over one or more
nodes (``*_tp``, ``*_tep``) and TP x PP (``multi_node_tp_pp``). The others compile (their commands
can be written as JSON) but the lane writer refuses them with a sentence.
"""
from __future__ import annotations

import json
import re

try:
    import yaml
except ImportError:  # module_utils must import anywhere; lanes are written on the controller, which has PyYAML
    yaml = None

from ansible_collections.lanekit.serving.plugins.module_utils import _engines
from ansible_collections.lanekit.serving.plugins.module_utils import _recipe_rules as R
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._hardware import PROFILES
from ansible_collections.lanekit.serving.plugins.module_utils._recipe_load import RecipeSource

LANE_STRATEGIES = ("single_node_tp", "single_node_tep", "multi_node_tp", "multi_node_tep", "multi_node_tp_pp")
# Environment the plan sets per host from the inventory (fabric_ifname, ib_hca, ucx_net_devices).
PLAN_FABRIC_ENV = {"GLOO_SOCKET_IFNAME": "fabric_ifname", "NCCL_SOCKET_IFNAME": "fabric_ifname",
                   "NCCL_IB_HCA": "ib_hca", "UCX_NET_DEVICES": "ucx_net_devices"}
PLACEHOLDER_RE = re.compile(r"\$[A-Z_][A-Z0-9_]*")
DEFAULT_IMAGES = {"nvidia": "vllm/vllm-openai:latest", "amd": "vllm/vllm-openai-rocm:latest"}
NIGHTLY_IMAGES = {"nvidia": "vllm/vllm-openai:nightly", "amd": "vllm/vllm-openai-rocm:nightly"}


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
    """The recipe's image for this hardware: the variant's exact-GPU pin, the variant's, the model's, else vLLM's."""
    recipe = src.recipe
    variant = (recipe.get("variants") or {}).get(variant_key) or {}
    profile = src.profiles.get(hardware) or {}
    brand = "amd" if profile.get("brand") == "AMD" else "nvidia"
    exact = ((variant.get("hardware_overrides") or {}).get(hardware) or {}).get("docker_image")
    if isinstance(exact, str):
        return exact
    for value in (variant.get("docker_image"), (recipe.get("model") or {}).get("docker_image")):
        if isinstance(value, str) and brand == "nvidia":
            return value
        if isinstance(value, dict):
            picked = value.get(brand)
            if isinstance(picked, dict):  # a CUDA map: the newer CUDA build
                picked = picked.get("cu130") or picked.get("cu129")
            if isinstance(picked, str):
                return picked
    nightly = (recipe.get("model") or {}).get("nightly_required") is True
    return (NIGHTLY_IMAGES if nightly else DEFAULT_IMAGES)[brand]


def _applies(when, src: RecipeSource, choice: dict) -> bool:
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


def _value(token: str):
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


def build_lane(src: RecipeSource, result: dict, lane_name: str) -> tuple[dict, dict]:
    """(lane mapping, comments by key path) for a compiled choice the plan can deploy."""
    refuse_unless_deployable(src, result)
    choice, head = result["choice"], result["commands"][0]
    engine = _engines.get("vllm")
    recipe, meta = src.recipe, src.recipe.get("meta") or {}
    variant = (recipe.get("variants") or {}).get(choice["variant"]) or {}
    comments: dict = {}
    args, owned = {}, {}
    tail, origins = head["argv"][3:], head["origins"]["args"]
    i = 0
    while i < len(tail):
        flag, origin = tail[i], origins[i]
        has_value = i + 1 < len(tail) and not str(tail[i + 1]).startswith("-")
        value = tail[i + 1] if has_value else True
        i += 2 if has_value else 1
        if flag in engine.plan_owned:
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
        comments[("serve", "args", flag)] = origin
    env, dropped = {}, []
    for key, value in head["env"].items():
        origin = head["origins"]["env"][key]
        if key in PLAN_FABRIC_ENV and isinstance(value, str) and PLACEHOLDER_RE.fullmatch(value):
            dropped.append(f"{key} ({origin}): the plan sets it per host from {PLAN_FABRIC_ENV[key]}")
            continue
        if isinstance(value, str) and PLACEHOLDER_RE.search(value):
            dropped.append(f"{key}={value} ({origin}): a per-host placeholder; set it in host_vars lane_overrides")
            continue
        env[key] = value
        comments[("serve", "env", key)] = origin
    profile = src.profiles[choice["hardware"]]
    gpus = profile.get("gpu_count") or 1
    nodes = choice["nodes"] or 1
    tp = int(owned.get("--tensor-parallel-size", (gpus * nodes, ""))[0])
    pp = int(owned.get("--pipeline-parallel-size", (1, ""))[0])
    topology = {"nodes": nodes, "gpus_per_node": min(gpus, tp * pp // nodes) or 1, "tensor_parallel": tp,
                "pipeline_parallel": pp, "data_parallel": 1}
    comments[("topology",)] = owned.get("--tensor-parallel-size", (None, f"strategy {choice['strategy']}"))[1]
    ready = head["env"].get(engine.timeout("engine_ready").key)
    ready_s = int(ready) if isinstance(ready, (int, str)) and str(ready).isdigit() else None
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
        # The CUDA and ROCm builds of a recipe's image are different images, so AMD lanes get their own spec.
        "image": f"{slug}-vllm" + ("-rocm" if (src.profiles.get(choice["hardware"]) or {}).get("brand") == "AMD" else ""),
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
    if variant.get("precision"):
        lane["model"]["quantization"] = str(variant["precision"])
    comments[("image",)] = f"recipe docker image {image_ref}: write images/{lane['image']}/image.yml pinned by digest"
    comments[("model", "id")] = f"variant {choice['variant']}" if variant.get("model_id") else "recipe model.model_id"
    comments[("model", "revision")] = "the recipe gives no revision: pin the 40-hex commit before staging"
    notes = recipe_notes(src, choice) + [f"Not carried into the lane: {d}." for d in dropped]
    if notes:
        lane["notes"] = notes
    return lane, comments


# --- rendering ------------------------------------------------------------------------------

def _scalar(value) -> str:
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

    def emit(data: dict, path: tuple, indent: int):
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
