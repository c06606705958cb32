"""vLLM's packed KV cache dtypes: per-token-head scales inside the page, NVFP4, DeepSeek's fp8 MLA
(kvplan/units.py KV_FORMATS; vllm/v1/kv_cache_interface.py AttentionSpec.page_size_bytes and MLAAttentionSpec)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.api import gpu_choices, load_model
from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.errors import KvplanError
from kvplan.models.hf_config import load_json, parse_config
from kvplan.models.layers import FullAttention, LatentAttention
from kvplan.models.model import SpecSource
from kvplan.units import DsMlaKv, Nvfp4Kv, PerTokenHeadKv, kv_cache_format

GiB = 2**30
QWEN35 = Path(__file__).parent / "fixtures" / "configs" / "hybrid" / "qwen3.5-27b.json"


def test_page_bytes_per_format():
    layer = FullAttention(kv_heads=4, head_dim=128)
    # bf16: 2 x 4 heads x 128 x 2 B = 2,048 B per token
    assert layer.bytes_per_token(kv_cache_format("bfloat16")) == 2048
    # int8 / fp8 per token head: each K and V vector 128 x 1 B + one fp32 scale: 2 x 4 x 132 = 1,056 B
    assert layer.bytes_per_token(kv_cache_format("int8_per_token_head")) == 1056
    assert layer.bytes_per_token(kv_cache_format("fp8_per_token_head")) == 1056
    # nvfp4: 128 / 2 B of fp4 + 128 / 16 B of fp8 scales = 72 B per vector: 2 x 4 x 72 = 576 B
    assert layer.bytes_per_token(kv_cache_format("nvfp4")) == 576
    # fp8_ds_mla on a 576-wide latent (512 + 64 rope): 512 + 4 x 4 + 64 x 2 = 656 B per token
    assert LatentAttention(576).bytes_per_token(kv_cache_format("fp8_ds_mla")) == 656
    assert isinstance(kv_cache_format("nvfp4"), Nvfp4Kv) and isinstance(kv_cache_format("fp8_ds_mla"), DsMlaKv)
    assert isinstance(kv_cache_format("int8_per_token_head"), PerTokenHeadKv)


def qwen35_plan(kv_cache_dtype: str, available_gib: float):
    # engine-calibration Y02 / Y03 (noonghunna/club-3090 #594 and #602): Qwen3.6-27B-FP8 (the Qwen3.5-27B text
    # geometry, fixtures/configs/hybrid/SOURCES.md) on 2 x RTX 3090, TP 2, max_model_len 262,144, MTP drafts,
    # the same profile but for the KV dtype; vLLM ~0.24. The logged available memory is given as the pool. The logs'
    # blocks are mamba_cache_mode align's, which 0.24 gives a hybrid only with --enable-prefix-caching (config/model.py
    # is_prefix_caching_supported), so the profile passes it.
    spec = parse_config(load_json(QWEN35.read_bytes(), str(QWEN35)), "qwen3.5-27b", SpecSource("local", str(QWEN35)))
    dep = Deployment.from_mapping({
        "gpu": "rtx3090", "tensor_parallel_size": 2, "kv_cache_dtype": kv_cache_dtype, "max_model_len": 262144,
        "engine_version": "0.24", "speculative_config": {"method": "mtp", "num_speculative_tokens": 3},
        "kv_cache_memory_bytes": int(available_gib * GiB), "enable_prefix_caching": True})
    return plan_deployment(spec, dep, gpu_choices(dep)[0])


def test_int8_per_token_head_replays_its_log_and_fp8_its_own():
    # Y03 logs "Setting attention block size to 1584 tokens", "Padding mamba page size by 0.80%", 5.23 GiB,
    # 289,661 tokens, 1.1x. Per rank the attention token is 2 x 2 heads x (256 + 4) = 1,040 B with the scales,
    # 1,024 B without: the state page needs 1584 tokens with them, 1600 without (Y02 has no 1584 in its log).
    int8 = qwen35_plan("int8_per_token_head", 5.23)
    assert int8.engine.block_size == 1584
    assert any("Padding mamba page size by 0.80%" in note for note in int8.notes)
    assert (int8.capacity.tokens, int8.capacity.max_concurrency) == (289_661, 1.1)
    # Y02, fp8: 5.33 GiB, 300,220 tokens, 1.15x.
    fp8 = qwen35_plan("fp8", 5.33)
    assert fp8.engine.block_size == 1600
    assert (fp8.capacity.tokens, fp8.capacity.max_concurrency) == (300_220, 1.15)


def test_nvfp4_pool_on_a_dense_model():
    # Qwen2.5-7B, 28 layers x 4 KV heads x 128: nvfp4 2 x 28 x 4 x 72 = 16,128 B per token, 258,048 B per
    # 16-token block.
    dep = Deployment.from_mapping({"gpu": "h100", "kv_cache_dtype": "nvfp4"})
    plan = plan_deployment(load_model("Qwen/Qwen2.5-7B"), dep, gpu_choices(dep)[0])
    assert plan.layout.bytes_per_token == 16_128 and plan.layout.block_bytes == 258_048
    assert plan.to_dict()["kv"]["dtype"] == "nvfp4"


def test_unknown_kv_dtype_is_refused():
    with pytest.raises(KvplanError, match="kv_cache_dtype"):
        Deployment.from_mapping({"gpu": "h100", "kv_cache_dtype": "int4_per_token_head"})
