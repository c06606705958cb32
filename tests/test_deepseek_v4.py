"""DeepSeek-V4's compressed sparse attention (issue 22): what each layer caches, its pages, vLLM 0.33.0's packed
KV cache groups, and the parameter count. The hand derivations below use the published config's numbers
(deepseek-ai/DeepSeek-V4-Flash: head_dim 512, qk_rope_head_dim 64, sliding_window 128, index_head_dim 128,
compress_ratios [0, 0, 4, 128, ..., 4] over 43 layers: 2 sliding-only, 21 of ratio 4, 20 of ratio 128). The
oracle figures are what vLLM 0.33.0's own code printed on CPU (tests/oracle/vllm_dsv4.py: the release's
get_kv_cache_spec methods and v1/core/kv_cache_planning.get_kv_cache_configs, update_kv_cache_capacity)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kvplan
from kvplan.capacity import approximate_gcd, pool_layout
from kvplan.errors import KvplanError
from kvplan.models.compressed_attention import CompressedSparseAttention
from kvplan.models.hf_config import parse_config
from kvplan.models.model import SpecSource

FRONTIER = Path(__file__).parent / "fixtures" / "configs" / "frontier"
FLASH = FRONTIER / "deepseek-ai__DeepSeek-V4-Flash"
PRO = FRONTIER / "deepseek-ai__DeepSeek-V4-Pro"
GIB40 = 40 * 2**30


def config(path: Path) -> dict:
    return json.loads((path / "config.json").read_text())


def spec(path: Path, data: dict | None = None):
    return parse_config(data or config(path), path.name, SpecSource("local", str(path)))


def test_layers_follow_compress_ratios():
    layers = spec(FLASH).layers
    assert len(layers) == 43  # the 44th entry of compress_ratios is the MTP layer's, outside the main model
    assert [layer.ratio for layer in layers[:4]] == [1, 1, 4, 128]
    assert sum(layer.ratio == 4 for layer in layers) == 21 and sum(layer.ratio == 128 for layer in layers) == 20
    assert layers[2] == CompressedSparseAttention(512, 64, 128, 4, 128, 64, 512)


def test_transformers_layer_types_read_as_the_ratios():
    # transformers' DeepseekV4Config writes layer_types and compress_rates in place of compress_ratios; vLLM 0.33.0
    # maps them back (deepseek_v4_utils.get_compress_ratios)
    data = config(FLASH)
    names = {0: "sliding_attention", 4: "compressed_sparse_attention", 128: "heavily_compressed_attention"}
    upstream = {k: v for k, v in data.items() if k != "compress_ratios"} | {
        "layer_types": [names[r] for r in data["compress_ratios"][:43]],
        "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128}}
    assert spec(FLASH, upstream).layers == spec(FLASH).layers
    # a model whose layer_types are all sliding_attention is a sliding-window model, not DeepSeek-V4
    plain = {"model_type": "mistral", "hidden_size": 1024, "num_attention_heads": 8, "num_hidden_layers": 2,
             "vocab_size": 1000, "intermediate_size": 4096, "sliding_window": 512,
             "layer_types": ["sliding_attention"] * 2}
    assert [layer.kind for layer in spec(FLASH, plain).layers] == ["sliding", "sliding"]


def test_one_ratio_4_layer_by_hand():
    # fp8_ds_mla latent entry: 448 NoPE bytes + 64 RoPE x 2 B + 448 / 64 + 1 scale bytes = 584 B; pages of the
    # 256-token pool block, each rounded up to a multiple of 576 B:
    #   sliding window   64 tokens x 584          = 37,376 -> 37,440
    #   compressed latent 256 / 4 = 64 x 584       = 37,376 -> 37,440
    #   compressor state  4 x 2 x 2 x 512 x 4 B    = 32,768 -> 32,832
    #   indexer key       64 x (128 + 128 / 128 x 4) = 8,448 -> 8,640
    #   indexer state     4 x 2 x 2 x 128 x 4 B    =  8,192 -> 8,640
    caches = spec(FLASH).layers[2].cache_layers()
    assert [cache.page_bytes(256, 1) for cache in caches] == [37_440, 37_440, 32_832, 8_640, 8_640]
    assert [cache.entry_bytes(1) for cache in caches] == [584, 584, 2 * 2 * 512 * 4, 132, 2 * 2 * 128 * 4]
    # per token of context: the compressed latent 584 / 4 = 146 B, the indexer key 132 / 4 = 33 B
    assert caches[1].bytes_per_token(1) == 146 and caches[3].bytes_per_token(1) == 33
    # a ratio-128 layer: 256 / 128 = 2 entries x 584 = 1,168 -> 1,728; its state 8 x 2 x 512 x 4 = 32,768 -> 32,832
    heavy = spec(FLASH).layers[3].cache_layers()
    assert [cache.page_bytes(256, 1) for cache in heavy] == [37_440, 1_728, 32_832]


def test_packed_groups_by_hand():
    # vLLM 0.33.0 _get_packed_kv_cache_groups: buckets sliding (43 x 37,440, block 64), full (21 x 37,440 +
    # 21 x 8,640 + 20 x 1,728, block 256: unbalanced, one group), ratio-4 states (21 x 32,832 + 21 x 8,640, block
    # 4, window 8: balanced, mixed, so at least 21 repeats), ratio-128 states (20 x 32,832, block 8). The repeats:
    # the d in [21, 43] padding 43, 21 and 20 least: d = 22 pads 1 + 1 + 2 = 4 (21 pads 20 + 0 + 1). So the
    # sliding bucket splits in cdiv(43, 22) = 2 groups, the others stay whole: 5 groups.
    assert approximate_gcd([43, 21, 20], 21) == 22
    assert approximate_gcd([4, 6], 1) == 2  # 1 and 2 both pad nothing: ties take the larger d
    layout = pool_layout(list(spec(FLASH).layers), 256, 1, 1)
    assert [(g.slots, g.tokens_per_block) for g in layout.groups] == [(22, 64), (21, 64), (62, 256), (42, 4),
                                                                      (20, 8)]
    # a block id costs the widest group: max(22 x 37,440 = 823,680; 21 x 37,440 + 21 x 8,640 + 20 x 1,728 =
    # 1,002,240; 21 x 32,832 + 21 x 8,640 = 870,912; 20 x 32,832 = 656,640)
    assert layout.block_bytes == 1_002_240
    # one request of 65,536 tokens with 16,384 in flight (2 x 8,192, async scheduling): each sliding group
    # cdiv(127 + 16,384, 64) + 1 = 259, the full group cdiv(65,536, 256) = 256, the ratio-4 states
    # cdiv(7 + 16,384, 4) + 1 = 4,099, the ratio-128 states cdiv(127 + 16,384, 8) + 1 = 2,065: 6,938
    assert layout.blocks_per_request(65_536, 16_384) == 2 * 259 + 256 + 4_099 + 2_065 == 6_938


def test_verify_allocates_one_buffer_the_groups_alias():
    # vLLM's block-outermost packing: every group's pages from byte 0 of one 1,002,240 B block, the narrower groups
    # padded (get_kv_cache_config_from_groups); the full group's three specs fill it exactly
    from kvplan.verify.shape import pool_shape

    layers = list(spec(FLASH).layers)
    shape = pool_shape(pool_layout(layers, 256, 1, 1), layers)
    assert len(shape.buffers) == 1 and shape.groups == 5 and shape.block_bytes == 1_002_240
    full = shape.buffers[0].tensors(2)
    assert len(full) == 62 and sum(tensor.nbytes for tensor in full) == 1_002_240
    assert shape.buffers[0].tensors(0)[-1].shape == (1_002_240 - 823_680,)  # 22 x 37,440 B, then padding


def test_a_deployment_by_hand_and_by_the_release():
    plan = kvplan.estimate(str(FLASH), gpu="h200", max_model_len=65_536, kv_cache_memory_bytes=GIB40)
    # 42,949,672,960 // 1,002,240 = 42,853 blocks; 42,853 / 6,938 = 6.1766; int(6.1766 x 65,536) = 404,787.
    # vLLM 0.33.0 on CPU (tests/oracle/vllm_dsv4.py, kv_cache_dtype auto, which it makes fp8_ds_mla): 42,853
    # blocks, 404,787 tokens, 6.18x, groups of 22, 21, 62, 42 and 20 layers
    assert plan.capacity.num_blocks == 42_853
    assert plan.capacity.blocks_per_request == 6_938
    assert plan.capacity.tokens == 404_787
    assert plan.capacity.max_concurrency == 6.18


@pytest.mark.parametrize(("path", "max_len", "extra", "blocks", "tokens", "concurrency"), [
    (PRO, 65_536, {}, 29_909, 282_518, 4.31),
    (FLASH, 1_048_576, {}, 42_853, 4_169_106, 3.98),
    (FLASH, 131_072, {"max_num_batched_tokens": 2_048}, 42_853, 2_550_784, 19.46),
], ids=["pro-64k", "flash-1m", "flash-128k-2048-batched"])
def test_vllm_033_oracle(path, max_len, extra, blocks, tokens, concurrency):
    # each figure printed by tests/oracle/vllm_dsv4.py with vLLM 0.33.0 (40 GiB of KV cache, an H200)
    plan = kvplan.estimate(str(path), gpu="h200", max_model_len=max_len, kv_cache_memory_bytes=GIB40, **extra)
    assert (plan.capacity.num_blocks, plan.capacity.tokens, plan.capacity.max_concurrency) == (
        blocks, tokens, concurrency)


def test_tensor_parallel_keeps_every_cache_whole():
    # max_tp_shards=1 on every spec: TP 8 with 20 GiB and fp8 at 262,144 tokens, vLLM 0.33.0 (oracle): 21,426
    # blocks, 728,873 tokens, 2.78x
    plan = kvplan.estimate(str(FLASH), gpu="h200", tensor_parallel_size=8, max_model_len=262_144,
                           kv_cache_memory_bytes=20 * 2**30, kv_cache_dtype="fp8")
    assert (plan.capacity.num_blocks, plan.capacity.tokens, plan.capacity.max_concurrency) == (
        21_426, 728_873, 2.78)


def test_pipeline_stages_share_the_global_groups():
    # PP 2, 40 GiB on each worker, Pro at 64K: vLLM 0.33.0 (oracle, get_global_kv_cache_groups over the two workers'
    # specs) 59,747 blocks, 564,367 tokens, 8.61x. The oracle runs Model Runner V1 (no Triton on CPU), whose two
    # batches in flight keep 6,938 blocks a request; the V1 runner is asked for here the same way
    plan = kvplan.estimate(str(PRO), gpu="h200", pipeline_parallel_size=2, max_model_len=65_536,
                           kv_cache_memory_bytes=GIB40, v2_model_runner=False)
    assert (plan.capacity.num_blocks, plan.capacity.tokens, plan.capacity.max_concurrency) == (
        59_747, 564_367, 8.61)


def test_an_mtp_draft_adds_one_sliding_window():
    # the MTP layer has ratio 1 (vLLM 0.33.0 nvidia/mtp.py; DeepseekV4Attention past num_hidden_layers): one more
    # sliding-window cache, so the sliding bucket holds 44 and splits 22 + 22; the block (the full group's
    # 1,002,240 B) and a request's 6,938 blocks stay. vLLM 0.33.0 with the MTP draft's cache (oracle): 42,853
    # blocks, 404,787 tokens, 6.18x, groups of 22, 22, 62, 42 and 20
    plan = kvplan.estimate(str(FLASH), gpu="h200", max_model_len=65_536, kv_cache_memory_bytes=GIB40,
                           speculative_config={"method": "mtp", "num_speculative_tokens": 1})
    assert [group.slots for group in plan.layout.groups] == [22, 22, 62, 42, 20]
    assert (plan.capacity.num_blocks, plan.capacity.tokens, plan.capacity.max_concurrency) == (
        42_853, 404_787, 6.18)


def test_parameter_count():
    # Per layer (vLLM 0.33.0 models/deepseek_v4): attention 4,096 x (1,024 + 512) + 1,024 + 1,024 x 64 x 512 + 512
    # + 4,096 x 8,192 + 8,192 x 4,096 + 64 sinks = 106,956,352 (+ ratio 4: compressor 4 x 2 x 512 + 4,096 x 2,048
    # + 512 = 8,393,216, indexer 1,024 x 64 x 128 + 4,096 x 64 + its compressor 4 x 256 + 4,096 x 512 + 128 =
    # 10,749,056; ratio 128: compressor 128 x 512 + 4,096 x 1,024 + 512 = 4,260,352); experts 256 x 3 x 4,096
    # x 2,048, a shared one 3 x 4,096 x 2,048, router 4,096 x 256, the score bias 256 or, in the 3 hash layers,
    # a 129,280 x 6 table; two norms 2 x 4,096; hyper-connections 2 x (24 x 16,384 + 24 + 3). Besides: embedding
    # and lm_head 129,280 x 4,096 each, the final norm, the head's 4 x 16,384 + 4 + 1.
    attention, c4, c128 = 106_956_352, 8_393_216 + 10_749_056, 4_260_352
    ffn = 256 * 3 * 4_096 * 2_048 + 3 * 4_096 * 2_048 + 4_096 * 256
    other = 2 * 4_096 + 2 * (24 * 16_384 + 24 + 3)
    layers = 43 * (attention + ffn + other) + 21 * c4 + 20 * c128 + 3 * 129_280 * 6 + 40 * 256
    total = layers + 2 * 129_280 * 4_096 + 4_096 + 4 * 16_384 + 5
    assert spec(FLASH).params.total == total == 284_334_567_511
    # the model cards' totals: 284B (Flash) and 1.6T (Pro), without the MTP layer
    assert round(spec(FLASH).params.total / 1e9) == 284
    assert round(spec(PRO).params.total / 1e11) / 10 == 1.6


def test_fp4_experts_weigh_17_bits_in_32():
    # expert_dtype fp4 beside fp8 (vLLM 0.33.0 DeepseekV4FP8Config): MXFP4 experts, 4 bits + one UE8M0 byte per 32
    flash = spec(FLASH)
    assert flash.quantization.expert_format == "mxfp4"
    plan = kvplan.estimate(str(FLASH), gpu="h200", tensor_parallel_size=8, max_model_len=65_536)
    experts = flash.params.experts * 17 // 32
    assert plan.memory.weights_bytes < (flash.params.total - flash.params.experts) + experts


def test_bad_compress_ratios_is_one_line():
    data = config(FLASH) | {"compress_ratios": [0, 4]}
    with pytest.raises(KvplanError, match="compress_ratios.*2 entries for 43 layers"):
        spec(FLASH, data)
    data = config(FLASH) | {"compress_ratios": [0, 0] + [2] * 42}
    with pytest.raises(KvplanError, match="ratio of 2"):
        pool_layout(list(spec(FLASH, data).layers), 256, 1, 1)


def test_vllm_serves_fp8_ds_mla_and_refuses_the_rest():
    # vLLM 0.33.0 attention.py _resolve_dsv4_kv_cache_dtype: auto -> fp8_ds_mla on FlashMLA; any other than fp8 is
    # refused; compute capability 12.x takes FlashInfer's rows (not modelled)
    plan = kvplan.estimate(str(FLASH), gpu="h200", max_model_len=65_536, kv_cache_memory_bytes=GIB40)
    assert plan.kv_dtype == "fp8_ds_mla"
    with pytest.raises(KvplanError, match="takes an fp8 KV cache only"):
        kvplan.estimate(str(FLASH), gpu="h200", kv_cache_dtype="bfloat16")
    with pytest.raises(KvplanError, match="compute capability 12.x"):
        kvplan.estimate(str(FLASH), gpu="rtx-pro-6000-blackwell", tensor_parallel_size=4)


def test_other_engines_refuse_by_name():
    # SGLang 0.5.23 builds pools of its own (tests/test_deepseek_v4_sglang.py); TensorRT-LLM's DeepseekV4CacheManager
    # is planned (tests/test_trtllm_deepseek_v4.py, an FP8 cache on SM 90 with its workspace reserve in
    # tests/test_issue22_trtllm_fp8_sm90.py), SM 120/121 refused by name (fp8_ds_mla rows there)
    with pytest.raises(KvplanError, match="DeepSeek-V4 on TensorRT-LLM is not modelled"):
        kvplan.estimate(str(FLASH), gpu="rtx-pro-6000-blackwell", tensor_parallel_size=8, engine="trtllm",
                        kv_cache_memory_bytes=GIB40)
