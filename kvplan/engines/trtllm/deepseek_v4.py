"""TensorRT-LLM and DeepSeek-V4's compressed sparse attention: refused by name, saying where the engine builds it.

The stored NVIDIA/TensorRT-LLM sources do run the model (tensorrt_llm/_torch/models/modeling_deepseekv4.py,
DeepseekV4ForCausalLM, PyTorch backend only), on a cache manager of its own:
tensorrt_llm/_torch/attention_backend/sparse/deepseek_v4/cache_manager.py, DeepseekV4CacheManager, a
KVCacheManagerV2. Its _build_cache_config adds, per compress ratio, up to three manager layers: the sliding window
(window_size, plus max_draft_len under MTP), the 1-in-ratio compressed latents with the indexer's keys (kept
whole), and the compressors' fp32 states over ratio (2 x ratio where the compressor overlaps) tokens. Their pool
groups share the GPU quota in the ratio StorageManager (tensorrt_llm/runtime/kv_cache_manager_v2/
_storage_manager.py, ratio_from_batch) takes from a typical step (one context request and max_batch_size - 1
decoding at max_seq_len) and the warmup constraints, in slots rounded to 2 MiB << k pages; tokens_per_block must
be 128 or 256. kvplan does not model that split, so it refuses instead of planning the layers as the flat token
pool of other models would hold them.
"""

from __future__ import annotations

from kvplan.errors import KvplanError
from kvplan.models.compressed_attention import PackedCache
from kvplan.models.layers import Layer

REFUSAL = ("DeepSeek-V4 on TensorRT-LLM is not modelled: its DeepseekV4CacheManager (tensorrt_llm/_torch/"
           "attention_backend/sparse/deepseek_v4/cache_manager.py, a KVCacheManagerV2) splits the KV memory "
           "between window, compressed and compressor-state pools by a typical batch, which kvplan does not "
           "reproduce; plan it with --engine vllm or --engine sglang")


def flat_layer(layer: Layer) -> Layer:
    """A cache layer in TensorRT-LLM's token pool: DeepSeek-V4's caches are refused by name; every other kind
    keeps every token (its as_full)."""
    if isinstance(layer, PackedCache):
        raise KvplanError(REFUSAL)
    return layer.as_full()
