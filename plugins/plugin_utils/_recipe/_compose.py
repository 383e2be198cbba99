# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Recipe composition: a resolved choice -> every node's ``vllm serve`` argv and env, as the recipe site builds them.

One job: compose. The layers are appended in the site's order (base args, variant, strategy block
with its parallel/rank flags, strategy overrides, hardware overrides, preset, features), then the
last occurrence of each flag wins at its own position. Every token and env value carries the layer
it came from (``origin``), so a lane can say where each value came from. The output is the shape of
an ``expected`` entry of the conformance corpus: ``deployType``, ``model``, ``modes``, ``pools``,
``commands`` (``role``, ``node``, ``command``, ``argv``, ``env``) and ``router`` for pd_cluster,
with the site's ``$HEAD_IP``-style placeholders left literal.

Presets (lanekit's own; the site does not read them) add their ``args``/``env`` after the hardware
overrides, their ``tp`` as the single-node TP, and per P/D role ``args``, ``remove_args`` (drop a
flag) and ``json_args`` (a JSON merge patch on a flag's value, optionally selected by connector).
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._yaml import whole_number
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe import _rules as R
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._choice import (
    Choice,
    Pool,
    ResolvedChoice,
    resolve,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._load import RecipeSource

NVL4_ONLY_ENV = ("VLLM_USE_NCCL_SYMM_MEM", "NCCL_CUMEM_ENABLE", "NCCL_MNNVL_ENABLE", "NCCL_NVLS_ENABLE",
                 "UCX_NET_DEVICES")
NVL4_HARDWARE = ("gb200", "gb300")
PORTS = {"prefill": 8001, "decode": 8002}


def _is_flag(token: object) -> bool:
    return isinstance(token, str) and token.startswith("-")


def dedupe(tokens: list) -> list:
    """Last occurrence of each flag wins at its own position; ``tokens`` are (value, origin) pairs."""
    tokens = [t for t in tokens if t[0] not in (None, "", False, 0)]
    units = []
    i = 0
    while i < len(tokens):
        cur = tokens[i]
        if _is_flag(cur[0]):
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            if nxt is not None and not _is_flag(nxt[0]):
                units.append((cur[0], [cur, nxt]))
                i += 2
                continue
            units.append((cur[0], [cur]))
        else:
            units.append((None, [cur]))
        i += 1
    seen, keep = set(), []
    for flag, unit in reversed(units):
        if flag is None:
            keep.append(unit)
        elif flag not in seen:
            seen.add(flag)
            keep.append(unit)
    return [t for unit in reversed(keep) for t in unit]


def shell_quote(value: Any) -> Any:
    if not isinstance(value, str) or value == "":
        return value
    if re.match(r"^\$[A-Z_][A-Z0-9_]*$", value) or re.match(r"^[A-Za-z0-9_./=:@,+%-]+$", value):
        return value
    return "'" + value.replace("'", "'\\''") + "'"


def display_command(model: str, argv_tail: list) -> str:
    lines = []
    i = 0
    while i < len(argv_tail):
        cur = str(argv_tail[i])
        nxt = argv_tail[i + 1] if i + 1 < len(argv_tail) else None
        if cur.startswith("-") and nxt is not None and not str(nxt).startswith("-"):
            lines.append(f"{cur} {shell_quote(nxt)}")
            i += 2
        else:
            lines.append(cur)
            i += 1
    if not lines:
        return f"vllm serve {model}"
    return f"vllm serve {model} \\\n  " + " \\\n  ".join(lines)


def _patch(value: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: mappings merge, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    out = dict(value) if isinstance(value, dict) else {}
    for key, val in patch.items():
        if val is None:
            out.pop(key, None)
        else:
            out[key] = _patch(out.get(key), val)
    return out


def _apply_json_args(tokens: list, json_args: dict | None, origin: str) -> list:
    out = list(tokens)
    for flag, patch in (json_args or {}).items():
        for i, (tok, _o) in enumerate(out[:-1]):
            if tok != flag:
                continue
            try:
                value = json.loads(out[i + 1][0])
            except (TypeError, ValueError):
                continue
            # {"NixlConnector": {...}} selects the patch by the value's connector name.
            if isinstance(patch, dict) and isinstance(value, dict) and value.get("kv_connector") in patch \
                    and not set(patch) & set(value):
                patch_for = patch[value["kv_connector"]]
            else:
                patch_for = patch
            out[i + 1] = (json.dumps(_patch(value, patch_for), separators=(",", ":")), origin)
    return out


def _remove(tokens: list, flags: list) -> list:
    out, i = [], 0
    while i < len(tokens):
        tok = tokens[i]
        if tok[0] in flags:
            i += 2 if i + 1 < len(tokens) and not _is_flag(tokens[i + 1][0]) else 1
            continue
        out.append(tok)
        i += 1
    return out


def _pd_role(role: str | None) -> str:
    """The pool of a pd_cluster command (compose() passes one with every pd_cluster command)."""
    if role is None:
        raise LanekitError("internal: a pd_cluster command was composed without its pool role.")
    return role


class _Composer:
    def __init__(self, src: RecipeSource, c: ResolvedChoice) -> None:
        self.src, self.c = src, c
        self.pools: dict[str, Pool] = c.pd or {}  # pd_cluster only
        self.nodes: int = c.nodes or 1  # c.nodes is None only for pd_cluster (sized by its pools)
        self.recipe = src.recipe
        self.variant = (self.recipe.get("variants") or {})[c.variant] or {}
        self.strategy = src.strategies[c.strategy]
        self.profile = src.profiles[c.hardware]
        self.hw = c.hardware
        self.gen = R.generation(self.profile)
        count = self.profile.get("gpu_count")
        self.gpus: int = count if isinstance(count, int) else 1
        self.deploy = self.strategy.get("deploy_type") or "single_node"
        self.so = (self.recipe.get("strategy_overrides") or {}).get(c.strategy)
        self.preset = c.preset_data or {}
        self.model = self.variant.get("model_id") or (self.recipe.get("model") or {}).get("model_id") or "unknown"

    # -- pieces ---------------------------------------------------------------------------

    def single_tp(self) -> int | float:
        if self.c.strategy != "single_node_tp":
            return self.gpus
        cpu = self.profile.get("generation") == "cpu"
        for raw in (self.preset.get("tp"), self.variant.get("tp"), (self.so or {}).get("tp")):
            tp = raw if isinstance(raw, (int, float)) and not isinstance(raw, bool) else R.keyed(raw, self.profile, self.hw)
            if isinstance(tp, (int, float)) and not isinstance(tp, bool) and tp > 0:
                return tp if cpu else min(tp, self.gpus)
        per_gpu = self.profile.get("vram_gb") / self.gpus if self.profile.get("vram_gb") and self.gpus else 0
        need = self.variant.get("vram_minimum_gb") or 0
        if not need or not per_gpu:
            return self.gpus
        return 1 if need <= per_gpu else self.gpus

    def pool(self, role: str) -> dict:
        pool = self.pools[role]
        so_role = (self.so or {}).get(role) or {}
        st_role = self.strategy.get(role) or {}
        nodes, mode = pool["nodes"], pool["parallelism"]
        pool_gpus = self.gpus // 2 if nodes == 0 else nodes * self.gpus
        tp = (so_role.get("tp") or st_role.get("tp") or 1) if mode == "dep" else pool_gpus
        dp_local = max(1, self.gpus // tp) if mode == "dep" else 0
        dp_size = max(1, nodes) * dp_local if mode == "dep" else 1
        return {"nodes": nodes, "parallelism": mode, "tp": tp, "dpLocal": dp_local, "dpSize": dp_size,
                "poolGpus": pool_gpus}

    def _ho_layers(self, role: str | None) -> list:
        """(mapping, origin) of the hardware-override layers, in the site's precedence."""
        so = self.so or {}
        layers = []
        strategy_gen = R.gen_override(so.get("hardware_overrides"), self.profile)
        if strategy_gen:
            layers.append((strategy_gen, f"strategy_overrides.{self.c.strategy}.hardware_overrides ({self.gen})"))
        else:
            layers.append((R.gen_override(self.recipe.get("hardware_overrides"), self.profile),
                           f"hardware_overrides ({self.gen})"))
            layers.append((R.gen_override(self.variant.get("hardware_overrides"), self.profile),
                           f"variant {self.c.variant} hardware_overrides ({self.gen})"))
        layers.append(((so.get("hardware_overrides") or {}).get(self.hw),
                       f"strategy_overrides.{self.c.strategy}.hardware_overrides.{self.hw}"))
        if role:
            layers.append((((so.get(role) or {}).get("hardware_overrides") or {}).get(self.hw),
                           f"strategy_overrides.{self.c.strategy}.{role}.hardware_overrides.{self.hw}"))
        return [(m, o) for m, o in layers if isinstance(m, dict)]

    def _features(self) -> Iterator[tuple[dict[str, Any], str]]:
        """(feature key, mapping of args/env, origin) of each enabled feature, in order."""
        declared = self.recipe.get("features") or {}
        for fkey in self.c.features:
            feat = declared.get(fkey) or {}
            if not R.feature_on_strategy(feat, self.c.strategy):
                continue
            if isinstance(feat.get("modes"), dict):
                mode_key = self.c.modes.get(fkey)
                mode = feat["modes"].get(mode_key) if mode_key else None
                if not mode:
                    continue
                ho = R.keyed(mode.get("hardware_overrides"), self.profile, self.hw)
                yield {"args": (ho or {}).get("args") if (ho or {}).get("args") is not None else mode.get("args"),
                       "env": (ho or {}).get("env") if (ho or {}).get("env") is not None else mode.get("env")}, \
                    f"feature {fkey} (mode {mode_key})"
                continue
            ho = R.keyed(feat.get("hardware_overrides"), self.profile, self.hw)
            yield {"args": (ho or {}).get("args") if (ho or {}).get("args") is not None else feat.get("args"),
                   "env": (ho or {}).get("env") if (ho or {}).get("env") is not None else feat.get("env")}, \
                f"feature {fkey}"

    # -- args -----------------------------------------------------------------------------

    def parallel(self, role: str | None, rank: int) -> list:
        gpus, nodes = self.gpus, self.c.nodes or 1
        flag = self.strategy.get("parallel_flag") or "--tensor-parallel-size"
        kind = self.strategy.get("parallelism")
        if self.deploy == "multi_node" and nodes > 1:
            if flag == "--data-parallel-size":
                so = self.so or {}
                ov = list(so.get("vllm_args") or []) + list(so.get("extra_args") or [])
                ov += list((R.gen_override(so.get("hardware_overrides"), self.profile) or {}).get("extra_args") or [])
                ov += list(((so.get("hardware_overrides") or {}).get(self.hw) or {}).get("extra_args") or [])
                idx = max((i for i, t in enumerate(ov) if t == "--data-parallel-size-local"), default=-1)
                dp_local = whole_number(ov[idx + 1]) if 0 <= idx < len(ov) - 1 else gpus
                if dp_local is None or dp_local < 1:
                    raise LanekitError(
                        f"recipe {self.src.path}: key 'strategy_overrides.{self.c.strategy}' gives "
                        f"--data-parallel-size-local without a whole number after it "
                        f"({ov[idx + 1] if idx < len(ov) - 1 else 'nothing'!r}); write the count of data-parallel "
                        "ranks per node, e.g. '8'.")
                out = ["--data-parallel-size", gpus * nodes, "--data-parallel-size-local", gpus,
                       "--data-parallel-address", "$HEAD_IP"]
                return out + (["--data-parallel-start-rank", rank * dp_local] if rank > 0 else [])
            if kind == "tp_dp":
                out = ["--tensor-parallel-size", gpus, "--data-parallel-size", nodes,
                       "--data-parallel-size-local", "1", "--data-parallel-address", "$HEAD_IP"]
                return out + (["--data-parallel-start-rank", rank] if rank > 0 else [])
            out = (["--tensor-parallel-size", gpus, "--pipeline-parallel-size", nodes] if kind == "tp_pp"
                   else ["--tensor-parallel-size", gpus * nodes])
            out += ["--nnodes", nodes, "--node-rank", rank, "--master-addr", "$HEAD_IP"]
            return out + (["--headless"] if rank > 0 else [])
        if self.deploy == "pd_cluster":
            role = _pd_role(role)
            pool = self.pool(role)
            up = role.upper()
            if pool["parallelism"] == "dep":
                so_role = (self.so or {}).get(role) or {}
                tp = so_role.get("tp") if so_role.get("tp") is not None else (self.strategy.get(role) or {}).get("tp")
                out = ["--tensor-parallel-size", tp] if tp is not None else []
                out += ["--data-parallel-size", pool["dpSize"], "--data-parallel-size-local", pool["dpLocal"],
                        "--data-parallel-start-rank", rank * pool["dpLocal"],
                        "--data-parallel-address", f"${up}_NODE_1", "--data-parallel-rpc-port", f"${up}_DP_RPC_PORT"]
                out += ["--data-parallel-hybrid-lb"] if max(1, pool["nodes"]) > 1 else []
                return out + ["--enable-expert-parallel"]
            so_role = (self.so or {}).get(role) or {}
            pflag = so_role.get("parallel_flag") or (self.strategy.get(role) or {}).get("parallel_flag") or flag
            out = [pflag, max(1, pool["poolGpus"])]
            out += ["--enable-expert-parallel"] if pool["parallelism"] == "tep" else []
            if pool["nodes"] > 1:
                out += ["--nnodes", pool["nodes"], "--node-rank", rank, "--master-addr", f"${up}_NODE_1"]
                out += ["--headless"] if rank > 0 else []
            return out
        return [flag, self.single_tp()]

    def args(self, role: str | None, rank: int) -> list:
        toks: list = []

        def add(values: Any, origin: str) -> None:
            toks.extend((v, origin) for v in (values or []))

        c = self.c
        add((self.recipe.get("model") or {}).get("base_args"), "recipe model.base_args")
        add(self.variant.get("extra_args"), f"variant {c.variant}")
        add(((self.variant.get("hardware_overrides") or {}).get(self.hw) or {}).get("extra_args"),
            f"variant {c.variant} hardware_overrides.{self.hw}")
        block = self.strategy if self.deploy != "pd_cluster" else (self.strategy.get(role) or {})
        add(block.get("vllm_args"), f"strategy {c.strategy}" + (f" {role}" if role else ""))
        add([str(v) if isinstance(v, (int, float)) else v for v in self.parallel(role, rank)],
            f"strategy {c.strategy} parallel flags")
        so = self.so or {}
        src = (so.get(role) or {}) if role else so
        where = f"strategy_overrides.{c.strategy}" + (f".{role}" if role else "")
        add(src.get("extra_args"), where)
        add(src.get("vllm_args"), where)
        for mapping, origin in self._ho_layers(role):
            add(mapping.get("extra_args"), origin)
        add(self.preset.get("args"), f"preset {c.preset}")
        if role:
            add(((self.preset.get("roles") or {}).get(role) or {}).get("args"), f"preset {c.preset} {role}")
        for feat, origin in self._features():
            add(feat.get("args"), origin)
        toks = dedupe(toks)
        if role:
            prole = (self.preset.get("roles") or {}).get(role) or {}
            toks = _remove(toks, prole.get("remove_args") or [])
            toks = _apply_json_args(toks, prole.get("json_args"), f"preset {c.preset} {role} json_args")
        return toks

    # -- env ------------------------------------------------------------------------------

    def env(self, role: str | None, rank: int) -> dict:
        env: dict = {}

        def put(values: Any, origin: str) -> None:
            for k, v in (values or {}).items():
                env[k] = (v, origin)

        c = self.c
        put((self.recipe.get("model") or {}).get("base_env"), "recipe model.base_env")
        put(self.variant.get("extra_env"), f"variant {c.variant}")
        put(((self.variant.get("hardware_overrides") or {}).get(self.hw) or {}).get("extra_env"),
            f"variant {c.variant} hardware_overrides.{self.hw}")
        if self.deploy != "pd_cluster":
            put(self.strategy.get("env"), f"strategy {c.strategy}")
        else:
            put((self.strategy.get(role) or {}).get("env"), f"strategy {c.strategy} {role}")
            nodes = self.pools[_pd_role(role)]["nodes"]
            if nodes >= 1:
                env["CUDA_VISIBLE_DEVICES"] = (",".join(str(i) for i in range(self.gpus)), "pd pool GPUs")
                if nodes >= 2:
                    env["GLOO_SOCKET_IFNAME"] = ("$IFACE_NAME", "pd pool spanning nodes")
                    env["NCCL_SOCKET_IFNAME"] = ("$IFACE_NAME", "pd pool spanning nodes")
            else:
                half = self.gpus // 2
                ids = range(half) if role == "prefill" else range(half, self.gpus)
                if half > 0:
                    env["CUDA_VISIBLE_DEVICES"] = (",".join(str(i) for i in ids), "pd co-located half node")
        so = self.so or {}
        put(so.get("env"), f"strategy_overrides.{c.strategy}")
        if role:
            put((so.get(role) or {}).get("env"), f"strategy_overrides.{c.strategy}.{role}")
        else:
            put(so.get("extra_env"), f"strategy_overrides.{c.strategy}")
        for mapping, origin in self._ho_layers(role):
            put(mapping.get("extra_env"), origin)
        for feat, origin in self._features():
            put(feat.get("env"), origin)
        put(self.preset.get("env"), f"preset {c.preset}")
        if self.deploy == "pd_cluster":
            if self.hw not in NVL4_HARDWARE:
                for key in NVL4_ONLY_ENV:
                    env.pop(key, None)
            role = _pd_role(role)
            if rank > 0 and self.pools[role]["parallelism"] == "dep":
                old, new = f"${role.upper()}_NODE_1", f"${role.upper()}_NODE_{rank + 1}"
                env = {k: ((new, o) if v == old else (v, o)) for k, (v, o) in env.items()}
        return env

    # -- output ---------------------------------------------------------------------------

    def command(self, role_name: str, role: str | None, node: int, rank: int) -> dict[str, Any]:
        toks = self.args(role, rank)
        env = self.env(role, rank)
        tail = [t for t, _o in toks]
        return {"role": role_name, "node": node, "command": display_command(self.model, tail),
                "argv": ["vllm", "serve", self.model] + tail,
                "env": {k: v for k, (v, _o) in env.items()},
                "origins": {"args": [o for _t, o in toks], "env": {k: o for k, (_v, o) in env.items()}}}

    def router(self, pools: dict[str, dict[str, Any]]) -> str:
        policy = (self.strategy.get("router") or {}).get("policy") or "round_robin"
        lines = [f"vllm-router --policy {policy} \\", "    --vllm-pd-disaggregation \\"]
        for role, flag in (("prefill", "--prefill"), ("decode", "--decode")):
            count = max(1, pools[role]["nodes"] or 1) if pools[role]["parallelism"] == "dep" else 1
            lines += [f"    {flag} http://${role.upper()}_NODE_{i + 1}:{PORTS[role]} \\" for i in range(count)]
        intra = ((self.so or {}).get("router") or {}).get("intra_node_data_parallel_size")
        if intra is None:
            intra = max(pools["prefill"]["dpLocal"] or 0, pools["decode"]["dpLocal"] or 0, 1)
        lines += ["    --host $ROUTER_HOST \\", "    --port $ROUTER_PORT \\",
                  f"    --intra-node-data-parallel-size {intra}"]
        return "\n".join(lines)

    def compose(self) -> dict:
        out: dict = {"deployType": self.deploy, "model": self.model}
        if self.c.modes:
            out["modes"] = dict(self.c.modes)
        if self.deploy == "pd_cluster":
            pools = {role: self.pool(role) for role in ("prefill", "decode")}
            out["pools"] = pools
            commands: list[dict[str, Any]] = []
            for role in ("prefill", "decode"):
                count = max(1, pools[role]["nodes"])
                for k in range(count):
                    commands.append(self.command(role, role, k, k))
            out["commands"] = commands
            out["router"] = self.router(pools)
        elif self.deploy == "multi_node":
            out["commands"] = [self.command("head" if r == 0 else "worker", None, r, r) for r in range(self.nodes)]
        else:
            out["commands"] = [self.command("single", None, 0, 0)]
        return out


def compile_recipe(src: RecipeSource, choice: Choice) -> dict:
    """Resolve ``choice`` against the recipe (or raise its refusal) and compose every node's command.

    The result is an ``expected``-shaped mapping; each command also carries ``origins`` (the layer
    behind every argv token after the model and every env key), which :func:`public` drops.
    """
    resolved = resolve(src, choice)
    result = _Composer(src, resolved).compose()
    result["choice"] = {"hardware": resolved.hardware, "strategy": resolved.strategy, "variant": resolved.variant,
                        "preset": resolved.preset, "features": list(resolved.features),
                        "feature_modes": dict(resolved.feature_modes), "nodes": resolved.nodes,
                        "pd": resolved.pd}
    return result


_SHELL_SAFE_RE = re.compile(r"[A-Za-z0-9_./:,=@%+-]+|\$[A-Z_][A-Z0-9_]*")


def _shell_word(value: object) -> str:
    """One shell word; a ``$PLACEHOLDER`` stays bare so the shell fills it in, as on the recipe site."""
    text = str(value)
    return text if _SHELL_SAFE_RE.fullmatch(text) else "'" + text.replace("'", "'\\''") + "'"


def command_lines(public_result: dict) -> list[str]:
    """The composed commands as a person reads and pastes them: per node a heading, the environment, the command."""
    lines = []
    for cmd in public_result.get("commands") or []:
        lines.append(f"# node {cmd.get('node')} ({cmd.get('role')})")
        env = cmd.get("env") or {}
        text = str(cmd.get("command") or " ".join(_shell_word(a) for a in cmd.get("argv") or []))
        if env:
            lines.append(" ".join(f"{k}={_shell_word(v)}" for k, v in env.items()) + " \\")
        lines.extend(text.splitlines())
    if public_result.get("router"):
        lines.append("# router")
        lines.extend(str(public_result["router"]).splitlines())
    return lines


def public(result: dict) -> dict:
    """The result in exactly the corpus's ``expected`` shape (no origins, no choice echo)."""
    out = {k: v for k, v in result.items() if k != "choice"}
    out["commands"] = [{k: v for k, v in cmd.items() if k != "origins"} for cmd in result["commands"]]
    return out
