"""Parts shared by the vLLM and SGLang stand-in ranks: model-directory checks, the weight read
loop, the rendezvous wiring and the lifecycle (signals, failures, clean exit)."""
from __future__ import annotations

import os
import sys
import threading
import time

from . import STANDIN_LABEL
from .common import Fatal, Faults, GiB, Runtime, Shutdown, emit, env_float, env_str
from .group import Group
from .weights import CheckpointError, Reader, find_shards, plan, tqdm_line

AUTOCONFIG_ERROR = ("OSError: We couldn't connect to 'https://huggingface.co' to load the files, and couldn't "
                    "find them in the cached files. Check your internet connection or see how to run the library "
                    "in offline mode at 'https://huggingface.co/docs/transformers/installation#offline-mode'.")


def model_dir_problem(model: str, tokenizer_mode: str, config_format: str = "auto") -> list[str] | None:
    """What the engine would say about `model` before touching weights (None: fine)."""
    if not os.path.isdir(model):
        if model.startswith(("/", "./", "../", "~")):
            return [f"huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or "
                    f"'namespace/repo_name': '{model}'. Use `repo_type` argument if needed."]
        return [AUTOCONFIG_ERROR]
    has_config = os.path.isfile(os.path.join(model, "config.json"))
    has_params = os.path.isfile(os.path.join(model, "params.json"))
    if config_format == "hf" and not has_config:
        return [f"OSError: {model} does not appear to have a file named config.json. Checkout "
                f"'https://huggingface.co/{model}/tree/None' for available files."]
    if config_format == "mistral" and not has_params:
        return [f"ValueError: Could not find params.json in {model} (--config-format mistral)."]
    if not has_config and not has_params:
        return [f"ValueError: Invalid repository ID or local directory specified: '{model}'. Please verify the "
                "following requirements: 1. Provide a valid Hugging Face repository ID. 2. Specify a local "
                "directory that contains a recognized configuration file (config.json for Hugging Face "
                "format, params.json for Mistral format)."]
    if tokenizer_mode == "mistral":
        names = os.listdir(model)
        if "tekken.json" not in names and not any(n.startswith("tokenizer.model") for n in names):
            return [f"OSError: No Mistral tokenizer (tekken.json or tokenizer.model.*) found in {model}."]
    elif not has_config:
        # AutoTokenizer -> AutoConfig on a checkpoint without config.json (the bring-up report)
        return [AUTOCONFIG_ERROR]
    return None


class RankBase:
    """Lifecycle of one stand-in rank. Subclasses implement `_run` and the log formats."""

    engine = "?"

    def __init__(self, node_rank: int):
        self.node_rank = node_rank
        self.rt = Runtime(node_rank)
        self.faults = Faults(node_rank)
        self.group: Group | None = None
        self.http = None
        self.t0 = time.monotonic()

    # subclasses -----------------------------------------------------------------------------
    def _run(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def info(self, msg: str, scope=None) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def shutdown_lines(self) -> list[str]:
        return []

    def on_shutdown(self) -> None:
        """SIGTERM/SIGINT: print the engine's shutdown lines (an engine may also take its time)."""
        for line in self.shutdown_lines():
            emit(line)

    def render_fault(self, phase: str) -> list[str]:
        """The output of an injected fault (engines wrap it in their error format)."""
        return self.faults.fault_lines(phase)

    def at(self, phase: str) -> None:
        """The rank reaches `phase`: injected faults and hangs fire here."""
        if self.faults.fault_here(phase):
            raise Fatal(self.render_fault(phase))
        if self.faults.hang_here(phase):
            emit(f"[lanekit stand-in] rank {self.node_rank} stops making progress at phase '{phase}' "
                 "(STANDIN_HANG_PHASE)", sys.stderr)
            self.rt.hang()

    # lifecycle -----------------------------------------------------------------------------
    def run(self) -> int:
        self.rt.install_signals()
        try:
            return self._run()
        except Fatal as f:
            for line in f.lines:
                emit(line)
            self._cleanup(send_shutdown=f.code == 0)
            return f.code
        except Shutdown:
            self.on_shutdown()
            self._cleanup(send_shutdown=True)
            return 0
        except KeyboardInterrupt:
            self._cleanup(send_shutdown=True)
            return 0

    def _cleanup(self, send_shutdown: bool) -> None:
        if self.http is not None:
            try:
                threading.Thread(target=self.http.shutdown, daemon=True).start()
                self.http.server_close()
            except Exception:  # noqa: BLE001
                pass
        if self.group is not None:
            self.group.close(send_shutdown=send_shutdown)

    def banner(self, scope=None) -> None:
        self.info(f"{STANDIN_LABEL}: this process mimics {self.engine}'s command line, multi-node "
                  "rendezvous, weight reads and OpenAI API for tests; it runs no model and its answers "
                  "are fixed text.", scope)

    # weights -------------------------------------------------------------------------------
    def read_weights(self, model: str, load_format: str, share_index: int, share_count: int,
                     progress_prefix: str | None, on_missing) -> tuple[float, int, int]:
        """Read this rank's share of the shards; returns (seconds, bytes read, total shard bytes).
        `progress_prefix` not None: print vLLM-style tqdm lines with that prefix."""
        shards = find_shards(model, load_format)
        if not shards:
            raise Fatal(on_missing(f"RuntimeError: Cannot find any model weights with `{model}`"))
        try:
            plans = plan(shards, share_index, share_count)
        except CheckpointError as exc:
            raise Fatal(on_missing(str(exc))) from None
        total_bytes = sum(p.size for p in plans)
        hang = self.faults.hang_here("load")
        hang_after = max(0, min(len(plans), int(env_float("STANDIN_HANG_AFTER_SHARDS", len(plans) // 2))))
        if self.faults.fault_here("load"):
            raise Fatal(self.render_fault("load"))
        reader = Reader(self.rt.check)
        start = time.monotonic()
        desc = "Loading safetensors checkpoint shards"
        if progress_prefix is not None:
            emit(progress_prefix + tqdm_line(desc, 0, len(plans), 0.0))
        for i, sp in enumerate(plans):
            if hang and i == hang_after:
                emit(f"[lanekit stand-in] rank {self.node_rank} stops making progress while loading "
                     f"(STANDIN_HANG_PHASE=load, after {i}/{len(plans)} shards)", stream=sys.stderr)
                self.rt.hang()
            try:
                reader.read(sp, self.rt.sleep)
            except CheckpointError as exc:
                raise Fatal(on_missing(str(exc))) from None
            if progress_prefix is not None:
                emit(progress_prefix + tqdm_line(desc, i + 1, len(plans), time.monotonic() - start))
        if hang and hang_after >= len(plans):
            self.rt.hang()
        return time.monotonic() - start, reader.total, total_bytes

    # rendezvous ----------------------------------------------------------------------------
    def make_group(self, *, nnodes: int, addr: str, port: int, fingerprint: dict) -> Group:
        self.group = Group(self.rt, rank=self.node_rank, nnodes=nnodes, addr=addr, port=port,
                           fingerprint=fingerprint, on_peer_lost=self.on_peer_lost,
                           on_head_gone=self.on_head_gone)
        self.group.on_abort = self.on_abort
        return self.group

    def on_peer_lost(self, rank: int, peer: str) -> None:  # head: a rank died after the world formed
        reason = f"node rank {rank} ({peer}) went away"
        if self.group is not None:
            self.group.abort_all(reason)
        self.rt.fail(self.peer_lost_lines(rank, peer))

    def on_head_gone(self) -> None:  # worker: the head's connection closed
        if self.group is not None and self.group.shutdown_requested:
            self.rt.fail(self.head_shutdown_lines(), 0)
        elif self.rt.term_signals:
            self.rt.fail([], 0)
        else:
            self.rt.fail(self.head_gone_lines())

    def on_abort(self, reason: str) -> None:
        self.rt.fail(self.abort_lines(reason))

    def peer_lost_lines(self, rank, peer):  # pragma: no cover - overridden
        return [f"RuntimeError: node rank {rank} ({peer}) went away"]

    def head_gone_lines(self):  # pragma: no cover - overridden
        return ["RuntimeError: node rank 0 went away"]

    def head_shutdown_lines(self):
        return []

    def abort_lines(self, reason):  # pragma: no cover - overridden
        return [f"RuntimeError: {reason}"]


def served_host(host: str | None) -> str:
    return host if host else "0.0.0.0"


def fmt_gib(x: float) -> str:
    return f"{x:.2f}"


__all__ = ["RankBase", "model_dir_problem", "served_host", "fmt_gib", "GiB", "env_str"]
