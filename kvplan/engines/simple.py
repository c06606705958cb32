"""The textbook rule: pool = GPU memory x utilization - weights - a fixed reserve."""

from __future__ import annotations

from kvplan.deployment import Deployment
from kvplan.engines import common
from kvplan.models.model import ModelSpec
from kvplan.plan import EngineSettings, GpuChoice, Memory, Plan
from kvplan.units import GB

DEFAULT_RESERVE = 1 * GB


def plan(spec: ModelSpec, dep: Deployment, gpu: GpuChoice, gpu_cc: str | None,
         ladder: list[int] | None = None) -> Plan:
    max_model_len = common.check_max_model_len(spec, dep)
    util = dep.gpu_memory_utilization or 0.9
    block_size = dep.block_size or 16
    reserve = DEFAULT_RESERVE if dep.reserve_bytes is None else dep.reserve_bytes
    prepared = common.prepare(spec, dep)
    memories = []
    for stage in prepared.stages:
        budget = int(gpu.memory_bytes * util)
        pool = dep.kv_cache_memory_bytes if dep.kv_cache_memory_bytes is not None else \
            budget - stage.weights_bytes - reserve
        memories.append(Memory(gpu.memory_bytes, budget, stage.weights_bytes, reserve_bytes=reserve,
                               kv_cache_bytes=pool))
    settings = EngineSettings("simple", None, util, block_size, max_model_len, dep.max_num_seqs,
                              dep.max_num_batched_tokens)
    return common.build_plan(spec, dep, gpu, settings, prepared, memories, ladder, [], "The engine")
