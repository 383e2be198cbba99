# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Bench settings as data: the bring-up report's defaults, merged with a lane's ``bench:``
section and the command line's ``bench_settings``, validated, and turned into the argv of
tool-eval-bench (which drives llama-benchy for the throughput grid).

Layers (later wins per key): DEFAULTS, the lane file's ``bench:`` (after the override layers), the
command line (``-e '{"bench_settings": {...}}'``). Every problem is one sentence naming the layer
and the key.
"""
from __future__ import annotations

import json
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._yaml import ascii_digits, describe, whole_number

# The bring-up report's bench: tool-eval-bench v3.0.0, seed 42, hard mode, c1/c2, pp2048/tg128
# at depths 0/4096/8192 (its "Bench" section); 3 runs per point is llama-benchy's default.
DEFAULTS: dict[str, Any] = {
    "seed": 42,
    "hard_mode": True,
    # "all": every tool-call scenario (the report's run); "short": the core 15 (+ hard mode).
    "suite": "all",
    "scenarios": [],
    "concurrency": [1, 2],
    "depths": [0, 4096, 8192],
    "pp": 2048,
    "tg": 128,
    "runs": 3,
    "latency_mode": "generation",
    "exact_tg": False,
    "no_think": False,
    "max_tokens": None,
    "timeout_s": 120,
    # A tokenizer.json on the controller; empty: the one in the staged model directory.
    "tokenizer": "",
    # Seconds the whole tool run may take before it is stopped (and the run marked invalid).
    "run_timeout_s": 7200,
}

_INT_KEYS = ("seed", "pp", "tg", "runs", "timeout_s", "run_timeout_s")
_BOOL_KEYS = ("hard_mode", "exact_tg", "no_think")
_LIST_KEYS = ("concurrency", "depths")
_CHOICES = {"suite": ("all", "short"), "latency_mode": ("generation", "api", "none")}
_MINIMUM = {"seed": 0, "pp": 1, "tg": 1, "runs": 1, "timeout_s": 1, "run_timeout_s": 10}

# Engines whose OpenAI server refuses llama-benchy's streamed `return_token_ids` (HTTP 400).
NO_TOKEN_IDS_ENGINES = ("sglang",)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_list(value: Any) -> list[int] | None:
    """A list of whole numbers from a list or a "1,2" string; None when it is neither."""
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",") if p.strip()]
        if not parts or not all(ascii_digits(p) for p in parts):
            return None
        return [int(p) for p in parts]
    if isinstance(value, list) and value and all(_is_int(v) for v in value):
        return list(value)
    return None


def check_layer(layer: Any, source: str) -> dict[str, Any]:
    """One layer's keys, validated; ``source`` names it in the sentences."""
    if layer in (None, ""):
        return {}
    if isinstance(layer, str):
        try:
            layer = json.loads(layer)
        except ValueError:
            raise LanekitError(f"{source} is not a mapping or JSON object: pass e.g. "
                               "-e '{\"bench_settings\": {\"depths\": [0, 4096]}}'.") from None
    if not isinstance(layer, dict):
        raise LanekitError(f"{source} must be a mapping of bench settings (keys: {', '.join(sorted(DEFAULTS))}).")
    out: dict[str, Any] = {}
    for key, value in layer.items():
        where = f"{source} key {key}"
        if key not in DEFAULTS:
            raise LanekitError(f"{where} is not a bench setting; known keys: {', '.join(sorted(DEFAULTS))}.")
        if key in _INT_KEYS:
            if isinstance(value, str) and whole_number(value) is not None:
                value = whole_number(value)
            if not _is_int(value) or value < _MINIMUM[key]:
                raise LanekitError(f"{where} is {describe(value)}; expected a whole number >= {_MINIMUM[key]}.")
        elif key in _BOOL_KEYS:
            if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no"):
                value = value.lower() in ("true", "yes")
            if not isinstance(value, bool):
                raise LanekitError(f"{where} is {describe(value)}; expected true or false.")
        elif key in _LIST_KEYS:
            parsed = _int_list(value)
            if parsed is None or any(v < (1 if key == "concurrency" else 0) for v in parsed):
                raise LanekitError(f"{where} is {value!r}; expected a non-empty list of whole numbers"
                                   f"{' >= 1' if key == 'concurrency' else ' >= 0'} (e.g. [0, 4096, 8192]).")
            value = sorted(set(parsed))
        elif key in _CHOICES:
            if value not in _CHOICES[key]:
                raise LanekitError(f"{where} is {value!r}; expected one of {', '.join(_CHOICES[key])}.")
        elif key == "scenarios":
            if isinstance(value, str):
                value = [v.strip() for v in value.split(",") if v.strip()]
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise LanekitError(f"{where} is {value!r}; expected a list of scenario ids such as [TC-01, TC-02].")
        elif key == "max_tokens":
            if value is not None and (not _is_int(value) or value < 1):
                raise LanekitError(f"{where} is {value!r}; expected a whole number >= 1 or null.")
        elif key == "tokenizer":
            if value is None:
                value = ""
            if not isinstance(value, str):
                raise LanekitError(f"{where} is {value!r}; expected the path of a tokenizer.json on the controller.")
        out[key] = value
    return out


def merge(lane_layer: Any = None, cli_layer: Any = None, lane: str = "the lane") -> dict[str, Any]:
    """DEFAULTS <- the lane's ``bench:`` <- the command line's ``bench_settings``."""
    settings = dict(DEFAULTS)
    settings.update(check_layer(lane_layer, f"The bench: section of lane {lane}"))
    settings.update(check_layer(cli_layer, "The command line's bench_settings"))
    return settings


def scenario_count(settings: dict[str, Any]) -> int:
    """How many throughput points the grid has (depth x concurrency)."""
    return len(settings["depths"]) * len(settings["concurrency"])


def book_url(port: int = 9) -> str:
    """The corpus's URL as llama-benchy keys its cache; never fetched (the file is pre-cached)."""
    return f"http://127.0.0.1:{port}/lanekit-bench-corpus-v1.txt"


def benchy_args(settings: dict[str, Any], engine: str, corpus_url: str, progress_path: str) -> list[str]:
    """The llama-benchy options tool-eval-bench passes through (--benchy-args)."""
    args = ["--book-url", corpus_url, "--emit-progress", progress_path, "--exit-on-first-fail", "--no-cache"]
    if engine in NO_TOKEN_IDS_ENGINES:
        args += ["--extra-body", "return_token_ids=false"]
    if settings["exact_tg"]:
        args.append("--exact-tg")
    return args


def tool_argv(settings: dict[str, Any], *, base_url: str, model: str, engine: str, tokenizer: str,
              corpus_url: str, progress_path: str, json_file: str, output_dir: str) -> list[str]:
    """tool-eval-bench's argv (program first). The API key is never here: TOOL_EVAL_API_KEY."""
    argv = ["tool-eval-bench", "bench", "--perf", "--seed", str(settings["seed"]),
            "--base-url", base_url, "--model", model, "--backend", engine, "--no-live",
            "--concurrency", ",".join(str(c) for c in settings["concurrency"]),
            "--depth", ",".join(str(d) for d in settings["depths"]),
            "--pp", str(settings["pp"]), "--tg", str(settings["tg"]),
            "--benchy-runs", str(settings["runs"]),
            "--benchy-latency-mode", settings["latency_mode"],
            "--tokenizer", tokenizer,
            "--benchy-args", " ".join(benchy_args(settings, engine, corpus_url, progress_path)),
            "--timeout", str(settings["timeout_s"]),
            "--json-file", json_file, "--output-dir", output_dir]
    if settings["hard_mode"]:
        argv.append("--hardmode")
    if settings["scenarios"]:
        argv += ["--scenarios", *settings["scenarios"]]
    elif settings["suite"] == "short":
        argv.append("--short")
    if settings["no_think"]:
        argv.append("--no-think")
    if settings["max_tokens"]:
        argv += ["--backend-kwargs", json.dumps({"max_tokens": settings["max_tokens"]})]
    return argv


def offline_env(path: str, home: str, api_host: str, api_key: str | None = None) -> dict[str, str]:
    """The tools' whole environment: no inherited proxies or tokens, every hub switch off, a
    private HOME (llama-benchy's corpus cache, no user .env or HF cache), the key (if any) only
    here."""
    env = {
        "PATH": path, "HOME": home, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1", "TOKENIZERS_PARALLELISM": "false",
        "NO_COLOR": "1", "PYTHONUNBUFFERED": "1", "MPLBACKEND": "Agg",
        "XDG_CACHE_HOME": f"{home}/.cache", "HF_HOME": f"{home}/.cache/huggingface",
        # The API host is reached directly even when a proxy variable leaks in from elsewhere.
        "NO_PROXY": f"{api_host},127.0.0.1,localhost", "no_proxy": f"{api_host},127.0.0.1,localhost",
    }
    if api_key:
        env["TOOL_EVAL_API_KEY"] = api_key
    return env
