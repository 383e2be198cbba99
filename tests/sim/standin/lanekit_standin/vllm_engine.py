"""Stand-in for `vllm serve` (vLLM 0.33-era, mp multi-node backend). A TEST INSTRUMENT.

Rank layout: one process per node. `--nnodes N --node-rank r --master-addr A --master-port P`
(ranks > 0 with `--headless`) or multi-node data parallel (`--data-parallel-size`,
`--data-parallel-size-local`, `--data-parallel-start-rank`, `--data-parallel-address`,
`--data-parallel-rpc-port`). The head binds the API port at start and listens only when the
engine is ready (connection refused meanwhile); headless ranks serve no HTTP.
"""
from __future__ import annotations

import os
import sys
import threading
import time

from . import VLLM_VERSION
from . import flags as F
from .common import Fatal, emit, env_float, fmt_thousands, phase_seconds
from .engine_base import RankBase, model_dir_problem, served_host
from .group import BarrierTimeout, GroupAborted, RendezvousTimeout
from .http_api import ApiState, bind, handler_for, load_middlewares, make_server, start
from .memory import Device, claim, fmt2, vllm_budget
from .weights import derived_max_len, fs_type, model_params

# Real vLLM 0.32.0's top-level parser (tests/fixtures/real_vllm/bogus_flag): an unrecognized argument
# of `vllm serve` is reported by it, after its three usage lines, as "vllm: error: ...", exit 2.
SUBCOMMANDS = ("chat", "complete", "serve", "launch", "bench", "collect-env", "download-kernels", "preload",
               "run-batch", "snapshot")
TOP_USAGE = ("usage: vllm [-h] [-v]\n"
             f"            {{{','.join(SUBCOMMANDS)}}}\n"
             "            ...\n")
# The grace a headless rank's executor gives its worker on SIGTERM before it SIGTERMs (5 s) and then
# SIGKILLs it (4 s later); real 0.32.0 exits 0 after 10.4 to 10.7 s (ok, rank0_killed_ready).
HEADLESS_TERM_GRACE_S = 10.5
# What a request gets from a head whose engine core died (real 0.32.0, rank1_killed_ready/http.json).
ENGINE_DEAD_MESSAGE = "EngineCore encountered an issue. See stack trace (above) for the root cause."
GLOO_PAIR = "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553]"


def _ts() -> str:
    return time.strftime("%m-%d %H:%M:%S")


class VllmRank(RankBase):
    engine = "vLLM"

    def __init__(self, args, prog: str):
        a = args
        self.args = a
        self.prog = prog
        self.model = getattr(a, "model_tag", None) or a.model or "Qwen/Qwen3-0.6B"
        self.tp = a.tensor_parallel_size or 1
        self.pp = a.pipeline_parallel_size or 1
        self.pcp = a.prefill_context_parallel_size or 1
        self.dp = a.data_parallel_size or 1
        self.nnodes = a.nnodes or 1
        node_rank = a.node_rank or 0
        self.dp_local = a.data_parallel_size_local
        self.mode = "single"
        self.group_nnodes, self.group_rank = 1, 0
        self.rdzv_addr, self.rdzv_port = a.master_addr or "127.0.0.1", a.master_port or 29501
        if self.nnodes > 1:
            self.mode = "mp"
            self.group_nnodes, self.group_rank = self.nnodes, node_rank
        elif self.dp > 1 and self.dp_local and self.dp_local < self.dp:
            self.mode = "dp"
            self.group_nnodes = max(1, self.dp // self.dp_local)
            self.group_rank = (a.data_parallel_start_rank or 0) // self.dp_local
            self.rdzv_addr = a.data_parallel_address or a.master_addr or "127.0.0.1"
            self.rdzv_port = a.data_parallel_rpc_port or 29550
        super().__init__(self.group_rank)
        self.world = self.tp * self.pp * self.pcp
        self.local_world = max(1, (self.world * (self.dp if self.mode == "mp" else 1)) // max(1, self.nnodes))
        g = self.group_rank * self.local_world if self.mode == "mp" else 0
        self.tp_rank, self.pp_rank = g % self.tp, (g // self.tp) % self.pp
        if self.mode == "dp":
            self.dp_rank = (a.data_parallel_start_rank or 0)
        else:
            self.dp_rank = 0
        self.headless = bool(a.headless)
        self.hybrid = self.mode == "dp" and not self.headless and self.group_rank > 0
        self.serves_http = not self.headless
        self.is_head = self.group_rank == 0
        self.dist_timeout = a.distributed_timeout_seconds or 600
        self.served_names = a.served_model_name or [self.model]
        self.worker_proc = (f"Worker_PP{self.pp_rank}_TP{self.tp_rank}" if self.pp > 1 else f"Worker_TP{self.tp_rank}")
        if self.mode == "dp":
            self.worker_proc = f"Worker_DP{self.dp_rank}_TP0"
        # Real 0.32.0: "EngineCore" in a TP-only run; the "_DP<n>" suffix with data parallelism.
        self.core_proc = f"EngineCore_DP{self.dp_rank}" if self.dp > 1 else "EngineCore"
        self.main_proc = "MainProcess"
        self.state = None
        self.lost_peer: tuple[int, str] | None = None
        self.api_proc = "APIServer"
        self.ready = False

    # ---- log format: "(Proc pid=N) LEVEL MM-DD HH:MM:SS [file.py:line] message" ---------------
    def fmt(self, level: str, src: str, msg: str, proc: str | None = None) -> str:
        prefix = f"({proc} pid={os.getpid()}) " if proc else ""
        return f"{prefix}{level} {_ts()} [{src}] {msg}"

    def log(self, src: str, msg: str, proc: str | None = None, level: str = "INFO") -> None:
        emit(self.fmt(level, src, msg, proc))

    def info(self, msg: str, scope=None) -> None:
        self.log("standin.py:1", msg, scope, "WARNING")

    def error_lines(self, proc, src, context, exc_lines):
        return [self.fmt("ERROR", src, context, proc), "Traceback (most recent call last):",
                '  File "<lanekit stand-in>", line 1, in <module>', *exc_lines]

    def config_error(self, exc_line: str) -> Fatal:
        proc = self.api_proc if self.serves_http and self.is_head else None
        return Fatal(self.error_lines(proc, "arg_utils.py:1750", "Error in engine configuration.", [exc_line]))

    # ---- failures in the group ------------------------------------------------------------
    def _gloo_closed(self, peer: str) -> str:
        host, _sep, port = peer.rpartition(":")
        return (f"{GLOO_PAIR} Connection closed by peer [{host}]:{port}. This is typically caused by a remote "
                "worker crashing. Check the logs of the remote worker before reporting an error. GLHF!")

    def on_peer_lost(self, rank: int, peer: str) -> None:
        if self.mode != "mp":
            return super().on_peer_lost(rank, peer)
        # Real 0.32.0: a rank lost after the group formed is not noticed while the engine idles; the
        # next collective (the next request) fails. During the boot the next barrier fails at once.
        if self.ready:
            self.lost_peer = (rank, peer)
            if self.state is not None:
                self.state.engine_failure = self.request_fails
            return None
        self.rt.fail(self.boot_peer_lost_lines(peer))
        return None

    def boot_peer_lost_lines(self, peer: str) -> list[str]:
        """The head's lines when a rank dies during the boot (real 0.32.0, rank1_killed_boot)."""
        w, c = self.worker_proc, self.core_proc
        lines = [self.fmt("ERROR", "multiproc_executor.py:953", "WorkerProc failed to start.", w),
                 self.fmt("ERROR", "multiproc_executor.py:953", "Traceback (most recent call last):", w),
                 self.fmt("ERROR", "multiproc_executor.py:953", '  File "<lanekit stand-in>", line 1, in <module>', w),
                 self.fmt("ERROR", "multiproc_executor.py:953", f"RuntimeError: {self._gloo_closed(peer)}", w),
                 self.fmt("INFO", "multiproc_executor.py:479", "[shutdown] Executor: waiting for worker exit count=1", c),
                 self.fmt("INFO", "multiproc_executor.py:486", "[shutdown] Executor: all workers exited gracefully", c),
                 self.fmt("ERROR", "core.py:1510", "EngineCore failed to start.", c),
                 self.fmt("ERROR", "core.py:1510", "Traceback (most recent call last):", c),
                 self.fmt("ERROR", "core.py:1510", "Exception: WorkerProc initialization failed due to an exception "
                          "in a background process. See stack trace for root cause.", c),
                 "Traceback (most recent call last):",
                 '  File "<lanekit stand-in>", line 1, in <module>',
                 "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): "
                 "{'EngineCore': 1}"]
        return lines

    def request_fails(self) -> None:
        """A request reaches an engine that lost a rank (real 0.32.0, rank1_killed_ready): its lines."""
        _rank, peer = self.lost_peer or (1, "0.0.0.0:0")
        w, c, a = self.worker_proc, self.core_proc, self.api_proc
        closed = self._gloo_closed(peer)
        for line in (
                self.fmt("ERROR", "multiproc_executor.py:1063", "WorkerProc hit an exception.", w),
                self.fmt("ERROR", "multiproc_executor.py:1063", "Traceback (most recent call last):", w),
                self.fmt("ERROR", "multiproc_executor.py:1063", '  File "<lanekit stand-in>", line 1, in <module>', w),
                self.fmt("ERROR", "multiproc_executor.py:1063", f"RuntimeError: {closed}", w),
                self.fmt("ERROR", "core.py:1512", "EngineCore encountered a fatal error.", c),
                self.fmt("ERROR", "core.py:1512", "Traceback (most recent call last):", c),
                self.fmt("ERROR", "core.py:1512", f"RuntimeError: Worker failed with error '{closed}', please check "
                         "the stack trace above for the root cause", c),
                self.fmt("ERROR", "async_llm.py:906", "AsyncLLM output_handler failed.", a),
                self.fmt("ERROR", "async_llm.py:906", "Traceback (most recent call last):", a),
                self.fmt("ERROR", "async_llm.py:906", "vllm.v1.engine.exceptions.EngineDeadError: "
                         + ENGINE_DEAD_MESSAGE, a),
                self.fmt("INFO", "multiproc_executor.py:479", "[shutdown] Executor: waiting for worker exit count=1", c)):
            emit(line)

    def after_request_failed(self) -> None:
        """The API server shuts down after the failed request and the process exits 0 (real 0.32.0)."""
        self.rt.fail(["INFO:     Shutting down", "INFO:     Waiting for application shutdown.",
                      "INFO:     Application shutdown complete.", f"INFO:     Finished server process [{os.getpid()}]"],
                     0)

    def on_head_gone(self) -> None:
        if self.mode != "mp":
            return super().on_head_gone()
        # Real 0.32.0: a headless rank prints nothing when the head exits or stops, and keeps running.
        return None

    def _cleanup(self, send_shutdown: bool) -> None:
        # Real 0.32.0: the head's shutdown does not stop its headless ranks (no shutdown message).
        super()._cleanup(send_shutdown=send_shutdown and self.mode != "mp")

    def on_shutdown(self) -> None:
        if self.serves_http or self.mode != "mp" or self.is_head:
            return super().on_shutdown()
        # A headless rank's executor waits for its worker, SIGTERMs it after 5 s, SIGKILLs it 4 s later
        # and exits 0 (real 0.32.0: 10.4 to 10.7 s in all). STANDIN_VLLM_TERM_GRACE_S scales it.
        grace = max(0.0, env_float("STANDIN_VLLM_TERM_GRACE_S", HEADLESS_TERM_GRACE_S))
        m, w = self.main_proc, self.worker_proc
        emit(self.fmt("INFO", "multiproc_executor.py:479", "[shutdown] Executor: waiting for worker exit count=1", m))
        emit(self.fmt("INFO", "multiproc_executor.py:843", "Parent process exited, terminating worker queues", w))
        time.sleep(grace * 5 / 10.5)
        emit(self.fmt("WARNING", "multiproc_executor.py:491", "[shutdown] Executor: workers still running after "
                      "grace period; sending SIGTERM count=1", m))
        time.sleep(grace * 4 / 10.5)
        emit(self.fmt("WARNING", "multiproc_executor.py:501", "[shutdown] Executor: workers still running after "
                      "SIGTERM; sending SIGKILL count=1", m))
        time.sleep(grace * 1.5 / 10.5)

    def peer_lost_lines(self, rank, peer):
        return self.error_lines(self.core_proc, "multiproc_executor.py:183",
                                f"Worker proc on node rank {rank} ({peer}) died unexpectedly, shutting down "
                                "executor.",
                                [f"RuntimeError: Engine core failed: the worker on node rank {rank} ({peer}) "
                                 "went away."])

    def head_gone_lines(self):
        return self.error_lines(self.worker_proc, "multiproc_executor.py:690",
                                "WorkerProc hit an exception.",
                                [f"RuntimeError: Connection to the head node ({self.rdzv_addr}:{self.rdzv_port}, "
                                 "node rank 0) was closed; torch.distributed process group is gone."])

    def head_shutdown_lines(self):
        return [self.fmt("INFO", "multiproc_executor.py:702", "Head node shut down; worker exiting.", self.worker_proc)]

    def abort_lines(self, reason):
        return self.error_lines(self.worker_proc, "multiproc_executor.py:690", "WorkerProc hit an exception.",
                                [f"RuntimeError: {reason}"])

    def shutdown_lines(self):
        if self.serves_http:
            # Real 0.32.0 on SIGTERM (ok/rank0.log), EngineDeadError traceback included; exit 0.
            a, c = self.api_proc, self.core_proc
            return [
                self.fmt("INFO", "launcher.py:254", "[shutdown] API server: shutdown triggered", a),
                self.fmt("INFO", "launcher.py:270", "[shutdown] API server: stopping engine client mode=abort "
                         "timeout=0s", a),
                self.fmt("INFO", "core_client.py:770", "[shutdown] MPClient: start timeout=0s", a),
                self.fmt("INFO", "core_client.py:772", "[shutdown] MPClient: stopping engine manager", a),
                self.fmt("INFO", "utils.py:628", f"[shutdown] Process manager: send sigterm to process {c}", a),
                self.fmt("INFO", "core.py:1454", "[shutdown] EngineCore: trigger received signal=SIGTERM", c),
                self.fmt("INFO", "core.py:1635", "[shutdown] EngineCore: start mode=abort timeout=0s", c),
                self.fmt("INFO", "core.py:1499", "[shutdown] EngineCore: exiting busy loop", c),
                self.fmt("INFO", "multiproc_executor.py:479", "[shutdown] Executor: waiting for worker exit count=1", c),
                self.fmt("INFO", "core_client.py:774", "[shutdown] MPClient: engine manager stopped", a),
                self.fmt("INFO", "core_client.py:777", "[shutdown] MPClient: complete", a),
                self.fmt("ERROR", "async_llm.py:906", "AsyncLLM output_handler failed.", a),
                self.fmt("ERROR", "async_llm.py:906", "Traceback (most recent call last):", a),
                self.fmt("ERROR", "async_llm.py:906", "vllm.v1.engine.exceptions.EngineDeadError: "
                         + ENGINE_DEAD_MESSAGE, a),
                self.fmt("INFO", "launcher.py:279", "[shutdown] API server: engine client stopped", a),
                self.fmt("INFO", "launcher.py:282", "[shutdown] API server: signalling HTTP server shutdown", a),
                self.fmt("INFO", "launcher.py:304", "[shutdown] API server: shutting down FastAPI HTTP server", a),
                "INFO:     Shutting down", "INFO:     Waiting for application shutdown.",
                "INFO:     Application shutdown complete."]
        if self.mode == "mp":
            return []  # on_shutdown prints the headless rank's lines, over its grace
        return [self.fmt("INFO", "multiproc_executor.py:702", "Received SIGTERM; worker exiting.", self.worker_proc)]

    # ---- validation (vLLM's own checks) ---------------------------------------------------
    def validate(self) -> None:
        a = self.args
        if self.mode == "mp":
            if not 0 <= self.group_rank < self.nnodes:
                raise self.config_error(f"ValueError: node_rank ({self.group_rank}) must be in [0, nnodes="
                                        f"{self.nnodes}).")
            if a.distributed_executor_backend == "ray":
                raise self.config_error("ValueError: nnodes > 1 can only be set when distributed executor backend "
                                        "is mp, uni or external_launcher.")
            if (self.world * self.dp) % self.nnodes:
                raise self.config_error(f"ValueError: world_size ({self.world * self.dp}) = dp * pp * tp * pcp "
                                        f"must be divisible by nnodes ({self.nnodes}).")
            if self.group_rank > 0 and not self.headless and self.dp == 1:
                raise self.config_error("ValueError: (lanekit stand-in check) --node-rank > 0 of a multi-node "
                                        "TP/PP group must run with --headless.")
        if self.headless and a.api_server_count and a.api_server_count > 0:
            raise self.config_error("ValueError: --api-server-count cannot be used with --headless.")
        if a.data_parallel_hybrid_lb and a.data_parallel_external_lb:
            raise self.config_error("ValueError: data_parallel_hybrid_lb and data_parallel_external_lb cannot "
                                    "both be True.")
        if a.enable_auto_tool_choice and not a.tool_call_parser:
            raise self.config_error("TypeError: Error: --enable-auto-tool-choice requires --tool-call-parser")
        if a.tool_call_parser and a.tool_call_parser not in F.VLLM_TOOL_PARSERS and not a.tool_parser_plugin:
            raise self.config_error(f"KeyError: 'invalid tool call parser: {a.tool_call_parser} (chose from "
                                    f"{{ {','.join(F.VLLM_TOOL_PARSERS)} }})'")
        if a.speculative_config is not None and not isinstance(a.speculative_config, dict):
            raise self.config_error("ValueError: --speculative-config must be a JSON object.")
        if a.gpu_memory_utilization is not None and not 0 < a.gpu_memory_utilization <= 1:
            raise self.config_error(f"ValueError: GPU memory utilization must be within (0, 1]. Got "
                                    f"{a.gpu_memory_utilization}.")
        problem = model_dir_problem(self.model, a.tokenizer_mode or "auto", a.config_format or "auto")
        if problem:
            raise self.config_error(problem[-1])
        self.params = model_params(self.model)
        self.derived_len = derived_max_len(self.params)
        mml = a.max_model_len
        if mml is not None and mml > 0 and mml > self.derived_len and os.environ.get(
                "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "0") not in ("1", "true", "True"):
            raise self.config_error(
                f"ValueError: User-specified max_model_len ({mml}) is greater than the derived max_model_len "
                f"(max_position_embeddings={self.derived_len} in model's config). To allow overriding this "
                "maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.")

    # ---- the run --------------------------------------------------------------------------
    def _run(self) -> int:
        a = self.args
        head_http = self.serves_http
        main = self.api_proc if head_http else self.main_proc
        self.banner(main)
        if head_http:
            # Real 0.32.0 prints an ASCII banner carrying the version and the model (api_utils.py:347),
            # not a "vLLM API server version" line; the version keeps its "+lanekit.standin" label.
            for art in ("", "       █     █     █▄   ▄█",
                        f" ▄▄ ▄█ █     █     █ ▀▄▀ █  version {VLLM_VERSION}",
                        f"  █▄█▀ █     █     █     █  model   {self.model}",
                        "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀", ""):
                self.log("api_utils.py:347", art, self.api_proc)
            self.log("api_utils.py:286", f"non-default args: {self.non_default_args()}", self.api_proc)
        elif self.mode != "mp":
            self.log("serve.py:211", f"Launching {self.dp_local or 1} data parallel engine(s) in headless "
                     f"mode, with head node address {self.rdzv_addr}.")
            self.log("utils.py:253", f"non-default args: {self.non_default_args()}")
        self.validate()
        self.log("model.py:733", f"Resolved architecture: {self.architecture()}", main)
        if not head_http and self.mode == "mp":
            self.log("serve.py:224", f"Launching vLLM (v{VLLM_VERSION}) headless multiproc executor, with head "
                     f"node address {self.rdzv_addr}:{self.rdzv_port} for torch.distributed process group.",
                     self.main_proc)
        kv = a.kv_transfer_config if isinstance(a.kv_transfer_config, dict) else None
        if kv:
            # A P/D pool: the role the router relies on (prefill produces KV, decode consumes it).
            self.log("factory.py:64", f"Creating v1 connector with name: {kv.get('kv_connector')} and engine_id: "
                     f"lanekit-standin-{os.getpid()}, kv_role: {kv.get('kv_role')}", self.worker_proc)
        if head_http:
            # bind now, listen when ready: connection refused during the load
            self.state = ApiState(engine="vllm", version=VLLM_VERSION, served_names=self.served_names,
                                  model_path=self.model, max_model_len=0, reasoning_parser=a.reasoning_parser,
                                  tool_call_parser=a.tool_call_parser, auto_tool_choice=bool(a.enable_auto_tool_choice),
                                  nnodes=self.group_nnodes,
                                  # uvicorn's lines carry no process prefix (real 0.32.0)
                                  access_log=None if a.disable_uvicorn_access_log else emit)
            self.state.after_failure = self.after_request_failed
            # vLLM binds --api-key, else VLLM_API_KEY from its environment.
            self.state.api_key = (a.api_key[0] if a.api_key else None) or os.environ.get("VLLM_API_KEY") or None
            # --middleware module.Class, imported and applied to every request as vLLM does.
            self.state.middlewares = load_middlewares(a.middleware)
            host, port = served_host(a.host), a.port if a.port is not None else 8000
            self.http = make_server(host, port, handler_for(self.state))
            try:
                bind(self.http)
            except OSError as exc:
                self.http = None
                raise Fatal([f"({self.api_proc} pid={os.getpid()}) ERROR: [Errno {exc.errno}] error while "
                             f"attempting to bind on address ('{host}', {port}): {(exc.strerror or '').lower()}"]) from None
            self.start_ready_watchdog()
        if self.is_head:
            self.log("core.py:93", f"Initializing a V1 LLM engine (v{VLLM_VERSION}) with config: model='{self.model}', "
                     f"tokenizer_mode={a.tokenizer_mode or 'auto'}, load_format={a.load_format or 'auto'}, "
                     f"tensor_parallel_size={self.tp}, pipeline_parallel_size={self.pp}, data_parallel_size={self.dp}, "
                     f"nnodes={self.nnodes}, node_rank={self.group_rank}, served_model_name={self.served_names[0]}",
                     self.core_proc)

        # rendezvous ------------------------------------------------------------------------
        self.at("rendezvous")
        self.rendezvous()
        gw = self.group_rank * self.local_world if self.mode == "mp" else 0
        self.log("parallel_state.py:2350", f"rank {gw} in world size {self.world * (self.dp if self.mode == 'mp' else 1)} "
                 f"is assigned as DP rank {self.dp_rank}, PP rank {self.pp_rank}, PCP rank 0, TP rank {self.tp_rank}, "
                 f"ETP rank {self.tp_rank}, EP rank {self.tp_rank}, EPLB rank N/A", "Worker")

        # load ------------------------------------------------------------------------------
        dev = Device.from_env()
        gmu = a.gpu_memory_utilization if a.gpu_memory_utilization is not None else 0.9
        if gmu * dev.total_gib > dev.free_gib:
            raise Fatal(self.error_lines(self.worker_proc, "gpu_worker.py:239", "WorkerProc failed to start.", [
                f"ValueError: Free memory on device cuda:0 ({dev.free_gib:.2f}/{dev.total_gib:.2f} GiB) on startup "
                f"is less than desired GPU memory utilization ({gmu}, {gmu * dev.total_gib:.2f} GiB). Decrease GPU "
                "memory utilization or reduce GPU memory used by other processes."]))
        claim(gmu * dev.total_gib)
        self.log("gpu_model_runner.py:2875", f"Starting to load model {self.model}...", self.worker_proc)
        self.load_t0 = time.monotonic()
        share_index, share_count = (self.group_rank, self.group_nnodes) if self.mode == "mp" else (0, 1)
        load_format = a.load_format or "auto"
        if load_format == "dummy":
            self.at("load")
            secs, nread, total = 0.0, 0, 0
        else:
            first = self.is_head
            if first:
                from .weights import find_shards  # noqa: PLC0415
                size = sum(os.path.getsize(p) for p in find_shards(self.model, load_format))
                self.log("weight_utils.py:589", f"Filesystem type for checkpoints: {fs_type(self.model).upper()}. "
                         f"Checkpoint size: {size / (1 << 30):.2f} GiB.", self.worker_proc)
            prefix = "" if first else None  # tqdm's lines carry no process prefix (real 0.32.0)
            secs, nread, total = self.read_weights(self.model, load_format, share_index, share_count, prefix,
                                                   self._load_failure)
        self.log("default_loader.py:314", f"Loading weights took {secs:.2f} seconds", self.worker_proc)
        self.log("gpu_model_runner.py:2935", f"Model loading took {dev.weights_gib:.2f} GiB memory and "
                 f"{time.monotonic() - self.load_t0:.6f} seconds", self.worker_proc)

        # barrier ---------------------------------------------------------------------------
        self.at("barrier")
        self.collective("load")

        # profile (KV budget) ------------------------------------------------------------------
        self.at("profile")
        self.profile_t0 = time.monotonic()
        self.rt.sleep(phase_seconds())
        cc = a.compilation_config if isinstance(a.compilation_config, dict) else {}
        sizes = a.cuda_graph_sizes or cc.get("cudagraph_capture_sizes") or []
        eager = bool(a.enforce_eager) or str(cc.get("cudagraph_mode", "")).upper() == "NONE"
        want_len = a.max_model_len
        if want_len is None:
            want_len = self.derived_len
        elif want_len < 0:
            want_len = None  # auto
        budget = vllm_budget(dev, gmu, want_len, self.derived_len, len(sizes), eager, a.kv_cache_memory_bytes)
        self.log("gpu_worker.py:298", f"Available KV cache memory: {fmt2(budget.available_gib)} GiB", self.worker_proc)
        if budget.error and self.is_head:
            raise Fatal(self.error_lines(self.core_proc, "core.py:843", "EngineCore failed to start.", budget.error)
                        + [self.fmt("ERROR", "core_client.py:600", "Engine core initialization failed. See root "
                                    "cause above. Failed core proc(s): {}", self.api_proc if self.serves_http else None),
                           "RuntimeError: Engine core initialization failed. See root cause above. Failed core "
                           "proc(s): {}"])
        if self.is_head:
            # One line, as real 0.32.0 prints it (its CPU build says "CPU KV cache size"; this simulates a GPU).
            conc = budget.tokens / budget.max_model_len if budget.max_model_len else 0.0
            self.log("kv_cache_utils.py:2327", f"GPU KV cache size: {fmt_thousands(budget.tokens)} tokens, Maximum "
                     f"concurrency for {fmt_thousands(budget.max_model_len)} tokens per request: {conc:.2f}x",
                     self.core_proc)
        self.max_model_len = budget.max_model_len
        self.collective("profile")

        # capture ---------------------------------------------------------------------------
        self.at("capture")
        t = time.monotonic()
        if not eager:
            n = len(sizes) or 67
            self.log("gpu_model_runner.py:3845", f"Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): "
                     f"{n} sizes", self.worker_proc)
            self.rt.sleep(phase_seconds())
            self.log("gpu_model_runner.py:3921", f"Graph capturing finished in {time.monotonic() - t:.0f} secs, "
                     f"took {fmt2(budget.graph_gib)} GiB", self.worker_proc)
        self.collective("capture")

        # warmup ----------------------------------------------------------------------------
        self.at("warmup")
        self.rt.sleep(phase_seconds())
        self.collective("warmup")
        if self.is_head:
            self.log("core.py:402", f"init engine (profile, create kv cache, warmup model) took "
                     f"{time.monotonic() - self.profile_t0:.2f} s", self.core_proc)

        # serve -----------------------------------------------------------------------------
        self.ready = True
        if self.serves_http:
            self.state.max_model_len = self.max_model_len
            host, port = served_host(a.host), self.http.server_port
            self.log("api_server.py:2011", f"Starting vLLM server on http://{host}:{port}", self.api_proc)
            self.log("launcher.py:46", "Available routes are:", self.api_proc)
            for route, methods in (("/health", "GET"), ("/ping", "GET, POST"), ("/load", "GET"),
                                   ("/version", "GET"), ("/metrics", "GET"), ("/v1/models", "GET"),
                                   ("/v1/chat/completions", "POST"), ("/v1/completions", "POST")):
                self.log("launcher.py:54", f"Route: {route}, Methods: {methods}", self.api_proc)
            start(self.http)
            emit(f"INFO:     Started server process [{os.getpid()}]")
            emit("INFO:     Waiting for application startup.")
            emit("INFO:     Application startup complete.")
        # A headless rank prints no ready line at all (real 0.32.0).
        if self.faults.fault_here("serve"):
            raise Fatal(self.render_fault("serve"))
        if self.faults.hang_here("serve"):
            emit(f"[lanekit stand-in] rank {self.node_rank} stops making progress at phase 'serve' "
                 "(STANDIN_HANG_PHASE): requests will not complete", sys.stderr)
            if self.serves_http:
                self.state.hang_requests = True
        group = self.group
        if self.mode == "mp" and not self.is_head:
            # Real 0.32.0: a headless rank runs until it is stopped, whatever its head does.
            self.rt.wait_for(lambda: False, None)
        self.rt.wait_for(lambda: group is not None and group.shutdown_requested, None)
        for line in self.head_shutdown_lines():
            emit(line)
        return 0

    # ---- helpers ------------------------------------------------------------------------------
    def architecture(self) -> str:
        params = model_params(self.model) if os.path.isdir(self.model) else {}
        archs = params.get("architectures")
        if isinstance(archs, list) and archs:
            return str(archs[0])
        return "MistralForCausalLM" if os.path.isfile(os.path.join(self.model, "params.json")) else "LlamaForCausalLM"

    def render_fault(self, phase):
        return [self.fmt("ERROR", "multiproc_executor.py:690", "WorkerProc hit an exception.", self.worker_proc),
                *self.faults.fault_lines(phase)]

    def _load_failure(self, exc_line):
        return self.error_lines(self.worker_proc, "multiproc_executor.py:690", "WorkerProc failed to start.",
                                [exc_line])

    def start_ready_watchdog(self):
        timeout = env_float("VLLM_ENGINE_READY_TIMEOUT_S", 600.0)

        def watch():
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.ready:
                    return
                time.sleep(min(0.5, max(0.01, deadline - time.monotonic())))
            if not self.ready:
                self.rt.fail(self.error_lines(self.api_proc, "core_client.py:612", "Engine core did not become ready.", [
                    "TimeoutError: Timed out waiting for engine core processes to start. This is often caused by "
                    f"slow weight loading for large models. Waited {timeout:.0f}s (configured by "
                    "VLLM_ENGINE_READY_TIMEOUT_S). To increase the timeout, set the environment variable: "
                    "VLLM_ENGINE_READY_TIMEOUT_S=<seconds>"]))

        threading.Thread(target=watch, name="engine-ready-timeout", daemon=True).start()

    def rendezvous(self):
        if self.group_nnodes <= 1:
            return
        fp = {"model": self.model, "tensor_parallel_size": self.tp, "pipeline_parallel_size": self.pp,
              "data_parallel_size": self.dp, "engine": "vllm"}
        group = self.make_group(nnodes=self.group_nnodes, addr=self.rdzv_addr, port=self.rdzv_port, fingerprint=fp)
        proc = self.worker_proc
        try:
            if self.is_head:
                group.listen()
            if self.mode == "mp":
                # Real 0.32.0 prints this and then nothing while the group forms (rank1_late).
                self.log("parallel_state.py:1906", f"world_size={self.world * self.dp} rank="
                         f"{self.group_rank * self.local_world} local_rank=0 distributed_init_method=tcp://"
                         f"{self.rdzv_addr}:{self.rdzv_port} backend=nccl", "Worker")
            group.join(self.dist_timeout)
        except RendezvousTimeout as exc:
            if self.is_head:
                msg = (f"torch.distributed.DistStoreError: Timed out after {self.dist_timeout} seconds waiting for "
                       f"clients. {len(exc.joined)}/{exc.nnodes} clients joined. Missing node ranks: "
                       f"{', '.join(map(str, exc.missing))}.")
                group.abort_all(msg)
            elif not exc.connected_to_head:
                msg = (f"torch.distributed.DistNetworkError: The client socket has timed out after "
                       f"{self.dist_timeout * 1000}ms while trying to connect to ({self.rdzv_addr}, "
                       f"{self.rdzv_port}). Missing node ranks: 0 (the head).")
            else:
                msg = (f"torch.distributed.DistStoreError: Timed out after {self.dist_timeout} seconds waiting for "
                       f"clients. {len(exc.joined)}/{exc.nnodes} clients joined. Missing node ranks: "
                       f"{', '.join(map(str, exc.missing))}.")
                if getattr(exc, "dup_reason", None):
                    msg += f" This rank was not admitted: {exc.dup_reason}."
            raise Fatal(self.error_lines(proc, "multiproc_executor.py:690", "WorkerProc failed to start.", [msg])) from None
        except GroupAborted as exc:
            raise Fatal(self.error_lines(proc, "multiproc_executor.py:690", "WorkerProc failed to start.",
                                         [f"RuntimeError: {exc.reason}"])) from None

    def collective(self, name: str):
        if self.group is None:
            return
        try:
            self.group.barrier(name, self.dist_timeout)
        except BarrierTimeout as exc:
            who = f" Missing node ranks: {', '.join(map(str, exc.missing))}." if exc.missing else ""
            raise Fatal(self.error_lines(self.worker_proc, "ProcessGroupNCCL.cpp:685", "WorkerProc hit an exception.", [
                f"torch.distributed.DistBackendError: [Rank {self.group_rank * self.local_world}] Watchdog caught "
                f"collective operation timeout: WorkNCCL(OpType=ALLREDUCE, Timeout(ms)={self.dist_timeout * 1000}) "
                f"ran for {self.dist_timeout * 1000} milliseconds before timing out (after '{name}').{who}"])) from None
        except GroupAborted as exc:
            if self.mode == "mp" and self.group.head_gone and self.group.abort_reason is None:
                # Real 0.32.0: the head died after the group formed; the headless rank says nothing
                # and keeps running (kv_too_small, rank0_killed_ready) until it is stopped.
                self.rt.wait_for(lambda: False, None)
            raise Fatal(self.abort_lines(exc.reason)) from None

    def non_default_args(self) -> dict:
        """The non-default arguments as vLLM prints them: the API key masked (real 0.32.0)."""
        args = F.non_default(self.args)
        if args.get("api_key"):
            args["api_key"] = "***"
        return args


def main(argv=None, entry: str = "cli") -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if entry == "cli":
        if not argv:
            sys.stderr.write(TOP_USAGE + "vllm: error: a subcommand is required (e.g. `vllm serve MODEL`)\n")
            return 2
        if argv[0] in ("-h", "--help"):
            sys.stdout.write(TOP_USAGE + "\nlanekit STAND-IN for the vLLM CLI (test instrument). Subcommands "
                             "other than `serve` are not implemented.\n")
            return 0
        if argv[0] in ("-v", "--version"):
            print(VLLM_VERSION, flush=True)
            return 0
        if argv[0] != "serve":
            sys.stderr.write(TOP_USAGE + f"vllm: error: argument subparser: invalid choice: '{argv[0]}' (choose "
                             f"from {', '.join(repr(c) for c in SUBCOMMANDS)})\n")
            return 2
        prog, positional, rest = "vllm serve", True, argv[1:]
    else:
        prog, positional, rest = "api_server.py", False, argv
    # argparse reports arguments no subcommand knows from the top-level parser (real 0.32.0).
    parser = F.vllm_parser(prog, positional, top=("vllm", TOP_USAGE) if entry == "cli" else None)
    args = parser.parse_args(F.vllm_preprocess(rest, prog))
    return VllmRank(args, prog).run()


if __name__ == "__main__":  # python3 -m lanekit_standin.vllm_engine serve ...
    sys.exit(main())
