"""Argv handling of the stand-in engines: the seeds' flags parse, wrong ones exit 2 like the
engines (argparse message under the engine's prog name)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from standin_helpers import PKGS, PY, REAL_VLLM, STANDIN, base_env, sglang_cmd, vllm_cmd

sys.path.insert(0, STANDIN)
from lanekit_standin import flags as F  # noqa: E402

# Every flag of the seeds, as the lanes and the recipe render them.
VLLM_LANE = [
    "--config-format", "mistral", "--load-format", "mistral", "--tokenizer-mode", "mistral",
    "--kv-cache-dtype", "fp8_ds_mla", "--dtype", "bfloat16", "--enable-expert-parallel",
    "--enable-prefix-caching", "--mm-processor-cache-gb", "0.0", "--tool-call-parser", "mistral",
    "--reasoning-parser", "mistral", "--enable-auto-tool-choice",
    "--speculative-config", '{"method":"dspark","num_speculative_tokens":3}', "--gpu-memory-utilization", "0.89",
    "--max-model-len", "524288", "--served-model-name", "mistral-large-4", "--host", "0.0.0.0", "--port", "8000",
    "--tensor-parallel-size", "8", "--nnodes", "8", "--node-rank", "0", "--master-addr", "172.31.213.11",
    "--master-port", "29501", "--distributed-timeout-seconds", "7200",
]
VLLM_RECIPE = [  # base_args, features, presets, P/D roles, advanced options of the recipe
    "--max-num-batched-tokens", "8192", "--max-num-seqs", "128", "--gpu-memory-utilization", "0.85",
    "--max-model-len", "262144", "--decode-context-parallel-size", "8", "--prefill-context-parallel-size", "8",
    "--tensor-parallel-size", "1", "--cp-kv-cache-interleave-size", "64", "--language-model-only",
    "--kernel-config", '{"moe_backend":"flashinfer_moe_ep_cutedsl"}',
    "--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_load_failure_policy":"fail"}',
    "--compilation-config", '{"cudagraph_mode":"FULL_DECODE_ONLY"}',
    "--additional-config", '{"decode_backend":"latency_specialized"}', "--limit-mm-per-prompt", '{"image": 4}',
    "--speculative-config", '{"method":"dspark","num_speculative_tokens":3,"draft_sample_method":"probabilistic"}',
    "--data-parallel-size", "8", "--data-parallel-size-local", "4", "--data-parallel-address", "10.0.0.1",
    "--data-parallel-rpc-port", "13345", "--data-parallel-start-rank", "4", "--data-parallel-hybrid-lb",
    "--headless", "--no-enable-flashinfer-autotune", "--enable-ep-weight-filter", "--max-num-batched-tokens", "256",
    "--cuda-graph-sizes", "1", "2", "4", "--pipeline-parallel-size", "2", "-tp", "8", "-pp", "2",
    "--all2all-backend", "deepep_low_latency", "--api-server-count", "4", "--trust-remote-code",
]
SGLANG_LANE = [
    "--model-path", "/mnt/nfs/models/m", "--tp", "8", "--nnodes", "8", "--node-rank", "3",
    "--dist-init-addr", "172.31.213.11:25000", "--dist-timeout", "3600", "--host", "0.0.0.0", "--port", "30000",
    "--served-model-name", "mistral-large-4", "--context-length", "524288", "--mem-fraction-static", "0.85",
    "--tokenizer-mode", "mistral", "--attention-backend", "dsa", "--dsa-prefill-backend", "tilelang",
    "--dsa-decode-backend", "tilelang", "--moe-runner-backend", "flashinfer_cutlass", "--watchdog-timeout", "3600",
    "--kv-cache-dtype", "fp8_e4m3", "--speculative-algorithm", "DSPARK", "--speculative-num-steps", "3",
    "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--tool-call-parser", "mistral",
    "--reasoning-parser", "mistral", "--trust-remote-code", "--skip-server-warmup",
    "--json-model-override-args", '{"max_position_embeddings": 524288}', "--enable-metrics",
]


def run(argv, timeout=20):
    return subprocess.run(argv, env=base_env(), capture_output=True, text=True, timeout=timeout,
                          check=False)


def test_vllm_parser_accepts_every_seed_flag():
    p = F.vllm_parser()
    a = p.parse_args(F.vllm_preprocess(["/m", *VLLM_LANE]))
    assert a.model_tag == "/m" and a.tensor_parallel_size == 8 and a.nnodes == 8
    assert a.speculative_config == {"method": "dspark", "num_speculative_tokens": 3}
    assert a.max_model_len == 524288 and a.enable_prefix_caching is True
    b = p.parse_args(F.vllm_preprocess(["/m", *VLLM_RECIPE]))
    assert b.kernel_config == {"moe_backend": "flashinfer_moe_ep_cutedsl"}
    assert b.enable_flashinfer_autotune is False and b.headless is True
    assert b.cuda_graph_sizes == [1, 2, 4] and b.pipeline_parallel_size == 2


def test_vllm_flexible_forms():
    p = F.vllm_parser()
    a = p.parse_args(F.vllm_preprocess(["/m", "--max_model_len=128k", "--gpu_memory_utilization", "0.5",
                                        "--speculative-config.method", "dspark",
                                        "--speculative-config.num_speculative_tokens", "3", "-O3"]))
    assert a.max_model_len == 128000 and a.gpu_memory_utilization == 0.5
    assert a.speculative_config == {"method": "dspark", "num_speculative_tokens": 3}
    assert a.optimization_level == 3
    assert p.parse_args(["/m", "--max-model-len", "1M"]).max_model_len == 1 << 20
    assert p.parse_args(["/m", "--max-model-len", "auto"]).max_model_len == -1


def test_sglang_parser_accepts_lane_flags_and_abbreviation():
    p = F.sglang_parser("sglang serve", model_positional=True)
    a = p.parse_args(SGLANG_LANE)
    assert a.tp_size == 8 and a.node_rank == 3 and a.dist_init_addr == "172.31.213.11:25000"
    assert a.speculative_algorithm == "DSPARK" and a.json_model_override_args == {"max_position_embeddings": 524288}
    assert p.parse_args(["m", "--tp-size", "4"]).tp_size == 4
    assert p.parse_args(["m", "--tensor-parallel-size", "2"]).tp_size == 2


@pytest.mark.parametrize("argv, message", [
    (["--foo"], "vllm serve: error: unrecognized arguments: --foo"),
    (["--tensor-parallel-size", "eight"], "vllm serve: error: argument --tensor-parallel-size/-tp: invalid int value: 'eight'"),
    (["--speculative-config", "{method: dspark}"], "vllm serve: error: argument --speculative-config: invalid loads value"),
    (["--kv-cache-dtype", "fp9"], "vllm serve: error: argument --kv-cache-dtype: invalid choice: 'fp9'"),
    (["--max-num-seq", "8"], "vllm serve: error: unrecognized arguments: --max-num-seq 8"),
])
def test_vllm_rejects_bad_argv_with_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        F.vllm_parser().parse_args(F.vllm_preprocess(["/nonexistent", *argv]))
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert message in err, err
    assert err.splitlines()[0].startswith("usage: vllm serve")


def test_vllm_process_exits_2_on_unknown_flag_from_the_top_level_parser():
    # Real vLLM 0.32.0 (tests/fixtures/real_vllm/bogus_flag): the top-level `vllm` parser reports the
    # argument `vllm serve` did not take, after its own usage; exit 2. (Was: "vllm serve: error: ...",
    # which real vLLM does not print for an unknown flag.)
    r = run(vllm_cmd("/nonexistent", "--lanekit-bogus", "1"))
    real = open(os.path.join(REAL_VLLM, "bogus_flag", "rank0.log"), encoding="utf-8").read().splitlines()
    assert r.returncode == 2, r
    assert r.stderr.splitlines() == real[1:], r.stderr
    # a bad value is still the subcommand's own error
    r = run(vllm_cmd("/nonexistent", "--tensor-parallel-size", "eight"))
    assert r.returncode == 2 and "vllm serve: error: argument --tensor-parallel-size/-tp: invalid int value" in r.stderr


def test_vllm_top_level_cli():
    r = run([PY, "-m", "vllm.entrypoints.cli.main", "--version"])
    assert r.returncode == 0 and "lanekit.standin" in r.stdout
    r = run([PY, "-m", "vllm.entrypoints.cli.main", "bogus"])
    assert r.returncode == 2 and "vllm: error: argument subparser: invalid choice: 'bogus'" in r.stderr


@pytest.mark.parametrize("argv, message", [
    (["--model-path", "/m", "--foo"], "launch_server.py: error: unrecognized arguments: --foo"),
    (["--model-path", "/m", "--tp", "x"],
     "launch_server.py: error: argument --tp-size/--tensor-parallel-size/--tp: invalid int value: 'x'"),
    (["--model-path", "/m", "--moe-runner-backend", "trtllm"], "argument --moe-runner-backend: invalid choice: 'trtllm'"),
    (["--model-path", "/m", "--json-model-override-args", "{x"], "argument --json-model-override-args: invalid loads value"),
    (["--tp", "2"], "launch_server.py: error: the following arguments are required: --model-path"),
])
def test_sglang_rejects_bad_argv_with_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        from lanekit_standin.sglang_engine import main  # noqa: PLC0415
        main(argv, prog="launch_server.py", entry="launch_server")
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert message in err, err


def test_sglang_process_exits_2_on_unknown_flag():
    r = run(sglang_cmd("--model-path", "/m", "--foo"))
    assert r.returncode == 2 and "launch_server.py: error: unrecognized arguments: --foo" in r.stderr, r


def test_sglang_cli_serve_prog_name():
    r = run([PY, "-m", "sglang.cli.main", "serve", "/m", "--bogus-flag"])
    assert r.returncode == 2 and "sglang serve: error: unrecognized arguments: --bogus-flag" in r.stderr
    r = run([PY, "-m", "sglang.cli.main", "version"])
    assert r.returncode == 0 and "lanekit.standin" in r.stdout


def test_config_errors_exit_1_before_rendezvous(tmp_path):
    """Wrong but well-formed values fail at configuration time with the engine's error."""
    r = run(vllm_cmd("/m", "--nnodes", "2", "--node-rank", "1", "--distributed-executor-backend", "ray"))
    assert r.returncode == 1 and "nnodes > 1 can only be set when distributed executor backend is mp" in r.stdout
    r = run(vllm_cmd("/m", "--enable-auto-tool-choice"))
    assert r.returncode == 1 and "--enable-auto-tool-choice requires --tool-call-parser" in r.stdout
    r = run(sglang_cmd("--model-path", str(tmp_path), "--tp", "2", "--nnodes", "2", "--dist-init-addr", "nohostport"))
    assert r.returncode == 1 and "--dist-init-addr must be HOST:PORT" in r.stdout


def test_pythonpath_layout_is_importable():
    r = subprocess.run([PY, "-c", "import sglang.srt.model_executor.model_runner_components.load_model_utils as m;"
                        "print(m.UNBALANCED_MODEL_LOADING_TIMEOUT_S)"],
                       env=base_env(pythonpath=[STANDIN, PKGS]), capture_output=True, text=True, timeout=20,
                       check=False)
    assert r.stdout.strip() == "480", r
