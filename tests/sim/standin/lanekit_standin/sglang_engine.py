"""Stand-in for `sglang serve` / `python3 -m sglang.launch_server` (SGLang 0.5.23). A TEST INSTRUMENT.

One process per node: `--tp N --nnodes N --node-rank r --dist-init-addr HEAD:PORT`. The head
(node rank 0) serves the API: connection refused until every rank loaded and captured, then
`/health` 503 during warm-up, then 200 and "The server is fired up and ready to roll!". Worker
ranks start a dummy health server on --host:--port after their load. The post-load barrier is
`sglang.srt.model_executor.model_runner_components.load_model_utils.dist_barrier_after_load`,
whose timeout is that module's UNBALANCED_MODEL_LOADING_TIMEOUT_S (patchable).
"""
from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time
import urllib.request

from . import SGLANG_VERSION
from . import flags as F
from .common import Fatal, GiB, emit, phase_seconds
from .engine_base import RankBase, model_dir_problem, served_host
from .group import BarrierTimeout, GroupAborted, RendezvousTimeout
from .http_api import ApiState, bind, handler_for, make_server, start
from .memory import Device, claim
from .weights import derived_max_len, model_params

LOAD_MODEL_UTILS = "sglang.srt.model_executor.model_runner_components.load_model_utils"


def _ts() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


class SglangRank(RankBase):
    engine = "SGLang"

    def __init__(self, args, model: str, entry: str):
        a = args
        self.args = a
        self.model = model
        self.entry = entry
        self.tp = a.tp_size or 1
        self.pp = a.pp_size or 1
        self.nnodes = a.nnodes or 1
        super().__init__(a.node_rank or 0)
        self.local = max(1, (self.tp * self.pp) // max(1, self.nnodes))
        g = self.node_rank * self.local
        self.tp_rank, self.pp_rank = g % self.tp, (g // self.tp) % self.pp
        self.scope = f"PP{self.pp_rank} TP{self.tp_rank}" if self.pp > 1 else f"TP{self.tp_rank}"
        self.is_head = self.node_rank == 0
        self.dist_timeout = a.dist_timeout or 600
        self.watchdog = a.watchdog_timeout if a.watchdog_timeout is not None else 300.0
        self.host = a.host or "127.0.0.1"
        self.port = a.port if a.port is not None else 30000
        self.served_name = a.served_model_name or model
        self.rt.defer_term = not self.is_head   # workers wait for rank 0's ShutdownReq

    # ---- log format: "[YYYY-MM-DD HH:MM:SS TP0] message" ------------------------------------
    def line(self, msg: str, scope=None) -> str:
        return f"[{_ts()} {scope}] {msg}" if scope else f"[{_ts()}] {msg}"

    def log(self, msg: str, scope: str | None = "") -> None:
        emit(self.line(msg, self.scope if scope == "" else scope))

    def info(self, msg: str, scope=None) -> None:
        emit(self.line(msg, scope))

    def exc_lines(self, exc_line: str, scheduler: bool = True) -> list[str]:
        head = (self.line("Scheduler hit an exception: Traceback (most recent call last):", self.scope)
                if scheduler else "Traceback (most recent call last):")
        lines = [head, '  File "<lanekit stand-in>", line 1, in <module>', exc_line]
        if scheduler and self.is_head:
            lines.append(self.line("Received sigquit from a child process. It usually means the child failed."))
        return lines

    def render_fault(self, phase):
        return self.exc_lines(self.faults.fault_lines(phase)[-1])

    def tp_ranks_of(self, node_ranks):
        return [r * self.local + i for r in node_ranks for i in range(self.local)]

    # ---- group failures ------------------------------------------------------------------
    def peer_lost_lines(self, rank, peer):
        return self.exc_lines(f"RuntimeError: TP rank(s) {', '.join(map(str, self.tp_ranks_of([rank])))} on node "
                              f"rank {rank} ({peer}) went away; the TP group is broken.")

    def head_gone_lines(self):
        return self.exc_lines(f"RuntimeError: Connection to node rank 0 ({self.args.dist_init_addr}) was closed "
                              "without a ShutdownReq; the TP group is broken.")

    def head_shutdown_lines(self):
        return [self.line("Received ShutdownReq from rank 0; exiting.", self.scope)]

    def abort_lines(self, reason):
        return self.exc_lines(f"RuntimeError: {reason}")

    def shutdown_lines(self):
        return [self.line("Received SIGTERM; shutting down.", None if self.is_head else self.scope)]

    # ---- validation ----------------------------------------------------------------------
    def validate(self) -> None:
        a = self.args
        err = None
        if not 0 <= self.node_rank < self.nnodes:
            err = f"ValueError: node_rank ({self.node_rank}) must be in [0, nnodes={self.nnodes})."
        elif (self.tp * self.pp) % self.nnodes:
            err = (f"ValueError: tp_size * pp_size ({self.tp * self.pp}) must be divisible by nnodes "
                   f"({self.nnodes}).")
        elif self.nnodes > 1 and not a.dist_init_addr:
            err = "ValueError: (lanekit stand-in check) --dist-init-addr HOST:PORT is required when --nnodes > 1."
        elif a.mem_fraction_static is not None and not 0 < a.mem_fraction_static < 1:
            err = f"ValueError: mem_fraction_static must be in (0, 1), got {a.mem_fraction_static}."
        if err is None and a.dist_init_addr:
            host, sep, port = a.dist_init_addr.rpartition(":")
            if not sep or not port.isdigit() or not host:
                err = (f"ValueError: --dist-init-addr must be HOST:PORT (e.g. 192.168.0.2:25000), got "
                       f"'{a.dist_init_addr}'.")
            else:
                self.rdzv_addr, self.rdzv_port = host.strip("[]"), int(port)
        if err is None:
            problem = model_dir_problem(self.model, a.tokenizer_mode or "auto")
            if problem:
                err = problem[-1]
        if err is None:
            self.params = model_params(self.model)
            self.derived_len = derived_max_len(self.params)
            if (a.context_length and a.context_length > self.derived_len
                    and os.environ.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "0") not in ("1", "true")):
                err = (f"ValueError: User-specified context_length ({a.context_length}) is greater than the derived "
                       f"context_length ({self.derived_len}). This may lead to incorrect model outputs or CUDA "
                       "errors. To allow overriding this maximum, set the env var "
                       "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")
        if err:
            raise Fatal(self.exc_lines(err, scheduler=False))

    # ---- the run --------------------------------------------------------------------------
    def _run(self) -> int:
        a = self.args
        self.banner()
        if self.entry == "launch_server":
            self.info("WARNING: 'python -m sglang.launch_server' is still supported, but 'sglang serve' is the "
                      "recommended entrypoint.")
        shown = {k: v for k, v in F.non_default(a).items() if k != "model_positional"}
        shown["model_path"] = self.model
        self.info("server_args=ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")")
        self.validate()
        if not self.is_head:
            threading.Thread(target=self._term_watch, name="sigterm-watch", daemon=True).start()

        # rendezvous ------------------------------------------------------------------------
        self.log("Init torch distributed begin.")
        self.at("rendezvous")
        self.rendezvous()
        self.log("Init torch distributed ends. mem usage=0.00 GB")

        # load ------------------------------------------------------------------------------
        dev = Device.from_env()
        self.log(f"Load weight begin. avail mem={dev.free_gib:.2f} GB")
        load_format = a.load_format or "auto"
        if load_format == "dummy":
            self.at("load")
        else:
            self.read_weights(self.model, "mistral" if load_format == "mistral" else "auto", self.node_rank,
                              self.nnodes, "" if self.is_head else None,
                              self.exc_lines)
        after = dev.free_gib - dev.weights_gib
        self.log(f"Load weight end. type={self.architecture()}, dtype=torch.bfloat16, avail mem={after:.2f} GB, "
                 f"mem usage={dev.weights_gib:.2f} GB.")

        # barrier: the post-load monitored barrier of load_model_utils ------------------------
        self.at("barrier")
        self.post_load_barrier()

        # profile: memory pool --------------------------------------------------------------
        self.at("profile")
        self.rt.sleep(phase_seconds())
        mfs = a.mem_fraction_static if a.mem_fraction_static is not None else 0.8
        rest = after - dev.total_gib * (1 - mfs)
        if rest <= 0:
            raise Fatal(self.exc_lines("RuntimeError: Not enough memory. Please try to increase "
                                       "--mem-fraction-static."))
        claim(dev.total_gib * mfs)
        tokens = int(rest * GiB // dev.kv_bytes_per_token)
        if a.max_total_tokens:
            tokens = min(tokens, a.max_total_tokens)
        self.log(f"KV Cache is allocated. #tokens: {tokens}, KV size: {rest:.2f} GB")
        pool_avail = after - rest
        self.log(f"Memory pool end. avail mem={pool_avail:.2f} GB")
        self.collective("profile", self.dist_timeout)

        # capture ---------------------------------------------------------------------------
        self.at("capture")
        graph = 0.0 if a.disable_cuda_graph else dev.graph_gib
        t = time.monotonic()
        if not a.disable_cuda_graph:
            self.log(f"Capture cuda graph begin. This can take up to several minutes. avail mem={pool_avail:.2f} GB")
            self.rt.sleep(phase_seconds())
            self.log(f"Capture cuda graph end. Time elapsed: {time.monotonic() - t:.2f} s. mem usage={graph:.2f} GB. "
                     f"avail mem={pool_avail - graph:.2f} GB.")
        context_len = a.context_length or self.derived_len
        if self.is_head:
            self.log(f"max_total_num_tokens={tokens}, chunked_prefill_size={a.chunked_prefill_size or 8192}, "
                     f"max_prefill_tokens={a.max_prefill_tokens or 16384}, max_running_requests="
                     f"{a.max_running_requests or 2048}, context_len={context_len}, "
                     f"available_gpu_mem={pool_avail - graph:.2f} GB")
        self.collective("capture", self.dist_timeout)

        # HTTP: head API (503 until warm) or worker dummy health server ----------------------
        self.start_http(context_len)

        # warmup ----------------------------------------------------------------------------
        self.at("warmup")
        self.rt.sleep(phase_seconds())
        if self.is_head and not a.skip_server_warmup:
            self.self_warmup()
        self.collective("warmup", self.watchdog, watchdog=True)
        if self.is_head:
            self.state.ready = True
            self.info("The server is fired up and ready to roll!")

        # serve -----------------------------------------------------------------------------
        if self.faults.fault_here("serve"):
            raise Fatal(self.render_fault("serve"))
        if self.faults.hang_here("serve"):
            emit(f"[lanekit stand-in] rank {self.node_rank} stops making progress at phase 'serve' "
                 "(STANDIN_HANG_PHASE): requests will not complete", sys.stderr)
            if self.is_head:
                self.state.hang_requests = True
        group = self.group
        self.rt.wait_for(lambda: group is not None and group.shutdown_requested, None)
        for line in self.head_shutdown_lines():
            emit(line)
        return 0

    # ---- pieces --------------------------------------------------------------------------
    def architecture(self) -> str:
        archs = self.params.get("architectures")
        if isinstance(archs, list) and archs:
            return str(archs[0])
        return "MistralForCausalLM" if os.path.isfile(os.path.join(self.model, "params.json")) else "LlamaForCausalLM"

    def _term_watch(self):
        """SGLang workers: SIGTERM only logs and waits for the rank-0 ShutdownReq broadcast."""
        logged = False
        while True:
            time.sleep(0.1)
            if not self.rt.term_signals or not self.rt.defer_term:
                continue
            g = self.group
            if g is None or g._head is None or g.head_gone:  # noqa: SLF001 - no rank 0 to wait for
                self.rt.defer_term = False
                self.rt.notify()
                return
            if not logged:
                logged = True
                emit(self.line("Received SIGTERM on a non-zero-rank node; ignoring it and waiting for the rank-0 "
                               "ShutdownReq broadcast.", self.scope))

    def rendezvous(self):
        if self.nnodes <= 1:
            return
        fp = {"model": self.model, "tp_size": self.tp, "pp_size": self.pp, "engine": "sglang"}
        group = self.make_group(nnodes=self.nnodes, addr=self.rdzv_addr, port=self.rdzv_port, fingerprint=fp)
        try:
            if self.is_head:
                group.listen()
            group.join(self.dist_timeout)
        except RendezvousTimeout as exc:
            if not exc.connected_to_head:
                msg = (f"torch.distributed.DistNetworkError: The client socket has timed out after "
                       f"{self.dist_timeout * 1000}ms while trying to connect to ({self.rdzv_addr}, "
                       f"{self.rdzv_port}). Missing node ranks: 0 (the head).")
            else:
                msg = (f"torch.distributed.DistStoreError: Timed out after {self.dist_timeout} seconds waiting for "
                       f"clients. {len(exc.joined)}/{exc.nnodes} clients joined. Missing node ranks: "
                       f"{', '.join(map(str, exc.missing))}.")
                if getattr(exc, "dup_reason", None):
                    msg += f" This rank was not admitted: {exc.dup_reason}."
                if self.is_head:
                    group.abort_all(msg)
            raise Fatal(self.exc_lines(msg)) from None
        except GroupAborted as exc:
            raise Fatal(self.exc_lines(f"RuntimeError: {exc.reason}")) from None

    def post_load_barrier(self):
        from . import distshim  # noqa: PLC0415

        distshim.configure(self.group, self.log, self.tp_ranks_of)
        try:
            lmu = importlib.import_module(LOAD_MODEL_UTILS)
        except Exception as exc:  # noqa: BLE001 - a broken patch must show up like it would
            raise Fatal(self.exc_lines(f"{type(exc).__name__}: {exc}")) from None
        try:
            lmu.dist_barrier_after_load(elastic_ep_backend=None, tp_rank=self.tp_rank)
        except ValueError as exc:
            raise Fatal(self.exc_lines(f"ValueError: {exc}")) from None

    def collective(self, name: str, timeout: float, watchdog: bool = False):
        if self.group is None:
            return
        try:
            self.group.barrier(name, timeout)
        except BarrierTimeout as exc:
            who = f" Missing node ranks: {', '.join(map(str, exc.missing))}." if exc.missing else ""
            if watchdog:
                line = (f"RuntimeError: Scheduler watchdog timeout (self.watchdog_timeout={timeout:g}, "
                        f"self.soft=False) during '{name}'.{who}")
            else:
                line = (f"torch.distributed.DistBackendError: [Rank {self.tp_rank}] Watchdog caught collective "
                        f"operation timeout: WorkNCCL(OpType=ALLREDUCE, Timeout(ms)={int(timeout * 1000)}) ran for "
                        f"{int(timeout * 1000)} milliseconds before timing out (after '{name}').{who}")
            raise Fatal(self.exc_lines(line)) from None
        except GroupAborted as exc:
            raise Fatal(self.abort_lines(exc.reason)) from None

    def start_http(self, context_len: int):
        a = self.args
        host = served_host(self.host)
        if self.is_head:
            self.state = ApiState(engine="sglang", version=SGLANG_VERSION, served_names=[self.served_name],
                                  model_path=self.model, max_model_len=context_len,
                                  reasoning_parser=a.reasoning_parser, tool_call_parser=a.tool_call_parser,
                                  auto_tool_choice=True, nnodes=self.nnodes, metrics_enabled=bool(a.enable_metrics),
                                  access_log=lambda line: emit(self.line(line)),
                                  extra_info={"tp_size": self.tp, "architectures": [self.architecture()]})
            self.state.api_key = a.api_key or None  # SGLang takes its key only as --api-key
            handler = handler_for(self.state)
        else:
            self.state = ApiState(engine="sglang", version=SGLANG_VERSION, served_names=[self.served_name],
                                  model_path=self.model, max_model_len=context_len, nnodes=self.nnodes,
                                  metrics_enabled=bool(a.enable_metrics))
            handler = handler_for(self.state, worker_health_only=True)
        server = make_server(host, self.port, handler)
        try:
            bind(server)
        except OSError as exc:
            raise Fatal(self.exc_lines(f"OSError: [Errno {exc.errno}] error while attempting to bind on address "
                                       f"('{host}', {self.port}): {(exc.strerror or '').lower()}")) from None
        self.http = server
        start(server)
        if self.is_head:
            pid = os.getpid()
            for msg in (f"INFO:     Started server process [{pid}]", "INFO:     Waiting for application startup.",
                        "INFO:     Application startup complete.",
                        f"INFO:     Uvicorn running on http://{host}:{self.http.server_port} (Press CTRL+C to quit)"):
                self.info(msg)
        else:
            self.log(f"Dummy health check server started in background thread at {host}:{self.http.server_port}",
                     None)

    def self_warmup(self):
        """Like SGLang's warm-up thread: GET /model_info, then a one-token /generate."""
        host = served_host(self.host)
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        base = f"http://{host if ':' not in host else '[' + host + ']'}:{self.http.server_port}"
        # SGLang's warm-up sends its own --api-key.
        auth = {"Authorization": f"Bearer {self.args.api_key}"} if self.args.api_key else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(base + "/model_info", headers=auth), timeout=10) as r:
                r.read()
            req = urllib.request.Request(base + "/generate", method="POST",
                                         data=json.dumps({"text": "The capital city of France is",
                                                          "sampling_params": {"max_new_tokens": 1}}).encode(),
                                         headers={"Content-Type": "application/json", **auth})
            with urllib.request.urlopen(req, timeout=30) as r:
                r.read()
        except OSError as exc:
            raise Fatal(self.exc_lines(f"RuntimeError: warm-up request to {base} failed: {exc}", scheduler=False)) from None


def main(argv=None, prog: str = "sglang serve", entry: str = "serve") -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = F.sglang_parser(prog, model_positional=(entry == "serve"))
    args = parser.parse_args(argv)
    model = args.model_path or getattr(args, "model_positional", None)
    if getattr(args, "model_positional", None) and args.model_path and args.model_positional != args.model_path:
        parser.error("the model was given twice (positional and --model-path) with different values")
    if not model:
        parser.error("the following arguments are required: --model-path")
    return SglangRank(args, model, entry).run()


if __name__ == "__main__":
    sys.exit(main())
