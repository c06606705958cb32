"""The textbook rule: pool = GPU memory x utilization - weights - a fixed reserve."""

from __future__ import annotations

from kvplan.deployment import Deployment
from kvplan.engines import common
from kvplan.plan import EngineSettings, GpuChoice, Memory, Plan
from kvplan.spec.model import ModelSpec
from kvplan.units import GB, dtype_bytes
from kvplan.weights import weight_layout

DEFAULT_RESERVE = 1 * GB


def plan(spec: ModelSpec, dep: Deployment, gpu: GpuChoice, gpu_cc: str | None,
         ladder: list[int] | None = None) -> Plan:
    tp, pp = dep.tensor_parallel_size, dep.pipeline_parallel_size
    max_model_len = common.check_max_model_len(spec, dep)
    util = dep.gpu_memory_utilization or 0.9
    block_size = dep.block_size or 16
    reserve = DEFAULT_RESERVE if dep.reserve_bytes is None else dep.reserve_bytes
    model_dtype = common.model_dtype(spec, dep)
    kv_name, kv_bytes = common.kv_dtype(dep, model_dtype)
    weights = weight_layout(spec, dtype_bytes(model_dtype), common.quantization_method(spec, dep))
    drafts, draft_decoders, _ = common.draft_layers(spec, dep)
    stage_list = common.stages(spec, dep, drafts)
    memories = []
    for stage in stage_list:
        budget = int(gpu.memory_bytes * util)
        weight_bytes = dep.weights_memory_bytes if dep.weights_memory_bytes is not None else \
            common.stage_weights(weights, spec, stage, tp, pp, draft_decoders)
        pool = dep.kv_cache_memory_bytes if dep.kv_cache_memory_bytes is not None else \
            budget - weight_bytes - reserve
        memories.append(Memory(gpu.memory_bytes, budget, weight_bytes, reserve_bytes=reserve, kv_cache_bytes=pool))
    settings = EngineSettings("simple", None, util, block_size, max_model_len, dep.max_num_seqs,
                              dep.max_num_batched_tokens)
    notes = [] if not weights.note else [weights.note]
    return common.build_plan(spec, dep, gpu, settings, stage_list, memories, kv_name, kv_bytes, ladder, notes,
                             "The engine")
