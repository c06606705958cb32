"""Bytes of model weights as the engine loads them: the parameter count by role, times the bytes each role
is stored in (quantized formats with their scales), and how a rank's share of the routed experts is cut."""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.models.model import ModelSpec, ParamCount
from kvplan.models.modelopt import LM_HEAD, excluded_roles, is_excluded
from kvplan.models.resident import ResidentCopy

FP8_METHODS = ("fp8", "fbgemm_fp8", "modelopt", "ptpc_fp8", "fp8_dynamic")
# AutoRound (quantization/auto_round.py AutoRoundConfig) loads through vLLM's GPTQ or AWQ linear methods by its
# packing_format, with the config's bits and group_size: packed integers, a 16-bit scale and a packed zero point
# per group, as those formats; lm_head stays 16-bit (ParallelLMHead is not quantized).
INT_METHODS = ("awq", "awq_marlin", "gptq", "gptq_marlin", "compressed-tensors", "bitsandbytes", "marlin",
               "int4", "int8", "experts_int8", "w8a8", "gguf", "auto-round", "auto_round")


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


@dataclass(frozen=True)
class Mxfp4Experts:
    """How one routed expert of an MXFP4 checkpoint (gate_up w13: 2 x intermediate rows, down w2: hidden rows;
    4-bit values two to a byte, one 8-bit scale per 32, biases beside) is held once loaded.

    vLLM (model_executor/layers/quantization/mxfp4.py, Mxfp4MoEMethod, read in v0.11.0 and a later main):
    create_weights rounds the expert's intermediate size (per slice, `intermediate_size_per_partition`) and
    its hidden size up for the backend's kernel, so the padded rows and columns are allocated; then
    process_weights_after_loading converts them. Its Triton branch casts the biases to float32 and swizzles
    values and scales (mxfp4_utils._swizzle_mxfp4): it deletes the loaded w13/w2 values, but the loaded
    w13_weight_scale / w2_weight_scale parameters stay registered beside their swizzled copies, which
    triton_kernels' HopperMXScaleLayout pads to rows of 2 x num_warps x 2 x 8 = 256 (num_warps 8 outside
    batched expert parallelism)."""

    name: str
    intermediate_multiple: int = 1
    hidden_multiple: int = 1
    bias_bytes: int = 2  # bfloat16 as stored; 4 where the backend casts them to float32
    scale_copy_rows: int = 0  # > 0: a swizzled copy of the scales is kept too, its rows padded to this multiple
    slices: int = 1  # the intermediate size is cut into this many slices (TP x DP, no expert parallelism)
    modular: bool = False  # its kernel is modular and takes the shared fused-MoE workspace (engines/vllm/moe_workspace.py)

    def expert_bytes(self, hidden: int, intermediate: int, biased: bool) -> int:
        """Bytes of one expert, all its slices together."""
        h = _round_up(hidden, self.hidden_multiple)
        i = _round_up(-(-intermediate // self.slices), self.intermediate_multiple)
        gate_up, down = 2 * i * h, h * i  # weights of w13 and w2
        held = gate_up // 2 + down // 2 + 2 * i * (h // 32) + h * (i // 32)
        if biased:
            held += (2 * i + h) * self.bias_bytes
        if self.scale_copy_rows:
            held += (_round_up(2 * i, self.scale_copy_rows) * (h // 32)
                     + _round_up(h, self.scale_copy_rows) * (i // 32))
        return held * self.slices

    def sliced(self, slices: int) -> Mxfp4Experts:
        return replace(self, slices=max(1, slices))


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


MXFP4_CHECKPOINT = Mxfp4Experts("the checkpoint")
def _mxfp4_expert_bytes(spec: ModelSpec, rule: Mxfp4Experts) -> int | None:
    """Bytes of all routed experts held under `rule`; None when the experts are not gated hidden x intermediate
    matrices (the shape MXFP4 MoE layers have)."""
    moe = spec.moe
    if moe is None or moe.num_experts <= 0:
        return None
    count = moe.expert_layer_count(spec.num_layers) * moe.num_experts
    hidden, intermediate = spec.hidden_size, moe.expert_intermediate_size
    matrices = 3 * hidden * intermediate
    per_expert = spec.params.experts // count if count > 0 else 0
    if per_expert < matrices:
        return None
    return count * rule.expert_bytes(hidden, intermediate, biased=per_expert > matrices)


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


def resident_params(spec: ModelSpec, engine: str | None = None) -> ParamCount:
    """The parameters the engine holds: the checkpoint's count (spec.params, the Hub's) with what this engine
    allocates beyond it (spec.resident, models/resident.py: each copy says which engines hold it; None: those every
    engine holds) added to the attention of the layers that hold it."""
    params = spec.params
    extra: dict[int, int] = {}
    for copy in held_copies(spec, engine):
        for index, count in copy.by_layer().items():
            extra[index] = extra.get(index, 0) + count
    if not extra:
        return params
    by_layer = tuple(replace(layer, mixer=layer.mixer + extra.get(index, 0))
                     for index, layer in enumerate(params.by_layer))
    return replace(params, total=params.total + sum(extra.values()), by_layer=by_layer)


def held_copies(spec: ModelSpec, engine: str | None) -> tuple[ResidentCopy, ...]:
    """The resident copies this engine holds (ResidentCopy.held_by)."""
    return tuple(copy for copy in spec.resident if copy.held_by(engine))


def weight_layout(spec: ModelSpec, dtype_bytes: int, method: str | None,
                  mxfp4: Mxfp4Experts | None = None, engine: str | None = None) -> WeightLayout:
    """method: the quantization in force (the --quantization flag, else the checkpoint's own); mxfp4: how the
    engine holds MXFP4 experts once loaded (vllm_mxfp4_experts), None for the checkpoint's own bytes; engine: whose
    resident copies and loose-parameter dtypes apply (None: those every engine shares, KdaLoose). The bytes are
    of resident_params: the checkpoint's and what the engine allocates beyond it, in the format in force."""
    params = spec.params
    held = replace(spec, params=resident_params(spec, engine))
    outside = params.embeddings + params.lm_head + params.vision  # kept at the model dtype
    checkpoint_method = spec.quantization.method.lower() if spec.quantization else None
    layers = max(1, spec.num_layers)
    loaded_differs = method == "mxfp4" and mxfp4 is not None  # the stored bytes are not what the engine holds
    if spec.stored_weight_bytes and method == checkpoint_method and not loaded_differs:
        # The safetensors headers give the stored bytes exactly; spread what is not embeddings over the layers,
        # the experts' part in proportion to their parameters. What the engine holds beyond the checkpoint is
        # weighed as the count's estimate weighs it (the difference of the two estimates: its own format).
        decoder, note = max(0, spec.stored_weight_bytes - outside * dtype_bytes), ""
        linear = params.total - outside
        experts = decoder * params.experts // linear if linear > 0 else 0
        if held.params is not params:
            decoder += (sum(_decoder_bytes(held, held.params.total - outside, dtype_bytes, method, engine=engine)[0])
                        - sum(_decoder_bytes(spec, linear, dtype_bytes, method, engine=engine)[0]))
    else:
        (dense, experts), note = _decoder_bytes(held, held.params.total - outside, dtype_bytes, method, mxfp4,
                                                engine)
        decoder = dense + experts
    note = "; ".join(part for part in (note, *(copy.note() for copy in held_copies(spec, engine))) if part)
    return WeightLayout(params.embeddings * dtype_bytes, _lm_head_bytes(spec, dtype_bytes, method), decoder // layers,
                        params.vision * dtype_bytes, note, experts // layers,
                        spec.moe.num_experts if spec.moe is not None else 0)


def _decoder_bytes(spec: ModelSpec, linear: int, dtype_bytes: int, method: str | None,
                   mxfp4: Mxfp4Experts | None = None, engine: str | None = None) -> tuple[tuple[int, int], str]:
    """Bytes of the decoder layers' parameters in the given format, estimated from the parameter count, as
    (outside the routed experts, routed experts)."""
    quant = spec.quantization
    experts = spec.params.experts
    dense = linear - experts
    if method == "modelopt_mixed" and quant is not None and quant.formats and spec.params.by_layer:
        return mixed_bytes(spec, linear, dtype_bytes)
    if method in MODELOPT_BYTES and quant is not None and quant.source and spec.params.by_layer:
        return modelopt_bytes(spec, linear, dtype_bytes, method), ""
    float32 = (KDA_LOOSE.get(engine or "", KdaLoose()).extra(spec, dtype_bytes)
               + SCORE_BIAS.get(engine or "", ScoreBiasFloat32()).extra(spec, dtype_bytes))
    if method is None:
        return (dense * dtype_bytes + float32, experts * dtype_bytes), ""
    if method in FP8_METHODS or (method == "compressed-tensors" and quant is not None and quant.bits == 8):
        if quant is not None and quant.expert_format == "mxfp4" and method == quant.method:
            # DeepSeek-V4's fp4 experts beside fp8 (kvplan.models.hf_config._expert_format): 4-bit values and one
            # UE8M0 scale byte per 32 (Mxfp4MoEMethod's checkpoint layout)
            return (dense, experts * 17 // 32), ""
        if quant is not None and quant.expert_format == "nvfp4" and method == quant.method:
            # ModelOpt's NVFP4 experts beside fp8 (kvplan.models.modelopt.hybrid_moe_format), groups of 16
            return (dense, _nvfp4(experts, quant.group_size or 16)), ""
        return (dense, experts), ""  # 8-bit weights in every linear layer
    if method == "mxfp4":
        # Only the routed experts are MXFP4; attention, router, sinks, norms and embeddings stay at the model dtype.
        rule = mxfp4 or MXFP4_CHECKPOINT
        held = _mxfp4_expert_bytes(spec, rule)
        note = f"MXFP4 experts as {rule.name} holds them" if mxfp4 is not None and held is not None else ""
        return (dense * dtype_bytes + float32, experts * 17 // 32 if held is None else held), note
    if method in INT_METHODS:
        bits = (quant.bits if quant and quant.bits else None) or (8 if "8" in method else 4)
        group = (quant.group_size if quant and quant.group_size else None) or 128

        def packed(count: int) -> int:
            # Packed integers plus one fp16 scale (and a packed zero point) per group of `group` weights.
            return count * bits // 8 + count * (2 * 8 + bits) // (8 * group)

        return (packed(dense), packed(experts)), ""
    return (dense * dtype_bytes + float32, experts * dtype_bytes), (f"quantization {method!r} is not modelled; "
                                                                    "weights counted at the model dtype")


FLOAT32_BYTES = 4


BFLOAT16_BYTES = 2


@dataclass(frozen=True)
class KdaLoose:
    """How an engine holds Kimi-Linear's and Kimi-K3's KDA dt_bias, q/k/v conv1d and A_log (LayerParams.float32,
    models/params.py _Mixers._kda_float32): vLLM 0.33.0 (layers/mamba/gdn/kimi_gdn_linear_attn.py) and SGLang 0.5.23
    (models/kimi_linear.py, kimi_k3.py) allocate them in float32 whatever the model dtype. extra: their bytes beyond
    the model dtype, for the layouts that weigh the loose parameters at it (the quantized ones weigh them as
    before)."""

    def extra(self, spec: ModelSpec, dtype_bytes: int) -> int:
        held = sum(layer.float32 for layer in spec.params.by_layer)
        return held * max(0, FLOAT32_BYTES - dtype_bytes)


@dataclass(frozen=True)
class KdaBfloat16(KdaLoose):
    """TensorRT-LLM creates A_log and dt_bias in float32 but ends KimiKDALinearAttention.__init__ with
    _meta_safe_cast_dtype(self, torch.bfloat16), which casts every floating parameter of the module, the conv1d
    weights included, to bfloat16 (_torch/modules/kimi_kda/kimi_kda_mixer.py, read_file id 57355614767; the
    production module of the same name, read_file id 57369235038, that modeling_kimi_linear.py's
    KimiLinearDecoderLayer builds): they are 2 bytes, the model dtype's or fewer. Under --dtype float32 the cast
    takes the module's projections to bfloat16 too, which is not modelled; nor are the fp32 copies its Blackwell
    decode path makes after loading (finalize_decode_weights)."""

    def extra(self, spec: ModelSpec, dtype_bytes: int) -> int:
        held = sum(layer.float32 for layer in spec.params.by_layer)
        return held * (BFLOAT16_BYTES - dtype_bytes)


KDA_LOOSE: dict[str, KdaLoose] = {"trtllm": KdaBfloat16()}  # every other engine: KdaLoose


@dataclass(frozen=True)
class ScoreBiasFloat32:
    """How an engine holds the MoE router's e_score_correction_bias (LayerParams.score_bias): vLLM 0.33.0 allocates
    it in float32 whatever the model dtype (deepseek_v2.py DeepseekV2MoE, glm4_moe.py Glm4MoE, minimax_m2.py
    MiniMaxM2MoE, nemotron_h.py NemotronHMoE, models/kimi_k3/nvidia/model.py KimiMoE: torch.empty(experts,
    dtype=torch.float32)); TensorRT-LLM too at its default CUTLASS MoE backend (_torch/models/modeling_deepseekv3.py
    DeepseekV3Gate, which modeling_nemotron_h.py NemotronHMOE builds as well: bias_dtype float32, bfloat16 only under
    moe_backend TRTLLM, which is not modelled). The loader
    copies the checkpoint's tensor into it. extra: its bytes beyond the model dtype, where the layout weighs the
    loose parameters at it (the quantized layouts weigh them as before)."""

    def extra(self, spec: ModelSpec, dtype_bytes: int) -> int:
        held = sum(layer.score_bias for layer in spec.params.by_layer)
        return held * max(0, self.bytes(spec, dtype_bytes) - dtype_bytes)

    def bytes(self, spec: ModelSpec, dtype_bytes: int) -> int:
        return FLOAT32_BYTES


@dataclass(frozen=True)
class ScoreBiasByModelFile(ScoreBiasFloat32):
    """SGLang 0.5.23 sets the bias's dtype in each model file: float32 in deepseek_v2.py MoEGate (off ROCm's aiter;
    kimi_k3.py builds the same MoEGate), glm4_moe.py, minimax_m2.py, minimax_m3.py and nemotron_h.py; kimi_linear.py
    KimiMoE writes torch.empty(num_experts) without one, so it takes the default dtype the loader sets to the model's
    (model_loader/loader.py set_default_torch_dtype): at_model_dtype names those model types."""

    at_model_dtype: frozenset[str] = frozenset({"kimi_linear"})

    def bytes(self, spec: ModelSpec, dtype_bytes: int) -> int:
        return dtype_bytes if spec.model_type in self.at_model_dtype else FLOAT32_BYTES


SCORE_BIAS: dict[str, ScoreBiasFloat32] = {"sglang": ScoreBiasByModelFile()}  # every other engine: ScoreBiasFloat32


def _fp8(count: int, group: int) -> int:
    return count


def _nvfp4(count: int, group: int) -> int:
    return count // 2 + count // group


def _mxfp8(count: int, group: int) -> int:
    return count + count // 32


# Bytes of `count` weights of one linear module as ModelOpt stores them (vLLM 0.33.0 quantization/modelopt.py
# create_weights, KFp8StaticTensor and KNvfp4Static): FP8 one byte a weight; NVFP4 two 4-bit values a byte and
# one float8_e4m3fn scale per group_size (16) values along the input. The per-module float32 scalars (FP8's
# weight_scale and input_scale, NVFP4's weight_scale_2 and input_scale: 8 bytes a module) are not counted, nor the
# per-channel scales of FP8_PER_CHANNEL_PER_TOKEN (4 bytes an output row) or FP8_PB_WO's 128 x 128 block scales.
MODELOPT_BYTES = {"modelopt": _fp8, "modelopt_fp4": _nvfp4}


def modelopt_bytes(spec: ModelSpec, linear: int, dtype_bytes: int, method: str) -> tuple[int, int]:
    """(outside the routed experts, routed experts) bytes of the decoder of a ModelOpt checkpoint, weighed per
    layer and role: a role that exclude_modules names stays at the model dtype, as do the norms, biases,
    convolutions, SSM parameters and routers of every layer (no ModelOpt format quantizes them); `linear`: the
    decoder's parameters with the final norm."""
    quant = spec.quantization
    excluded = quant.unquantized if quant is not None else ()
    weigh = MODELOPT_BYTES[method]
    group = (quant.group_size if quant is not None else None) or 16
    dense = experts = 0
    for index, layer in enumerate(spec.params.by_layer):
        roles = excluded_roles(excluded, index)
        dense += layer.loose * dtype_bytes
        for role, count in (("mixer", layer.mixer), ("mlp", layer.mlp)):
            dense += count * dtype_bytes if role in roles else weigh(count, group)
        experts += layer.experts * dtype_bytes if "experts" in roles else weigh(layer.experts, group)
    counted = sum(p.mixer + p.mlp + p.experts + p.loose for p in spec.params.by_layer)
    return dense + (linear - counted) * dtype_bytes, experts


# Bytes of a MIXED_PRECISION module by its quantized_layers quant_algo (kvplan.models.modelopt.MIXED_FORMATS), as
# MODELOPT_BYTES: FP8 and the block FP8s one byte a weight (Fp8Config's block scales not counted); NVFP4 and
# W4A16_NVFP4 (one packing: vLLM 0.33.0 modelopt.py KNvfp4Static) half a byte and an FP8 scale per group; MXFP8
# one byte and one E8M0 scale byte per 32 along the input (KMxfp8Static; SGLang 0.5.23 modelopt_quant.py gives it
# Fp8Config(weight_block_size=[1, 32], use_mxfp8=True), the same bytes).
MIXED_BYTES = {"FP8": _fp8, "FP8_PB_WO": _fp8, "FP8_BLOCK_SCALES": _fp8, "NVFP4": _nvfp4, "W4A16_NVFP4": _nvfp4,
               "MXFP8": _mxfp8}


def _held(count: int, algos: list[str], group: int, dtype_bytes: int) -> int:
    """A role's bytes in the widest of its modules' formats; the model dtype where quantized_layers names none of
    them (both engines' get_quant_method: unquantized) or an algorithm kvplan does not weigh."""
    return max((MIXED_BYTES[a](count, group) if a in MIXED_BYTES else count * dtype_bytes for a in algos),
               default=count * dtype_bytes)


def mixed_bytes(spec: ModelSpec, linear: int, dtype_bytes: int) -> tuple[tuple[int, int], str]:
    """modelopt_bytes for a MIXED_PRECISION checkpoint: each decoder layer's roles in the formats its
    quantized_layers entries name (vLLM 0.33.0 and SGLang 0.5.23 modelopt ModelOptMixedPrecisionConfig resolve
    each module's quant_algo by its path, a routed-experts module by any entry under it); exclude_modules first.
    Modules of one role are taken to share a format; where the map gives a role several, the widest, noted."""
    quant = spec.quantization
    assert quant is not None
    table: dict[tuple[int, str], list[str]] = {}
    for index, role, algo in quant.formats:
        table.setdefault((index, role), []).append(algo)
    group = quant.group_size or 16
    dense = experts = 0
    for index, layer in enumerate(spec.params.by_layer):
        roles = excluded_roles(quant.unquantized, index)
        dense += layer.loose * dtype_bytes
        held = {role: count * dtype_bytes if role in roles else _held(count, table.get((index, role), []), group,
                                                                       dtype_bytes)
                for role, count in (("mixer", layer.mixer), ("mlp", layer.mlp), ("experts", layer.experts))}
        dense += held["mixer"] + held["mlp"]
        experts += held["experts"]
    counted = sum(p.mixer + p.mlp + p.experts + p.loose for p in spec.params.by_layer)
    mixes = sorted({role for (index, role), algos in table.items() if index != LM_HEAD and len(set(algos)) > 1})
    note = (f"quantized_layers gives the {' and '.join(mixes)} of some layers several formats; each weighed at "
            "its widest") if mixes else ""
    return (dense + (linear - counted) * dtype_bytes, experts), note


def _lm_head_bytes(spec: ModelSpec, dtype_bytes: int, method: str | None) -> int:
    """lm_head at the model dtype, or in the format a MIXED_PRECISION map names for it (both engines build
    ParallelLMHead with the quant config, e.g. vLLM 0.33.0 models qwen3_5.py, SGLang 0.5.23 qwen3_5_text.py, and
    resolve 'lm_head' like any module) unless exclude_modules names it."""
    count, quant = spec.params.lm_head, spec.quantization
    if method != "modelopt_mixed" or quant is None or is_excluded(quant.unquantized, "lm_head"):
        return count * dtype_bytes
    algos = [algo for index, _, algo in quant.formats if index == LM_HEAD]
    return _held(count, algos, quant.group_size or 16, dtype_bytes)
