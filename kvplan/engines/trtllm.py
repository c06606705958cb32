"""TensorRT-LLM: KvCacheConfig.free_gpu_memory_fraction (0.9) of the memory still free after the weights and
runtime buffers are in place, in blocks of 32 tokens."""

from __future__ import annotations

from kvplan.engines import common
from kvplan.engines.base import Target
from kvplan.models.model import ModelSpec
from kvplan.plan import EngineSettings, Memory
from kvplan.units import GiB

TOKENS_PER_BLOCK = 32
FREE_FRACTION = 0.9
MAX_NUM_TOKENS = 8192
MAX_BATCH_SIZE = 2048
# Runtime buffers: logits of the batch in fp32 (LOGITS_COPIES of max batch x vocab) plus routed-token buffers
# for MoE models and a fixed part. These are the values kvplan's vLLM sampler model had when they were copied
# here; they are TensorRT-LLM's own from now on, to be calibrated on its logs, and do not follow vLLM's.
LOGITS_COPIES = 3.79
MOE_COPIES = 1.0
FIXED_BYTES = int(0.12 * GiB)
LOGITS_BATCH_CAP = 1024


def runtime_buffer_bytes(spec: ModelSpec, tp: int, batch: int, max_num_tokens: int) -> int:
    logits = LOGITS_COPIES * min(batch, max_num_tokens) * spec.vocab_size * 4
    moe = 0.0
    if spec.moe is not None:
        moe = MOE_COPIES * max_num_tokens * spec.moe.experts_per_token * (
            spec.hidden_size + spec.moe.expert_intermediate_size / tp) * 2
    return int(logits + moe) + FIXED_BYTES


class TensorRtLlm:
    name = "trtllm"
    label = "TensorRT-LLM"
    versioned = False
    kv_log = "Allocated ... GiB for max tokens in paged KV cache (N)"
    flat_pool = True

    def settings(self, target: Target) -> EngineSettings:
        dep = target.deployment
        return EngineSettings(
            "trtllm", self.label, self.kv_log, dep.engine_version, dep.gpu_memory_utilization or FREE_FRACTION,
            dep.block_size or TOKENS_PER_BLOCK, common.check_max_model_len(target.spec, dep),
            dep.max_num_seqs or MAX_BATCH_SIZE, dep.max_num_batched_tokens or MAX_NUM_TOKENS,
            utilization_knob="free_gpu_memory_fraction", length_knob="max_seq_len")

    def stage_memory(self, target: Target, settings: EngineSettings, weights_bytes: int, decoder_layers: int,
                     last: bool) -> Memory:
        dep, gpu = target.deployment, target.gpu
        batch = min(settings.max_num_seqs or MAX_BATCH_SIZE, LOGITS_BATCH_CAP) if last else 0
        runtime = runtime_buffer_bytes(target.spec, dep.tensor_parallel_size, batch,
                                       settings.max_num_batched_tokens or MAX_NUM_TOKENS)
        free = gpu.memory_bytes - weights_bytes - runtime
        fraction = settings.gpu_memory_utilization or FREE_FRACTION
        pool = dep.kv_cache_memory_bytes if dep.kv_cache_memory_bytes is not None else int(free * fraction)
        return Memory(gpu.memory_bytes, gpu.memory_bytes, weights_bytes, activation_bytes=runtime,
                      reserve_bytes=max(0, free - pool), kv_cache_bytes=pool)

    def notes(self, target: Target, settings: EngineSettings) -> list[str]:
        return [f"free_gpu_memory_fraction {settings.gpu_memory_utilization} of the memory free after weights and "
                "runtime buffers (runtime buffers estimated, not yet calibrated on TensorRT-LLM logs)"]


ENGINE = TensorRtLlm()
