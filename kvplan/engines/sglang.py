"""SGLang: the pool is what is left after weights once a fixed share of total memory, 1 - mem_fraction_static,
is held back for activations and CUDA graphs (ModelRunner.profile_max_num_token). Pages are 1 token."""

from __future__ import annotations

from kvplan.engines import common
from kvplan.engines.base import Target
from kvplan.plan import EngineSettings, Memory
from kvplan.units import GiB, MiB


def default_mem_fraction(total_bytes: int, tp: int, pp: int) -> tuple[float, int, int]:
    """server_args' heuristic: reserve MB = 512 + 1.5 x chunked-prefill size + 2 x CUDA-graph batch size +
    1024 per 8 GPUs. Returns (fraction, chunked prefill size, cuda graph max bs)."""
    gib = total_bytes / GiB
    chunked, graph_bs = (2048, 24) if gib < 35 else (4096, 80) if gib < 60 else (8192, 160)
    reserved_mib = 512 + 1.5 * max(chunked, 2048) + 2 * graph_bs + tp * pp / 8 * 1024
    return round((total_bytes / MiB - reserved_mib) / (total_bytes / MiB), 3), chunked, graph_bs


class Sglang:
    name = "sglang"
    label = "SGLang"
    versioned = False
    kv_log = "KV Cache is allocated. #tokens: N"
    flat_pool = True

    def settings(self, target: Target) -> EngineSettings:
        dep, gpu = target.deployment, target.gpu
        fraction, chunked, _ = default_mem_fraction(gpu.memory_bytes, dep.tensor_parallel_size,
                                                    dep.pipeline_parallel_size)
        return EngineSettings(
            "sglang", self.label, self.kv_log, dep.engine_version, dep.gpu_memory_utilization or fraction,
            dep.block_size or 1, common.check_max_model_len(target.spec, dep), dep.max_num_seqs,
            dep.max_num_batched_tokens or chunked, utilization_knob="mem_fraction_static",
            length_knob="context_length", token_cap=dep.max_total_tokens)

    def stage_memory(self, target: Target, settings: EngineSettings, weights_bytes: int, decoder_layers: int,
                     last: bool) -> Memory:
        dep, total = target.deployment, target.gpu.memory_bytes
        held_back = int(total * (1 - (settings.gpu_memory_utilization or 1)))
        pool = dep.kv_cache_memory_bytes if dep.kv_cache_memory_bytes is not None else \
            total - weights_bytes - held_back
        return Memory(total, total - held_back, weights_bytes, reserve_bytes=held_back, kv_cache_bytes=pool)

    def notes(self, target: Target, settings: EngineSettings) -> list[str]:
        given = target.deployment.gpu_memory_utilization is not None
        return [f"mem_fraction_static {settings.gpu_memory_utilization}"
                + ("" if given else " (SGLang's default heuristic for this GPU)")]


ENGINE = Sglang()
