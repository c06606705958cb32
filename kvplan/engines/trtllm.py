"""TensorRT-LLM: free_gpu_memory_fraction (0.9) of the memory still free once the weights are loaded and a
profiling forward pass has run, cut into whole tokens, then rounded up to blocks of tokens_per_block (32).

Sources (NVIDIA/TensorRT-LLM, read in stored copies):
- tensorrt_llm/_torch/pyexecutor/_util.py (1.0-1.1, KvCacheCreator._cal_max_tokens): available = (device total
  - peak memory of the profiling run + the estimation pool it held) x fraction; max_tokens = available // bytes
  per token (the PyTorch backend, trtllm-serve's default).
- cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp (the TensorRT-engine backend and the final allocation of
  both): max tokens = fraction x free memory / bytes per token, after the engine, execution context, runtime
  buffers and decoder are allocated; blocks in the primary pool = ceilDiv(max tokens, tokens per block);
  max_tokens_in_paged_kv_cache (or max_gpu_total_bytes) caps it, the smaller wins. KvCacheConfig stores the
  fraction as a C++ float: 0.9 is 0.8999999761581421 (printed so in the logs).
"""

from __future__ import annotations

import struct

from kvplan.capacity import pool_layout
from kvplan.engines import common
from kvplan.engines.base import Target
from kvplan.models.model import ModelSpec
from kvplan.plan import EngineSettings, Memory
from kvplan.units import GiB

TOKENS_PER_BLOCK = 32
FREE_FRACTION = 0.9
MAX_NUM_TOKENS = 8192
MAX_BATCH_SIZE = 2048
# The CUDA context, outside torch and counted in the profiling peak: 79.18 GiB total, 78.57 GiB free at startup
# on an H100 (llm-d's measurement, the h100-sxm memory_source in kvplan/data/gpus.json).
CUDA_CONTEXT_BYTES = int((79.18 - 78.57) * GiB)
# The profiling run's activations: logits of the batch in fp32 (LOGITS_COPIES of max batch x vocab) plus routed-token
# buffers for MoE models and a fixed part. Not derived from TensorRT-LLM: these are the values kvplan's vLLM
# sampler model had when they were copied here, kept until TensorRT-LLM logs that print the profiling peak on a
# discrete GPU are collected (the one such log, T03, is a unified-memory device).
LOGITS_COPIES = 3.79
MOE_COPIES = 1.0
FIXED_BYTES = int(0.12 * GiB)
LOGITS_BATCH_CAP = 1024


def as_float32(value: float) -> float:
    """The value a C++ float holds: KvCacheConfig's fraction."""
    return float(struct.unpack("f", struct.pack("f", value))[0])


def pytorch_available_bytes(total: float, peak: float, estimation_pool: float, fraction: float) -> int:
    """_cal_max_tokens: the memory for KV after the profiling run. The estimation pool was part of the peak and
    is freed before the real pool is made, so it is counted back."""
    return int((total - peak + estimation_pool) * fraction)


def engine_available_bytes(free: float, fraction: float) -> int:
    """The C++ KV cache manager: the fraction of the memory free after the engine, execution context, runtime
    buffers and decoder."""
    return int(free * fraction)


def max_tokens(available: int, bytes_per_token: int, cap: int | None = None) -> int:
    tokens = max(available, 0) // bytes_per_token
    return min(tokens, cap) if cap is not None else tokens


def pool_blocks(tokens: int, tokens_per_block: int) -> int:
    """Blocks in the primary pool: the max tokens rounded up to whole blocks (ceilDiv)."""
    return -(-tokens // tokens_per_block)


def runtime_buffer_bytes(spec: ModelSpec, tp: int, batch: int, max_num_tokens: int) -> int:
    logits = LOGITS_COPIES * min(batch, max_num_tokens) * spec.vocab_size * 4
    moe = 0.0
    if spec.moe is not None:
        moe = MOE_COPIES * max_num_tokens * spec.moe.experts_per_token * (
            spec.hidden_size + spec.moe.expert_intermediate_size / tp) * 2
    return int(logits + moe) + FIXED_BYTES


def _block_bytes(target: Target, settings: EngineSettings, decoder_layers: int, last: bool) -> int:
    """One block's bytes on the rank of this pipeline stage (every layer keeps every token: one flat pool)."""
    prepared = common.prepare(target, flat_pool=True, settings=settings)
    stage = next((s for s in prepared.stages if s.decoder_layers == decoder_layers and s.last == last),
                 prepared.stages[-1])
    return pool_layout(stage.layers, settings.block_size, prepared.kv_bytes,
                       target.deployment.tensor_parallel_size).block_bytes


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
        peak = weights_bytes + runtime + CUDA_CONTEXT_BYTES
        fraction = as_float32(settings.gpu_memory_utilization or FREE_FRACTION)
        available = pytorch_available_bytes(gpu.memory_bytes, peak, 0, fraction)
        if dep.kv_cache_memory_bytes is not None:
            # max_gpu_total_bytes with the fraction also set: the smaller wins (with no GPU given, the bytes alone)
            available = dep.kv_cache_memory_bytes if gpu.memory_bytes == 0 else min(available,
                                                                                     dep.kv_cache_memory_bytes)
        block = _block_bytes(target, settings, decoder_layers, last)
        pool = available
        if block and available > 0:
            per_token = block // settings.block_size
            # max_tokens (kv_cache_config.max_tokens) caps the tokens before they are rounded up to blocks
            pool = pool_blocks(max_tokens(available, per_token, dep.max_total_tokens), settings.block_size) * block
        free = gpu.memory_bytes - peak
        return Memory(gpu.memory_bytes, gpu.memory_bytes, weights_bytes, activation_bytes=runtime,
                      non_torch_bytes=CUDA_CONTEXT_BYTES, reserve_bytes=max(0, free - pool),
                      kv_cache_bytes=pool)

    def notes(self, target: Target, settings: EngineSettings) -> list[str]:
        return [f"free_gpu_memory_fraction {settings.gpu_memory_utilization} of the memory free after the weights "
                "and the profiling run, rounded up to whole blocks (the profiling run's activations are "
                "estimated, not yet calibrated on TensorRT-LLM logs)"]


ENGINE = TensorRtLlm()
