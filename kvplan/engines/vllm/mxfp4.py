"""The MXFP4 MoE backend vLLM picks on each GPU, and how each holds the experts once loaded."""

from __future__ import annotations

from kvplan.weights import Mxfp4Experts

# The backends of vLLM's get_mxfp4_backend (mxfp4.py) with their create_weights padding; FlashInfer's SM90 and
# SM100 CUTLASS paths are opt-in (VLLM_USE_FLASHINFER_MOE_MXFP4_BF16 / _MXFP8_CUTLASS) and not modelled.
MXFP4_MARLIN = Mxfp4Experts("vLLM's Marlin backend", intermediate_multiple=128, hidden_multiple=256,
                            modular=True)
MXFP4_TRITON_HOPPER = Mxfp4Experts("vLLM's Triton backend (Hopper swizzle)", intermediate_multiple=64,
                                   bias_bytes=4, scale_copy_rows=256)
MXFP4_TRITON = Mxfp4Experts("vLLM's Triton backend", intermediate_multiple=64, bias_bytes=4)
MXFP4_TRITON_ROCM = Mxfp4Experts("vLLM's Triton backend (ROCm)", intermediate_multiple=256, hidden_multiple=256,
                                 bias_bytes=4)
MXFP4_FLASHINFER_SM100 = Mxfp4Experts("vLLM's FlashInfer SM100 backend", intermediate_multiple=256,
                                      hidden_multiple=256, bias_bytes=4)


def mxfp4_experts(version: tuple[int, int] | None, compute_capability: str | None,
                       slices: int = 1) -> Mxfp4Experts | None:
    """The MXFP4 backend vLLM picks by default (mxfp4.py get_mxfp4_backend) on a GPU of this compute
    capability ("9.0", or an AMD "gfx942"); version None: the newest. None when the device is not modelled.

    CUDA below 9.0: Marlin. 9.x: Triton, which on Hopper keeps the swizzled scale copies. _swizzle_mxfp4 swizzles
    on Hopper with torch >= 2.8.1 (v0.11.1 on pin torch 2.9.0); v0.11.0 pins 2.8.0, where it would keep the
    strided layout and no copy, yet the v0.11.0 H100 logs B01/B02 (13.47 and 64.38 GiB) match the copies. 10.x:
    FlashInfer's SM100 kernels (FlashInfer is a dependency from v0.11.1, in v0.11.0's image). 11 and up:
    Triton without the Hopper swizzle in v0.11, Marlin once Triton is limited to 9.0 <= capability < 11.0
    (later main). ROCm: Triton with both sizes rounded to 256 (v0.11.0)."""
    capability = compute_capability or ""
    major_text = capability.split(".")[0]
    if capability.startswith("gfx"):
        rule = MXFP4_TRITON_ROCM
    elif not major_text.isdigit():
        return None
    elif int(major_text) < 9:
        rule = MXFP4_MARLIN
    elif int(major_text) == 9:
        rule = MXFP4_TRITON_HOPPER
    elif int(major_text) == 10:
        rule = MXFP4_FLASHINFER_SM100
    else:
        rule = MXFP4_TRITON if version is not None and version <= (0, 11) else MXFP4_MARLIN
    return rule.sliced(slices)
