"""Levers: the few changes to a deployment that help most, each re-planned to give its real number."""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.deployment import Deployment
from kvplan.engines import estimate
from kvplan.errors import KvplanError
from kvplan.models.model import ModelSpec
from kvplan.plan import GpuChoice, Plan


@dataclass(frozen=True)
class Lever:
    change: str
    flags: str
    tokens: int
    max_concurrency: float
    fits: bool


def _try(spec: ModelSpec, dep: Deployment, gpu: GpuChoice, cc: str | None) -> Plan | None:
    try:
        return estimate(spec, dep, gpu, cc)
    except KvplanError:
        return None


def _smallest_tp_that_fits(spec: ModelSpec, dep: Deployment, gpu: GpuChoice, cc: str | None,
                           extra_flags: str) -> tuple[str, str, Deployment, GpuChoice] | None:
    for factor in (2, 4, 8):
        tp = factor * dep.tensor_parallel_size
        if tp > 8 or spec.num_attention_heads % tp:
            continue
        new_dep = replace(dep, tensor_parallel_size=tp)
        new_gpu = replace(gpu, count=tp * dep.pipeline_parallel_size)
        plan = _try(spec, new_dep, new_gpu, cc)
        if plan is not None and plan.capacity.fits:
            return (f"tensor parallel {tp} ({new_gpu.count} GPUs){extra_flags and ' + fp8 weights'}",
                    f"--tensor-parallel-size {tp}{extra_flags}", new_dep, new_gpu)
    return None


def levers(spec: ModelSpec, dep: Deployment, gpu: GpuChoice, cc: str | None, base: Plan, limit: int = 5) -> list[Lever]:
    candidates: list[tuple[str, str, Deployment, GpuChoice]] = []
    if base.kv_bytes > 1:
        candidates.append(("fp8 KV cache", "--kv-cache-dtype fp8", replace(dep, kv_cache_dtype="fp8"), gpu))
    longest = base.capacity.max_model_len_that_fits
    if not base.capacity.fits and longest >= base.engine.block_size:
        length = longest // base.engine.block_size * base.engine.block_size
        candidates.append((f"max_model_len {length}", f"--max-model-len {length}",
                           replace(dep, max_model_len=length), gpu))
    util = base.engine.gpu_memory_utilization
    if dep.engine == "vllm" and util is not None and util < 0.95 and dep.kv_cache_memory_bytes is None:
        candidates.append(("gpu_memory_utilization 0.95", "--gpu-memory-utilization 0.95",
                           replace(dep, gpu_memory_utilization=0.95), gpu))
    quantized = spec.quantization is not None or dep.quantization is not None
    if not quantized:
        candidates.append(("fp8 weights (online, or an FP8 checkpoint)", "--quantization fp8",
                           replace(dep, quantization="fp8"), gpu))
        candidates.append(("a 4-bit AWQ/GPTQ checkpoint", "--quantization awq (with a 4-bit checkpoint)",
                           replace(dep, quantization="awq"), gpu))
    for extra_flags, base_dep in (("", dep), (" --quantization fp8", replace(dep, quantization="fp8"))):
        if extra_flags and quantized:
            continue
        lever = _smallest_tp_that_fits(spec, base_dep, gpu, cc, extra_flags)
        if lever is not None:
            candidates.append(lever)
            break
    found = []
    for change, flags, new_dep, new_gpu in candidates:
        plan = _try(spec, new_dep, new_gpu, cc)
        if plan is not None and plan.capacity.tokens > 0:
            found.append(Lever(change, flags, plan.capacity.tokens, plan.capacity.max_concurrency,
                               plan.capacity.fits))
    found.sort(key=lambda lever: (lever.fits, lever.tokens), reverse=True)
    return found[:limit]
