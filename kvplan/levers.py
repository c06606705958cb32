"""Levers: the few changes to a deployment that help most, each re-planned to give its real number."""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.errors import KvplanError
from kvplan.models.model import ModelSpec, Quantization
from kvplan.plan import GpuChoice, Plan
from kvplan.units import MiB


@dataclass(eq=False)
class Lever:
    """One change to the deployment, re-planned: what it gives."""

    change: str
    flags: str
    tokens: int
    max_concurrency: float
    fits: bool


# A change to try: what it is, its flags, the deployment and GPUs it gives, and its plan when already made.
Candidate = tuple[str, str, Deployment, GpuChoice, "Plan | None"]


def _try(spec: ModelSpec, dep: Deployment, gpu: GpuChoice, draft: ModelSpec | None) -> Plan | None:
    try:
        return plan_deployment(spec, dep, gpu, draft=draft)
    except KvplanError:
        return None


def _smallest_tp_that_fits(spec: ModelSpec, dep: Deployment, gpu: GpuChoice, draft: ModelSpec | None,
                           extra_flags: str) -> tuple[Candidate, bool] | None:
    """The smallest tensor-parallel size (x2, x4, x8, at most 8) that serves max_model_len; when none does, the
    largest that leaves room for any KV cache, so the user sees how far it gets."""
    best = None
    for factor in (2, 4, 8):
        tp = factor * dep.tensor_parallel_size
        if tp > 8:
            break  # (a size the model's heads refuse plans to nothing: deployment.rules)
        new_dep = replace(dep, tensor_parallel_size=tp)
        new_gpu = replace(gpu, count=tp * dep.pipeline_parallel_size * dep.data_parallel_size)
        plan = _try(spec, new_dep, new_gpu, draft)
        if plan is None or plan.capacity.tokens <= 0:
            continue
        best = (f"tensor parallel {tp} ({new_gpu.count} GPUs){extra_flags and ' + fp8 weights'}",
                f"{flag('tensor_parallel_size', dep.engine, tp)}{extra_flags}", new_dep, new_gpu, plan)
        if plan.capacity.fits:
            return best, True
    return (best, False) if best else None


def _kv_size_that_fits(spec: ModelSpec, dep: Deployment, gpu: GpuChoice, base: Plan,
                       draft: ModelSpec | None) -> Candidate | None:
    """A given KV cache size the GPU cannot hold beside the weights: the size the engine would profile itself
    (the same deployment without it), in whole MiB, as the smaller size to give."""
    given = dep.kv_cache_memory_bytes
    memory = base.memory
    if given is None or not memory.total_bytes or memory.weights_bytes + memory.kv_cache_bytes <= memory.total_bytes:
        return None
    profiled = _try(spec, replace(dep, kv_cache_memory_bytes=None), gpu, draft)
    if profiled is None or profiled.memory.kv_cache_bytes <= 0:
        return None
    size = min(profiled.memory.kv_cache_bytes, given) // MiB * MiB
    return (f"kv_cache_memory_bytes {size}", flag("kv_cache_memory_bytes", dep.engine, size),
            replace(dep, kv_cache_memory_bytes=size), gpu, None)


def flag(name: str, engine: str, value: object) -> str:
    """A knob as the engine's own command line spells it (--context-length on SGLang, --max_seq_len on
    trtllm-serve), so that a lever can be pasted."""
    from kvplan.deployment.declaration import BY_NAME
    from kvplan.deployment.dialect import dialect_of

    return f"{dialect_of(engine).flag_for(BY_NAME()[name])} {value}"


def levers(spec: ModelSpec, dep: Deployment, gpu: GpuChoice, base: Plan, draft: ModelSpec | None = None,
           limit: int = 5) -> list[Lever]:
    """FP8 levers only where the GPU computes in FP8 (vLLM's FP8 kernels need it)."""
    candidates: list[Candidate] = []
    engine = dep.engine
    if base.kv_bytes > 1 and gpu.fp8:
        candidates.append(("fp8 KV cache", flag("kv_cache_dtype", engine, "fp8"), replace(dep, kv_cache_dtype="fp8"),
                           gpu, None))
    longest = base.capacity.max_model_len_that_fits
    kv_size = _kv_size_that_fits(spec, dep, gpu, base, draft)
    if kv_size is not None:
        candidates.append(kv_size)
    if not base.capacity.fits and base.engine.block_size <= longest < base.engine.max_model_len:
        length = longest // base.engine.block_size * base.engine.block_size
        candidates.append((f"max_model_len {length}", flag("max_model_len", engine, length),
                           replace(dep, max_model_len=length), gpu, None))
    util = base.engine.gpu_memory_utilization
    from kvplan.deployment.dialect import dialect_of

    if dialect_of(engine).raises_utilization and util is not None and util < 0.95 and dep.kv_cache_memory_bytes is None:
        candidates.append(("gpu_memory_utilization 0.95", flag("gpu_memory_utilization", engine, 0.95),
                           replace(dep, gpu_memory_utilization=0.95), gpu, None))
    quantized = spec.quantization is not None or dep.quantization is not None
    if not quantized and gpu.fp8:
        candidates.append(("fp8 weights (online, or an FP8 checkpoint)", flag("quantization", engine, "fp8"),
                           replace(dep, quantization="fp8"), gpu, None))
    if not quantized:  # planned as that checkpoint: --quantization awq on this 16-bit one is refused
        awq_dep = replace(dep, quantization="awq")
        candidates.append(("a 4-bit AWQ/GPTQ checkpoint",
                           flag("quantization", engine, "awq") + " (with a 4-bit checkpoint)", awq_dep, gpu,
                           _try(replace(spec, quantization=Quantization("awq", 4, 128)), awq_dep, gpu, draft)))
    # TP alone; if that never serves max_model_len, TP with FP8 weights; if neither does, the TP that gets furthest
    plain = _smallest_tp_that_fits(spec, dep, gpu, draft, "")
    if (plain is None or not plain[1]) and not quantized and gpu.fp8:
        with_fp8 = _smallest_tp_that_fits(spec, replace(dep, quantization="fp8"), gpu, draft,
                                          " " + flag("quantization", engine, "fp8"))
        if with_fp8 is not None and (with_fp8[1] or plain is None):
            plain = with_fp8
    if plain is not None:
        candidates.append(plain[0])
    found = []
    for change, flags, new_dep, new_gpu, planned in candidates:
        plan = planned or _try(spec, new_dep, new_gpu, draft)
        if plan is not None and plan.capacity.tokens > 0:
            found.append(Lever(change, flags, plan.capacity.tokens, plan.capacity.max_concurrency,
                               plan.capacity.fits))
    found.sort(key=lambda lever: (lever.fits, lever.tokens), reverse=True)
    return found[:limit]
