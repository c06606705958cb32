"""What every engine shares: dtypes, per-stage layers and weights, and turning per-stage budgets into a Plan."""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.capacity import concurrency, context_ladder, pipeline_stages, pool_layout
from kvplan.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.models.layers import FullAttention, Layer
from kvplan.models.model import ModelSpec
from kvplan.plan import Capacity, EngineSettings, GpuChoice, LadderRung, Memory, Plan
from kvplan.units import GiB, canonical_dtype, dtype_bytes
from kvplan.weights import WeightLayout, weight_layout


@dataclass(frozen=True)
class Stage:
    layers: list[Layer]  # the KV-relevant layers this stage's ranks hold, draft layers included
    decoder_layers: int
    first: bool
    last: bool
    weights_bytes: int = 0  # per rank of this stage


@dataclass(frozen=True)
class Prepared:
    """What every engine starts from: dtypes, and per pipeline stage its layers and weights."""

    kv_name: str
    kv_bytes: int
    stages: list[Stage]
    notes: list[str]


def prepare(spec: ModelSpec, dep: Deployment, every_token_cached: bool = False) -> Prepared:
    dtype = model_dtype(spec, dep)
    kv_name, kv_bytes = kv_dtype(dep, dtype)
    weights = weight_layout(spec, dtype_bytes(dtype), quantization_method(spec, dep))
    drafts, draft_decoders, draft_note = draft_layers(spec, dep)
    notes = [note for note in (weights.note, draft_note) if note]
    if every_token_cached and any(layer.kind in ("sliding", "chunked") for layer in spec.layers):
        notes.append("sliding and chunked layers are counted as caching every token (one flat pool)")
    tp, pp = dep.tensor_parallel_size, dep.pipeline_parallel_size
    stage_list = []
    for stage in stages(spec, dep, drafts, every_token_cached):
        measured = dep.weights_memory_bytes
        weight_bytes = measured if measured is not None else stage_weights(weights, stage, tp, pp, draft_decoders)
        stage_list.append(replace(stage, weights_bytes=weight_bytes))
    return Prepared(kv_name, kv_bytes, stage_list, notes)


def model_dtype(spec: ModelSpec, dep: Deployment) -> str:
    if dep.dtype != "auto":
        return canonical_dtype(dep.dtype)
    configured = canonical_dtype(spec.dtype)
    # Engines serve float32 checkpoints in 16-bit unless told otherwise.
    return "bfloat16" if configured in ("float32", "fp8_e4m3", "fp8") else configured


def kv_dtype(dep: Deployment, model: str) -> tuple[str, int]:
    name = model if dep.kv_cache_dtype == "auto" else dep.kv_cache_dtype
    return name, dtype_bytes(name, "--kv-cache-dtype")


def quantization_method(spec: ModelSpec, dep: Deployment) -> str | None:
    if dep.quantization:
        return dep.quantization.lower()
    return spec.quantization.method.lower() if spec.quantization else None


def draft_layers(spec: ModelSpec, dep: Deployment) -> tuple[list[Layer], int, str | None]:
    """Attention layers a speculative-decoding drafter adds to the last stage, and how many decoder layers
    of weights come with them."""
    config = dep.speculative_config
    if not config:
        return [], 0, None
    method = str(config.get("method") or ("draft_model" if config.get("model") else "")).lower()
    if method in ("ngram", "suffix", "medusa", ""):
        return [], 0, None
    if "mtp" in method:
        count = spec.mtp_layers or 1
    else:
        count = int(config.get("num_hidden_layers") or 1)
    template = next((layer for layer in spec.kv_layers), None)
    if template is None:
        return [], 0, None
    layer = template if template.kind == "mla" else FullAttention(template.kv_heads, template.head_dim)
    note = (f"speculative decoding ({method}): {count} draft layer(s) with the target's KV geometry; a separate "
            "draft model's own geometry is not read")
    return [layer] * count, count, note


def stages(spec: ModelSpec, dep: Deployment, drafts: list[Layer], every_token_cached: bool = False) -> list[Stage]:
    """every_token_cached: the engine keeps all tokens in sliding and chunked layers too (one flat pool)."""
    ranges = pipeline_stages(spec.num_layers, dep.pipeline_parallel_size)
    result = []
    for index, span in enumerate(ranges):
        last = index == len(ranges) - 1
        layers = [spec.layers[i] for i in span] + (drafts if last else [])
        if every_token_cached:
            layers = [layer.as_full() for layer in layers]
        result.append(Stage(layers, len(span), index == 0, last))
    return result


def stage_weights(weights: WeightLayout, stage: Stage, tp: int, pp: int, draft_decoder_layers: int) -> int:
    total = weights.per_layer * stage.decoder_layers
    if stage.first:
        total += weights.embeddings + weights.vision
    if stage.last:
        total += weights.per_layer * draft_decoder_layers
        # A tied lm_head is the embedding itself, unless the embedding lives on another stage.
        total += weights.lm_head or (weights.embeddings if pp > 1 else 0)
    return -(-total // tp)


def check_max_model_len(spec: ModelSpec, dep: Deployment) -> int:
    if dep.max_model_len is None:
        return spec.max_context
    if dep.max_model_len > spec.max_context:
        raise KvplanError(f"User-specified max_model_len ({dep.max_model_len}) is greater than the derived "
                          f"max_model_len ({spec.max_context}) of {spec.id}", "--max-model-len")
    return dep.max_model_len


def build_plan(spec: ModelSpec, dep: Deployment, gpu: GpuChoice, settings: EngineSettings, prepared: Prepared,
               memories: list[Memory], ladder_contexts: list[int] | None, notes: list[str], engine_label: str,
               concurrency_in_tokens: bool = False) -> Plan:
    """concurrency_in_tokens: V0's rule, pool tokens / max_model_len, instead of blocks per request."""
    tp = dep.tensor_parallel_size
    kv_name, kv_bytes = prepared.kv_name, prepared.kv_bytes
    notes = prepared.notes + notes
    mnbt = settings.max_num_batched_tokens or settings.max_model_len
    layouts = [pool_layout(stage.layers, settings.block_size, kv_bytes, tp) for stage in prepared.stages]
    blocks = [layout.num_blocks(memory.kv_cache_bytes) for layout, memory in zip(layouts, memories, strict=True)]
    limiting = min(range(len(blocks)), key=lambda i: blocks[i])
    layout, memory, num_blocks = layouts[limiting], memories[limiting], blocks[limiting]
    length = settings.max_model_len
    per_request = layout.blocks_per_request(length, mnbt)
    request_bytes = layout.request_bytes(length, mnbt)
    fits_everywhere = all(lay.request_bytes(length, mnbt) <= mem.kv_cache_bytes and lay.groups
                          for lay, mem in zip(layouts, memories, strict=True))
    upper = max(spec.max_context, length)
    longest = min(lay.longest_context(mem.kv_cache_bytes, mnbt, upper) for lay, mem in zip(layouts, memories, strict=True))

    ladder = []
    for context in context_ladder(length, ladder_contexts):
        need = layout.blocks_per_request(context, mnbt)
        kv_limited = num_blocks // need if need else 0
        cap = settings.max_num_seqs
        ladder.append(LadderRung(context, min(kv_limited, cap) if cap else kv_limited, kv_limited))

    error = None
    if not layout.groups:
        notes.append("the model has no attention KV cache (state-only layers); the block pool does not apply")
    elif memory.kv_cache_bytes <= 0:
        error = (f"{engine_label} would refuse to start: no memory is left for KV cache blocks "
                 f"({memory.kv_cache_bytes / GiB:.2f} GiB). Raise --gpu-memory-utilization, add GPUs, or use a "
                 "smaller or quantized model.")
    elif not fits_everywhere:
        error = (f"{engine_label} would refuse to start: one request of max_model_len {length} needs "
                 f"{request_bytes / GiB:.2f} GiB of KV cache, more than the {memory.kv_cache_bytes / GiB:.2f} GiB "
                 f"available; the estimated maximum model length is {longest}. Raise "
                 "--gpu-memory-utilization or lower --max-model-len.")
    capacity = Capacity(
        num_blocks=num_blocks, tokens=layout.reported_tokens(num_blocks),
        max_concurrency=round(num_blocks * settings.block_size / length if concurrency_in_tokens
                              else concurrency(num_blocks, per_request), 2), fits=error is None and bool(layout.groups),
        max_model_len_that_fits=longest, blocks_per_request=per_request, request_bytes=request_bytes,
        ladder=tuple(ladder))
    if layout.padding_layers:
        waste = layout.padding_layers / (sum(g.slots for g in layout.groups)) * 100
        notes.append(f"{layout.padding_layers} padding layers to make equal KV groups (up to {waste:.2f}% of "
                     "the pool unused)")
    if any(layer.kind == "none" for layer in spec.layers) and layout.groups:
        notes.append("state-only (Mamba / linear attention) layers hold a per-sequence state that is not "
                     "counted in the block pool")
    return Plan(model=spec, gpu=gpu, tensor_parallel=tp, pipeline_parallel=dep.pipeline_parallel_size,
                engine=settings, kv_dtype=kv_name, kv_bytes=kv_bytes, layout=layout, memory=memory,
                capacity=capacity, limiting_stage=limiting, error=error, notes=tuple(notes + list(spec.notes)))
