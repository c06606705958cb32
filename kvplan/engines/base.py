"""The Engine interface and the one planning loop every engine shares: check the deployment against the model
and GPU, settle the engine's settings, prepare the stages, take each stage's budget, build the Plan."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from kvplan.capacity import concurrency
from kvplan.deployment import Deployment
from kvplan.deployment.knobs import AUTO
from kvplan.errors import KvplanError
from kvplan.models.model import ModelSpec
from kvplan.plan import EngineSettings, GpuChoice, Memory, Plan
from kvplan.units import GiB

if TYPE_CHECKING:
    from kvplan.capacity import PoolLayout, SplitPools
    from kvplan.engines.common import Stage
    from kvplan.models.layers import Layer

# The CUDA context, outside torch, taken before SGLang measures its "free before load" and counted in TensorRT-LLM's
# profiling peak: llm-d measured 78.57 GiB free at startup of 79.18 GiB on an H100 (the h100-sxm memory_source in
# kvplan/data/gpus.json). One GPU, no NCCL: the communicators of TP > 1 take more, which kvplan does not model.
CUDA_CONTEXT_BYTES = int((79.18 - 78.57) * GiB)


@dataclass(eq=False)
class PlanInput:
    """What is planned: the model (and a separate speculative draft model, when one is named), on which GPU,
    deployed how, and which contexts the concurrency ladder shows."""

    spec: ModelSpec
    deployment: Deployment
    gpu: GpuChoice
    ladder: tuple[int, ...] = ()
    draft: ModelSpec | None = None
    notes: tuple[str, ...] = field(default=())


class Engine(Protocol):
    name: str  # the --engine value
    label: str  # how the engine names itself in messages
    kv_log: str  # the log line whose token count Capacity.tokens reproduces
    flat_pool: bool  # one pool in which every layer caches every token (no sliding-window savings)

    def settings(self, target: PlanInput) -> EngineSettings: ...

    def stage_memory(self, target: PlanInput, settings: EngineSettings, weights_bytes: int, decoder_layers: int,
                     last: bool) -> Memory:
        """One rank of one pipeline stage: what the engine's budget rule leaves for the KV pool."""
        ...

    def notes(self, target: PlanInput, settings: EngineSettings) -> list[str]: ...


class PoolRules:
    """How an engine lays its pool out beyond the block budget. The defaults (one pool; KV heads split over the
    whole TP group; no cap on requests but max_num_seqs) are vLLM's and TensorRT-LLM's; an engine with other rules
    subclasses this and overrides them."""

    refused_kv_cache_dtypes: frozenset[str] = frozenset()  # kvplan's KV dtype choices this engine does not take

    def kv_cache_scheme_note(self, target: PlanInput, settings: EngineSettings | None, kv_name: str) -> str | None:
        """What the plan says of a compressed-tensors quantization_config.kv_cache_scheme (models/hf_config.py
        keeps it as text): by default that this engine's reading of it is not modelled, and the dtype planned.
        SGLang 0.5.23 reads kv_cache_scheme only from ModelOpt configs (srt/layers/quantization/modelopt_quant.py);
        vLLM reads it (engines/vllm/kv_scheme.py)."""
        scheme = target.spec.quantization.kv_cache_scheme if target.spec.quantization else None
        if scheme is None:
            return None
        engine = settings.label if settings else "this engine"
        return (f"quantization_config.kv_cache_scheme {scheme} is not read for {engine}: kvplan plans the KV cache "
                f"in {kv_name} (kv_cache_dtype {target.deployment.kv_cache_dtype})")

    def kv_tensor_parallel(self, target: PlanInput) -> int:
        """The ranks a layer's KV heads are divided over."""
        return target.deployment.tensor_parallel_size

    def pools(self, target: PlanInput, settings: EngineSettings, stage: int, tokens: int, kv_bytes: int,
              kv_tp: int) -> SplitPools | None:
        """Separate token pools the profiled `tokens` of pipeline stage `stage` are re-split into; None: one."""
        return None

    def flat_layer(self, layer: Layer) -> Layer:
        """A cache layer as the engine's flat pool holds it: by default every token kept (the kind's as_full, which
        refuses a kind no flat pool holds)."""
        return layer.as_full()

    def unified(self, target: PlanInput, settings: EngineSettings) -> bool:
        """Whether every attention layer caches every token in one group (no sliding or chunked savings)."""
        return False

    def stage_facts(self, stage: Stage) -> dict[str, Any]:
        """What else of the pipeline stage the engine's stage_memory takes, as keyword arguments (none)."""
        return {}

    def served_layers(self, target: PlanInput, settings: EngineSettings, layers: list[Layer],
                      model_bytes: int) -> list[Layer]:
        """The stage's cache layers as the engine holds them: by default recurrent states stay outside the pool,
        sizeless in it."""
        return [layer.unpaged() for layer in layers]

    def pool_block_size(self, target: PlanInput, settings: EngineSettings, layers: list[Layer], kv_bytes: int,
                        tp: int) -> int:
        """The block size the pool is laid out with, before state pages raise it (capacity.aligned_block_size)."""
        return settings.block_size

    def capped_blocks(self, target: PlanInput, settings: EngineSettings, blocks: int) -> int:
        """The engine's own overrides of the profiled block count."""
        return blocks

    def held_back_bytes(self, settings: EngineSettings, layout: PoolLayout) -> int:
        """Pool bytes the engine leaves out when it checks that one request fits (and estimates the longest that
        would); the pool itself keeps them."""
        return 0

    def logged(self, target: PlanInput, settings: EngineSettings, layout: PoolLayout, num_blocks: int,
               per_request: int) -> tuple[int, float]:
        """The token count and the concurrency the engine prints for its pool."""
        return layout.reported_tokens(num_blocks), concurrency(num_blocks, per_request)

    def offload_tier(self, target: PlanInput, settings: EngineSettings, layout: PoolLayout, tokens: int,
                     split: bool) -> tuple[int, list[str]]:
        """Tokens of a CPU KV tier beside the GPU pool (tokens: the GPU pool's; split: in several pools), and the
        notes that say so."""
        return 0, []

    def offload_host_bytes(self, target: PlanInput, settings: EngineSettings, layout: PoolLayout,
                           offload_tokens: int) -> int:
        """Host memory the CPU KV tier takes over all ranks: by default each rank of every stage keeps its own
        tokens at its pool's bytes per token (SGLang's HostKVCache, mem_cache/pool_host/base.py)."""
        dep = target.deployment
        return offload_tokens * layout.bytes_per_token * dep.tensor_parallel_size * dep.pipeline_parallel_size

    def pool_notes(self, target: PlanInput, settings: EngineSettings, num_blocks: int) -> list[str]:
        """What the engine's own overrides of the pool did."""
        return []

    def layout_notes(self, settings: EngineSettings, layout: PoolLayout) -> list[str]:
        """The engine's own words on how it laid the pool out (a block raised, a page padded)."""
        return []

    def request_cap(self, target: PlanInput, settings: EngineSettings, memory: Memory) -> tuple[int | None, str | None]:
        """A limit on running requests the engine sets from its memory, beyond max_num_seqs, and a note."""
        return None, None


def pool_rules(engine: Engine) -> PoolRules:
    return engine if isinstance(engine, PoolRules) else PoolRules()


def plan(engine: Engine, target: PlanInput) -> Plan:
    from kvplan.deployment.rules import check

    _check_release(engine, target.deployment)
    target = _check_architecture(engine, target)
    _check_kv_cache_dtype(engine, target.deployment)
    notes = check(target.deployment, target.spec, target.gpu)
    if notes:
        target = replace(target, notes=(*target.notes, *notes))
    if target.deployment.max_model_len == AUTO:
        return _auto_length(engine, target)
    return _plan(engine, target)


def _check_release(engine: Engine, dep: Deployment) -> None:
    """An engine version is one of the engine's releases that kvplan covers."""
    from kvplan import registry

    if dep.engine_version is None:
        return
    releases = registry.releases(engine.name)
    if releases is None:
        raise KvplanError(f"{engine.label} has no releases; an engine version does not apply", dep.where("engine_version"))
    releases.checked(dep.engine_version, dep.where("engine_version"))


def _check_architecture(engine: Engine, target: PlanInput) -> PlanInput:
    """A release that does not register the model's architecture refuses it; with --allow-unmodelled, a note
    (engines/registered.py)."""
    from kvplan import registry

    registries, releases = registry.architectures(engine.name), registry.releases(engine.name)
    if registries is None or releases is None:
        return target
    version = target.deployment.engine_version or releases.newest
    note = registries.check(target.spec, target.deployment, version)
    return replace(target, notes=(*target.notes, note)) if note else target


def _check_kv_cache_dtype(engine: Engine, dep: Deployment) -> None:
    if dep.kv_cache_dtype in pool_rules(engine).refused_kv_cache_dtypes:
        raise KvplanError(f"invalid choice {dep.kv_cache_dtype!r}: {engine.label} has no such KV cache dtype",
                          dep.where("kv_cache_dtype"))


def _auto_length(engine: Engine, target: PlanInput) -> Plan:
    """max_model_len auto (vLLM 0.33: "auto" or -1): the longest request that fits in the KV cache, at most the
    model's own maximum."""
    first = _plan(engine, replace(target, deployment=replace(target.deployment, max_model_len=None)))
    longest = first.capacity.max_model_len_that_fits
    if longest <= 0 or longest == first.engine.max_model_len:
        return first
    chosen = replace(target, deployment=replace(target.deployment, max_model_len=longest),
                     notes=(*target.notes, f"max_model_len auto: {longest:,} tokens, the longest that fits"))
    return _plan(engine, chosen)


def _plan(engine: Engine, target: PlanInput) -> Plan:
    from kvplan.engines import common
    settings = engine.settings(target)
    prepared = common.prepare(target, flat_pool=engine.flat_pool, settings=settings, rules=pool_rules(engine))
    memories = [engine.stage_memory(target, settings, stage.weights_bytes, stage.decoder_layers, stage.last,
                                    **pool_rules(engine).stage_facts(stage)) for stage in prepared.stages]
    return common.build_plan(target, settings, prepared, memories, engine.notes(target, settings),
                             pool_rules(engine))
