"""The textbook rule: pool = GPU memory x utilization - weights - a fixed reserve."""

from __future__ import annotations

from kvplan.engines import common
from kvplan.engines.base import PlanInput
from kvplan.plan import EngineSettings, Memory
from kvplan.units import GB

DEFAULT_RESERVE = 1 * GB
DEFAULT_UTILIZATION = 0.9
DEFAULT_BLOCK = 16


class Simple:
    name = "simple"
    label = "The engine"
    kv_log = "KV cache tokens"
    flat_pool = False

    def settings(self, target: PlanInput) -> EngineSettings:
        dep = target.deployment
        return EngineSettings("simple", self.label, self.kv_log, None,
                              dep.gpu_memory_utilization or DEFAULT_UTILIZATION, dep.block_size or DEFAULT_BLOCK,
                              common.check_max_model_len(target.spec, dep), dep.max_num_seqs,
                              dep.max_num_batched_tokens)

    def stage_memory(self, target: PlanInput, settings: EngineSettings, weights_bytes: int, decoder_layers: int,
                     last: bool) -> Memory:
        dep, total = target.deployment, target.gpu.memory_bytes
        reserve = DEFAULT_RESERVE if dep.reserve_bytes is None else dep.reserve_bytes
        budget = int(total * (settings.gpu_memory_utilization or DEFAULT_UTILIZATION))
        pool = dep.kv_cache_memory_bytes if dep.kv_cache_memory_bytes is not None else \
            budget - weights_bytes - reserve
        return Memory(total, budget, weights_bytes, reserve_bytes=reserve, kv_cache_bytes=pool)

    def notes(self, target: PlanInput, settings: EngineSettings) -> list[str]:
        return []


ENGINE = Simple()
