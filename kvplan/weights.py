"""Bytes of model weights as the engine loads them: the parameter count by role, times the bytes each role
is stored in (quantized formats with their scales)."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.models.model import ModelSpec

FP8_METHODS = ("fp8", "fbgemm_fp8", "modelopt", "ptpc_fp8", "fp8_dynamic")
INT_METHODS = ("awq", "awq_marlin", "gptq", "gptq_marlin", "compressed-tensors", "bitsandbytes", "marlin",
               "int4", "int8", "experts_int8", "w8a8", "gguf")


@dataclass(eq=False)
class WeightLayout:
    """Bytes of weights by where they live: embeddings, lm_head, each decoder layer, vision tower."""

    embeddings: int  # bytes, first pipeline stage
    lm_head: int  # bytes, last pipeline stage
    per_layer: int  # bytes of one decoder layer
    vision: int  # bytes, first pipeline stage
    note: str = ""


def weight_layout(spec: ModelSpec, dtype_bytes: int, method: str | None) -> WeightLayout:
    """method: the quantization in force (the --quantization flag, else the checkpoint's own)."""
    params = spec.params
    outside = params.embeddings + params.lm_head + params.vision  # kept at the model dtype
    checkpoint_method = spec.quantization.method.lower() if spec.quantization else None
    if spec.stored_weight_bytes and method == checkpoint_method:
        # The safetensors headers give the stored bytes exactly; spread what is not embeddings over the layers.
        decoder, note = max(0, spec.stored_weight_bytes - outside * dtype_bytes), ""
    else:
        decoder, note = _decoder_bytes(spec, params.total - outside, dtype_bytes, method)
    return WeightLayout(params.embeddings * dtype_bytes, params.lm_head * dtype_bytes,
                        decoder // max(1, spec.num_layers), params.vision * dtype_bytes, note)


def _decoder_bytes(spec: ModelSpec, linear: int, dtype_bytes: int, method: str | None) -> tuple[int, str]:
    """Bytes of the decoder layers' parameters in the given format, estimated from the parameter count."""
    quant = spec.quantization
    experts = spec.params.experts
    if method is None:
        return linear * dtype_bytes, ""
    if method in FP8_METHODS or (method == "compressed-tensors" and quant is not None and quant.bits == 8):
        return linear, ""  # 8-bit weights in every linear layer
    if method == "mxfp4":
        # Experts in MXFP4: 4-bit values plus one 8-bit scale per 32 (4.25 bits); the rest unquantized.
        return (linear - experts) * dtype_bytes + experts * 17 // 32, ""
    if method in INT_METHODS:
        bits = (quant.bits if quant and quant.bits else None) or (8 if "8" in method else 4)
        group = (quant.group_size if quant and quant.group_size else None) or 128
        # Packed integers plus one fp16 scale (and a packed zero point) per group of `group` weights.
        return linear * bits // 8 + linear * (2 * 8 + bits) // (8 * group), ""
    return linear * dtype_bytes, f"quantization {method!r} is not modelled; weights counted at the model dtype"
