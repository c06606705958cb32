"""DeepSeek sparse attention (DeepSeek-V3.2): the MLA latent and the lightning indexer's own K cache, per layer.

Hand figures, from the engines' sources:
- vLLM deepseek_v2.py Indexer: the indexer cache is DeepseekV32IndexerCache(head_dim = index_head_dim +
  index_head_dim // 128 x 4, dtype uint8), an MLAAttentionSpec of one head: 128 + 4 = 132 B per token per layer.
- The latent: kv_lora_rank 512 + qk_rope_head_dim 64 = 576 values; bfloat16 576 x 2 = 1,152 B; an 8-bit cache is the
  fp8_ds_mla layout, 512 fp8 + 4 fp32 scales + 64 bf16 = 512 + 16 + 128 = 656 B (MLAAttentionSpec).
- kv_cache_utils: the two specs of each layer form one UniformTypeKVCacheSpecs group whose page is their sum;
  platforms/cuda.py forces 64-token blocks for the sparse backend; SGLang server_args sets page size 64 for DSA.
"""

from __future__ import annotations

import pytest

from kvplan.api import estimate, load_model
from kvplan.models.hf_config import parse_config
from kvplan.models.layers import LatentAttention, SparseLatentAttention, page_tensors_bytes
from kvplan.models.model import SpecSource
from kvplan.units import GiB, kv_cache_format

V32 = "deepseek-ai/DeepSeek-V3.2"
BF16, FP8 = kv_cache_format("bfloat16"), kv_cache_format("fp8")


def _config(**extra: object) -> dict[str, object]:
    # DeepSeek-V3.2's attention fields (bundled config), trimmed to what the layer parser reads
    return {"architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32", "num_hidden_layers": 4,
            "hidden_size": 7168, "num_attention_heads": 128, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
            "qk_nope_head_dim": 128, "v_head_dim": 128, "q_lora_rank": 1536, "intermediate_size": 18432,
            "vocab_size": 129280, "torch_dtype": "bfloat16", **extra}


def _layers(config: dict[str, object]) -> list[object]:
    return list(parse_config(config, "test/sparse", SpecSource("local", "config.json")).layers)


def test_bundled_v32_has_the_indexer_in_every_layer() -> None:
    spec = load_model(V32)
    assert spec.layers == (SparseLatentAttention(576, 128, 64, 2048),) * 61


def test_indexer_width_comes_from_the_config() -> None:
    # index_head_dim 256: 256 fp8 + 2 scales x 4 B = 264 B per token
    (layer, *_) = _layers(_config(index_head_dim=256, index_n_heads=32, index_topk=1024))
    assert layer == SparseLatentAttention(576, 256, 32, 1024)
    assert layer.bytes_per_token(BF16) == 1152 + 264


def test_index_topk_alone_marks_sparse_attention() -> None:
    # vLLM's test is hasattr(config, "index_topk"); the indexer width is then V3.2's 128
    (layer, *_) = _layers(_config(index_topk=2048))
    assert layer == SparseLatentAttention(576, 128, 64, 2048)


def test_mla_without_indexer_stays_plain_latent() -> None:
    assert _layers(_config()) == [LatentAttention(576)] * 4


@pytest.mark.parametrize(("kv", "latent"), [(BF16, 1152), (FP8, 656), (kv_cache_format("fp8_ds_mla"), 656)])
def test_bytes_per_token_latent_plus_indexer(kv: int, latent: int) -> None:
    layer = SparseLatentAttention(576, 128, 64, 2048)
    assert layer.bytes_per_token(kv) == latent + 132
    assert layer.bytes_per_token(kv, tp=8) == latent + 132  # whole on every rank, like the latent


@pytest.mark.parametrize(("kv", "latent"), [(BF16, ((64, 576), 2)), (FP8, ((64, 656), 1))])
def test_page_tensors_sum_to_the_page(kv: int, latent: tuple[tuple[int, int], int]) -> None:
    layer = SparseLatentAttention(576, 128, 64, 2048)
    tensors = layer.page_tensors(64, kv)
    assert [(t.name, t.shape, t.element_bytes) for t in tensors] == [
        ("latent", *latent), ("indexer_k", (64, 132), 1)]
    assert page_tensors_bytes(tensors) == layer.page_bytes(64, kv)
    assert layer.page_bytes(64, kv) == 64 * (latent[0][1] * latent[1] + 132)


def test_vllm_block_of_v32_counts_the_indexer() -> None:
    # 10 GiB of KV cache given, so only the page maths speak: 61 layers x 64 tokens x (1,152 + 132) B = 5,012,736 B
    # per block; 10,737,418,240 // 5,012,736 = 2,142 blocks = 137,088 tokens (one group: blocks x 64)
    plan = estimate(V32, gpu="h200", tensor_parallel_size=8, kv_cache_memory_bytes=10 * GiB, max_model_len=8192)
    assert plan.engine.block_size == 64
    assert plan.layout.block_bytes == 5_012_736
    assert plan.capacity.num_blocks == 2_142
    assert plan.capacity.tokens == 137_088


def test_vllm_fp8_is_the_ds_mla_layout() -> None:
    # 61 x 64 x (656 + 132) = 3,076,352 B per block; 10 GiB // that = 3,490 blocks = 223,360 tokens
    plan = estimate(V32, gpu="h200", tensor_parallel_size=8, kv_cache_memory_bytes=10 * GiB, max_model_len=8192,
                    kv_cache_dtype="fp8")
    assert plan.layout.block_bytes == 3_076_352
    assert plan.capacity.tokens == 223_360


def test_sparse_block_size_is_forced_to_64() -> None:
    # Blackwell gives dense MLA 32-token blocks from v0.18 (FlashInfer MLA's smallest), FlashInfer MLA's forced 64 in
    # 0.15-0.17 for DeepSeek's qk_nope_head_dim of 128 and CUTLASS MLA's 128 before (platforms/cuda.py); the sparse
    # backend takes 64 unless asked for a multiple of it (from v0.18, tests/test_vllm_blocks_issue18.py)
    assert estimate(V32, gpu="b200", tensor_parallel_size=8).engine.block_size == 64
    assert estimate(V32, gpu="h200", tensor_parallel_size=8, block_size=16).engine.block_size == 64
    assert estimate("deepseek-ai/DeepSeek-V3", gpu="b200", tensor_parallel_size=8).engine.block_size == 32
    for version, block in (("0.17", 64), ("0.14", 128)):
        assert estimate("deepseek-ai/DeepSeek-V3", gpu="b200", tensor_parallel_size=8,
                        engine_version=version).engine.block_size == block


def test_sglang_cell_matches_its_v32_log() -> None:
    # engine-calibration S10 (sgl-project/sglang#11309, DeepSeek-V3.2-Exp, 8 x B200, fp8 KV by default on SM100):
    # "KV Cache is allocated. #tokens: 975424, KV size: 43.67 GB" (GiB): 61 x (656 + 132) = 48,068 B per token,
    # and 975,424 x 48,068 B = 43.67 GiB.
    plan = estimate(V32, gpu="b200", engine="sglang", tensor_parallel_size=8, kv_cache_dtype="fp8_e4m3")
    assert plan.layout.bytes_per_token == 48_068
    assert round(975_424 * 48_068 / GiB, 2) == 43.67
    assert plan.engine.block_size == 64


def test_automatic_fp8_defaults_are_noted() -> None:
    # SGLang server_args _set_default_nsa_kv_cache_dtype: fp8_e4m3 on SM100+ (B200), bfloat16 below (H200);
    # vLLM 0.11.0 (PR #25988) made "auto" fp8_ds_mla, later versions keep it 16-bit
    def noted(**knobs: object) -> bool:
        return any("sparse attention" in note for note in estimate(V32, tensor_parallel_size=8, **knobs).notes)

    assert noted(gpu="b200", engine="sglang")
    assert not noted(gpu="h200", engine="sglang")
    assert not noted(gpu="b200", engine="sglang", kv_cache_dtype="fp8_e4m3")
    assert noted(gpu="h200", engine_version="0.11.0")
    assert not noted(gpu="h200")


def test_plain_latent_page_tensors_in_ds_mla() -> None:
    # fp8_ds_mla on plain MLA: 64 tokens x 656 B allocated as bytes, the page's 41,984 B
    layer, ds_mla = LatentAttention(576), kv_cache_format("fp8_ds_mla")
    (tensor,) = layer.page_tensors(64, ds_mla)
    assert (tensor.shape, tensor.element_bytes) == ((64, 656), 1)
    assert page_tensors_bytes((tensor,)) == layer.page_bytes(64, ds_mla) == 41_984


def test_each_engine_turns_an_automatic_kv_dtype_into_its_own_sparse_format():
    # SGLang on SM100+ (server_args _set_default_nsa_kv_cache_dtype): fp8_e4m3, stored as 656 B latent + 132 B indexer
    # K = 788 B per layer and token, x 61 layers = 48,068 B (bf16 would be 61 x (1,152 + 132) = 78,324 B).
    sglang = estimate("deepseek-ai/DeepSeek-V3.2", gpu="b200", engine="sglang", tensor_parallel_size=8)
    assert (sglang.to_dict()["kv"]["dtype"], sglang.to_dict()["kv"]["bytes_per_token"]) == ("fp8_e4m3", 48_068)
    # vLLM 0.11 (PR #25988): fp8_ds_mla, a 64-token block of 61 x 64 x 788 = 3,076,352 B; later versions keep the
    # model dtype: 61 x 64 x (1,152 + 132) = 5,012,736 B.
    old = estimate("deepseek-ai/DeepSeek-V3.2", gpu="h200", tensor_parallel_size=8, engine_version="0.11.0")
    new = estimate("deepseek-ai/DeepSeek-V3.2", gpu="h200", tensor_parallel_size=8)
    assert (old.to_dict()["kv"]["dtype"], old.layout.block_bytes) == ("fp8_ds_mla", 3_076_352)
    assert new.layout.block_bytes == 5_012_736
