"""The KV cache dtype vLLM serves DeepSeek-V4's compressed sparse attention in (models/compressed_attention.py
gives the layers; the dtype rule is vLLM's)."""

from __future__ import annotations

from kvplan.errors import KvplanError
from kvplan.models.layers import Layer, has_compressed_attention


def served_kv_cache_dtype(layers: tuple[Layer, ...], kv_cache_dtype: str, compute_major: int | None,
                          where: tuple[str, str]) -> str | None:
    """The KV cache dtype vLLM 0.33.0 serves DeepSeek-V4's layers in: FlashMLA's fp8_ds_mla, which
    _resolve_dsv4_kv_cache_dtype (models/deepseek_v4/attention.py) makes of auto and of any fp8 and refuses any
    other dtype for; None for other models. Compute capability 12.x takes FlashInfer's rows instead
    (nvidia/model.py _select_dsv4_attn_cls), which kvplan does not model: refused by name. where: the KV dtype's
    and the GPU's sources."""
    if not has_compressed_attention(layers):
        return None
    if compute_major == 12:
        raise KvplanError("DeepSeek-V4 on compute capability 12.x runs FlashInfer's sparse MLA rows "
                          "(DeepseekV4FlashInferSM120Attention), which kvplan does not model", where[1])
    if kv_cache_dtype != "auto" and not kv_cache_dtype.startswith("fp8"):
        raise KvplanError(f"DeepSeek-V4's FlashMLA cache (fp8_ds_mla) takes an fp8 KV cache only, so vLLM 0.33.0 "
                          f"refuses {kv_cache_dtype}: use auto or fp8", where[0])
    return "fp8_ds_mla"
