"""The torch dtype a pool is held in, from the plan's KV dtype name."""

from __future__ import annotations

import torch

from kvplan.units import canonical_dtype

_TORCH = {
    "float32": "float32", "float16": "float16", "bfloat16": "bfloat16",
    # vLLM's fp8 and fp8_inc caches are e4m3
    "fp8": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn", "fp8_inc": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2",
    # DeepSeek's packed MLA layout, which vLLM allocates as uint8 (kv_cache_interface.py MLAAttentionSpec)
    "fp8_ds_mla": "uint8",
}


def torch_dtype(kv_dtype: str) -> torch.dtype | None:
    """None when this torch has no such dtype."""
    name = _TORCH.get(canonical_dtype(kv_dtype))
    found = getattr(torch, name, None) if name else None
    return found if isinstance(found, torch.dtype) else None


def compute_dtype(pool: torch.dtype, device: torch.device) -> torch.dtype:
    """What attention computes in: 16-bit stays 16-bit on a GPU (what a decode kernel reads), everything else and
    everything on the CPU in float32."""
    if device.type == "cuda" and pool in (torch.float16, torch.bfloat16):
        return pool
    if device.type == "cuda" and pool.itemsize == 1:
        return torch.bfloat16
    return torch.float32


# Largest |paged - reference| accepted, by compute dtype: a few units in the last place of outputs of magnitude
# below one (float32 eps 1.2e-7, float16 9.8e-4, bfloat16 7.8e-3).
TOLERANCE = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 4e-2}
