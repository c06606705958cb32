"""Block-level arithmetic: the seed example, grouping of hybrid models, parallelism."""

from __future__ import annotations

from kvplan.capacity import context_ladder, pipeline_stages, pool_layout
from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.models.layers import FullAttention, SlidingWindow
from kvplan.models.sources import resolve
from kvplan.plan import GpuChoice
from kvplan.units import GB, GiB

CUSTOM_24GB = GpuChoice("custom", "custom", 24 * GB, 1)


def test_seed_example_simple_engine():
    # 2 x 28 x 4 x 128 x 16 x 2 = 917,504 B/block; (24 GB - 15.2 GB - 1 GB) = 7.8e9 B; 7.8e9 // 917,504 = 8,501
    # blocks x 16 = 136,016 tokens.
    dep = Deployment(engine="simple", gpu_memory_bytes=24 * GB, weights_memory_bytes=15_200_000_000,
                     reserve_bytes=GB, gpu_memory_utilization=1.0, dtype="float16")
    plan = plan_deployment(resolve("Qwen/Qwen2.5-7B"), dep, CUSTOM_24GB)
    assert plan.layout.block_bytes == 917_504
    assert plan.layout.bytes_per_token == 57_344
    assert plan.capacity.num_blocks == 8_501
    assert plan.capacity.tokens == 136_016


def test_gemma3_groups_and_padding():
    # 52 sliding + 10 full: group size 10 (52 >= 1.5 x 10) -> 6 sliding groups (8 padding layers) + 1 full.
    spec = resolve("google/gemma-3-27b-it")
    layout = pool_layout(list(spec.layers), 16, 2, 1)
    assert layout.num_groups == 7
    assert layout.padding_layers == 8
    # page = 16 x 2 x 16 x 128 x 2 = 131,072; one block id spans 10 slots = 1,310,720 B
    assert layout.page_bytes == 131_072 and layout.block_bytes == 1_310_720


def test_gemma2_two_equal_groups():
    layout = pool_layout(list(resolve("google/gemma-2-9b-it").layers), 16, 2, 1)
    assert layout.num_groups == 2 and layout.padding_layers == 0
    # 21 slots x 131,072 B (16 x 2 x 8 x 256 x 2)
    assert layout.block_bytes == 21 * 131_072


def test_grouping_is_decided_by_kind():
    # 3 sliding + 2 full, equal pages (16 x 2 x 8 x 128 x 2 = 65,536 B): hybrid. 3 < 1.5 x 2 fails, so the group
    # size is the smaller count, 2: sliding in groups [2, 1] (1 padding layer) + full [2] = 3 groups.
    layers = [SlidingWindow(8, 128, 4096)] * 3 + [FullAttention(8, 128)] * 2
    layout = pool_layout(layers, 16, 2, 1)
    assert layout.num_groups == 3 and layout.padding_layers == 1 and layout.block_bytes == 2 * 65_536
    assert sorted(g.layer.kind for g in layout.groups) == ["full", "sliding", "sliding"]


def test_llama4_chunked_groups():
    # 36 chunked + 12 full: group size 12 -> 3 chunked groups + 1 full, no padding
    layout = pool_layout(list(resolve("meta-llama/Llama-4-Scout-17B-16E-Instruct").layers), 16, 2, 1)
    assert layout.num_groups == 4 and layout.padding_layers == 0


def test_tensor_parallel_divides_kv_heads_but_not_mla():
    llama = resolve("meta-llama/Llama-3.1-70B")
    # 8 KV heads / TP 4 = 2 per rank: 80 x 2 x 2 x 128 x 2 = 81,920 B/token
    assert pool_layout(list(llama.layers), 16, 2, 4).bytes_per_token == 81_920
    v3 = resolve("deepseek-ai/DeepSeek-V3")
    # MLA: 61 x 576 x 2 = 70,272 B/token on every rank
    assert pool_layout(list(v3.layers), 64, 2, 8).bytes_per_token == 70_272


def test_pipeline_split_follows_vllm():
    # 62 layers / 4 stages = 15 rem 2 -> the 2nd- and 3rd-to-last... i.e. stages [15, 16, 16, 15]
    assert [len(r) for r in pipeline_stages(62, 4)] == [15, 16, 16, 15]
    assert [len(r) for r in pipeline_stages(80, 2)] == [40, 40]


def test_pipeline_blocks_are_minimum_over_stages():
    spec = resolve("meta-llama/Llama-3.1-8B")
    dep = Deployment(engine="simple", gpu_memory_bytes=24 * GB, tensor_parallel_size=1, pipeline_parallel_size=3,
                     kv_cache_memory_bytes=3 * GiB, max_model_len=8192)
    plan = plan_deployment(spec, dep, GpuChoice("custom", "custom", 24 * GB, 3))
    # 32 layers over 3 stages: [10, 11, 11]; the 11-layer stages limit: 3 GiB // (11 x 65,536 B) = 4,468 blocks
    assert plan.capacity.num_blocks == 3 * GiB // (11 * 65_536)


def test_ladder_rungs():
    assert context_ladder(32768) == [2048, 4096, 8192, 16384, 32768]
    assert context_ladder(5000) == [2048, 4096, 5000]
    assert context_ladder(131072, [4096, 1000]) == [1000, 4096]


def test_speculative_mtp_adds_a_layer():
    spec = resolve("deepseek-ai/DeepSeek-V3")
    base = Deployment(gpu_memory_bytes=141 * GB, tensor_parallel_size=8, kv_cache_memory_bytes=10 * GiB)
    gpu = GpuChoice("custom", "custom", 141 * GB, 8)
    plain = plan_deployment(spec, base, gpu)
    from dataclasses import replace

    mtp = plan_deployment(spec, replace(base, speculative_config={"method": "deepseek_mtp", "num_speculative_tokens": 1}),
                   gpu)
    # 61 + 1 MLA layers; block 64 on an unknown GPU -> default 16: 62 x 16 x 576 x 2 = 1,142,784 B/block
    assert plain.layout.block_bytes == 61 * 16 * 576 * 2
    assert mtp.layout.block_bytes == 62 * 16 * 576 * 2


def test_sglang_counts_sliding_layers_as_full():
    # SGLang's flat pool: gemma-2-9b caches every token in all 42 layers: 42 x 2 x 8 x 256 x 2 = 344,064 B/token,
    # so a 10 GiB pool holds 10 GiB // 344,064 = 31,207 tokens.
    spec = resolve("google/gemma-2-9b-it")
    dep = Deployment(engine="sglang", gpu_memory_bytes=80 * GiB, kv_cache_memory_bytes=10 * GiB, max_model_len=8192)
    plan = plan_deployment(spec, dep, GpuChoice("custom", "custom", 80 * GiB, 1))
    assert plan.layout.bytes_per_token == 344_064
    assert plan.capacity.tokens == 10 * GiB // 344_064 == 31_207
