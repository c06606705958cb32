"""Behaviours pinned through the command line, each expected number derived by hand from the rule's constants.

Constants used below and where they come from:
- GPU totals (CUDA-reported, the catalogue in kvplan/data/, each with its source): rtx3090 25,297,357,373 B;
  rtx4090 25,383,256,719 B; l40s 47,803,531,264 B; h100 (SXM) 85,018,877,624 B.
- vLLM v0.20+ era (kvplan/engines/vllm/releases.py, calibrated in docs/calibration.md): utilization 0.92; the
  default 0.33 runs Model Runner V2, whose two-pass profiling sampler (kvplan/engines/vllm/sampler.py) holds 3.5
  fp32 copies of min(max_num_seqs, max_num_batched_tokens) x vocab + FlashInfer's 1 MiB row states, beside the
  dummy run's hidden states and sampled rows it holds, (max_num_batched_tokens + rows) x hidden x 2 B
  (v1/worker/gpu/model_runner.py profile_run), PyTorch's cuBLAS workspace (8,519,680 B off compute capability
  9.0, and on a device of unknown capability) and its penalty and grammar buffers of max_num_seqs x (vocab + 2 x
  ceil(vocab / 32)) int32 (so for Qwen2.5-7B, vocab 152,064 and hidden 3,584, at 256 sequences and 2,048 tokens:
  546,045,952 + (2,048 + 256) x 3,584 x 2 + 8,519,680 + 165,445,632 = 546,045,952 + 16,515,072 + 8,519,680
  + 165,445,632 = 736,526,336 B, the forward being smaller); V1's sampler side from 0.17 is read in the source
  (tests/test_vllm_sampler_v1.py); moe copies 1.0 (0 for dense models); the forward's
  fixed int(0.12 GiB) = 128,849,018 B; non-torch int(0.25 GiB) = 268,435,456 B on one GPU,
  with TP > 1 that plus NCCL's growth (kvplan/engines/vllm/interconnect.py: int(0.08 GiB) = 85,899,345 B over PCIe,
  so 354,334,801 B on an RTX 4090, or an RTX 3090 with its optional bridge taken as absent; int(0.42 GiB)
  = 450,971,566 B over NVLink) and, on an NVSwitch or unknown device that may be Hopper, FlashInfer's fusion
  workspace 3 x 512 MiB (2,330,019,758 B in all), int(0.07 GiB) = 75,161,927 B with pipeline stages alone;
  CUDA graphs 256 MiB + 0.1875 MiB per decoder layer for each further captured size of each mode.
  Below 70 GiB: max_num_seqs 256, max_num_batched_tokens 2048, so 51 PIECEWISE sizes (up to 512) and 35 FULL
  (up to 256): graphs 256 MiB + 84 x 0.1875 MiB x layers (28 layers: 730,857,472 B; 80: 1,589,641,216 B; 64:
  1,325,400,064 B; 12: 466,616,320 B).
- Weights (kvplan/weights.py): 2 B per parameter at bf16; fp8 keeps embeddings / lm_head at 2 B and the
  decoder linears at 1 B; the decoder bytes are spread as floor(decoder bytes / layers) per layer; per rank
  = ceil(stage bytes / TP); plus, on every rank whole, vLLM's RoPE cos/sin table of max_position_embeddings
  x head_dim values in the model dtype (131,072 x 128 x 2 B = 33,554,432 B for Qwen2.5-7B, -32B and
  Llama-3.1-70B).
- Parameter counts: `kvplan models show ID --json` (params, params_breakdown), published exact counts.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def run(*args):
    return subprocess.run([sys.executable, "-m", "kvplan.cli.app", *args], capture_output=True, text=True,
                          timeout=120)


def estimate_json(*args):
    result = run("estimate", *args, "--json")
    assert result.stdout.strip(), result.stderr
    return result, json.loads(result.stdout)


def lever_flags(plan):
    return [lever["flags"] for lever in plan["levers"]]


# --- a. levers: order and values -------------------------------------------------------------------------------

def test_levers_qwen7b_rtx4090_full_context_order_and_values():
    # The README's example on an RTX 4090 (CUDA total 25,383,256,719 B; Ada, FP8-capable, so the fp8 levers are
    # real options there). Qwen2.5-7B: 7,615,616,512 params, embeddings = lm_head = 544,997,376, 28 layers,
    # 4 KV heads x 128, vocab 152,064; block = 2 x 28 x 4 x 128 x 16 x 2 = 917,504 B.
    #   budget int(25,383,256,719 x 0.92) = 23,352,596,181; weights 7,615,616,512 x 2 + RoPE 33,554,432
    #   = 15,264,787,456;
    #   activation 3.5 x 256 x 152,064 x 4 + 1 MiB + the held hidden states (2,048 + 256) x 3,584 x 2 = 16,515,072
    #   + the cuBLAS workspace 8,519,680 + 165,445,632 (V2's held buffers) = 736,526,336 (the forward, (3 x 2,048
    #   x 3,584 + 3 x 2,048 x 18,944) x 2 + 128,849,018 = 405,673,082, is smaller);
    #   non-torch 268,435,456; graphs 730,857,472
    #   pool = 23,352,596,181 - 15,264,787,456 - 736,526,336 - 268,435,456 - 730,857,472 = 6,351,989,461
    #   6,351,989,461 // 917,504 = 6,923 blocks < cdiv(131,072, 16) = 8,192 needed -> does not fit.
    result, plan = estimate_json("--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx4090")
    assert result.returncode == 1 and plan["capacity"]["fits"] is False
    assert plan["memory"]["kv_cache_bytes"] == 6_351_989_461
    # Each lever re-planned by hand (same activation / graphs / RoPE table as above):
    # TP 2: weights ceil(15,231,233,024 / 2) + 33,554,432 = 7,649,170,944, non-torch 354,334,801 (PCIe), block per
    #   rank 458,752 (2 KV heads), the sampler side as at TP 1 (logits and hidden states whole on each rank):
    #   23,352,596,181 - 7,649,170,944 - 736,526,336 - 354,334,801 - 730,857,472
    #   = 13,881,706,628 // 458,752 = 30,259 blocks -> 484,144 tokens; 30,259 / 8,192 = 3.69 requests.
    # AWQ: linears 7,615,616,512 - 2 x 544,997,376 = 6,525,621,760 params -> 6,525,621,760 x 4 // 8
    #   + 6,525,621,760 x 20 // 1024 = 3,262,810,880 + 127,453,550 = 3,390,264,430 B, // 28 x 28 = 3,390,264,416,
    #   + embeddings and lm_head 2,179,989,504 = 5,570,253,920 (+ RoPE) -> pool 16,012,968,565 // 917,504 = 17,452
    #   -> 279,232.
    # fp8 KV: 6,351,989,461 // 458,752 = 13,846 blocks -> 221,536 tokens.
    # fp8 weights: 6,525,621,760 + 2,179,989,504 = 8,705,611,264 (+ RoPE) -> pool 12,877,611,221 // 917,504 = 14,035
    #   -> 224,560 tokens.
    # max_model_len: longest fit 6,922 x 16 = 110,752: from v0.29 the capacity check leaves the null block out of the
    #   6,923 (vLLM 0.29.0 v1/core/kv_cache_utils.py get_kv_cache_configs, 0.33.0 kv_cache_planning.py).
    # Sorted fitting first, then by tokens, cut at 5: utilization 0.95 (int(25,383,256,719 x 0.95) = 24,114,093,883
    #   -> pool 7,113,487,163 // 917,504 = 7,753 blocks = 124,048 tokens < 131,072, does not fit) is the 6th, left off.
    assert lever_flags(plan) == ["--tensor-parallel-size 2", "--quantization awq (with a 4-bit checkpoint)",
                                 "--quantization fp8", "--kv-cache-dtype fp8", "--max-model-len 110752"]
    assert [lever["tokens"] for lever in plan["levers"]] == [484_144, 279_232, 224_560, 221_536, 110_768]
    assert all(lever["fits"] for lever in plan["levers"])
    assert plan["levers"][0]["max_concurrency"] == 3.69
    # concurrency of the max_model_len lever: 6,923 blocks / cdiv(110,768, 16) = 6,923 / 6,923
    assert plan["levers"][-1]["max_concurrency"] == 1.0
    assert plan["capacity"]["max_model_len_that_fits"] == 110_752


def test_levers_llama70b_rtx4090_only_tp8_with_fp8():
    # Llama-3.1-70B: 70,553,706,496 params, embeddings = lm_head = 1,050,673,152, 80 layers, 64 heads, 8 KV heads,
    # vocab 128,256. At TP 1 the 141 GB of weights leave a negative pool: no max_model_len, fp8-KV or
    # utilization lever has a token (levers with 0 tokens are dropped), fp8 (72.7 GB) and AWQ do not load either.
    # Common to TP 4 and 8 (budget 23,352,596,181 as above): activation 3.5 x 256 x 128,256 x 4 + 1 MiB + the held
    #   hidden states (2,048 + 256) x 8,192 x 2 + the cuBLAS workspace 8,519,680 + V2's held 256 x (128,256 + 2 x
    #   4,008) x 4 = 460,718,080 + 37,748,736 + 8,519,680 + 139,542,528 = 646,529,024 (the forward is smaller);
    #   non-torch 354,334,801 (PCIe); graphs 1,589,641,216;
    #   block per rank 2 x 80 x 1 x 128 x 16 x 2 = 655,360 B; one 131,072-token request needs 8,192 blocks.
    # Every rank adds the 33,554,432 B RoPE table.
    # TP 8 bf16: linears 70,553,706,496 - 2,101,346,304 = 68,452,360,192 params; x 2 // 80 x 80 = 136,904,720,320
    #   + 4,202,692,608 -> ceil(/ 8) + RoPE = 17,671,981,048 -> pool 3,090,110,092 // 655,360 = 4,715 blocks < 8,192.
    # So the search retries with fp8 weights: TP 2 (36,327,526,384 B + RoPE) / TP 4 (18,197,317,624 B -> pool
    #   2,564,773,516 // 1,310,720 = 1,956 blocks) do not fit; TP 8 + fp8: (68,452,360,192 // 80 x 80
    #   = 68,452,360,160 + 4,202,692,608) / 8 + RoPE = 9,115,436,028 -> pool 23,352,596,181 - 9,115,436,028
    #   - 646,529,024 - 354,334,801 - 1,589,641,216 = 11,646,655,112 // 655,360 = 17,771 blocks -> 284,336 tokens,
    #   17,771 / 8,192 = 2.17 requests.
    result, plan = estimate_json("--model", "meta-llama/Llama-3.1-70B", "--gpu", "rtx4090")
    assert result.returncode == 1
    assert plan["capacity"]["max_model_len_that_fits"] == 0
    assert lever_flags(plan) == ["--tensor-parallel-size 8 --quantization fp8"]
    assert plan["levers"][0]["tokens"] == 284_336 and plan["levers"][0]["max_concurrency"] == 2.17


# --- b. the TP lever search over 2 / 4 / 8 -----------------------------------------------------------------------

def test_tp_lever_skips_tp2_that_does_not_fit_and_proposes_tp4():
    # Qwen2.5-32B: 32,763,876,352 params, embeddings = lm_head = 778,567,680, 64 layers, 40 heads, 8 KV heads.
    # bf16 stage bytes: linears (32,763,876,352 - 1,557,135,360) x 2 = 62,413,481,984 (// 64 = 975,210,656 per
    #   layer, exact) + 3,114,270,720 = 65,527,752,704.
    # Each rank adds the 33,554,432 B RoPE table (131,072 positions x 128 x 2 B).
    # TP 2: 32,763,876,352 + 33,554,432 = 32,797,430,784 B of weights per rank > the 23,273,568,783 B budget -> no
    #   pool, does not fit.
    # TP 4: 16,381,938,176 + 33,554,432 = 16,415,492,608 per rank; pool 23,273,568,783 - 16,415,492,608
    #   - 743,604,224 (the sampler as for Qwen2.5-7B, 546,045,952 + 8,519,680 + 165,445,632, with the held hidden
    #   states at hidden 5,120: (2,048 + 256) x 5,120 x 2 = 23,592,960) - 354,334,801 (non-torch over PCIe: the RTX
    #   3090's optional bridge taken as absent) - graphs 1,325,400,064 = 4,434,737,086; block per rank
    #   2 x 64 x 2 x 128 x 16 x 2 = 1,048,576 -> 4,229 blocks -> 67,664 tokens >= 32,768 (2,048 blocks): fits,
    #   4,229 / 2,048 = 2.06 requests.
    common = ("--model", "Qwen/Qwen2.5-32B", "--gpu", "rtx3090", "--max-model-len", "32768")
    result, plan = estimate_json(*common)
    assert result.returncode == 1
    tp_levers = [lever for lever in plan["levers"] if "--tensor-parallel-size" in lever["flags"]]
    assert [lever["flags"] for lever in tp_levers] == ["--tensor-parallel-size 4"]
    assert tp_levers[0]["tokens"] == 67_664 and tp_levers[0]["fits"] and tp_levers[0]["max_concurrency"] == 2.06
    _, tp2 = estimate_json(*common, "-tp", "2")
    assert tp2["memory"]["weights_bytes"] == 32_797_430_784 and tp2["capacity"]["fits"] is False
    _, tp4 = estimate_json(*common, "-tp", "4")
    assert tp4["memory"]["kv_cache_bytes"] == 4_434_737_086 and tp4["capacity"]["num_blocks"] == 4_229


def test_tp_lever_never_proposes_a_size_that_does_not_divide_the_heads():
    # Qwen2.5-7B has 28 heads: TP 2 and 4 divide them, TP 8 does not. On an 8.5 GB device (budget
    # int(8.5e9 x 0.92) = 7,820,000,000; activation 736,526,336 (its cuBLAS workspace the non-Hopper 8,519,680:
    # sampler.cublas_workspace_bytes takes an unknown capability as that), non-torch 2,330,019,758 (an unknown device: the
    # NVSwitch Hopper figure), graphs 730,857,472 at any TP > 1; block per rank with 1 KV head
    # = 2 x 28 x 1 x 128 x 16 x 2 = 229,376 B; 8,192 blocks needed), and on every rank the 33,554,432 B RoPE table:
    #   TP 4 bf16: weights 3,841,362,688 -> pool 181,233,746 -> 790 blocks, no fit
    #   TP 4 + fp8: weights 8,705,611,264 / 4 + RoPE = 2,209,957,248 -> pool 1,812,639,186 -> 7,902 blocks, no fit
    #   TP 8 (not allowed): weights 1,937,458,560 -> pool 2,085,137,874 -> 9,090 blocks, would fit.
    # So with the heads rule no TP size serves one request (a non-fitting TP 4 may be listed); without the rule,
    # --tensor-parallel-size 8 would top the list as the only fitting lever.
    result, plan = estimate_json("--model", "Qwen/Qwen2.5-7B", "--gpu-memory", "8.5GB")
    assert result.returncode == 1
    assert not any("--tensor-parallel-size 8" in flags for flags in lever_flags(plan))
    assert not any(lever["fits"] for lever in plan["levers"] if "--tensor-parallel-size" in lever["flags"])
    _, tp4_fp8 = estimate_json("--model", "Qwen/Qwen2.5-7B", "--gpu-memory", "8.5GB", "-tp", "4", "--quantization",
                               "fp8")
    assert tp4_fp8["memory"]["kv_cache_bytes"] == 1_812_639_186 and tp4_fp8["capacity"]["num_blocks"] == 7_902
    # falcon-7b-instruct has 71 (prime) heads: no TP size is ever proposed (with the rule off, TP 2 shows up).
    _, falcon = estimate_json("--model", "tiiuae/falcon-7b-instruct", "--gpu-memory", "12GiB")
    assert falcon["capacity"]["fits"] is False and falcon["levers"]
    assert not any("--tensor-parallel-size" in flags for flags in lever_flags(falcon))


# --- c. SGLang's defaults ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("gpu, chunked, fraction, reserve, pool", [
    # SGLang sizes its defaults by nvidia-smi's total (kvplan/data/gpus.json nvml_total_mib) and holds back
    # (1 - fraction) of the memory free before loading: the CUDA total less the 0.61 GiB context (654,982,512 B).
    # rtx3090: 24,576 MiB (< 35 GiB): chunked 2048, graph bs 24; reserved 512 + 1.5 x 2048 + 2 x 24 + 1/8 x 1024
    #   = 3,760 MiB; 20,816 / 24,576 = 0.84701 -> 0.847; free before load 25,297,357,373 - 654,982,512
    #   = 24,642,374,861; reserve int(24,642,374,861 x 0.153) = 3,770,283,353;
    #   pool int(24,642,374,861 - 15,231,233,024 - 3,770,283,353.73) = 5,640,858,483.
    ("rtx3090", 2048, 0.847, 3_770_283_353, 5_640_858_483),
    # l40s: 46,068 MiB (< 60 GiB): chunked 4096, graph bs 32; reserved 512 + 6,144 + 64 + 128 = 6,848 MiB;
    #   39,220 / 46,068 = 0.85135 -> 0.851; free before load 47,148,548,752; reserve int(x 0.149) = 7,025,133,764;
    #   pool int(47,148,548,752 - 15,231,233,024 - 7,025,133,764.05) = 24,892,181,963.
    ("l40s", 4096, 0.851, 7_025_133_764, 24_892_181_963),
    # h100: 81,559 MiB (60-90 GiB, TP < 4): chunked 8192, graph bs 256; reserved 512 + 12,288 + 512 + 128
    #   = 13,440 MiB; 68,119 / 81,559 = 0.83521 -> 0.835; free before load 84,363,895,112;
    #   reserve int(x 0.165) = 13,920,042,693; pool int(84,363,895,112 - 15,231,233,024 - 13,920,042,693.48)
    #   = 55,212,619,394.
    ("h100", 8192, 0.835, 13_920_042_693, 55_212_619_394),
])
def test_sglang_default_chunked_prefill_and_reserve(gpu, chunked, fraction, reserve, pool):
    # Rule: kvplan/engines/sglang/defaults.py (SGLang 0.5.9 server_args' mem_fraction_static heuristic, ModelRunner
    # profile_max_num_token); Qwen2.5-7B weights 7,615,616,512 x 2 = 15,231,233,024 B; page size 1, 57,344 B per token.
    # (0.5.23's defaults, with its prefill CUDA graphs: tests/test_sglang_releases_issue18.py.)
    result, plan = estimate_json("--model", "Qwen/Qwen2.5-7B", "--gpu", gpu, "--engine", "sglang",
                                 "--max-model-len", "8192", "--engine-version", "0.5.9")
    assert result.returncode == 0
    assert plan["engine"]["max_num_batched_tokens"] == chunked
    assert plan["engine"]["gpu_memory_utilization"] == fraction
    assert plan["memory"]["reserve_bytes"] == reserve
    assert plan["memory"]["kv_cache_bytes"] == pool
    assert plan["capacity"]["tokens"] == pool // 57_344  # 98,368 / 434,085 / 962,831 with page size 1


# --- d. TensorRT-LLM's profiling run and CUDA graphs ------------------------------------------------------------

@pytest.mark.parametrize("extra, activation, graphs, pool, blocks", [
    # default max_batch_size 2048: the largest of CudaGraphConfig's batch sizes 1-31, 32, 64, 128 within
    # min(2,048, max_num_tokens 8,192) is 128, and the estimation pool (at least max_batch_size blocks, _util.py
    # _get_token_num_for_estimation as stored in 2026) holds it. The graph's logits in bf16 and float32 at once,
    # 128 x 128,256 x (2 + 4) = 98,500,608, beat its layers' 128 x 55,296 x 2 = 14,155,776.
    #   free 85,018,877,624 - 16,060,522,496 - 905,969,664 - 98,500,608 - 654,982,512 (CUDA context)
    #   = 67,298,902,344; x 0.8999999761581421 (0.9 as a C++ float) = 60,569,010,505 -> // 131,072 = 462,104 tokens
    #   -> 14,440 whole blocks of 32 (resource_manager.py rounds down) = 60,565,749,760 B
    ((), 905_969_664, 98_500_608, 60_565_749_760, 14_440),
    # --max-num-seqs 64 (max_batch_size): graphs stop at 64 requests, 64 x 128,256 x 6 = 49,250,304
    #   free 67,348,152,648 -> 60,613,335,777 -> 462,443 tokens -> 14,451 blocks = 60,611,887,104 B
    (("--max-num-seqs", "64"), 905_969_664, 49_250_304, 60_611_887_104, 14_451),
])
def test_trtllm_profiling_llama8b_h100(extra, activation, graphs, pool, blocks):
    # TensorRT-LLM's PyTorch backend (kvplan/engines/trtllm.py): the dummy requests' forward of max_num_tokens 8192
    # holds 3 x 4,096 + 3 x 14,336 = 55,296 elements per token at the MLP (GatedMLP.forward):
    # 8,192 x 55,296 x 2 = 905,969,664, above the logits of its 2 requests (2 x 128,256 x 6 = 1,539,072). Weights
    # 8,030,261,248 x 2 = 16,060,522,496; KV 2 x 32 x 8 x 128 x 2 = 131,072 B per token, 32-token blocks;
    # KvCacheConfig.free_gpu_memory_fraction 0.9.
    result, plan = estimate_json("--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100", "--engine", "trtllm",
                                 "--max-model-len", "8192", *extra)
    assert result.returncode == 0
    assert plan["memory"]["weights_bytes"] == 16_060_522_496
    assert plan["memory"]["activation_bytes"] == activation and plan["memory"]["cuda_graph_bytes"] == graphs
    assert plan["memory"]["kv_cache_bytes"] == pool
    assert plan["capacity"]["num_blocks"] == blocks and plan["engine"]["block_size"] == 32


# --- e. V0's concurrency rule ------------------------------------------------------------------------------------

@pytest.mark.parametrize("length, v0, v1", [
    # 10,000 = 625 x 16 exactly: both rules agree, 18,724 x 16 / 10,000 = 18,724 / 625 = 29.9584 -> 29.96.
    (10_000, 29.96, 29.96),
    # 10,001 needs cdiv(10,001, 16) = 626 blocks: V0 counts pool tokens, 299,584 / 10,001 = 29.9554 -> 29.96;
    # V1 counts whole blocks per request, 18,724 / 626 = 29.9105 -> 29.91.
    (10_001, 29.96, 29.91),
])
def test_v0_concurrency_is_pool_tokens_over_max_model_len(length, v0, v1):
    # --kv-cache-memory 16 GiB fixes the pool in both eras: 17,179,869,184 // 917,504 = 18,724 blocks
    # = 299,584 tokens (Qwen2.5-7B, 16-token blocks). V0 rule: vllm/executor/executor_base.py initialize_cache,
    # max_concurrency = num_gpu_blocks * block_size / max_model_len ("Maximum concurrency for %s tokens per
    # request: %.2fx"); V1 divides blocks by the blocks one request holds.
    common = ("--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--kv-cache-memory", "16GiB", "--max-model-len",
              str(length))
    _, old = estimate_json(*common, "--vllm-version", "0.6")
    _, new = estimate_json(*common, "--vllm-version", "0.11")
    for plan in (old, new):
        assert plan["capacity"]["num_blocks"] == 18_724
        assert plan["capacity"]["blocks_per_request"] == -(-length // 16)
    assert old["capacity"]["max_concurrency"] == v0
    assert new["capacity"]["max_concurrency"] == v1


# --- f. a tied lm_head on the last pipeline stage ----------------------------------------------------------------

def test_tied_lm_head_is_a_copy_on_the_last_pipeline_stage():
    # Qwen2.5-0.5B (tie_word_embeddings true): 494,032,768 params, embeddings 136,134,656 (151,936 x 896),
    # lm_head 0; 24 layers, 2 KV heads x 64.
    # Per layer: (494,032,768 - 136,134,656) x 2 = 715,796,224 // 24 = 29,824,842 B.
    # PP 1: 24 x 29,824,842 + 136,134,656 x 2 = 715,796,208 + 272,269,312 = 988,065,520 (the embedding once),
    # + the RoPE table every stage builds, 32,768 positions x 64 x 2 B = 4,194,304: 992,259,824.
    _, pp1 = estimate_json("--model", "Qwen/Qwen2.5-0.5B", "--gpu", "rtx3090")
    assert pp1["memory"]["weights_bytes"] == 992_259_824
    # PP 2 (12 + 12 layers): stage 0 = 12 x 29,824,842 + 272,269,312 (embedding) = 630,167,416; the last stage
    # = 12 x 29,824,842 + 272,269,312 (its own copy of the tied matrix as lm_head) = 630,167,416 too; each
    # + 4,194,304 (RoPE) = 634,361,720.
    # Only the last stage runs the sampler and holds V2's sampler buffers: 3.5 x 256 x 151,936 x 4 + 1 MiB
    # = 545,587,200, the held hidden states (2,048 + 256) x 896 x 2 = 4,128,768, the cuBLAS workspace 8,519,680,
    # 256 x (151,936 + 2 x 4,748) x 4 = 165,306,368, and the buffers V2's load_model makes for what the stage
    # receives (v1/worker/gpu/model_runner.py, counted from 0.27): hidden_states and residual, 2 x 2,048 x 896 x 2
    # = 7,340,032; 730,882,048 in all (stage 0: its forward (3 x 2,048 x 896 + 3 x 2,048 x 4,864) x 2 + 128,849,018
    # = 199,627,898), so the last stage limits. Its pool: 23,273,568,783 - 634,361,720
    # - 730,882,048 - 75,161,927 (non-torch, pipeline stages at TP 1: int(0.07 GiB)) - graphs for 12 layers
    # (466,616,320) = 21,366,546,768; block 2 x 12 x 2 x 64 x 16 x 2 = 98,304 B -> 217,351 blocks (stage 0:
    # 21,897,800,918 -> 222,755). (Without the copy its weights would read 362,092,408 and its pool 21,638,816,080
    # -> 220,121 blocks, still the limiting stage.)
    result, pp2 = estimate_json("--model", "Qwen/Qwen2.5-0.5B", "--gpu", "rtx3090", "-pp", "2")
    assert result.returncode == 0
    assert pp2["limiting_stage"] == 1
    assert pp2["memory"]["weights_bytes"] == 634_361_720
    assert pp2["memory"]["activation_bytes"] == 730_882_048
    assert pp2["memory"]["kv_cache_bytes"] == 21_366_546_768
    assert pp2["kv"]["block_bytes"] == 98_304 and pp2["capacity"]["num_blocks"] == 217_351
