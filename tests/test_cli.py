"""The command line, as a user runs it: real subprocesses, real exit codes, real output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "kvplan.cli.app", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def estimate_json(*args):
    result = run("estimate", *args, "--json")
    return result, (json.loads(result.stdout) if result.stdout.strip() else None)


def test_seed_example_cli():
    result, plan = estimate_json("--model", "Qwen/Qwen2.5-7B", "--engine", "simple", "--gpu-memory", "24GB",
                                 "--weights-memory", "15.2GB", "--reserve", "1GB", "--gpu-memory-utilization",
                                 "1.0", "--dtype", "float16", "--max-model-len", "32768")
    assert result.returncode == 0, result.stderr
    # 2 x 28 x 4 x 128 x 16 x 2 = 917,504; 7.8e9 // 917,504 = 8,501; x 16 = 136,016
    assert plan["kv"]["block_bytes"] == 917_504 and plan["kv"]["bytes_per_token"] == 57_344
    assert plan["capacity"]["num_blocks"] == 8_501 and plan["capacity"]["tokens"] == 136_016
    assert plan["memory"]["kv_cache_bytes"] == 7_800_000_000
    # 8,501 / cdiv(32768, 16) = 4.15 requests of 32k at once
    assert plan["capacity"]["max_concurrency"] == 4.15


def test_json_fields_are_all_there():
    result, plan = estimate_json("--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx3090", "--max-model-len", "16K")
    required = {
        "model": {"id", "num_layers", "kv_layers", "num_kv_heads", "head_dim", "attention", "params"},
        "gpu": {"id", "name", "memory_bytes", "count"},
        "parallel": {"tensor", "pipeline"},
        "engine": {"name", "version", "gpu_memory_utilization", "block_size", "max_model_len", "max_num_seqs",
                   "max_num_batched_tokens"},
        "kv": {"dtype", "bytes_per_token", "block_bytes"},
        "memory": {"total_bytes", "budget_bytes", "weights_bytes", "activation_bytes", "non_torch_bytes",
                   "cuda_graph_bytes", "reserve_bytes", "kv_cache_bytes"},
        "capacity": {"num_blocks", "tokens", "max_concurrency", "fits", "max_model_len_that_fits", "ladder"},
    }
    for section, keys in required.items():
        assert keys <= set(plan[section]), section
    for key, value in plan["memory"].items():
        assert isinstance(value, int), key
    assert plan["gpu"]["id"] == "rtx3090" and plan["gpu"]["memory_bytes"] == 25_297_357_373
    assert plan["engine"]["max_model_len"] == 16384  # vLLM's reading: uppercase K = 1024
    _, decimal = estimate_json("--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx3090", "--max-model-len", "25.6k")
    assert decimal["engine"]["max_model_len"] == 25_600  # lowercase k = 1000
    assert [r["context"] for r in plan["capacity"]["ladder"]] == [2048, 4096, 8192, 16384]
    # the ladder is consistent with the pool: floor(blocks / (context / 16))
    blocks = plan["capacity"]["num_blocks"]
    assert plan["capacity"]["ladder"][0]["kv_limited"] == blocks // 128


def test_rtx3090_qwen7b_vllm_numbers():
    # vLLM v0.20+ era constants (kvplan/engines/vllm/releases.py), RTX 3090 CUDA total 25,297,357,373 B:
    #   budget      int(25,297,357,373 x 0.92)                                    = 23,273,568,783
    #   weights     7,615,616,512 params x 2 B + the RoPE table of its 131,072 positions x 128 x 2 B
    #               = 15,231,233,024 + 33,554,432                                 = 15,264,787,456
    #   activation  Model Runner V2's two-pass sampler (0.33; engines/vllm/sampler.py), min(256, 2048) rows:
    #               3.5 x 256 x 152,064 x 4 + 1 MiB = 546,045,952, beside it the dummy run's hidden states and
    #               sampled rows (v1/worker/gpu/model_runner.py profile_run) (2,048 + 256) x 3,584 x 2 = 16,515,072
    #               and the cuBLAS workspace off Hopper 8,519,680: 571,080,704 (over the forward's 276,824,064
    #               + int(0.12 GiB) 128,849,018), + V2's held buffers 256 x (152,064 + 2 x 4,752) x 4 = 165,445,632
    #                                                                             =    736,526,336
    #   non-torch   int(0.25 GiB), single GPU                                     =    268,435,456
    #   CUDA graphs 51 PIECEWISE sizes (up to 512) and 35 FULL ones (up to 256 sequences):
    #               256 MiB + (50 + 34) x 28 layers x 0.1875 MiB = 697 MiB     =    730,857,472
    #   pool = 23,273,568,783 - 15,264,787,456 - 736,526,336 - 268,435,456 - 730,857,472 = 6,272,962,063
    #   blocks = 6,272,962,063 // 917,504 (2 x 28 x 4 x 128 x 16 x 2) = 6,836 -> 109,376 tokens
    #   32,768-token requests: 6,836 / 2,048 = 3.34
    result, plan = estimate_json("--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx3090", "--max-model-len", "32768")
    memory = plan["memory"]
    assert memory["budget_bytes"] == 23_273_568_783
    assert memory["weights_bytes"] == 15_264_787_456
    assert memory["activation_bytes"] == 736_526_336
    assert memory["non_torch_bytes"] == 268_435_456
    assert memory["cuda_graph_bytes"] == 730_857_472
    assert memory["kv_cache_bytes"] == 6_272_962_063
    assert plan["kv"]["block_bytes"] == 917_504
    assert plan["capacity"]["num_blocks"] == 6_836 and plan["capacity"]["tokens"] == 109_376
    assert plan["capacity"]["max_concurrency"] == 3.34
    assert result.returncode == 0 and plan["capacity"]["fits"]


def test_gpu_list_gives_a_list():
    result, plans = estimate_json("--model", "meta-llama/Llama-3.1-8B", "--gpu", "rtx3090,a100-80gb,h100",
                                  "--max-model-len", "8192")
    assert result.returncode == 0
    assert [p["gpu"]["id"] for p in plans] == ["rtx3090", "a100-80gb-sxm", "h100-sxm"]
    # vLLM's batch defaults (EngineArgs.get_batch_defaults): 1024 sequences / 8192 tokens only on >= 70 GiB
    # devices that are not A100s; 256 / 2048 otherwise.
    assert [p["engine"]["max_num_seqs"] for p in plans] == [256, 256, 1024]
    assert [p["engine"]["max_num_batched_tokens"] for p in plans] == [2048, 2048, 8192]
    # the same 2 MiB blocks (2 x 32 x 8 x 128 x 16 x 2) on every GPU
    assert {p["kv"]["block_bytes"] for p in plans} == {2 * 2**20}
    for p in plans:
        assert p["capacity"]["num_blocks"] == p["memory"]["kv_cache_bytes"] // (2 * 2**20)


def test_cannot_serve_exits_1_with_vllm_error_and_levers():
    result, plan = estimate_json("--model", "meta-llama/Llama-3.1-70B", "--gpu", "rtx3090")
    assert result.returncode == 1
    assert plan["capacity"]["fits"] is False
    assert "would refuse to start" in plan["error"]
    assert plan["levers"] and all("--" in lever["flags"] for lever in plan["levers"])


def test_max_model_len_too_long_for_pool_gives_estimate():
    # Llama-3.1-8B on 24 GiB with 3 GiB of KV: 3 GiB // 2 MiB = 1,536 blocks; from v0.29 the capacity check leaves
    # the null block out (vLLM 0.29.0 v1/core/kv_cache_utils.py get_kv_cache_configs): 1,535 x 16 = 24,560 tokens max.
    result, plan = estimate_json("--model", "meta-llama/Llama-3.1-8B", "--gpu-memory", "24GiB",
                                 "--kv-cache-memory", "3GiB")
    assert result.returncode == 1
    assert plan["capacity"]["num_blocks"] == 1536
    assert plan["capacity"]["max_model_len_that_fits"] == 24_560
    assert "24560" in plan["error"]


def test_engines_differ_as_documented():
    common = ("--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--max-model-len", "8192")
    _, sglang = estimate_json(*common, "--engine", "sglang")
    _, trt = estimate_json(*common, "--engine", "trtllm")
    assert sglang["engine"]["block_size"] == 1 and trt["engine"]["block_size"] == 32
    # SGLang 0.5.23 (kvplan/engines/sglang/defaults.py): H100 nvidia-smi 81,559 MiB (60-90 GiB, TP < 4: chunked
    # prefill 8192, CUDA-graph bs 256): reserved 512 + 1.5 x 8192 + 2 x 256 + 1 x 1 / 8 x 1024 + 58 prefill graph
    # sizes x 8 MiB = 13,904 MiB, fraction round((81,559 - 13,904) / 81,559, 3) = round(0.82952, 3) = 0.83
    #   free before load 85,018,877,624 - 654,982,512 (0.61 GiB CUDA context) = 84,363,895,112
    #   held back int(84,363,895,112 x 0.17) = 14,341,862,169
    #   pool int(84,363,895,112 - 15,231,233,024 (7,615,616,512 x 2) - 14,341,862,169.04) = 54,790,799,918
    #   page size 1: tokens = 54,790,799,918 // 57,344 = 955,475
    assert sglang["engine"]["gpu_memory_utilization"] == 0.83
    assert sglang["memory"]["reserve_bytes"] == 14_341_862_169
    assert sglang["memory"]["kv_cache_bytes"] == 54_790_799_918
    assert sglang["capacity"]["num_blocks"] == sglang["capacity"]["tokens"] == 955_475
    # TRT-LLM (kvplan/engines/trtllm.py): 0.9 of the memory free after weights, the profiling run, the CUDA graphs
    # and the CUDA context, in whole tokens, in whole 32-token blocks (rounded down, resource_manager.py).
    #   profiling run: 8,192 tokens x (3 x 3,584 + 3 x 18,944 = 67,584 elements at the MLP) x 2 = 1,107,296,256
    #   (its 2 dummy requests' logits, 2 x 152,064 x (2 + 4) = 1,824,768, are smaller)
    #   CUDA graphs: the largest, 128 decode requests, is its logits 128 x 152,064 x 6 = 116,785,152
    #   free 85,018,877,624 - 15,231,233,024 - 1,107,296,256 - 116,785,152 - 654,982,512 = 67,908,580,680;
    #   x 0.8999999761581421 = 61,117,720,992 -> // 57,344 = 1,065,808 tokens -> 33,306 blocks of 32
    #   = 1,065,792 tokens, 33,306 x 1,835,008 = 61,116,776,448 B
    assert trt["memory"]["activation_bytes"] == 1_107_296_256
    assert trt["memory"]["kv_cache_bytes"] == 61_116_776_448
    assert trt["capacity"]["num_blocks"] == 33_306 and trt["capacity"]["tokens"] == 1_065_792


def test_fp8_kv_doubles_tokens():
    common = ("--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--max-model-len", "8192")
    _, bf16 = estimate_json(*common)
    _, fp8 = estimate_json(*common, "--kv-cache-dtype", "fp8")
    assert fp8["kv"]["block_bytes"] * 2 == bf16["kv"]["block_bytes"]
    assert fp8["capacity"]["num_blocks"] in (2 * bf16["capacity"]["num_blocks"], 2 * bf16["capacity"]["num_blocks"] + 1)


def test_human_output_shows_the_working():
    import os

    result = run("estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx3090", "--max-model-len", "32768",
                 env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 0
    out = result.stdout
    assert "block bytes = 2 x 28 layers x 4 KV heads x 128 head dim x 16 tokens x 2 B = 917,504 B" in out
    for word in ("weights", "activation", "non-torch", "CUDA graphs", "KV pool", "unused", "requests at once"):
        assert word in out


@pytest.mark.parametrize("args, where", [
    (["--gpu", "rtx3080"], "--gpu"),
    (["--gpu", "rtx3090", "--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization"),
    (["--gpu", "rtx3090", "--block-size", "12"], "--block-size"),
    (["--gpu", "rtx3090", "-tp", "3"], "-tp: Total number of attention heads (28)"),  # named as typed
    (["--gpu-memory", "-5GB"], "--gpu-memory"),
    (["--gpu-memory", "24 parsecs"], "--gpu-memory"),
    (["--gpu", "rtx3090", "--kv-cache-dtype", "int3"], "--kv-cache-dtype"),
    (["--gpu", "rtx3090", "--max-model-len", "1000000"], "--max-model-len"),
    (["--gpu", "rtx3090", "--max-model-len", "1.5K"], "--max-model-len"),
    (["--gpu", "rtx3090", "--speculative-config", "{oops"], "--speculative-config"),
    (["--gpu", "rtx3090", "--no-such-flag"], "--no-such-flag"),
    (["--gpu", "rtx3090", "--engine", "tgi"], "--engine"),
])
def test_bad_flags_are_one_line_exit_2(args, where):
    result = run("estimate", "--model", "Qwen/Qwen2.5-7B", *args)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("kvplan: error:")
    assert where in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_gpus_command():
    result = run("gpus", "--json")
    gpus = json.loads(result.stdout)
    assert len(gpus) >= 30
    h100 = next(g for g in gpus if g["id"] == "h100-sxm")
    assert h100["memory_bytes"] == 85_018_877_624 and h100["memory_source"].startswith("http")


def test_cuda_graph_switch_is_honoured():
    import os

    common = ("estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--max-model-len", "8192", "--json")
    on = json.loads(run(*common).stdout)
    off = json.loads(run(*common, env={**os.environ, "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "0"}).stdout)
    old = json.loads(run(*common, "--vllm-version", "0.19").stdout)
    eager = json.loads(run(*common, "--enforce-eager").stdout)
    # v0.21+ on an H100 (1,024 sequences): 51 + 51 sizes, 256 MiB + 100 x 28 layers x 0.1875 MiB = 781 MiB
    assert on["memory"]["cuda_graph_bytes"] == 781 * 2**20
    assert off["memory"]["cuda_graph_bytes"] == old["memory"]["cuda_graph_bytes"] == 0
    assert eager["memory"]["cuda_graph_bytes"] == 0
    assert off["memory"]["kv_cache_bytes"] - on["memory"]["kv_cache_bytes"] == 781 * 2**20


def test_gpu_list_human_output_compares_side_by_side():
    import os

    result = run("estimate", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "rtx3090,h100", "--max-model-len", "32K",
                 env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 0
    _, plans = estimate_json("--model", "meta-llama/Llama-3.1-8B", "--gpu", "rtx3090,h100", "--max-model-len", "32K")
    assert "GPUs side by side" in result.stdout
    for plan in plans:  # each row carries the same block count the JSON reports
        assert f"{plan['capacity']['num_blocks']:,}" in result.stdout


def test_a_mistyped_command_gets_one_suggestion():
    # typer and click both suggest close command names; the one line says it once.
    result = run("estimat", "--model", "Qwen/Qwen2.5-7B")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert result.stderr.count("Did you mean") == 1 and "'estimate'" in result.stderr


def test_pool_line_names_an_engines_own_pools_not_a_false_division():
    # DeepSeek-V4-Flash at TP 8 with 40 GiB: vLLM's packed groups are the flat layout's, 42,949,672,960 // 1,002,240
    # = 42,853 blocks (tests/test_deepseek_v4.py); TensorRT-LLM's 50,310 compressed blocks come from its pool groups
    # (tests/test_trtllm_deepseek_v4.py), not from 42,949,672,960 // 870,912 = 49,315, so the panel names the pools
    import kvplan
    from kvplan.cli import render

    flash = str(Path(__file__).parent / "fixtures" / "configs" / "frontier" / "deepseek-ai__DeepSeek-V4-Flash")

    def plan(engine: str):
        return kvplan.estimate(flash, gpu="h200", tensor_parallel_size=8, engine=engine, kv_cache_memory_bytes=40 << 30)

    assert render.pool_line(plan("vllm")) == "42,949,672,960 B // 1,002,240 B = 42,853 blocks"
    trtllm = plan("trtllm")
    assert render.pool_line(trtllm).startswith("42,949,672,960 B in the engine's own pools: compressed 6,439,680 tokens")
    assert render.formula(trtllm).startswith("block bytes: each pool's own")
    assert render.pool_line(plan("sglang")).startswith("42,949,672,960 B in the engine's own pools: full 5,677,312")
