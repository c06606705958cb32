"""Levers: the few changes to a deployment that help most, each re-planned to give its real number."""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.deployment import Deployment
from kvplan.engines import estimate
from kvplan.errors import KvplanError
from kvplan.plan import GpuChoice, Plan
from kvplan.spec.model import ModelSpec


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
    tp = dep.tensor_parallel_size * 2
    if tp <= 8 and spec.num_attention_heads % tp == 0:
        candidates.append((f"tensor parallel {tp} ({tp * dep.pipeline_parallel_size} GPUs)",
                           f"--tensor-parallel-size {tp}", replace(dep, tensor_parallel_size=tp),
                           replace(gpu, count=tp * dep.pipeline_parallel_size)))
    if spec.quantization is None and dep.quantization is None:
        candidates.append(("fp8 weights (online, or an FP8 checkpoint)", "--quantization fp8",
                           replace(dep, quantization="fp8"), gpu))
    found = []
    for change, flags, new_dep, new_gpu in candidates:
        plan = _try(spec, new_dep, new_gpu, cc)
        if plan is not None and plan.capacity.tokens + (1 if plan.capacity.fits else 0) > 0:
            found.append(Lever(change, flags, plan.capacity.tokens, plan.capacity.max_concurrency,
                               plan.capacity.fits))
    found.sort(key=lambda lever: (lever.fits, lever.tokens), reverse=True)
    return found[:limit]
