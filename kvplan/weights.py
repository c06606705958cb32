"""Bytes of model weights as the engine loads them: the parameter count by role, times the bytes each role
is stored in (quantized formats with their scales), and how a rank's share of the routed experts is cut."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.models.model import ModelSpec

FP8_METHODS = ("fp8", "fbgemm_fp8", "modelopt", "ptpc_fp8", "fp8_dynamic")
INT_METHODS = ("awq", "awq_marlin", "gptq", "gptq_marlin", "compressed-tensors", "bitsandbytes", "marlin",
               "int4", "int8", "experts_int8", "w8a8", "gguf")


@dataclass(frozen=True)
class ExpertPlacement:
    """How the routed experts of one MoE layer are spread over ranks.

    vLLM (model_executor/layers/fused_moe/config.py FusedMoEParallelConfig.make, v0.9 to at least v0.29): the MoE
    layers see TP x DP ranks (flatten_tp_across_dp). Without expert parallelism every expert is sliced over
    them; with it (use_ep = enable_expert_parallel and TP x DP > 1) each rank holds whole experts, the first
    `global % ranks` ranks one more (determine_expert_map). EPLB's redundant experts are extra physical copies:
    global experts = num_experts + num_redundant_experts (fused_moe/layer.py FusedMoE.__init__)."""

    ranks: int = 1  # ranks the routed experts are spread over
    whole: bool = False  # expert parallel: whole experts per rank, not a slice of each
    redundant: int = 0  # EPLB's extra physical experts per layer

    def share(self, expert_bytes: int, num_experts: int) -> int:
        """Bytes of `expert_bytes` (one layer's routed experts) that the fullest rank holds."""
        if not self.whole or num_experts <= 0:
            return -(-expert_bytes // self.ranks)
        physical = num_experts + self.redundant
        local = -(-physical // self.ranks)
        return -(-expert_bytes * local // num_experts)


@dataclass(eq=False)
class WeightLayout:
    """Bytes of weights by where they live: embeddings, lm_head, each decoder layer (its routed experts apart),
    vision tower."""

    embeddings: int  # bytes, first pipeline stage
    lm_head: int  # bytes, last pipeline stage
    per_layer: int  # bytes of one decoder layer, its routed experts included
    vision: int  # bytes, first pipeline stage
    note: str = ""
    experts_per_layer: int = 0  # bytes of one decoder layer's routed experts (part of per_layer)
    num_experts: int = 0  # routed experts per MoE layer

    @property
    def dense_per_layer(self) -> int:
        """Bytes of one decoder layer outside its routed experts: attention, norms, router, shared experts."""
        return self.per_layer - self.experts_per_layer


def weight_layout(spec: ModelSpec, dtype_bytes: int, method: str | None) -> WeightLayout:
    """method: the quantization in force (the --quantization flag, else the checkpoint's own)."""
    params = spec.params
    outside = params.embeddings + params.lm_head + params.vision  # kept at the model dtype
    checkpoint_method = spec.quantization.method.lower() if spec.quantization else None
    layers = max(1, spec.num_layers)
    if spec.stored_weight_bytes and method == checkpoint_method:
        # The safetensors headers give the stored bytes exactly; spread what is not embeddings over the layers,
        # the experts' part in proportion to their parameters.
        decoder, note = max(0, spec.stored_weight_bytes - outside * dtype_bytes), ""
        linear = params.total - outside
        experts = decoder * params.experts // linear if linear > 0 else 0
    else:
        (dense, experts), note = _decoder_bytes(spec, params.total - outside, dtype_bytes, method)
        decoder = dense + experts
    return WeightLayout(params.embeddings * dtype_bytes, params.lm_head * dtype_bytes, decoder // layers,
                        params.vision * dtype_bytes, note, experts // layers,
                        spec.moe.num_experts if spec.moe is not None else 0)


def _decoder_bytes(spec: ModelSpec, linear: int, dtype_bytes: int, method: str | None) -> tuple[tuple[int, int], str]:
    """Bytes of the decoder layers' parameters in the given format, estimated from the parameter count, as
    (outside the routed experts, routed experts)."""
    quant = spec.quantization
    experts = spec.params.experts
    dense = linear - experts
    if method is None:
        return (dense * dtype_bytes, experts * dtype_bytes), ""
    if method in FP8_METHODS or (method == "compressed-tensors" and quant is not None and quant.bits == 8):
        return (dense, experts), ""  # 8-bit weights in every linear layer
    if method == "mxfp4":
        # Experts in MXFP4: 4-bit values plus one 8-bit scale per 32 (4.25 bits); the rest unquantized.
        return (dense * dtype_bytes, experts * 17 // 32), ""
    if method in INT_METHODS:
        bits = (quant.bits if quant and quant.bits else None) or (8 if "8" in method else 4)
        group = (quant.group_size if quant and quant.group_size else None) or 128

        def packed(count: int) -> int:
            # Packed integers plus one fp16 scale (and a packed zero point) per group of `group` weights.
            return count * bits // 8 + count * (2 * 8 + bits) // (8 * group)

        return (packed(dense), packed(experts)), ""
    return (dense * dtype_bytes, experts * dtype_bytes), (f"quantization {method!r} is not modelled; weights "
                                                          "counted at the model dtype")
