"""TensorRT-LLM: KvCacheConfig.free_gpu_memory_fraction (0.9) of the memory still free after the weights and
runtime buffers are in place, in blocks of 32 tokens."""

from __future__ import annotations

from kvplan.deployment import Deployment
from kvplan.engines import common
from kvplan.engines.vllm import ERAS, activation_bytes
from kvplan.models.model import ModelSpec
from kvplan.plan import EngineSettings, GpuChoice, Memory, Plan

TOKENS_PER_BLOCK = 32
FREE_FRACTION = 0.9
MAX_NUM_TOKENS = 8192
MAX_BATCH_SIZE = 2048


def plan(spec: ModelSpec, dep: Deployment, gpu: GpuChoice, gpu_cc: str | None,
         ladder: list[int] | None = None) -> Plan:
    tp = dep.tensor_parallel_size
    max_model_len = common.check_max_model_len(spec, dep)
    fraction = dep.gpu_memory_utilization or FREE_FRACTION
    mnbt = dep.max_num_batched_tokens or MAX_NUM_TOKENS
    seqs = dep.max_num_seqs or MAX_BATCH_SIZE
    prepared = common.prepare(spec, dep, every_token_cached=True)
    light_era = ERAS[-1][1]
    memories = []
    for stage in prepared.stages:
        runtime = activation_bytes(light_era, spec, tp, min(seqs, 1024) if stage.last else 0, mnbt)
        free = gpu.memory_bytes - stage.weights_bytes - runtime
        pool = dep.kv_cache_memory_bytes if dep.kv_cache_memory_bytes is not None else int(free * fraction)
        memories.append(Memory(gpu.memory_bytes, gpu.memory_bytes, stage.weights_bytes, activation_bytes=runtime,
                               reserve_bytes=max(0, free - pool), kv_cache_bytes=pool))
    settings = EngineSettings("trtllm", dep.engine_version, fraction, dep.block_size or TOKENS_PER_BLOCK,
                              max_model_len, seqs, mnbt)
    notes = [f"free_gpu_memory_fraction {fraction} of the memory free after weights and runtime buffers "
             "(runtime buffers estimated with kvplan's vLLM activation model)"]
    return common.build_plan(spec, dep, gpu, settings, prepared, memories, ladder, notes, "TensorRT-LLM")
