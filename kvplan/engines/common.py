"""What every engine shares: dtypes, per-stage layers and weights, and turning per-stage budgets into a Plan."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from kvplan.capacity import PoolLayout, SplitPools, context_ladder, pipeline_stages, pool_layouts
from kvplan.deployment import Deployment
from kvplan.deployment.rules import NO_DRAFT_LAYERS
from kvplan.engines.base import PlanInput, PoolRules
from kvplan.errors import KvplanError
from kvplan.models.layers import Layer
from kvplan.models.model import ModelSpec
from kvplan.plan import Capacity, EngineSettings, GpuChoice, LadderRung, Memory, Plan
from kvplan.units import GiB, canonical_dtype, dtype_bytes, kv_cache_format
from kvplan.weights import ExpertPlacement, WeightLayout, weight_layout

FLAT_POOL_NOTE = "sliding and chunked layers are counted as caching every token (one flat pool)"


@dataclass(eq=False)
class Stage:
    """One pipeline stage: its layers and the weights each of its ranks holds."""

    layers: list[Layer]  # the KV-relevant layers this stage's ranks hold, draft layers included
    decoder_layers: int
    first: bool
    last: bool
    weights_bytes: int = 0  # per rank of this stage


@dataclass(eq=False)
class Prepared:
    """What every engine starts from: dtypes, and per pipeline stage its layers and weights."""

    kv_name: str
    kv_bytes: int
    stages: list[Stage]
    notes: list[str]


def prepare(target: PlanInput, flat_pool: bool = False, settings: EngineSettings | None = None,
            rules: PoolRules | None = None) -> Prepared:
    """flat_pool: the engine keeps every token of sliding and chunked layers too (one flat pool); with settings,
    the engine's rules say how it holds recurrent states and whether every layer caches every token."""
    rules = rules or PoolRules()
    spec, dep = target.spec, target.deployment
    dtype, dtype_note = model_dtype(spec, dep, target.gpu)
    # a dtype the config names (not a flag the user typed) is blamed on the config
    dtype_where = dep.where("dtype") if dep.dtype != "auto" else f"{spec.source.location}: torch_dtype"
    kv_name, kv_bytes = kv_dtype(dep, (settings.auto_kv_cache_dtype if settings else None) or dtype, dtype_where)
    if settings is not None and settings.forced_kv_cache_dtype:
        kv_name = settings.forced_kv_cache_dtype
        kv_bytes = kv_cache_format(kv_name, f"{spec.source.location}: quantization_config")
    weights = weight_layout(spec, dtype_bytes(dtype, dtype_where), quantization_method(spec, dep),
                            settings.mxfp4_experts if settings is not None else None,
                            settings.name if settings is not None else dep.engine)
    drafts, draft_weights, draft_note = draft_layers(target, dtype, weights)
    notes = [note for note in (dtype_note, weights.note, draft_note, modelopt_kv_note(spec, dep, kv_name),
                                       rules.kv_cache_scheme_note(target, settings, kv_name)) if note]
    if flat_pool and any(layer.drops_old_tokens for layer in spec.layers):
        notes.append(FLAT_POOL_NOTE)
    unified = settings is not None and rules.unified(target, settings)
    tp, pp = dep.tensor_parallel_size, dep.pipeline_parallel_size
    stage_list = []
    for stage in stages(spec, dep, drafts, flat_pool or unified, rules.flat_layer):
        if settings is not None:
            served = rules.served_layers(target, settings, stage.layers, dtype_bytes(dtype, dtype_where))
            stage = replace(stage, layers=served)
        measured = dep.weights_memory_bytes
        placement = settings.expert_placement if settings is not None else None
        weight_bytes = measured if measured is not None else stage_weights(weights, stage, tp, pp, placement) + (
            -(-draft_weights // tp) if stage.last else 0)
        stage_list.append(replace(stage, weights_bytes=weight_bytes))
    return Prepared(kv_name, kv_bytes, stage_list, notes)


def speculative_tokens(dep: Deployment) -> int:
    config = dep.speculative_config or {}
    method = str(config.get("method") or ("draft_model" if config.get("model") else "")).lower()
    tokens = config.get("num_speculative_tokens")
    return tokens if method and isinstance(tokens, int) and not isinstance(tokens, bool) else 0


def model_dtype(spec: ModelSpec, dep: Deployment, gpu: GpuChoice | None = None) -> tuple[str, str | None]:
    """The dtype weights are served in, and a note when the GPU changed it."""
    if dep.dtype != "auto":
        return canonical_dtype(dep.dtype), None
    configured = canonical_dtype(spec.dtype)
    # Engines serve float32 checkpoints in 16-bit unless told otherwise.
    dtype = "bfloat16" if configured in ("float32", "fp8_e4m3", "fp8") else configured
    major = gpu.compute_major if gpu is not None else None
    if gpu is not None and dtype == "bfloat16" and major is not None and major < 8:
        # vLLM casts an automatic bfloat16 to float16 on GPUs without bfloat16 (compute capability < 8.0).
        return "float16", (f"{gpu.name} has no bfloat16 (compute capability {gpu.compute_capability}): served "
                           "in float16, as vLLM does")
    return dtype, None


def kernel_block_size(spec: ModelSpec) -> int | None:
    """The block size a layer kind's kernels impose over the user's choice; None where any is taken."""
    return next((layer.kernel_block_size for layer in spec.layers if layer.kernel_block_size), None)


def kv_dtype(dep: Deployment, model: str, model_where: str) -> tuple[str, int]:
    """The KV cache dtype and its format (an int: the element's bytes, with the format's own page maths)."""
    if dep.kv_cache_dtype == "auto":
        return model, kv_cache_format(model, model_where)
    return dep.kv_cache_dtype, kv_cache_format(dep.kv_cache_dtype, dep.where("kv_cache_dtype"))


def modelopt_kv_algo(spec: ModelSpec) -> str | None:
    """The KV cache algorithm the checkpoint's ModelOpt settings (hf_quant_config.json, or config.json's own
    quantization_config) name, upper-cased (kvplan.models.modelopt); None where they name none."""
    quant = spec.quantization
    return quant.kv_cache_quant_algo if quant is not None and quant.source else None


def modelopt_where(spec: ModelSpec) -> str:
    """The file the checkpoint's ModelOpt settings were read from, for errors: hf_quant_config.json beside the
    config, or config.json's quantization_config."""
    source = spec.quantization.source if spec.quantization else ""
    location = spec.source.location
    if source == "config.json":
        return f"{location}: quantization_config"
    if location.endswith("config.json") and source:
        return str(Path(location).with_name(source))
    return f"{location}: {source}"


def modelopt_fp8_kv(spec: ModelSpec) -> bool:
    """Whether the checkpoint's ModelOpt settings name an FP8 KV cache."""
    return modelopt_kv_algo(spec) == "FP8"


def modelopt_kv_note(spec: ModelSpec, dep: Deployment, kv_name: str) -> str | None:
    if dep.kv_cache_dtype != "auto":
        return None
    if modelopt_kv_algo(spec) == "NVFP4" and kv_name == "nvfp4":
        source = spec.quantization.source if spec.quantization else ""
        return f"KV cache in nvfp4: the checkpoint's {source} names an NVFP4 KV cache (kv_cache_quant_algo NVFP4)"
    if not modelopt_fp8_kv(spec):
        return None  # another value: each engine's notes say what it makes of it
    source = spec.quantization.source if spec.quantization else ""
    named = f"the checkpoint's {source} names an FP8 KV cache (kv_cache_quant_algo FP8)"
    if kv_name == "fp8_e4m3":
        return f"KV cache in fp8_e4m3: {named}"
    return (f"{named}; kvplan applies it to "
            f"kv_cache_dtype auto only in the releases read to do so (vLLM 0.14.0+, SGLang 0.5.9+, TensorRT-LLM's "
            f"PyTorch backend): KV cache in {kv_name}")


def quantization_method(spec: ModelSpec, dep: Deployment) -> str | None:
    if dep.quantization:
        return dep.quantization.lower()
    return spec.quantization.method.lower() if spec.quantization else None


def draft_layers(target: PlanInput, dtype: str, weights: WeightLayout) -> tuple[list[Layer], int, str | None]:
    """KV layers a speculative-decoding drafter adds to the last stage, and the bytes of its weights
    (weights: the target's, for MTP layers shaped like its own)."""
    spec, config = target.spec, target.deployment.speculative_config
    if not config:
        return [], 0, None
    method = str(config.get("method") or ("draft_model" if config.get("model") else "")).lower()
    if method in NO_DRAFT_LAYERS or not method:
        return [], 0, None
    if target.draft is not None:
        draft = target.draft
        layers = list(draft.kv_layers)
        draft_bytes = weight_layout(draft, dtype_bytes(dtype), None)
        total = draft_bytes.per_layer * draft.num_layers + draft_bytes.embeddings + draft_bytes.lm_head
        note = (f"speculative decoding ({method}): draft model {draft.id}, its own {len(layers)} KV layer(s) "
                f"and {total / GiB:.2f} GiB of weights on the last stage")
        return layers, total, note
    count = spec.mtp_layers or 1 if "mtp" in method else int(config.get("num_hidden_layers") or 1)
    if "mtp" in method and spec.mtp_layer is not None:  # the checkpoint's MTP layer has a geometry of its own
        note = f"speculative decoding ({method}): {count} MTP layer(s) of {spec.mtp_layer.describe()}"
        return [spec.mtp_layer] * count, weights.per_layer * count, note
    template = next(iter(spec.kv_layers), None)
    if template is None:
        return [], 0, None
    if "mtp" in method and spec.params.mtp:
        # the checkpoint's MTP module counted as vLLM builds the draft (models/params._mtp_module), held in the
        # target decoder's bytes a parameter
        decoder = spec.params.decoder
        held = weights.per_layer * spec.num_layers * spec.params.mtp // max(1, decoder)
        note = (f"speculative decoding ({method}): {count} MTP KV layer(s) with the target's KV geometry; the MTP "
                f"module's {spec.params.mtp:,} parameters ({held / GiB:.2f} GiB) on the last stage")
        return [template.draft_layer()] * count, held, note
    note = (f"speculative decoding ({method}): {count} draft layer(s) with the target's KV geometry (name the "
            "draft 'model' in --speculative-config to count its own)")
    return [template.draft_layer()] * count, weights.per_layer * count, note


def stages(spec: ModelSpec, dep: Deployment, drafts: list[Layer], flat_pool: bool = False,
           flatten: Callable[[Layer], Layer] = lambda layer: layer.as_full()) -> list[Stage]:
    ranges = pipeline_stages(spec.num_layers, dep.pipeline_parallel_size)
    result = []
    for index, span in enumerate(ranges):
        last = index == len(ranges) - 1
        # one entry per cache layer: a decoder layer with parallel mixers registers one per mixer (vLLM v1)
        layers = [cache for layer in [spec.layers[i] for i in span] + (drafts if last else [])
                  for cache in layer.cache_layers()]
        if flat_pool:
            layers = [flatten(layer) for layer in layers]
        result.append(Stage(layers, len(span), index == 0, last))
    return result


def stage_weights(weights: WeightLayout, stage: Stage, tp: int, pp: int,
                  experts: ExpertPlacement | None = None) -> int:
    """Bytes one rank of the stage holds: attention and dense weights sliced by TP, the routed experts as the
    engine places them (by default sliced by TP too)."""
    placement = experts or ExpertPlacement(tp)
    total = weights.dense_per_layer * stage.decoder_layers
    if stage.first:
        total += weights.embeddings + weights.vision
    if stage.last:
        # A tied lm_head is the embedding itself, unless the embedding lives on another stage.
        total += weights.lm_head or (weights.embeddings if pp > 1 else 0)
    return -(-total // tp) + stage.decoder_layers * placement.share(weights.experts_per_layer, weights.num_experts)


def check_max_model_len(spec: ModelSpec, dep: Deployment) -> int:
    if dep.max_model_len is None:
        return spec.max_context
    if dep.max_model_len > spec.max_context:
        raise KvplanError(f"User-specified max_model_len ({dep.max_model_len}) is greater than the derived "
                          f"max_model_len ({spec.max_context}) of {spec.id}", dep.where("max_model_len"))
    return dep.max_model_len


def ladder_contexts(target: PlanInput, max_model_len: int) -> tuple[list[int], str | None]:
    """The ladder's contexts, none longer than max_model_len: a longer request is refused by the engine."""
    wanted = context_ladder(max_model_len, list(target.ladder) or None)
    clipped = sorted({min(context, max_model_len) for context in wanted})
    above = [context for context in wanted if context > max_model_len]
    note = (f"contexts above max_model_len {max_model_len:,} shown at {max_model_len:,}: "
            f"{', '.join(f'{c:,}' for c in above)}") if above else None
    return clipped, note


def build_plan(target: PlanInput, settings: EngineSettings, prepared: Prepared, memories: list[Memory],
               notes: list[str], rules: PoolRules | None = None) -> Plan:
    spec, dep, gpu = target.spec, target.deployment, target.gpu
    rules = rules or PoolRules()
    notes = list(dep.notes) + list(target.notes) + prepared.notes + notes
    notes += [gpu.memory_note] if gpu.memory_note else []
    mnbt = settings.in_flight_tokens or settings.max_num_batched_tokens or settings.max_model_len
    kv_tp = rules.kv_tensor_parallel(target)
    block_size = rules.pool_block_size(target, settings, [layer for stage in prepared.stages for layer in stage.layers],
                                       prepared.kv_bytes, kv_tp)
    layouts = pool_layouts([stage.layers for stage in prepared.stages], block_size, prepared.kv_bytes, kv_tp,
                           settings.max_model_len)
    notes += rules.layout_notes(settings, layouts[0])
    settings = _aligned(settings, layouts[0])
    pairs = list(zip(layouts, memories, strict=True))
    blocks = [rules.capped_blocks(target, settings, layout.num_blocks(memory.kv_cache_bytes)) for layout, memory
              in pairs]
    limiting = min(range(len(blocks)), key=lambda i: blocks[i])
    layout, memory, num_blocks = layouts[limiting], memories[limiting], blocks[limiting]
    length = settings.max_model_len
    per_request = layout.blocks_per_request(length, mnbt)
    fit = _Fit.of(pairs, layout, length, mnbt, [rules.held_back_bytes(settings, lay) for lay, _ in pairs])
    split = rules.pools(target, settings, limiting, num_blocks * settings.block_size, prepared.kv_bytes, kv_tp)
    if split is not None:  # the profiled tokens re-split into pools that must each hold the request
        notes = [note for note in notes if note != FLAT_POOL_NOTE]
        fit = _Fit(split.fits(length), split.longest(length), split.request_bytes(length))
    request_cap, cap_note = rules.request_cap(target, settings, memory)
    notes += [cap_note] if cap_note else []
    caps = [cap for cap in (settings.max_num_seqs, request_cap) if cap is not None]
    contexts, ladder_note = ladder_contexts(target, length)
    notes += [ladder_note] if ladder_note else []
    ladder = _ladder(contexts, layout, num_blocks, mnbt, split, caps)
    error = _startup_error(target, settings, layout, memories, memory, fit.everywhere, fit.request_bytes, fit.longest)
    if target.deployment.kv_cache_memory_bytes is not None and _overcommitted(memories):
        fit = _Fit(False, 0, fit.request_bytes)  # the pool cannot be allocated: no request fits in it
    if not layout.groups:
        notes.append("the model has no attention KV cache (state-only layers); the block pool does not apply")
    tokens, concurrency_value = rules.logged(target, settings, layout, num_blocks, per_request)
    if split is not None:  # tokens: the engine's max_total_num_tokens; num_blocks stays the profiled pages
        concurrency_value, tokens = split.concurrency(length), split.pools[0].tokens
    offload_tokens, offload_notes = rules.offload_tier(target, settings, layout, tokens, split is not None)
    notes += offload_notes
    capacity = Capacity(
        num_blocks=num_blocks, tokens=tokens, max_concurrency=round(concurrency_value, 2),
        fits=error is None and bool(layout.groups), max_model_len_that_fits=fit.longest,
        blocks_per_request=per_request, request_bytes=fit.request_bytes, ladder=tuple(ladder),
        offload_tokens=offload_tokens,
        offload_host_bytes=rules.offload_host_bytes(target, settings, layout, offload_tokens))
    notes += _pool_notes(target, settings, prepared, layout, tokens) + rules.pool_notes(target, settings, num_blocks)
    return Plan(model=spec, gpu=gpu, tensor_parallel=dep.tensor_parallel_size,
                pipeline_parallel=dep.pipeline_parallel_size, data_parallel=dep.data_parallel_size,
                engine=settings, kv_dtype=prepared.kv_name, kv_bytes=prepared.kv_bytes, layout=layout, memory=memory,
                capacity=capacity, limiting_stage=limiting, error=error, pools=split, stage_memories=tuple(memories),
                notes=tuple(dict.fromkeys(notes + list(spec.notes))))


@dataclass(frozen=True)
class _Fit:
    """Whether one request of max_model_len fits on every rank, the longest that would, and what one takes."""

    everywhere: bool
    longest: int
    request_bytes: int

    @classmethod
    def of(cls, pairs: list[tuple[PoolLayout, Memory]], limiting: PoolLayout, length: int, mnbt: int,
           held: list[int]) -> _Fit:
        # held: what each rank's check leaves out of its pool (PoolRules.held_back_bytes)
        checked = [(lay, mem.kv_cache_bytes - back) for (lay, mem), back in zip(pairs, held, strict=True)]
        everywhere = all(lay.request_bytes(length, mnbt) <= free and lay.groups for lay, free in checked)
        # vLLM's estimate of the longest request searches up to max_model_len, never beyond it.
        longest = min(lay.longest_context(free, mnbt, length) for lay, free in checked)
        return cls(everywhere, longest, limiting.request_bytes(length, mnbt))


def _ladder(contexts: list[int], layout: PoolLayout, num_blocks: int, mnbt: int, split: SplitPools | None,
            caps: list[int]) -> list[LadderRung]:
    ladder = []
    for context in contexts:
        need = layout.blocks_per_request(context, mnbt)
        kv_limited = split.requests(context) if split is not None else num_blocks // need if need else 0
        ladder.append(LadderRung(context, min([kv_limited, *caps]), kv_limited))
    return ladder


def _pool_notes(target: PlanInput, settings: EngineSettings, prepared: Prepared, layout: PoolLayout,
                tokens: int) -> list[str]:
    """What the plan's pool says beyond its figures: padding, states outside it, replicas, experts."""
    dep, notes = target.deployment, []
    if layout.padding_layers:
        waste = layout.padding_layers / (sum(g.slots for g in layout.groups)) * 100
        notes.append(f"{layout.padding_layers} padding layers to make equal KV groups (up to {waste:.2f}% of "
                     "the pool unused)")
    if layout.groups and any(layer.state_outside_pool for stage in prepared.stages for layer in stage.layers):
        notes.append("state-only (Mamba / linear attention) layers hold a per-sequence state that is not "
                     "counted in the block pool")
    if dep.data_parallel_size > 1:
        dp = dep.data_parallel_size
        notes.append(f"data parallel {dp}: {dp} engines, each with its own weights and this pool; in all "
                     f"{tokens * dp:,} tokens and {dp} x the requests at once")
    placement = settings.expert_placement
    if placement is not None and (placement.whole or placement.ranks > dep.tensor_parallel_size):
        notes.append(_placement_note(placement, target.spec.moe.num_experts if target.spec.moe else 0))
    return notes


def _placement_note(placement: ExpertPlacement, num_experts: int) -> str:
    if not placement.whole:
        return f"MoE experts sliced over TP x DP = {placement.ranks} ranks; attention and dense weights over TP"
    physical = num_experts + placement.redundant
    extra = f" ({placement.redundant} redundant)" if placement.redundant else ""
    return (f"expert parallel: {physical} experts{extra} over {placement.ranks} ranks, up to "
            f"{-(-physical // placement.ranks)} whole experts per rank; attention and dense weights over TP")


def _aligned(settings: EngineSettings, layout: PoolLayout) -> EngineSettings:
    """The block size the pool settled on: state pages may have raised the attention block."""
    has_attention = any(group.layer.holds_kv for group in layout.groups)
    if has_attention and layout.block_size != settings.block_size:
        return replace(settings, block_size=layout.block_size)
    return settings


def _overcommitted(memories: list[Memory]) -> list[Memory]:
    """The ranks whose given KV pool and weights exceed the GPU (the allocation fails with CUDA out of memory)."""
    return [m for m in memories if m.total_bytes and m.weights_bytes + m.kv_cache_bytes > m.total_bytes]


def _startup_error(target: PlanInput, settings: EngineSettings, layout: PoolLayout, memories: list[Memory],
                   memory: Memory, fits_everywhere: bool, request_bytes: int, longest: int) -> str | None:
    """The engine's own refusal to start, worded with its own knob names."""
    label, util, length_knob = settings.label, settings.utilization_knob, settings.length_knob
    if not layout.groups:
        return None
    if target.deployment.kv_cache_memory_bytes is not None:
        over = _overcommitted(memories)
        if over:
            m = over[0]
            if m.weights_bytes > m.total_bytes:
                return (f"{label} would fail to load the weights: {m.weights_bytes / GiB:.2f} GiB exceed the GPU's "
                        f"{m.total_bytes / GiB:.2f} GiB (CUDA out of memory). Add GPUs or use a smaller or quantized "
                        "model.")
            return (f"{label} would fail to allocate: a KV pool of {m.kv_cache_bytes / GiB:.2f} GiB and "
                    f"{m.weights_bytes / GiB:.2f} GiB of weights exceed the GPU's {m.total_bytes / GiB:.2f} GiB "
                    "(CUDA out of memory). Give a smaller KV cache memory size.")
    if memory.kv_cache_bytes <= 0:
        return (f"{label} would refuse to start: no memory is left for KV cache blocks "
                f"({memory.kv_cache_bytes / GiB:.2f} GiB). Raise {util}, add GPUs, or use a smaller or quantized "
                "model.")
    if not fits_everywhere:
        return (f"{label} would refuse to start: one request of {length_knob} {settings.max_model_len} needs "
                f"{request_bytes / GiB:.2f} GiB of KV cache, more than the {memory.kv_cache_bytes / GiB:.2f} GiB "
                f"available; the estimated maximum model length is {longest}. Raise {util} or lower {length_knob}.")
    return None
