"""SGLang release by release (issue 18 section 3): each rule as the release's own wheel has it (kvplan/engines/sglang/
releases.py names the file), derived by hand here; tests/oracle/cases.jsonl holds what every release's ServerArgs from
0.5.9 to 0.5.23 resolved for the same deployments."""

from __future__ import annotations

import pytest

from kvplan.api import estimate
from kvplan.engines.sglang import defaults
from kvplan.engines.sglang.releases import RELEASES, release_of
from kvplan.engines.sglang.running import mamba_slots_per_request, running_requests
from kvplan.errors import KvplanError

# nvidia-smi totals (kvplan/data/gpus.json nvml_total_mib): RTX 4090 24,564 MiB, H100 SXM 81,559, H200 143,771
RTX4090, H100, H200 = 24_564, 81_559, 143_771


def test_the_default_release_is_the_newest_covered():
    assert release_of(None) == (0, 5, 23) == release_of(RELEASES.newest)
    assert release_of("0.5") == (0, 5, 0) and release_of("0.5.10.post1") == (0, 5, 10)


@pytest.mark.parametrize("release, tp, expected", [
    ((0, 5, 19), 1, (2048, 24)),  # 0.5.19 arg_groups/memory_hook.py: chunked 2k, max_bs 24 if tp < 4 else 80
    ((0, 5, 19), 4, (2048, 80)),
    ((0, 5, 20), 1, (4096, 48)),  # 0.5.20 arg_groups/memory_hook.py: chunked 4k, max_bs 48 if tp < 4 else 160
    ((0, 5, 20), 4, (4096, 160)),
])
def test_20_35_gib_cards_get_larger_defaults_from_0_5_20(release, tp, expected):
    assert defaults.gpu_defaults(RTX4090, tp, release) == expected


def test_prefill_graph_sizes():
    # generate_prefill_cuda_graph_batch_sizes: 4..32 by 4 (8 sizes), 48..256 by 16 (14), 288..512 by 32 (8),
    # 576..1024 by 64 (8), 1280..4096 by 256 (12), then 4608.. by 512. Up to 2048: 8 + 14 + 8 + 8 + 4 (1280, 1536,
    # 1792, 2048) = 42; 4096: 50; 8192: 50 + 8 (4608 .. 8192) = 58; chunking off (-1): none.
    assert [defaults.prefill_graph_sizes(tokens) for tokens in (2048, 4096, 8192, -1)] == [42, 50, 58, 0]
    assert defaults.prefill_graph_mib(4096, mla=False) == 400 and defaults.prefill_graph_mib(4096, mla=True) == 1536


@pytest.mark.parametrize("version, fraction, chunked", [
    # 0.5.9: 512 + 1.5 x 2048 + 2 x 24 + 1 / 8 x 1024 = 3,760 MiB: round(20,804 / 24,564, 3) = 0.847
    ("0.5.9", 0.847, 2048),
    # 0.5.23: 512 + 1.5 x 4096 + 2 x 48 + 128 + 50 prefill graph sizes x 8 MiB = 7,280 MiB: 17,284 / 24,564 = 0.704
    ("0.5.23", 0.704, 4096),
])
def test_rtx4090_fraction_by_release(version, fraction, chunked):
    # issue 18 section 3.1 and 3.2; 0.5.23's own ServerArgs (with the prefill backend CUDA gets) resolves 0.704
    plan = estimate("Qwen/Qwen2.5-7B", gpu="rtx4090", engine="sglang", max_model_len=32768, engine_version=version)
    assert plan.engine.gpu_memory_utilization == fraction
    assert plan.engine.max_num_batched_tokens == chunked


def test_h100_pool_at_0_5_23():
    # Qwen2.5-7B on an H100: 512 + 1.5 x 8192 + 2 x 256 + 128 + 58 x 8 = 13,904 MiB: round(67,655 / 81,559, 3) = 0.83
    # (0.835 in 0.5.9). Free before load 84,363,895,112 B (85,018,877,624 less the 654,982,512 B CUDA context); held
    # back int(x 0.17) = 14,341,862,169; pool int(84,363,895,112 - 15,231,233,024 weights - 14,341,862,169.04) =
    # 54,790,799,918 B // 57,344 B a token = 955,475 tokens (962,831 at 0.5.9).
    plan = estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="sglang", max_model_len=8192)
    assert plan.engine.gpu_memory_utilization == 0.83
    assert plan.memory.kv_cache_bytes == 54_790_799_918
    assert plan.capacity.tokens == 955_475


@pytest.mark.parametrize("model, version, fraction", [
    # DeepSeek-V3 at TP 8 on an H200: 512 + 1.5 x 8192 + 2 x 512 + 8 / 8 x 1024 = 14,848 MiB: 0.897 (0.5.9);
    # an MLA backend's prefill graphs add 1,536 MiB (reserve_for_graph_mb): 16,384 -> 127,387 / 143,771 = 0.886
    ("deepseek-ai/DeepSeek-V3", "0.5.9", 0.897), ("deepseek-ai/DeepSeek-V3", "0.5.13", 0.886),
    ("deepseek-ai/DeepSeek-V3", "0.5.16", 0.897), ("deepseek-ai/DeepSeek-V3", "0.5.17", 0.897),
    ("deepseek-ai/DeepSeek-V3", "0.5.18", 0.886), ("deepseek-ai/DeepSeek-V3", "0.5.23", 0.886),
    # DeepSeek sparse attention (V3.2) keeps them from 0.5.17
    ("deepseek-ai/DeepSeek-V3.2", "0.5.16", 0.897), ("deepseek-ai/DeepSeek-V3.2", "0.5.17", 0.886),
])
def test_mla_prefill_graphs_reserve_1536_mib(model, version, fraction):
    # 0.5.15-0.5.16 keep MLA off the breakable backend; 0.5.17 all but DeepSeek sparse attention (server_args.py
    # _disable_breakable_cudagraph_if_incompatible); 0.5.18 keeps it
    plan = estimate(model, gpu="h200", engine="sglang", tensor_parallel_size=8, max_model_len=32768,
                    engine_version=version)
    assert plan.engine.gpu_memory_utilization == fraction


def test_prefill_graphs_stop_at_max_total_tokens():
    # memory_hook.py: the prefill graphs' largest size is min(chunked prefill, --max-total-tokens): sizes up to
    # 3,000 are 8 + 14 + 8 + 8 + 7 (1280 .. 2816) = 45 x 8 = 360 MiB: 13,800 MiB -> round(67,759 / 81,559, 3) = 0.831
    plan = estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="sglang", max_model_len=32768, max_total_tokens=3000)
    assert plan.engine.gpu_memory_utilization == 0.831


@pytest.mark.parametrize("version, fraction", [("0.5.9", 0.769), ("0.5.23", 0.758)])
def test_deepseek_attention_dp_launch_is_eight_gpus(version, fraction):
    # issue 18 section 3.5: `--tp 8 --dp 8 --enable-dp-attention` is attention DP 8 inside TP 8 (8 GPUs).
    # 14,848 MiB + 512 x 8 x 3 + 512 x 8 x 1.5 (max_bs above 300) = 33,280 MiB: round(110,491 / 143,771, 3) = 0.769;
    # 0.5.23 adds the MLA prefill graphs' 1,536 MiB (kept under attention DP): 34,816 -> 0.758. Both releases' own
    # ServerArgs resolve these, and the chunk per DP rank 8,192 // 8 = 1,024 (tests/oracle/cases.jsonl).
    from kvplan.deployment.front_doors import from_cli

    own = {"model": ("deepseek-ai/DeepSeek-V3", "--model"), "gpu": ("h200", "--gpu"),
           "engine": ("sglang", "--engine"), "engine_version": (version, "--engine-version")}
    dep = from_cli(own, ["--tp", "8", "--dp", "8", "--enable-dp-attention", "--context-length", "32768"], None,
                   None, environ={})
    assert (dep.tensor_parallel_size, dep.data_parallel_size, dep.attention_data_parallel_size) == (8, 1, 8)
    from kvplan.api import estimates

    plan = estimates(dep)[0].plan
    assert plan.gpu.count == 8
    assert plan.engine.gpu_memory_utilization == fraction
    assert plan.engine.max_num_batched_tokens == 1024
    assert not any("enable-dp-attention" in note for note in plan.notes)


@pytest.mark.parametrize("version, fraction, draft_in_pool", [
    # DeepSeek-V3 at TP 8 on an H200 with its MTP layer as the draft. 0.5.9: 14,848 MiB + 2 GiB for EAGLE / MTP =
    # 16,896 -> 0.882; 0.5.13: + 1,536 MiB of prefill graphs (speculative decoding no longer turns them off from
    # 0.5.11) + 4 GiB = 20,480 -> round(123,291 / 143,771, 3) = 0.858; 0.5.14: no reserve: 16,384 -> 0.886.
    ("0.5.9", 0.882, False), ("0.5.13", 0.858, False), ("0.5.14", 0.886, True), ("0.5.23", 0.886, True),
])
def test_the_draft_is_in_the_pool_from_0_5_14(version, fraction, draft_in_pool):
    # issue 18 section 3.3. Before 0.5.14 the target's pool holds only its 61 layers (70,272 B a token: 61 x 576 latent
    # x 2 B) and its weights only; from 0.5.14 the cell grows by the draft's layer (pool_configurator.py: 62 x 1,152
    # B = 71,424) and the profiled memory holds the draft's weights.
    plan = estimate("deepseek-ai/DeepSeek-V3", gpu="h200", engine="sglang", tensor_parallel_size=8,
                    max_model_len=32768, engine_version=version,
                    speculative_config={"method": "mtp", "num_speculative_tokens": 1})
    target_only = estimate("deepseek-ai/DeepSeek-V3", gpu="h200", engine="sglang", tensor_parallel_size=8,
                           max_model_len=32768, engine_version=version)
    assert plan.engine.gpu_memory_utilization == fraction
    cell = plan.memory.kv_cache_bytes // plan.capacity.tokens
    assert cell == (71_424 if draft_in_pool else 70_272)
    assert (plan.memory.weights_bytes > target_only.memory.weights_bytes) == draft_in_pool
    assert any("before 0.5.14" in note for note in plan.notes) != draft_in_pool


@pytest.mark.parametrize("model, tp, context, fraction", [
    # An MI300X (206,141,652,992 B = 196,591.6 MiB, no nvidia-smi total): chunked 16,384, max_bs 512; no prefill
    # graphs on ROCm. Qwen2.5-7B: 512 + 24,576 + 1,024 + 128 = 26,240 MiB -> 0.867; above 8K of context aiter scales
    # it by 0.85 (arg_groups/attention_hook.py): 0.73695.
    ("Qwen/Qwen2.5-7B", 1, 8192, 0.867),
    ("Qwen/Qwen2.5-7B", 1, 32768, 0.867 * 0.85),
    # DeepSeek-V3 (MLA, 128 heads): aiter at 128 // 8 = 16 heads a rank (27,136 MiB -> 0.862 x 0.85), triton at
    # 128 // 2 = 64 (26,368 MiB -> 0.866, unscaled)
    ("deepseek-ai/DeepSeek-V3", 8, 32768, 0.862 * 0.85),
    ("deepseek-ai/DeepSeek-V3", 2, 32768, 0.866),
])
def test_aiter_on_rocm_above_8k_context(model, tp, context, fraction):
    plan = estimate(model, gpu="mi300x", engine="sglang", tensor_parallel_size=tp, max_model_len=context)
    assert plan.engine.gpu_memory_utilization == pytest.approx(fraction, abs=1e-12)
    assert any("aiter" in note for note in plan.notes) == (fraction != round(fraction, 3))


def test_aiter_scales_a_given_fraction_too():
    # 0.5.23 attention_hook.py (0.5.9 the same): mem_fraction_static x 0.85 whether given or not (unless
    # SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION is set)
    plan = estimate("Qwen/Qwen2.5-7B", gpu="mi300x", engine="sglang", max_model_len=32768, gpu_memory_utilization=0.9)
    assert plan.engine.gpu_memory_utilization == pytest.approx(0.9 * 0.85)


@pytest.mark.parametrize("tokens, given, dp, release, expected", [
    # default: tokens / context (32,768) x 512 within 2,048-4,096 (0.5.9 init_memory_pool)
    (1_000_000, None, 1, (0, 5, 9), 4096),  # 15,625 -> 4,096
    (100_000, None, 1, (0, 5, 9), 2048),  # 1,562 -> 2,048
    (3_000, None, 1, (0, 5, 9), 2048),
    (3_000, None, 1, (0, 5, 10), 1500),  # 0.5.10 _resolve_max_num_reqs: at most 3,000 // 2
    # a given 100 under attention DP 4: 0.5.9 as given; 0.5.10 100 // 4 = 25, at most the estimate; 0.5.14 at most
    # tokens // 2 (0.5.23 kv_cache_configurator.py resolve_max_num_reqs)
    (3_000, 100, 4, (0, 5, 9), 100),
    (3_000, 100, 4, (0, 5, 10), 25),
    (40, 100, 4, (0, 5, 13), 25),
    (40, 100, 4, (0, 5, 14), 20),
])
def test_max_running_requests_by_release(tokens, given, dp, release, expected):
    assert running_requests(tokens, 32768, given, dp, release) == expected


def test_the_default_running_requests_cap_short_contexts():
    # issue 18 section 3.8. Qwen2.5-0.5B on a B200 at 32K: a pool of millions of tokens runs thousands of 2,048-token
    # requests by its KV, but SGLang runs at most 4,096 (tokens / 32,768 x 512 is far above the ceiling)
    plan = estimate("Qwen/Qwen2.5-0.5B", gpu="b200", engine="sglang", max_model_len=32768)
    rung = next(rung for rung in plan.capacity.ladder if rung.context == 2048)
    assert rung.kv_limited > 4096 and rung.concurrency == 4096
    assert any(note.startswith("max_running_requests 4,096") for note in plan.notes)


@pytest.mark.parametrize("architecture, release, slots", [
    # issue 18 section 3.6: mamba_radix_cache_strategy auto resolves to extra_buffer (overlap scheduler on) from
    # 0.5.14 for the architectures server_args names: 3 + 2 tracking slots a running request (get_mamba_tracking_slots)
    ("Qwen3NextForCausalLM", (0, 5, 13), 3),
    ("Qwen3NextForCausalLM", (0, 5, 14), 5),
    ("KimiLinearForCausalLM", (0, 5, 14), 3),  # not in 0.5.14's list
    ("KimiLinearForCausalLM", (0, 5, 23), 5),  # in 0.5.23's _MAMBA_EXTRA_BUFFER_ARCHS
    ("JambaForCausalLM", (0, 5, 23), 3),
])
def test_mamba_slots_a_running_request(architecture, release, slots):
    assert mamba_slots_per_request(architecture, release) == slots


@pytest.mark.parametrize("version, cap, full, swa", [
    # issue 18 section 3.7. gpt-oss-20b: 12 full and 12 sliding layers of 8 KV heads x 64 x (K, V) x 2 B = 2,048 B,
    # so F = S = 24,576 B a token. At 0.85 on an H100 the pool is 57,948,046,077 B (the budget rule,
    # test_sglang_rules.py). 0.5.9-0.5.10 (set_num_tokens_hybrid_swa): 57,948,046,077 // 49,152 = 1,178,956 tokens of
    # every layer, capped, then re-split: full = int(tokens x 2 / 1.8). 0.5.11+ (pool_configurator.py
    # HybridSWAPoolConfigurator): full = int(57,948,046,077 // (24,576 + 0.8 x 24,576)) = 1,309,951, the cap on it.
    ("0.5.9", None, 1_309_951, 1_047_960), ("0.5.23", None, 1_309_951, 1_047_960),
    ("0.5.10", 100_000, 111_111, 88_888),  # int(100,000 x 2 / 1.8) = 111,111; int(x 0.8) = 88,888
    ("0.5.11", 100_000, 100_000, 80_000),
])
def test_the_swa_split_caps_the_full_pool_from_0_5_11(version, cap, full, swa):
    plan = estimate("openai/gpt-oss-20b", gpu="h100", engine="sglang", max_model_len=32768, engine_version=version,
                    max_total_tokens=cap, gpu_memory_utilization=0.85)
    assert plan.memory.kv_cache_bytes == 57_948_046_077
    pools = {pool.name: pool.tokens for pool in plan.pools.pools}
    assert (plan.capacity.tokens, pools["full"], pools["swa"]) == (full, full, swa)


@pytest.mark.parametrize("dtype, per_token", [
    # issue 18 section 3.9. Qwen2.5-7B: 28 layers x 4 KV heads x (K, V). mxfp8 (0.5.23 pool_configurator.py): 128
    # fp8 values + 128 // 32 scale bytes = 132 B a vector: 28 x 4 x 2 x 132 = 29,568 B. fp4_mx_block16
    # (fp4_kv_cache_quant_method.py FP4MXBlock16KVCacheMethod): 128 // 2 + 128 // 16 = 72 B: 16,128 B.
    ("mxfp8", 29_568), ("fp4_mx_block16", 16_128),
])
def test_sglang_kv_dtypes_of_0_5_16(dtype, per_token):
    plan = estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="sglang", max_model_len=32768, kv_cache_dtype=dtype)
    assert plan.layout.bytes_per_token == per_token
    # 0.5.15's --kv-cache-dtype choices are auto, fp8_e5m2, fp8_e4m3, bf16, bfloat16, fp4_e2m1 (server_args.py)
    with pytest.raises(KvplanError, match=f"SGLang 0.5.15 has no --kv-cache-dtype {dtype}"):
        estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="sglang", kv_cache_dtype=dtype, engine_version="0.5.15")


def test_disable_radix_cache_changes_the_mamba_pool():
    # issue 18 section 3.6. Qwen3-Next-80B at TP 2 on an H200 (38,633,472 B of states a request a rank, 12,288 B of
    # KV a token). With the radix cache (0.5.23: extra_buffer) the states take 0.9 : 1 of the rest, 674 slots, and a
    # running request 5 of them: 134 at once. --disable-radix-cache: one slot a request (_calculate_mamba_ratio), so
    # 674 // 1; with --max-running-requests 64 the pool is 64 slots + 1 padding (_handle_max_mamba_cache), and the
    # 675 - 65 = 610 slots freed, 610 x 38,633,472 = 23,566,417,920 B, are 23,566,417,920 // 12,288 = 1,917,840
    # tokens more of KV.
    common = dict(gpu="h200", engine="sglang", tensor_parallel_size=2, max_model_len=32768)
    radix = estimate("Qwen/Qwen3-Next-80B-A3B-Instruct", **common)
    off = estimate("Qwen/Qwen3-Next-80B-A3B-Instruct", disable_radix_cache=True, **common)
    sized = estimate("Qwen/Qwen3-Next-80B-A3B-Instruct", disable_radix_cache=True, max_num_seqs=64, **common)
    assert any("674 // 5 = 134" in note for note in radix.notes)
    assert any("674 // 1 = 674" in note for note in off.notes)
    assert off.capacity.tokens == radix.capacity.tokens
    assert sized.capacity.tokens - radix.capacity.tokens == 1_917_840
    assert any("64 slots, one a running request" in note for note in sized.notes)


@pytest.mark.parametrize("model, gpu, tp, fraction", [
    # issue 18 section 3.9: --chunked-prefill-size -1 turns chunked prefill off. The activation reserve then counts
    # max_prefill_tokens (16,384): Qwen2.5-7B on an H100 512 + 1.5 x 16,384 + 2 x 256 + 128 = 25,728 MiB, and the
    # prefill graphs capture no size (their largest is the chunk, -1): round(55,831 / 81,559, 3) = 0.685, as 0.5.9's
    # and 0.5.23's ServerArgs resolve it (tests/oracle/cases.jsonl). DeepSeek-V3 (MLA) at TP 8 on an H200 keeps the
    # MLA backend's flat 1,536 MiB: 512 + 24,576 + 1,024 + 1,024 + 1,536 = 28,672 -> round(115,099 / 143,771, 3) = 0.801.
    ("Qwen/Qwen2.5-7B", "h100", 1, 0.685),
    ("deepseek-ai/DeepSeek-V3", "h200", 8, 0.801),
])
def test_chunked_prefill_off(model, gpu, tp, fraction):
    from kvplan.deployment.front_doors import from_cli

    own = {"model": (model, "--model"), "gpu": (gpu, "--gpu"), "engine": ("sglang", "--engine")}
    dep = from_cli(own, ["--tp", str(tp), "--context-length", "32768", "--chunked-prefill-size", "-1"], None, None,
                   environ={})
    from kvplan.api import estimates

    plan = estimates(dep)[0].plan
    assert plan.engine.gpu_memory_utilization == fraction
    assert plan.engine.max_num_batched_tokens is None  # a prefill step takes whole requests


def test_only_sglang_takes_a_chunk_of_minus_one():
    with pytest.raises(KvplanError, match="must be at least 1, got -1"):
        estimate("Qwen/Qwen2.5-7B", gpu="h100", max_model_len=32768, max_num_batched_tokens=-1)
    with pytest.raises(KvplanError, match="or -1 for no chunked prefill, got 0"):
        estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="sglang", max_num_batched_tokens=0)
