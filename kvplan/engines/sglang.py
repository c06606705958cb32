"""SGLang: the pool is what is left after weights once a fixed share of total memory, 1 - mem_fraction_static,
is held back for activations and CUDA graphs (ModelRunner.profile_max_num_token). Pages are 1 token."""

from __future__ import annotations

from kvplan.deployment import Deployment
from kvplan.engines import common
from kvplan.models.model import ModelSpec
from kvplan.plan import EngineSettings, GpuChoice, Memory, Plan
from kvplan.units import GiB, MiB


def default_mem_fraction(total_bytes: int, tp: int, pp: int) -> tuple[float, int, int]:
    """server_args' heuristic: reserve MB = 512 + 1.5 x chunked-prefill size + 2 x CUDA-graph batch size +
    1024 per 8 GPUs. Returns (fraction, chunked prefill size, cuda graph max bs)."""
    gib = total_bytes / GiB
    chunked, graph_bs = (2048, 24) if gib < 35 else (4096, 80) if gib < 60 else (8192, 160)
    reserved_mib = 512 + 1.5 * max(chunked, 2048) + 2 * graph_bs + tp * pp / 8 * 1024
    return round((total_bytes / MiB - reserved_mib) / (total_bytes / MiB), 3), chunked, graph_bs


def plan(spec: ModelSpec, dep: Deployment, gpu: GpuChoice, gpu_cc: str | None,
         ladder: list[int] | None = None) -> Plan:
    tp, pp = dep.tensor_parallel_size, dep.pipeline_parallel_size
    max_model_len = common.check_max_model_len(spec, dep)
    fraction, chunked, _ = default_mem_fraction(gpu.memory_bytes, tp, pp)
    util = dep.gpu_memory_utilization or fraction
    prepared = common.prepare(spec, dep, every_token_cached=True)
    held_back = int(gpu.memory_bytes * (1 - util))
    memories = []
    for stage in prepared.stages:
        pool = dep.kv_cache_memory_bytes if dep.kv_cache_memory_bytes is not None else \
            gpu.memory_bytes - stage.weights_bytes - held_back
        memories.append(Memory(gpu.memory_bytes, gpu.memory_bytes - held_back, stage.weights_bytes,
                               reserve_bytes=held_back, kv_cache_bytes=pool))
    settings = EngineSettings("sglang", dep.engine_version, util, dep.block_size or 1, max_model_len,
                              dep.max_num_seqs, dep.max_num_batched_tokens or chunked)
    notes = [f"mem_fraction_static {util} (SGLang's default heuristic for this GPU unless "
             "--gpu-memory-utilization is given)"]
    return common.build_plan(spec, dep, gpu, settings, prepared, memories, ladder, notes, "SGLang")
